//! Station resolution over the corpus's full station list (2,927 stations, prefix-searched
//! like the autocomplete endpoint): time per dictated name, fallback queries included.
//! `cargo bench -p steward-connectors --bench stations` (needs `STEWARD_CORPORA`).

use std::time::Instant;

use steward_connectors::trains::{StationList, resolve_station};

fn main() {
    let Some(root) = std::env::var_os("STEWARD_CORPORA") else {
        eprintln!("STEWARD_CORPORA is not set: nothing to measure");
        return;
    };
    let path = std::path::Path::new(&root).join("viaggiatreno/sabas-trenitalia/stazioni.tsv");
    let list = StationList::parse(&std::fs::read_to_string(path).expect("the station list"));
    let names = [
        "Milano Centrale",
        "milano rogo redo",
        "Milano",
        "firenze campo di marte",
        "Roma",
        "Xyzzy Plugh",
        "bologna centrale",
        "porta garibaldi milano",
    ];
    let rounds = 200;
    let mut times = Vec::new();
    for name in names {
        let t = Instant::now();
        for _ in 0..rounds {
            std::hint::black_box(resolve_station(&list, name).expect("in memory"));
        }
        times.push((name, t.elapsed().as_secs_f64() * 1e3 / f64::from(rounds)));
    }
    println!("| dictated name ({} stations) | ms per resolution | target |", list.len());
    println!("|---|---|---|");
    for (name, ms) in &times {
        println!("| {name} | {ms:.3} | ≤ 1 ms |");
    }
}
