//! A `train` watch through the HTTP API. `POST /watches` takes the first snapshot on tokio's
//! blocking pool, where a runtime is current, against a loopback ViaggiaTreno replaying a
//! recorded run moved to today; the engine's poll, run there as the server's poller runs it,
//! asks again. Needs `STEWARD_CORPORA` (the recorded run).

use std::sync::Arc;

use axum::{
    Router,
    body::Body,
    http::{Method, Request, StatusCode, header},
};
use http_body_util::BodyExt as _;
use serde_json::{Value, json};
use steward_connectors::{
    testing::models::{Reply, ScriptedServer},
    trains::{TrainAdapter, TrainRef, ViaggiaTreno},
};
use steward_core::{
    Steward,
    access::{AccessToken, OriginPolicy},
    watch::WatchAdapter,
};
use steward_server::http::{AppState, app};
use tower::ServiceExt as _;

const TOKEN: &str = "0123456789abcdef0123456789abcdef-test";

/// REG 136 Como Lago → Milano Cadorna on 2026-01-03, not departed: a raw `andamentoTreno`
/// response of the corpus.
/// Without the corpora: a visible skip, or a failure under `CI` / `STEWARD_REQUIRE_CORPORA=1`.
fn recorded_run() -> Option<Value> {
    let path = steward_connectors::testing::corpus(
        "viaggiatreno/monga-viaggiatreno_ha/1767394800000.json",
    )?;
    Some(serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap())
}

/// Shifts every epoch-millisecond value of a run by `delta` ms.
fn shift_ms(v: &mut Value, delta: i64) {
    match v {
        Value::Number(n) => {
            if let Some(x) =
                n.as_i64().filter(|x| (1_600_000_000_000..2_000_000_000_000).contains(x))
            {
                *v = json!(x + delta);
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|x| shift_ms(x, delta)),
        Value::Object(m) => m.values_mut().for_each(|x| shift_ms(x, delta)),
        _ => {}
    }
}

/// One authenticated request; returns the status and the JSON body (Null when not JSON).
async fn call(app: &Router, method: Method, uri: &str, body: Option<Value>) -> (StatusCode, Value) {
    let b = Request::builder()
        .method(method)
        .uri(uri)
        .header(header::HOST, "127.0.0.1:4317")
        .header(header::AUTHORIZATION, format!("Bearer {TOKEN}"));
    let req = match body {
        Some(v) => b
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(v.to_string()))
            .unwrap(),
        None => b.body(Body::empty()).unwrap(),
    };
    let res = app.clone().oneshot(req).await.unwrap();
    let status = res.status();
    let bytes = res.into_body().collect().await.unwrap().to_bytes();
    (status, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

#[tokio::test]
async fn a_train_watch_is_created_over_http_and_polled_on_the_blocking_pool() {
    let Some(mut run) = recorded_run() else {
        return;
    };
    // The run moved to leave 20 minutes from now, so its default expiry is ahead.
    let now = steward_core::time::now_secs();
    let departs = run["fermate"][0]["partenza_teorica"].as_i64().unwrap();
    shift_ms(&mut run, (now + 20 * 60) * 1_000 - departs);
    let stops = run["fermate"].as_array().unwrap();
    let from = stops[0]["id"].as_str().unwrap().to_owned();
    let to = stops[stops.len() - 1]["id"].as_str().unwrap().to_owned();
    let day = run["dataPartenzaTreno"].as_i64().unwrap();
    // ViaggiaTreno on loopback: the run at its `andamentoTreno` path, 404 elsewhere.
    let path = format!("/v1/andamentoTreno/{from}/136/{day}");
    let (wanted, body) = (path.clone(), run.to_string().into_bytes());
    let server = ScriptedServer::start(move |req, _| {
        if req.path == wanted {
            Reply::Raw(200, Vec::new(), body.clone())
        } else {
            Reply::Raw(404, Vec::new(), Vec::new())
        }
    });
    let asked = || server.requests().iter().filter(|r| r.path == path).count();

    let dir = tempfile::tempdir().unwrap();
    let adapter: Arc<dyn WatchAdapter> =
        Arc::new(TrainAdapter::new(ViaggiaTreno::new(&server.base_url).unwrap()));
    let steward = Arc::new(
        Steward::builder().home(dir.path().join("home")).watch_adapter(adapter).open().unwrap(),
    );
    let origins = OriginPolicy::new(&[], &[]).unwrap();
    let state =
        AppState::new(Arc::clone(&steward), AccessToken::new(TOKEN).unwrap(), origins, "ada");
    let app = app(state);

    let train_ref = TrainRef {
        v: 1,
        number: 136,
        origin_id: from.clone(),
        day_ms: day,
        from_id: from.clone(),
        to_id: to.clone(),
    }
    .encode();
    let def = json!({"source": "train", "resource_ref": train_ref,
        "instruction": "tell me when it leaves",
        "rules": [{"id": "gone", "event": "train.departed", "once": true}]});
    let (s, w) = call(&app, Method::POST, "/watches", Some(def)).await;
    assert_eq!(s, StatusCode::OK, "{w}");
    assert_eq!((w["status"].as_str(), w["source"].as_str()), (Some("active"), Some("train")));
    let snap = &w["snapshot"];
    assert_eq!(snap["number"], 136, "{w}");
    assert_eq!(
        (snap["from"]["id"].as_str(), snap["to"]["id"].as_str()),
        (Some(&*from), Some(&*to))
    );
    assert_eq!(snap["departed"], false);
    assert_eq!(w["last_error"], Value::Null);
    assert_eq!(asked(), 1, "the first snapshot is one request");
    assert_eq!(server.requests().len(), 1);

    // The engine's poll on the blocking pool, as the server's poller runs it.
    let s2 = Arc::clone(&steward);
    let report = tokio::task::spawn_blocking(move || s2.watches().unwrap().poll(now + 60))
        .await
        .unwrap()
        .unwrap();
    assert_eq!((report.checked, report.failed, report.queued), (1, 0, 0), "{report:?}");
    assert_eq!(asked(), 2);
    let (s, list) = call(&app, Method::GET, "/watches?status=active", None).await;
    assert_eq!(s, StatusCode::OK, "{list}");
    let list = list.as_array().unwrap();
    assert_eq!(list.len(), 1);
    assert_eq!(
        (list[0]["last_checked_at"].as_i64(), &list[0]["last_error"]),
        (Some(now + 60), &Value::Null)
    );
    assert_eq!(list[0]["snapshot"]["number"], 136);
    assert_eq!(server.requests().len(), 2, "nothing else was asked");
}
