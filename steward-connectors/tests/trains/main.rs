//! The station resolver against the real station list of the corpus
//! (`viaggiatreno/sabas-trenitalia/stazioni.tsv`, 2,927 stations), searched by prefix the way
//! ViaggiaTreno's autocomplete is.

use std::path::PathBuf;

use steward_connectors::trains::{StationList, StationResolution, resolve_station};

fn corpora() -> Option<PathBuf> {
    std::env::var_os("STEWARD_CORPORA").map(PathBuf::from).filter(|p| p.is_dir())
}

fn stations() -> Option<StationList> {
    let path = corpora()?.join("viaggiatreno/sabas-trenitalia/stazioni.tsv");
    Some(StationList::parse(&std::fs::read_to_string(path).ok()?))
}

#[test]
fn dictated_names_against_the_real_station_list() {
    let Some(list) = stations() else {
        eprintln!("SKIP dictated_names_against_the_real_station_list: STEWARD_CORPORA is not set");
        return;
    };
    assert!(list.len() > 2_900, "{}", list.len());
    for (dictated, id) in [
        ("Milano Centrale", "S01700"),
        ("milano rogo redo", "S01820"),
        ("Milano Porta Garibaldi", "S01645"),
        ("milano lambrate", "S01701"),
        ("Abano Terme", "S05700"),
        ("firenze campo di marte", "S06900"),
    ] {
        match resolve_station(&list, dictated).unwrap() {
            StationResolution::Resolved { station, .. } => {
                assert_eq!(station.id, id, "{dictated} resolved to {}", station.name);
            }
            other => panic!("{dictated}: {other:?}"),
        }
    }
    // Vague or unknown: a short list to ask about, never a guess.
    for vague in ["Milano", "Firenze"] {
        match resolve_station(&list, vague).unwrap() {
            StationResolution::AmbiguousStation { candidates } => {
                assert!((2..=8).contains(&candidates.len()), "{vague}: {}", candidates.len());
            }
            other => panic!("{vague}: {other:?}"),
        }
    }
    assert_eq!(resolve_station(&list, "Xyzzy Plugh").unwrap(), StationResolution::NotFound);
}
