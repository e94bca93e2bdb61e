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

fn sample(name: &str) -> Option<serde_json::Value> {
    let path = corpora()?.join("viaggiatreno/monga-viaggiatreno_ha").join(name);
    serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()
}

#[test]
fn real_runs_normalize_and_the_platform_change_is_an_event() {
    use steward_connectors::trains::{normalize_run, train_events};
    let Some(fr) = sample("1767481200000.json") else {
        eprintln!("SKIP real_runs_normalize…: STEWARD_CORPORA is not set");
        return;
    };
    // FR 9600 Milano Centrale -> Torino Porta Nuova: programmed platform 6, effective 7, 15 min late.
    let to = fr["fermate"].as_array().unwrap().last().unwrap()["id"].as_str().unwrap().to_owned();
    let cur = normalize_run(&fr, "S01700", &to, 1_767_511_000_000).unwrap();
    assert_eq!((cur.number, cur.origin_id.as_str()), (9600, "S01700"));
    assert_eq!(
        (cur.platform.as_deref(), cur.platform_programmed.as_deref(), cur.platform_status.as_str()),
        (Some("7"), Some("6"), "confirmed")
    );
    assert!(cur.departed && !cur.arrived && !cur.cancelled);
    assert_eq!(cur.delay_minutes, 14, "the departure stop's delay wins over the run's 15");
    assert_eq!(cur.to.position_relative_to_destination, 0);
    assert_eq!(cur.stops[0].position_relative_to_destination, -(cur.stops.len() as i64 - 1));
    assert!(
        cur.estimated_arrival.as_deref().unwrap().ends_with("+01:00"),
        "Europe/Rome in January"
    );
    assert_eq!(cur.source, "ViaggiaTreno");
    // The same run as it was before the change: programmed platform only, not departed.
    let mut before = fr.clone();
    let first = &mut before["fermate"][0];
    first["binarioEffettivoPartenzaDescrizione"] = serde_json::Value::Null;
    first["partenzaReale"] = serde_json::Value::Null;
    before["stazioneUltimoRilevamento"] = "--".into();
    let prev = normalize_run(&before, "S01700", &to, 1_767_509_000_000).unwrap();
    assert_eq!((prev.platform.as_deref(), prev.platform_status.as_str()), (Some("6"), "scheduled"));
    assert!(!prev.departed);
    let kinds: Vec<String> = train_events(&prev, &cur, 0).into_iter().map(|e| e.kind).collect();
    for want in [
        "train.platform_changed",
        "train.platform_confirmed",
        "train.departed",
        "train.stop_departed",
    ] {
        assert!(kinds.iter().any(|k| k == want), "{want} missing from {kinds:?}");
    }
    let changed = train_events(&prev, &cur, 0)
        .into_iter()
        .find(|e| e.kind == "train.platform_changed")
        .unwrap();
    assert_eq!(changed.key, "platform_changed:6:7");
    // Nothing changed, nothing reported.
    assert!(train_events(&cur, &cur, 0).is_empty());
    // A segment against the direction of travel is refused.
    assert!(normalize_run(&fr, &to, "S01700", 0).is_err());

    // A regional train that has not left (nonPartito, no detections): not departed, platform unknown
    // when the operator publishes none.
    let not_departed = sample("1767394800000.json").unwrap();
    let stops = not_departed["fermate"].as_array().unwrap();
    let (a, b) = (stops[0]["id"].as_str().unwrap(), stops[stops.len() - 1]["id"].as_str().unwrap());
    let s = normalize_run(&not_departed, a, b, 0).unwrap();
    assert!(!s.departed && !s.arrived && !s.run_arrived);
    assert!(
        s.stops.iter().all(|st| st.actual_arrival_ms.is_none() && st.actual_departure_ms.is_none())
    );
}
