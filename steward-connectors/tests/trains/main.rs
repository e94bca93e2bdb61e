//! The station resolver against the real station list of the corpus
//! (`viaggiatreno/sabas-trenitalia/stazioni.tsv`, 2,927 stations), searched by prefix the way
//! ViaggiaTreno's autocomplete is.

mod conformance;

use std::path::PathBuf;

use steward_connectors::trains::{StationList, StationResolution, resolve_station};

/// A file of the corpora; without it a visible skip, or a failure under `CI` /
/// `STEWARD_REQUIRE_CORPORA=1` (`steward_connectors::testing::corpus`).
fn corpus(relative: &str) -> Option<PathBuf> {
    steward_connectors::testing::corpus(relative)
}

fn stations() -> Option<StationList> {
    let path = corpus("viaggiatreno/sabas-trenitalia/stazioni.tsv")?;
    Some(StationList::parse(&std::fs::read_to_string(path).unwrap()))
}

#[test]
fn dictated_names_against_the_real_station_list() {
    let Some(list) = stations() else {
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
    let path = corpus(&format!("viaggiatreno/monga-viaggiatreno_ha/{name}"))?;
    Some(serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap())
}

#[test]
fn real_runs_normalize_and_the_platform_change_is_an_event() {
    use steward_connectors::trains::{normalize_run, train_events};
    let Some(fr) = sample("1767481200000.json") else {
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

/// What [`Replay`] answers for a path prefix: a body sent with `Content-Length`, or this many
/// bytes of filler sent with `Transfer-Encoding: chunked` and no length.
#[derive(Clone)]
enum Answer {
    Sized(String),
    Chunked(usize),
}

type Script = std::sync::Arc<std::sync::Mutex<Vec<(String, u16, Answer)>>>;

/// A loopback HTTP server that answers from a script of (path prefix, status, body) and counts
/// requests: the test double at the outermost edge, speaking HTTP/1.1 on a real socket.
struct Replay {
    base: String,
    script: Script,
    /// Every request path, in arrival order.
    seen: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl Replay {
    fn start() -> Self {
        use std::io::{BufRead as _, BufReader, Write as _};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let base = format!("http://{}/", listener.local_addr().unwrap());
        let script: Script = Default::default();
        let seen: std::sync::Arc<std::sync::Mutex<Vec<String>>> = Default::default();
        let (s, log) = (std::sync::Arc::clone(&script), std::sync::Arc::clone(&seen));
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
                log.lock().unwrap().push(path.clone());
                let (status, answer) = s
                    .lock()
                    .unwrap()
                    .iter()
                    .find(|(p, _, _)| path.starts_with(p.as_str()))
                    .map(|(_, st, b)| (*st, b.clone()))
                    .unwrap_or((404, Answer::Sized(String::new())));
                let reason = match status {
                    200 => "OK",
                    204 => "No Content",
                    503 => "Service Unavailable",
                    _ => "Not Found",
                };
                match answer {
                    Answer::Sized(body) => {
                        let _ = write!(
                            conn,
                            "HTTP/1.1 {status} {reason}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                            body.len()
                        );
                    }
                    Answer::Chunked(total) => {
                        let _ = write!(
                            conn,
                            "HTTP/1.1 {status} {reason}\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
                        );
                        // 64 KiB chunks until `total` or until the client hangs up.
                        let piece = vec![b'x'; 64 * 1024];
                        let mut sent = 0;
                        while sent < total {
                            let n = piece.len().min(total - sent);
                            let wrote = write!(conn, "{n:X}\r\n")
                                .and_then(|()| conn.write_all(&piece[..n]))
                                .and_then(|()| conn.write_all(b"\r\n"));
                            if wrote.is_err() {
                                break;
                            }
                            sent += n;
                        }
                        let _ = conn.write_all(b"0\r\n\r\n");
                    }
                }
            }
        });
        Self { base, script, seen }
    }

    fn answer(&self, path: &str, status: u16, answer: Answer) {
        let mut s = self.script.lock().unwrap();
        s.retain(|(p, _, _)| p != path);
        s.push((path.to_owned(), status, answer));
    }

    fn set(&self, path: &str, status: u16, body: &str) {
        self.answer(path, status, Answer::Sized(body.to_owned()));
    }

    /// How many requests had a path starting with `prefix`.
    fn hits(&self, prefix: &str) -> usize {
        self.seen.lock().unwrap().iter().filter(|p| p.starts_with(prefix)).count()
    }
}

/// `steward serve` and the FFI's async calls run core calls (and so the `train` source) on
/// tokio's blocking pool, where a runtime is current: the client works there, and even on an
/// async worker it answers rather than refusing or panicking.
#[test]
fn the_client_works_on_the_blocking_pool_and_on_an_async_worker() {
    use steward_connectors::trains::{StationSource as _, ViaggiaTreno};
    let server = Replay::start();
    server.set("autocompletaStazione/MILANO", 200, "MILANO CENTRALE|S01700\n");
    let client = ViaggiaTreno::new(&server.base).unwrap();
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let c = client.clone();
    let found = runtime
        .block_on(async move {
            tokio::task::spawn_blocking(move || c.autocomplete("MILANO")).await.unwrap()
        })
        .unwrap();
    assert_eq!(found.iter().map(|s| s.id.as_str()).collect::<Vec<_>>(), ["S01700"]);
    assert_eq!(server.hits("autocompletaStazione/MILANO"), 1);
    // On a worker thread of the multi-thread runtime, and on a current-thread runtime's only
    // thread: it blocks that thread for the request, but answers.
    let c = client.clone();
    let on_worker = runtime.block_on(async move {
        tokio::spawn(async move { c.autocomplete("MILANO") }).await.unwrap()
    });
    assert_eq!(on_worker.unwrap().len(), 1);
    let single = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    assert_eq!(single.block_on(async { client.autocomplete("MILANO") }).unwrap().len(), 1);
    assert_eq!(server.hits("autocompletaStazione/MILANO"), 3);
}

/// A chunked body carries no `Content-Length`: the cap is enforced on the bytes read, the
/// answer is the typed error, and an oversized answer is not asked for again.
#[test]
fn a_chunked_body_over_the_cap_is_refused_and_asked_for_once() {
    use steward_connectors::trains::{FetchError, MAX_RESPONSE_BYTES, ViaggiaTreno};
    let server = Replay::start();
    let cap = usize::try_from(MAX_RESPONSE_BYTES).unwrap();
    server.answer("andamentoTreno/S01700/9600/", 200, Answer::Chunked(2 * cap));
    // Under the cap, a chunked body is read whole.
    server.answer("statistiche/", 200, Answer::Chunked(cap / 2));
    let client = ViaggiaTreno::new(&server.base).unwrap();
    match client.get("andamentoTreno/S01700/9600/0") {
        Err(FetchError::TooLarge { path, limit }) => {
            assert_eq!(
                (path.as_str(), limit),
                ("andamentoTreno/S01700/9600/0", MAX_RESPONSE_BYTES)
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(server.hits("andamentoTreno/S01700/9600/"), 1, "a refused body is not retried");
    match client.get("statistiche/0").unwrap() {
        steward_connectors::trains::Fetched::Body(b) => assert_eq!(b.len(), cap / 2),
        other => panic!("{other:?}"),
    }
    // Through the watch source, the same refusal is the snapshot's error.
    assert!(client.run_status("S01700", 9600, 0).unwrap_err().contains("response over"));
    assert_eq!(server.hits("andamentoTreno/S01700/9600/"), 2);
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
    assert!(client.get("statistiche/0").unwrap_err().to_string().contains("503"));
    assert_eq!(server.hits("statistiche"), 2, "a 503 is tried twice");

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

/// A departure-board row with the fields `partenze` carries for a run (the corpus has no
/// `partenze` capture: the identity fields are taken from the real `andamentoTreno` responses).
fn board_row(number: i64, origin: &str, day: i64, departs_ms: i64) -> serde_json::Value {
    serde_json::json!({"numeroTreno": number, "codOrigine": origin, "dataPartenzaTreno": day,
        "orarioPartenza": departs_ms, "compNumeroTreno": format!("{number}"), "ritardo": 0})
}

/// The replayed stations and board of a Milano Centrale → Torino Porta Nuova search: a row
/// ten minutes stale (it would win if kept), a regional train that does not call at Milano
/// Centrale (not direct), then FR 9600. Returns the search instant and the two service days.
fn milan_turin_board(
    server: &Replay,
    fr: &serde_json::Value,
    reg: &serde_json::Value,
) -> (i64, i64, i64) {
    server.set("autocompletaStazione/Milano%20Centrale", 200, "MILANO CENTRALE|S01700\n");
    server.set("autocompletaStazione/Torino%20Porta%20Nuova", 200, "TORINO PORTA NUOVA|S00219\n");
    let fr_day = fr["dataPartenzaTreno"].as_i64().unwrap();
    let fr_departs = fr["orarioPartenza"].as_i64().unwrap();
    let reg_day = reg["dataPartenzaTreno"].as_i64().unwrap();
    let after = fr_departs / 1_000 - 20 * 60;
    let board = serde_json::json!([
        board_row(9601, "S01700", fr_day, (after - 600) * 1_000),
        board_row(136, "S01765", reg_day, (after + 300) * 1_000),
        board_row(9600, "S01700", fr_day, fr_departs),
    ]);
    server.set("partenze/S01700/", 200, &board.to_string());
    server.set(&format!("andamentoTreno/S01700/9601/{fr_day}"), 200, &fr.to_string());
    server.set(&format!("andamentoTreno/S01765/136/{reg_day}"), 200, &reg.to_string());
    server.set(&format!("andamentoTreno/S01700/9600/{fr_day}"), 200, &fr.to_string());
    (after, fr_day, reg_day)
}

#[test]
fn the_train_tools_answer_through_the_toolbox_as_untrusted_data() {
    use std::sync::Arc;
    use steward_connectors::trains::{ViaggiaTreno, tools};
    use steward_core::{
        StewardError, ToolCall,
        policy::DecisionContext,
        tools::{SourceRef, ToolOutcome, Toolbox},
    };
    let (Some(fr), Some(reg)) = (sample("1767481200000.json"), sample("1767308400000.json")) else {
        return;
    };
    let server = Replay::start();
    let (after, _, _) = milan_turin_board(&server, &fr, &reg);
    let dir = tempfile::tempdir().unwrap();
    let mut b = steward_core::Steward::builder().home(dir.path());
    for spec in tools::specs().unwrap() {
        b = b.tool(spec);
    }
    let steward = Arc::new(b.open().unwrap());
    let mut tb = Toolbox::new(Arc::clone(&steward));
    tools::register(&mut tb, ViaggiaTreno::new(&server.base).unwrap()).unwrap();
    let at = steward_core::time::CivilTime::from_unix(after).rfc3339();
    let call = |tool: &str, input: serde_json::Value| {
        tb.call(
            &ToolCall { actor: "agent:t", chat: None, tool, input: &input },
            &DecisionContext::default(),
        )
    };
    let out = call(
        "trains.next",
        serde_json::json!({"from": "Milano Centrale", "to": "Torino Porta Nuova", "after": at}),
    )
    .unwrap();
    let ToolOutcome::Ran { result, .. } = out else { panic!("{out:?}") };
    assert!(result.text.starts_with("train 9600 "), "{}", result.text);
    assert!(result.text.contains("platform 7"), "{}", result.text);
    let Some(SourceRef::Train { train_ref }) = result.sources.first().cloned() else {
        panic!("{result:?}")
    };
    assert!(result.text.contains(&format!("trainRef {train_ref}")));
    assert!(result.untrusted, "a public service's text is data");
    let out = call("trains.status", serde_json::json!({"train_ref": train_ref})).unwrap();
    let ToolOutcome::Ran { result, .. } = out else { panic!("{out:?}") };
    assert!(result.text.contains("→ TORINO PORTA NUOVA"), "{}", result.text);
    let bad = call("trains.status", serde_json::json!({"train_ref": "vt1_garbage"})).unwrap_err();
    assert_eq!(bad.code(), "TRAIN_BAD_REF", "{bad}");
    let unknown =
        call("trains.next", serde_json::json!({"from": "Xyzzy", "to": "Torino"})).unwrap();
    let ToolOutcome::Ran { result, .. } = unknown else { panic!() };
    assert!(result.text.contains("No from station like \"Xyzzy\""), "{}", result.text);
}

#[test]
fn find_next_train_picks_the_earliest_direct_run_and_says_when_there_is_none() {
    use steward_connectors::trains::{NextTrain, TrainRef, TrainStatus, ViaggiaTreno};
    let (Some(fr), Some(reg)) = (sample("1767481200000.json"), sample("1767308400000.json")) else {
        return;
    };
    let server = Replay::start();
    let client = ViaggiaTreno::new(&server.base).unwrap();
    let (after, fr_day, reg_day) = milan_turin_board(&server, &fr, &reg);
    let found = client.find_next_train("Milano Centrale", "Torino Porta Nuova", after).unwrap();
    let NextTrain::Found { train_ref, snapshot, from, to } = found else { panic!("{found:?}") };
    let r = TrainRef::decode(&train_ref).unwrap();
    assert_eq!((r.number, r.origin_id.as_str(), r.day_ms), (9600, "S01700", fr_day));
    assert_eq!((r.from_id.as_str(), r.to_id.as_str()), ("S01700", "S00219"));
    assert_eq!((from.id.as_str(), to.id.as_str()), ("S01700", "S00219"));
    assert_eq!(snapshot.platform.as_deref(), Some("7"));
    // The status call recomputes the same segment; a 204 is an explicit "no live data".
    match client.train_status(&train_ref, after).unwrap() {
        TrainStatus::Live { snapshot: s } => assert_eq!(s.to.id, "S00219"),
        other @ TrainStatus::NoLiveData => panic!("{other:?}"),
    }
    server.set(&format!("andamentoTreno/S01700/9600/{fr_day}"), 204, "");
    assert_eq!(client.train_status(&train_ref, after).unwrap(), TrainStatus::NoLiveData);
    assert!(client.train_status("vt1_garbage", after).is_err());
    // Only the regional train on the board: no direct train, said explicitly.
    server.set(
        "partenze/S01700/",
        200,
        &serde_json::json!([board_row(136, "S01765", reg_day, (after + 300) * 1_000)]).to_string(),
    );
    let none = client.find_next_train("Milano Centrale", "Torino Porta Nuova", after).unwrap();
    assert!(matches!(none, NextTrain::NoDirectTrain { checked: 1, .. }), "{none:?}");
    // The board is down: an error, not "no train".
    server.set("partenze/S01700/", 503, "");
    assert!(client.find_next_train("Milano Centrale", "Torino Porta Nuova", after).is_err());
    // A name that matches nothing is an explicit answer.
    let unknown = client.find_next_train("Xyzzy", "Torino Porta Nuova", after).unwrap();
    assert!(matches!(unknown, NextTrain::StationNotFound { which: "from", .. }), "{unknown:?}");
}

/// Shifts every epoch-millisecond value of a run by `delta` ms.
fn shift_ms(v: &mut serde_json::Value, delta: i64) {
    match v {
        serde_json::Value::Number(n) => {
            if let Some(x) =
                n.as_i64().filter(|x| (1_600_000_000_000..2_000_000_000_000).contains(x))
            {
                *v = serde_json::json!(x + delta);
            }
        }
        serde_json::Value::Array(a) => a.iter_mut().for_each(|x| shift_ms(x, delta)),
        serde_json::Value::Object(m) => m.values_mut().for_each(|x| shift_ms(x, delta)),
        _ => {}
    }
}

/// The run as the service reports it at `t` (Unix seconds): stops whose (delayed) time has
/// passed are detected, the platform is assigned 10 minutes before departure, and a 3-minute
/// delay appears once the fourth stop is passed.
fn run_at(base: &serde_json::Value, t: i64) -> serde_json::Value {
    use serde_json::Value;
    let mut run = base.clone();
    let stops = run["fermate"].as_array_mut().unwrap();
    let when = |f: &Value| f["arrivo_teorico"].as_i64().or(f["partenza_teorica"].as_i64()).unwrap();
    let delayed = stops.len() > 4 && when(&stops[4]) <= t * 1_000;
    let delay = if delayed { 3 } else { 0 };
    let mut last = None;
    let departs = stops[0]["partenza_teorica"].as_i64().unwrap();
    for (i, f) in stops.iter_mut().enumerate() {
        let extra = if i > 4 { delay * 60_000 } else { 0 };
        let arrival = f["arrivo_teorico"].as_i64().map(|x| x + extra);
        let departure = f["partenza_teorica"].as_i64().map(|x| x + extra);
        let reached = arrival.or(departure).is_some_and(|x| x <= t * 1_000);
        f["arrivoReale"] = if reached { arrival.into() } else { Value::Null };
        f["partenzaReale"] = match departure {
            Some(d) if d <= t * 1_000 => d.into(),
            _ => Value::Null,
        };
        f["actualFermataType"] = if reached { 1.into() } else { 0.into() };
        f["ritardo"] = 0.into();
        f["ritardoPartenza"] = 0.into();
        f["binarioEffettivoPartenzaDescrizione"] = Value::Null;
        if reached {
            last = f["stazione"].as_str().map(str::to_owned);
        }
    }
    if t * 1_000 >= departs - 600_000 {
        stops[0]["binarioEffettivoPartenzaDescrizione"] = "2".into();
    }
    let n = stops.len();
    let arrived = stops[n - 1]["arrivoReale"].is_i64();
    run["ritardo"] = delay.into();
    run["stazioneUltimoRilevamento"] = last.map_or("--".into(), Value::from);
    run["nonPartito"] = (t * 1_000 < departs).into();
    run["arrivato"] = arrived.into();
    run
}

/// Counts the granted actions that ran.
#[derive(Default)]
struct Mailer(std::sync::Mutex<Vec<serde_json::Value>>);

impl steward_core::watch::ActionExecutor for Mailer {
    fn execute(&self, _tool: &str, args: &serde_json::Value) -> steward_core::watch::ActionResult {
        self.0.lock().unwrap().push(args.clone());
        steward_core::watch::ActionResult {
            status: steward_core::watch::ActionStatus::Succeeded,
            outcome: None,
            error: None,
        }
    }
}

#[test]
fn a_simulated_journey_across_the_dst_changeover_yields_each_event_once_through_a_kill() {
    use std::{collections::BTreeMap, sync::Arc};

    use steward_connectors::trains::{TrainAdapter, TrainRef, ViaggiaTreno};
    use steward_core::{
        Limits,
        watch::{WatchAdapter, WatchDefinition, WatchEventQuery, Watches},
    };
    let Some(mut base) = sample("1767308400000.json") else {
        return;
    };
    // REG 136 Como Lago → Milano Cadorna, moved to leave at 2026-10-25 00:40 UTC (02:40 CEST):
    // Europe/Rome falls back at 01:00 UTC, in the middle of the journey.
    let departs = base["fermate"][0]["partenza_teorica"].as_i64().unwrap();
    let leave = steward_core::time::parse_date("2026-10-25T00:40:00Z").unwrap() * 1_000;
    shift_ms(&mut base, leave - departs);
    let stops = base["fermate"].as_array().unwrap().clone();
    let n = stops.len();
    let (from, to) = (stops[0]["id"].as_str().unwrap(), stops[n - 1]["id"].as_str().unwrap());
    let fifth = stops[5]["stazione"].as_str().unwrap().to_owned();
    let day = base["dataPartenzaTreno"].as_i64().unwrap();
    let path = format!("andamentoTreno/{from}/136/{day}");
    let server = Replay::start();
    let dir = tempfile::tempdir().unwrap();
    let open = || {
        let adapter = TrainAdapter::new(ViaggiaTreno::new(&server.base).unwrap());
        let adapters: Vec<Arc<dyn WatchAdapter>> = vec![Arc::new(adapter)];
        Watches::open(dir.path(), &Limits::default(), &adapters).unwrap()
    };
    let t0 = leave / 1_000 - 20 * 60;
    server.set(&path, 200, &run_at(&base, t0).to_string());
    let train_ref = TrainRef {
        v: 1,
        number: 136,
        origin_id: from.into(),
        day_ms: day,
        from_id: from.into(),
        to_id: to.into(),
    }
    .encode();
    let def: WatchDefinition = serde_json::from_value(serde_json::json!({
        "source": "train", "resource_ref": train_ref,
        "instruction": "tell me the platform and when it leaves, write to my sister one stop before",
        "rules": [
            {"id": "platform", "event": "train.platform_confirmed", "once": true},
            {"id": "departed", "event": "train.departed", "once": true},
            {"id": "fifth", "event": "train.stop_arrived", "where": {"station": fifth}},
            {"id": "prepare", "event": "train.stop_arrived",
             "where": {"positionRelativeToDestination": -1}, "once": true,
             "grants": [{"tool": "mail.send", "constraints": {"fields": {
                "to": {"kind": "exact", "value": ["sister@example.com"]},
                "subject": {"kind": "exact", "value": "Almost there"},
                "body": {"kind": "template",
                         "template": "Arriving at {{state.to.name}} at {{state.estimatedArrival}}."}}}}]},
            {"id": "soon", "trigger": {"kind": "before_time", "field": "estimatedArrivalMs", "minutes": 30}, "once": true},
            {"id": "arrived", "event": "train.arrived"}
        ]
    }))
    .unwrap();
    // A stop rule without a selector is refused.
    let mut loose = def.clone();
    loose.rules[2].filter.clear();
    let mut watches = open();
    let approve = |d: &WatchDefinition| steward_core::testing::approved_watch(dir.path(), d, t0);
    assert_eq!(
        steward_core::StewardError::code(
            &watches.create_approved(&approve(&loose), t0).unwrap_err()
        ),
        "WATCH_INVALID"
    );
    let watch = watches.create_approved(&approve(&def), t0).unwrap();
    let mailer = Mailer::default();
    let end = stops[n - 1]["arrivo_teorico"].as_i64().unwrap() / 1_000 + 10 * 60;
    let mut t = t0;
    let mut killed = false;
    while t <= end {
        t += 60;
        server.set(&path, 200, &run_at(&base, t).to_string());
        watches.poll(t).unwrap();
        watches.poll(t + 1).unwrap(); // the same snapshot again: nothing new
        for ev in watches
            .events(&WatchEventQuery { pending: true, limit: Some(100), ..Default::default() })
            .unwrap()
        {
            watches.run_granted(ev.id, &mailer, t).unwrap();
        }
        // Killed mid-journey, after the stop before the destination was handled once.
        if !killed && !mailer.0.lock().unwrap().is_empty() {
            drop(watches);
            watches = open();
            killed = true;
            // The delivery is retried after the restart: the claim stops a second mail.
            for ev in
                watches.events(&WatchEventQuery { limit: Some(100), ..Default::default() }).unwrap()
            {
                watches.run_granted(ev.id, &mailer, t).unwrap();
            }
        }
    }
    assert!(killed, "the journey reached the stop before the destination");
    let events =
        watches.events(&WatchEventQuery { limit: Some(100), ..Default::default() }).unwrap();
    let mut by_rule: BTreeMap<String, usize> = BTreeMap::new();
    for e in &events {
        for r in &e.matched_rules {
            *by_rule.entry(r.clone()).or_default() += 1;
        }
    }
    let want: BTreeMap<String, usize> = [
        ("platform", 1),
        ("departed", 1),
        ("fifth", 1),
        ("prepare", 1),
        ("soon", 1),
        ("arrived", 1),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    assert_eq!(by_rule, want, "{events:#?}");
    let keys: std::collections::BTreeSet<&str> =
        events.iter().map(|e| e.event_key.as_str()).collect();
    assert_eq!(keys.len(), events.len(), "no event key twice");
    assert_eq!(watches.get(watch.id).unwrap().status, "completed");
    // One mail, rendered in Rome time after the changeover (+01:00), from the live state.
    let sent = mailer.0.lock().unwrap().clone();
    assert_eq!(sent.len(), 1, "{sent:?}");
    let body = sent[0]["body"].as_str().unwrap();
    assert!(body.starts_with("Arriving at MILANO CADORNA at 2026-10-25T02:"), "{body}");
    assert!(body.ends_with("+01:00."), "{body}");
}
