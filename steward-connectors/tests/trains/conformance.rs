//! The watch sources against the `WatchAdapter` contract (`steward_core::testing`): `time`
//! over a fixed instant, `train` over a synthetic run served by the loopback [`Replay`] server
//! (no corpus needed), moved along by the suite's clock.

use serde_json::{Value, json};
use steward_connectors::{
    trains::{TrainAdapter, TrainRef, ViaggiaTreno},
    watches::TimeAdapter,
};
use steward_core::testing::{WatchAdapterExpectations, watch_adapter_contract};

use super::Replay;

#[test]
fn the_time_source_keeps_the_watch_adapter_contract() {
    let instant = "2026-12-24T18:00:00+01:00";
    let at = steward_core::time::parse_instant(instant).unwrap();
    let expect = WatchAdapterExpectations {
        source: "time",
        resource_ref: instant,
        timeline: &[at - 7_200, at - 60, at, at + 60, at + 7_200],
        kinds: &["time.reached"],
        ends_terminal: true,
        refused_refs: &["tomorrow", "2026-12-24T18:00:00", "", "24/12/2026 18:00"],
        failing_refs: &[],
    };
    watch_adapter_contract(&TimeAdapter, &expect, &mut |_| {});
}

/// The service day of the synthetic run (Unix ms) and its departure (Unix seconds).
const DAY_MS: i64 = 1_789_941_600_000;
const DEPARTS: i64 = 1_790_000_000;
const ORIGIN: &str = "S00100";

/// A three-stop run (ALFA → BETA → GAMMA) as `andamentoTreno` reports it at `t`: stops whose
/// time has passed are detected, the departure platform is programmed 3 and assigned 4 ten
/// minutes before departure.
fn run_at(number: i64, t: i64) -> Value {
    let ms = |secs: i64| secs * 1_000;
    let stops = [
        ("S00100", "ALFA", None, Some(DEPARTS)),
        ("S00200", "BETA", Some(DEPARTS + 1_200), Some(DEPARTS + 1_260)),
        ("S00300", "GAMMA", Some(DEPARTS + 2_400), None),
    ];
    let mut last = None;
    let fermate: Vec<Value> = stops
        .iter()
        .enumerate()
        .map(|(i, &(id, name, arrival, departure))| {
            let reached = arrival.or(departure).is_some_and(|x| x <= t);
            if reached {
                last = Some(name);
            }
            let mut f = json!({
                "id": id,
                "stazione": name,
                "arrivo_teorico": arrival.map(ms),
                "partenza_teorica": departure.map(ms),
                "arrivoReale": arrival.filter(|&a| a <= t).map(ms),
                "partenzaReale": departure.filter(|&d| d <= t).map(ms),
                "actualFermataType": i64::from(reached),
                "ritardo": 0,
            });
            if i == 0 {
                f["binarioProgrammatoPartenzaDescrizione"] = "3".into();
                f["binarioEffettivoPartenzaDescrizione"] =
                    if t >= DEPARTS - 600 { "4".into() } else { Value::Null };
            }
            f
        })
        .collect();
    json!({
        "numeroTreno": number,
        "idOrigine": ORIGIN,
        "dataPartenzaTreno": DAY_MS,
        "ritardo": 0,
        "provvedimento": 0,
        "stazioneUltimoRilevamento": last.unwrap_or("--"),
        "arrivato": t >= DEPARTS + 2_400,
        "nonPartito": t < DEPARTS,
        "fermate": fermate,
    })
}

fn train_ref(number: i64, to: &str) -> String {
    TrainRef {
        v: 1,
        number,
        origin_id: ORIGIN.into(),
        day_ms: DAY_MS,
        from_id: ORIGIN.into(),
        to_id: to.into(),
    }
    .encode()
}

fn path(number: i64) -> String {
    format!("andamentoTreno/{ORIGIN}/{number}/{DAY_MS}")
}

#[test]
fn the_train_source_keeps_the_watch_adapter_contract_over_a_replayed_endpoint() {
    let server = Replay::start();
    let adapter = TrainAdapter::new(ViaggiaTreno::new(&server.base).unwrap());
    // Resources whose snapshot must fail: the service is down (503 twice), has no live data
    // (204), answers garbage, knows no such train (404), or the segment is not on the route.
    server.set(&path(9001), 503, "");
    server.set(&path(9002), 204, "");
    server.set(&path(9003), 200, "this is not JSON");
    server.set(&path(9005), 200, &run_at(9005, DEPARTS).to_string());
    let (down, empty, garbage, unknown, off_route) = (
        train_ref(9001, "S00300"),
        train_ref(9002, "S00300"),
        train_ref(9003, "S00300"),
        train_ref(9004, "S00300"),
        train_ref(9005, "S99999"),
    );
    let resource = train_ref(4321, "S00300");
    let expect = WatchAdapterExpectations {
        source: "train",
        resource_ref: resource.as_str(),
        // Before the platform is assigned; assigned (a change, confirmed); departed; at the
        // middle stop; left it; arrived at the end of the run (terminal); after.
        timeline: &[
            DEPARTS - 1_200,
            DEPARTS - 300,
            DEPARTS + 60,
            DEPARTS + 1_230,
            DEPARTS + 1_300,
            DEPARTS + 2_460,
            DEPARTS + 2_600,
        ],
        kinds: &[
            "train.platform_changed",
            "train.platform_confirmed",
            "train.departed",
            "train.stop_departed",
            "train.stop_arrived",
            "train.arrived",
        ],
        ends_terminal: true,
        refused_refs: &["vt1_garbage", "vt2_abc", "", "9600"],
        failing_refs: &[
            down.as_str(),
            empty.as_str(),
            garbage.as_str(),
            unknown.as_str(),
            off_route.as_str(),
        ],
    };
    watch_adapter_contract(&adapter, &expect, &mut |t| {
        server.set(&path(4321), 200, &run_at(4321, t).to_string());
    });
    assert_eq!(server.hits(&path(9001)), 2, "a 503 is asked twice, then the snapshot fails");
}
