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

/// A loopback HTTP server that answers from a script of (path prefix, status, body) and counts
/// requests: the test double at the outermost edge, speaking HTTP/1.1 on a real socket.
struct Replay {
    base: String,
    script: std::sync::Arc<std::sync::Mutex<Vec<(String, u16, String)>>>,
}

impl Replay {
    fn start() -> Self {
        use std::io::{BufRead as _, BufReader, Write as _};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let base = format!("http://{}/", listener.local_addr().unwrap());
        let script: std::sync::Arc<std::sync::Mutex<Vec<(String, u16, String)>>> =
            Default::default();
        let s = std::sync::Arc::clone(&script);
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut conn) = conn else { continue };
                let mut reader = BufReader::new(conn.try_clone().unwrap());
                let mut line = String::new();
                if reader.read_line(&mut line).is_err() {
                    continue;
                }
                loop {
                    let mut h = String::new();
                    if reader.read_line(&mut h).is_err() || h == "\r\n" || h.is_empty() {
                        break;
                    }
                }
                let path = line
                    .split_whitespace()
                    .nth(1)
                    .unwrap_or("/")
                    .trim_start_matches('/')
                    .to_owned();
                let (status, body) = s
                    .lock()
                    .unwrap()
                    .iter()
                    .find(|(p, _, _)| path.starts_with(p.as_str()))
                    .map(|(_, st, b)| (*st, b.clone()))
                    .unwrap_or((404, String::new()));
                let reason = match status {
                    200 => "OK",
                    204 => "No Content",
                    503 => "Service Unavailable",
                    _ => "Not Found",
                };
                let _ = write!(
                    conn,
                    "HTTP/1.1 {status} {reason}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
            }
        });
        Self { base, script }
    }

    fn set(&self, path: &str, status: u16, body: &str) {
        let mut s = self.script.lock().unwrap();
        s.retain(|(p, _, _)| p != path);
        s.push((path.to_owned(), status, body.to_owned()));
    }
}

#[test]
fn the_train_source_over_a_replayed_endpoint_drives_a_watch() {
    use std::sync::Arc;

    use steward_connectors::trains::{
        Fetched, StationSource as _, TrainAdapter, TrainRef, ViaggiaTreno,
    };
    use steward_core::{
        Limits,
        watch::{WatchAdapter, WatchDefinition, WatchEventQuery, Watches},
    };
    let Some(changed) = sample("1767481200000.json") else {
        eprintln!("SKIP the_train_source…: STEWARD_CORPORA is not set");
        return;
    };
    let server = Replay::start();
    let client = ViaggiaTreno::new(&server.base).unwrap();
    // Autocomplete: pipe-separated lines.
    server.set(
        "autocompletaStazione/MILANO",
        200,
        "MILANO CENTRALE|S01700\nMILANO ROGOREDO|S01820\n",
    );
    let found = client.autocomplete("MILANO").unwrap();
    assert_eq!(found.iter().map(|s| s.id.as_str()).collect::<Vec<_>>(), ["S01700", "S01820"]);
    // 204 and 404 are explicit results, not errors; a 503 twice is an error.
    server.set("andamentoTreno/S00001", 204, "");
    assert_eq!(client.get("andamentoTreno/S00001/1/0").unwrap(), Fetched::NoData);
    assert_eq!(client.get("nope").unwrap(), Fetched::NotFound);
    server.set("statistiche", 503, "");
    assert!(client.get("statistiche/0").unwrap_err().contains("503"));

    // A watch on FR 9600: before the change (programmed 6, not departed), then the real run.
    let to =
        changed["fermate"].as_array().unwrap().last().unwrap()["id"].as_str().unwrap().to_owned();
    let mut before = changed.clone();
    before["fermate"][0]["binarioEffettivoPartenzaDescrizione"] = serde_json::Value::Null;
    before["fermate"][0]["partenzaReale"] = serde_json::Value::Null;
    before["stazioneUltimoRilevamento"] = "--".into();
    let day = changed["dataPartenzaTreno"].as_i64().unwrap();
    let path = format!("andamentoTreno/S01700/9600/{day}");
    server.set(&path, 200, &before.to_string());
    let r = TrainRef {
        v: 1,
        number: 9600,
        origin_id: "S01700".into(),
        day_ms: day,
        from_id: "S01700".into(),
        to_id: to,
    };
    assert_eq!(TrainRef::decode(&r.encode()).unwrap(), r);
    assert!(TrainRef::decode("vt2_abc").is_err());
    let dir = tempfile::tempdir().unwrap();
    let adapters: Vec<Arc<dyn WatchAdapter>> = vec![Arc::new(TrainAdapter::new(client))];
    let watches = Watches::open(dir.path(), &Limits::default(), &adapters).unwrap();
    let def: WatchDefinition = serde_json::from_value(serde_json::json!({
        "source": "train", "resource_ref": r.encode(), "instruction": "tell me the platform",
        "rules": [
            {"id": "platform", "event": "train.platform_changed", "once": true},
            {"id": "gone", "event": "train.departed"}
        ]
    }))
    .unwrap();
    // The service day is in January 2026: create and poll at a time inside the default expiry.
    let t0 = changed["orarioPartenza"].as_i64().unwrap() / 1_000 - 600;
    let w = watches.create(&def, t0).unwrap();
    assert_eq!(watches.poll(t0 + 45).unwrap().queued, 0);
    // The source fails: the old snapshot is kept and the error recorded.
    server.set(&path, 503, "");
    assert_eq!(watches.poll(t0 + 90).unwrap().failed, 1);
    assert!(watches.get(w.id).unwrap().last_error.unwrap().contains("503"));
    // The platform changes 6 -> 7 and the train leaves: each rule's event once.
    server.set(&path, 200, &changed.to_string());
    let report = watches.poll(t0 + 135).unwrap();
    assert_eq!(report.queued, 2, "{report:?}");
    assert_eq!(watches.poll(t0 + 180).unwrap().queued, 0, "the same state again: nothing new");
    let kinds: Vec<String> = watches
        .events(&WatchEventQuery::default())
        .unwrap()
        .into_iter()
        .map(|e| e.event.kind)
        .collect();
    assert_eq!(kinds, ["train.platform_changed", "train.departed"]);
}
