//! The HTTP API through `oneshot` (no socket), plus one real socket: every route's happy path
//! and typed errors, pagination bounds, and the security rules for every route of the table.

use std::sync::Arc;

use axum::{
    Router,
    body::Body,
    http::{Method, Request, StatusCode, header},
};
use http_body_util::BodyExt as _;
use serde_json::{Value, json};
use steward_connectors::mail::{
    MaildirSource,
    demo::{DemoOptions, generate_maildir},
};
use steward_core::{
    Steward,
    access::{AccessToken, OriginPolicy},
    approval::NewApproval,
    mirror::SyncOptions,
    policy::Level,
};
use steward_server::http::{AppState, ServeConfig, ServeError, app, openapi, routes, serve, spawn};
use tower::ServiceExt as _;

const TOKEN: &str = "0123456789abcdef0123456789abcdef-test";

struct Fixture {
    _dir: tempfile::TempDir,
    steward: Arc<Steward>,
    app: Router,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let maildir = dir.path().join("maildir");
    generate_maildir(&maildir, &DemoOptions::new(120)).unwrap();
    let mut builder = Steward::builder().home(dir.path().join("home"));
    for a in steward_connectors::watches::all() {
        builder = builder.watch_adapter(a);
    }
    let steward = Arc::new(builder.open().unwrap());
    let opts = SyncOptions { account: Some("demo".to_owned()), cancel: None };
    steward.sync_mail(&MaildirSource::new(&maildir), &opts, &mut |_| {}).unwrap();
    let origins = OriginPolicy::new(&[], &["https://phone.example:4318".to_owned()]).unwrap();
    let state =
        AppState::new(Arc::clone(&steward), AccessToken::new(TOKEN).unwrap(), origins, "ada");
    Fixture { _dir: dir, steward, app: app(state) }
}

/// One request; returns the status and the JSON body (Null when it is not JSON).
async fn call(
    app: &Router,
    method: Method,
    uri: &str,
    token: Option<&str>,
    body: Option<Value>,
    extra: &[(&str, &str)],
) -> (StatusCode, Value) {
    let mut b = Request::builder().method(method).uri(uri);
    if !extra.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        b = b.header(header::HOST, "127.0.0.1:4317");
    }
    if let Some(t) = token {
        b = b.header(header::AUTHORIZATION, format!("Bearer {t}"));
    }
    for (k, v) in extra {
        b = b.header(*k, *v);
    }
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

async fn get(app: &Router, uri: &str) -> (StatusCode, Value) {
    call(app, Method::GET, uri, Some(TOKEN), None, &[]).await
}

async fn post(app: &Router, uri: &str, body: Value) -> (StatusCode, Value) {
    call(app, Method::POST, uri, Some(TOKEN), Some(body), &[]).await
}

fn code(v: &Value) -> &str {
    v["code"].as_str().unwrap_or("")
}

/// Like [`call`], returning the raw response headers too.
async fn call_raw(app: &Router, req: Request<Body>) -> (StatusCode, axum::http::HeaderMap, Value) {
    let res = app.clone().oneshot(req).await.unwrap();
    let (parts, body) = res.into_parts();
    let bytes = body.collect().await.unwrap().to_bytes();
    (parts.status, parts.headers, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

/// A concrete URI for a route of the table.
fn concrete(path: &str) -> String {
    path.replace("{id}", "1").replace("{tool}", "mail.send")
}

#[tokio::test]
async fn every_route_but_health_needs_the_token_in_the_header() {
    let f = fixture();
    let table = routes();
    assert!(table.len() >= 15, "the table lists every route");
    let public: Vec<_> =
        table.iter().filter(|r| r.public).map(|r| format!("{} {}", r.method, r.path)).collect();
    assert_eq!(public, ["GET /health", "GET /pair", "POST /pair"]);
    for r in table.iter().filter(|r| !r.public) {
        let uri = concrete(r.path);
        let body = (r.method != Method::GET).then(|| json!({}));
        let m = || r.method.clone();
        let (s, v) = call(&f.app, m(), &uri, None, body.clone(), &[]).await;
        assert_eq!(
            (s, code(&v)),
            (StatusCode::UNAUTHORIZED, "TOKEN_MISSING"),
            "{} {uri}",
            r.method
        );
        let (s, v) =
            call(&f.app, m(), &uri, Some("x".repeat(40).as_str()), body.clone(), &[]).await;
        assert_eq!(
            (s, code(&v)),
            (StatusCode::UNAUTHORIZED, "TOKEN_INVALID"),
            "{} {uri}",
            r.method
        );
        // The right token, but in the URL: refused, with or without a header.
        let in_query = format!("{uri}?token={TOKEN}");
        let (s, v) = call(&f.app, m(), &in_query, None, body.clone(), &[]).await;
        assert_eq!(
            (s, code(&v)),
            (StatusCode::UNAUTHORIZED, "TOKEN_IN_QUERY"),
            "{} {uri}",
            r.method
        );
        let (s, _) = call(
            &f.app,
            m(),
            &format!("{uri}?access_token={TOKEN}"),
            Some(TOKEN),
            body.clone(),
            &[],
        )
        .await;
        assert_eq!(s, StatusCode::UNAUTHORIZED, "{} {uri}", r.method);
        // A foreign Host is refused before anything else (DNS rebinding).
        let (s, v) =
            call(&f.app, m(), &uri, Some(TOKEN), body.clone(), &[("host", "evil.example:4317")])
                .await;
        assert_eq!((s, code(&v)), (StatusCode::MISDIRECTED_REQUEST, "HOST_NOT_ALLOWED"));
        if r.method != Method::GET {
            for origin in ["null", "https://evil.example", "http://127.0.0.1:9999"] {
                let (s, v) =
                    call(&f.app, m(), &uri, Some(TOKEN), body.clone(), &[("origin", origin)]).await;
                assert_eq!(
                    (s, code(&v)),
                    (StatusCode::FORBIDDEN, "ORIGIN_NOT_ALLOWED"),
                    "{origin}"
                );
            }
        }
    }
    let (s, v) = call(&f.app, Method::GET, "/health", None, None, &[]).await;
    assert_eq!((s, v["status"].as_str()), (StatusCode::OK, Some("ok")));
    let (s, _) =
        call(&f.app, Method::GET, "/health", None, None, &[("host", "evil.example")]).await;
    assert_eq!(s, StatusCode::MISDIRECTED_REQUEST);
    let (s, v) = get(&f.app, "/no/such/route").await;
    assert_eq!((s, code(&v)), (StatusCode::NOT_FOUND, "NO_SUCH_ROUTE"));
    // Nothing above changed anything: no approval was decided, the policy is at version 0.
    assert_eq!(f.steward.policy().unwrap().version, 0);
}

#[tokio::test]
async fn search_read_and_thread() {
    let f = fixture();
    let (s, page) = get(&f.app, "/search?role=inbox&limit=5").await;
    assert_eq!(s, StatusCode::OK, "{page}");
    let hits = page["messages"].as_array().unwrap();
    assert_eq!(hits.len(), 5);
    assert_eq!(page["page"]["next_offset"], 5);
    let (_, next) = get(&f.app, "/search?role=inbox&limit=5&offset=5").await;
    assert_ne!(next["messages"][0]["id"], hits[0]["id"], "the second page is another page");
    let (s, text) = get(&f.app, "/search?text=invoice&limit=3").await;
    assert_eq!(s, StatusCode::OK);
    assert!(text["messages"].as_array().is_some_and(|m| !m.is_empty()));

    for (uri, status, want) in [
        ("/search?limit=0", 400, "LIMIT_OUT_OF_RANGE"),
        ("/search?limit=101", 400, "LIMIT_OUT_OF_RANGE"),
        ("/search?limit=-1", 400, "BAD_QUERY"),
        ("/search?colour=red", 400, "BAD_QUERY"),
        ("/search?role=spam!", 400, "INVALID_ROLE"),
        ("/search?after=yesterday", 400, "INVALID_DATE"),
        ("/search?sort=random", 400, "INVALID_SORT"),
        ("/search?from=ab", 400, "SUBSTRING_TOO_SHORT"),
        ("/search?account=nobody", 404, "ACCOUNT_NOT_FOUND"),
    ] {
        let (s, v) = get(&f.app, uri).await;
        assert_eq!((s.as_u16(), code(&v)), (status, want), "{uri}: {v}");
        assert!(v["message"].as_str().is_some_and(|m| !m.is_empty()));
    }

    let id = hits[0]["id"].as_i64().unwrap();
    let thread = hits[0]["thread_id"].as_i64().unwrap();
    let (s, m) = get(&f.app, &format!("/messages/{id}?chars=50")).await;
    assert_eq!(s, StatusCode::OK, "{m}");
    assert_eq!(m["id"], id);
    assert!(m["body"]["text"].as_str().unwrap().chars().count() <= 50);
    let (s, t) = get(&f.app, &format!("/threads/{thread}?limit=1")).await;
    assert_eq!(s, StatusCode::OK, "{t}");
    assert_eq!(t["thread_id"], thread);
    assert_eq!(t["messages"].as_array().unwrap().len(), 1);
    for (uri, status, want) in [
        ("/messages/999999".to_owned(), 404, "MESSAGE_NOT_FOUND"),
        ("/messages/abc".to_owned(), 400, "BAD_PATH"),
        (format!("/messages/{id}?chars=0"), 400, "LIMIT_OUT_OF_RANGE"),
        (format!("/messages/{id}?chars=12001"), 400, "LIMIT_OUT_OF_RANGE"),
        ("/threads/999999".to_owned(), 404, "THREAD_NOT_FOUND"),
        (format!("/threads/{thread}?limit=101"), 400, "LIMIT_OUT_OF_RANGE"),
    ] {
        let (s, v) = get(&f.app, &uri).await;
        assert_eq!((s.as_u16(), code(&v)), (status, want), "{uri}: {v}");
    }
    let (s, stats) = get(&f.app, "/stats").await;
    assert_eq!(s, StatusCode::OK);
    assert!(stats["messages_live"].as_i64().unwrap() >= 120, "{stats}");
}

/// The demo calendars and address book indexed into `steward` (zone Europe/Rome); returns the
/// Monday of this week there.
fn index_demo_pim(steward: &Steward, dir: &std::path::Path) -> chrono::NaiveDate {
    use chrono::Datelike as _;
    let (calendars, contacts) = (dir.join("calendars"), dir.join("contacts"));
    let now = chrono::Utc::now();
    steward_connectors::calendar::demo::write_demo_pim(&calendars, &contacts, now.timestamp())
        .unwrap();
    let store = steward.calendar_store().unwrap();
    steward_connectors::calendar::sync::sync_vdir(
        store,
        "demo",
        &calendars,
        chrono_tz::Europe::Rome,
    )
    .unwrap();
    let books = steward_connectors::contacts::read_vdir(
        &contacts,
        steward_connectors::contacts::phone::region("IT"),
    )
    .unwrap();
    steward.index_contacts("demo", books.into_account_read().unwrap().0).unwrap();
    let today = now.with_timezone(&chrono_tz::Europe::Rome).date_naive();
    today - chrono::Duration::days(i64::from(today.weekday().num_days_from_monday()))
}

#[tokio::test]
async fn calendar_and_contacts_answer_in_the_persons_zone_with_typed_errors() {
    let dir = tempfile::tempdir().unwrap();
    let settings = steward_core::calendar::CalendarSettings {
        zone: chrono_tz::Europe::Rome,
        me: vec!["giulia.bianchi@example.it".to_owned()],
        hours: steward_core::calendar::WorkingHours::default(),
    };
    let steward = Arc::new(
        Steward::builder()
            .home(dir.path().join("home"))
            .calendar_settings(settings)
            .open()
            .unwrap(),
    );
    let monday = index_demo_pim(&steward, dir.path());
    let state = AppState::new(
        Arc::clone(&steward),
        AccessToken::new(TOKEN).unwrap(),
        OriginPolicy::new(&[], &[]).unwrap(),
        "ada",
    );
    let app = app(state);
    let next = monday + chrono::Duration::days(7);

    // The week's agenda: the weekly meeting on Monday at 09:30 Rome time, in order.
    let (s, page) = get(&app, &format!("/calendar/agenda?from={monday}&to={next}")).await;
    assert_eq!(s, StatusCode::OK, "{page}");
    let occ = page["occurrences"].as_array().unwrap();
    assert!(!occ.is_empty(), "{page}");
    let starts: Vec<&str> = occ.iter().map(|o| o["start"].as_str().unwrap()).collect();
    let mut sorted = starts.clone();
    sorted.sort_by_key(|t| chrono::DateTime::parse_from_rfc3339(t).unwrap());
    assert_eq!(starts, sorted, "by start");
    let weekly = occ.iter().find(|o| o["uid"] == "weekly-team@demo.steward").expect("weekly");
    assert!(weekly["start"].as_str().unwrap().starts_with(&format!("{monday}T09:30:00+0")));
    assert_eq!(weekly["calendar"], "demo/lavoro");

    // Free/busy: no free slot overlaps the meeting; the default shortest slot is 30 minutes.
    let (s, fb) = get(&app, &format!("/calendar/free_busy?from={monday}&to={next}")).await;
    assert_eq!(s, StatusCode::OK, "{fb}");
    let meeting = (
        chrono::DateTime::parse_from_rfc3339(weekly["start"].as_str().unwrap()).unwrap(),
        chrono::DateTime::parse_from_rfc3339(weekly["end"].as_str().unwrap()).unwrap(),
    );
    let free = fb["free"].as_array().unwrap();
    assert!(!free.is_empty(), "{fb}");
    for slot in free {
        let a = chrono::DateTime::parse_from_rfc3339(slot["start"].as_str().unwrap()).unwrap();
        let b = chrono::DateTime::parse_from_rfc3339(slot["end"].as_str().unwrap()).unwrap();
        assert!(b - a >= chrono::Duration::minutes(30), "{slot}");
        assert!(b <= meeting.0 || a >= meeting.1, "a free slot overlaps the meeting: {slot}");
    }

    // Search: words every one of which must match; absent words find nothing.
    let (s, hits) = get(&app, "/calendar/search?q=riunione%20settimanale&limit=5").await;
    assert_eq!(s, StatusCode::OK, "{hits}");
    let events = hits["events"].as_array().unwrap();
    assert!(events.iter().any(|e| e["uid"] == "weekly-team@demo.steward"), "{hits}");
    let (_, none) = get(&app, "/calendar/search?q=riunione%20zebra").await;
    assert_eq!(none["events"], json!([]), "{none}");
    let (_, other) = get(&app, "/calendar/search?q=riunione&calendar=demo/personale").await;
    assert_eq!(other["events"], json!([]), "only the calendar asked for: {other}");

    // Contacts: search, and a resolution that does not guess between the two Annas.
    let (s, people) = get(&app, "/contacts/search?q=anna").await;
    assert_eq!(s, StatusCode::OK, "{people}");
    assert!(people["contacts"].as_array().unwrap().len() >= 2, "{people}");
    let (s, r) = get(&app, "/contacts/resolve?q=Anna").await;
    assert_eq!(s, StatusCode::OK, "{r}");
    assert_eq!(r["status"], "ambiguous", "{r}");
    assert!(r["candidates"].as_array().unwrap().len() >= 2);
    let (_, r) = get(&app, "/contacts/resolve?q=Anna%20from%20Scuola%20Manzoni").await;
    assert_eq!(r["status"], "resolved", "one person, her preferred address: {r}");
    assert_eq!(r["candidates"][0]["email"], "anna.ricci@scuola-manzoni.example.it", "{r}");
    let (_, r) = get(&app, "/contacts/resolve?q=anna.mueller%40example.de").await;
    assert_eq!(
        (r["status"].as_str(), r["candidates"][0]["email"].as_str()),
        (Some("resolved"), Some("anna.mueller@example.de")),
        "{r}"
    );
    let (_, r) = get(&app, "/contacts/resolve?q=Zebedeo").await;
    assert_eq!(r["status"], "not_found", "{r}");

    let long = "a".repeat(201);
    for (uri, status, want) in [
        (format!("/calendar/agenda?from=yesterday&to={next}"), 400, "CALENDAR_BAD_TIME"),
        (format!("/calendar/agenda?from={next}&to={monday}"), 400, "CALENDAR_BAD_WINDOW"),
        (format!("/calendar/agenda?from={monday}"), 400, "BAD_QUERY"),
        (format!("/calendar/agenda?from={monday}&to=2099-01-01"), 400, "CALENDAR_BAD_WINDOW"),
        (
            format!("/calendar/free_busy?from={monday}&to={next}&min_minutes=4"),
            400,
            "CALENDAR_BAD_MINUTES",
        ),
        (
            format!("/calendar/free_busy?from={monday}&to={next}&min_minutes=1441"),
            400,
            "CALENDAR_BAD_MINUTES",
        ),
        (format!("/calendar/search?q={long}"), 400, "CALENDAR_BAD_QUERY"),
        ("/calendar/search?colour=red".to_owned(), 400, "BAD_QUERY"),
        (format!("/contacts/search?q={long}"), 400, "CONTACTS_QUERY_TOO_LONG"),
        ("/contacts/resolve".to_owned(), 400, "BAD_QUERY"),
    ] {
        let (s, v) = get(&app, &uri).await;
        assert_eq!((s.as_u16(), code(&v)), (status, want), "{uri}: {v}");
        assert!(v["message"].as_str().is_some_and(|m| !m.is_empty()), "{v}");
    }
}

fn request_approval(steward: &Steward, level: Level) -> i64 {
    let now = steward_core::time::now_secs();
    let n = NewApproval {
        chat: Some("web".into()),
        requested_by: "agent:assistant".into(),
        tool: "mail.send".into(),
        input: json!({"to": ["sister@example.org"], "subject": "Arriving", "body": "At 18:40"}),
        summary: "Tell my sister when I arrive".into(),
        level,
        timeout_secs: None,
        taint: None,
    };
    steward.approvals().unwrap().request(&n, None, now).unwrap().id
}

#[tokio::test]
async fn approvals_are_decided_by_the_person_once() {
    let f = fixture();
    let a = request_approval(&f.steward, Level::Confirm);
    let b = request_approval(&f.steward, Level::Confirm);
    let c = request_approval(&f.steward, Level::Secure);

    let (s, list) = get(&f.app, "/approvals?status=pending").await;
    assert_eq!(s, StatusCode::OK);
    let ids: Vec<i64> =
        list.as_array().unwrap().iter().map(|x| x["id"].as_i64().unwrap()).collect();
    assert_eq!(ids, [c, b, a], "newest first");
    let (_, one) = get(&f.app, "/approvals?status=pending&limit=1&offset=1").await;
    assert_eq!(one[0]["id"], b);
    for (uri, want) in [
        ("/approvals?status=bogus", "APPROVAL_INVALID"),
        ("/approvals?limit=0", "APPROVAL_INVALID"),
        ("/approvals?limit=101", "APPROVAL_INVALID"),
    ] {
        let (s, v) = get(&f.app, uri).await;
        assert_eq!((s, code(&v)), (StatusCode::BAD_REQUEST, want), "{uri}: {v}");
    }

    // Malformed bodies are typed and change nothing.
    let (s, v) = call(
        &f.app,
        Method::POST,
        &format!("/approvals/{a}/approve"),
        Some(TOKEN),
        None,
        &[("content-type", "application/json")],
    )
    .await;
    assert_eq!((s, code(&v)), (StatusCode::BAD_REQUEST, "BAD_JSON"), "{v}");
    let (s, v) = post(&f.app, &format!("/approvals/{a}/approve"), json!({"sudo": true})).await;
    assert_eq!((s.as_u16(), code(&v)), (422, "BAD_JSON"), "{v}");
    let (s, v) = post(&f.app, &format!("/approvals/{a}/deny"), json!({"edit": {"to": []}})).await;
    assert_eq!((s, code(&v)), (StatusCode::BAD_REQUEST, "APPROVAL_INVALID"), "{v}");
    let (s, v) = post(&f.app, &format!("/approvals/{a}/revise"), json!({})).await;
    assert_eq!((s, code(&v)), (StatusCode::BAD_REQUEST, "APPROVAL_INVALID"), "{v}");
    let (s, v) = post(&f.app, "/approvals/999999/approve", json!({})).await;
    assert_eq!((s, code(&v)), (StatusCode::NOT_FOUND, "APPROVAL_NOT_FOUND"), "{v}");
    let (_, still) = get(&f.app, &format!("/approvals/{a}")).await;
    assert_eq!(still["approval"]["status"], "requested");

    // The person denies one; a second decision conflicts.
    let (s, v) = post(&f.app, &format!("/approvals/{a}/deny"), json!({"note": "not now"})).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!((v["status"].as_str(), v["decided_by"].as_str()), (Some("denied"), Some("ada")));
    let (s, v) = post(&f.app, &format!("/approvals/{a}/approve"), json!({})).await;
    assert_eq!((s, code(&v)), (StatusCode::CONFLICT, "APPROVAL_ALREADY_RESOLVED"), "{v}");
    // Revise with a note; approve with an edit runs the edit.
    let (s, v) =
        post(&f.app, &format!("/approvals/{b}/revise"), json!({"note": "say 19:00"})).await;
    assert_eq!((s, v["status"].as_str()), (StatusCode::OK, Some("revision_requested")), "{v}");
    // A secure request needs the person's PIN: without it, or with a wrong one, it is refused
    // and stays pending; with it, approved.
    let (s, v) = post(&f.app, &format!("/approvals/{c}/approve"), json!({})).await;
    assert_eq!((s, code(&v)), (StatusCode::BAD_REQUEST, "APPROVAL_NO_PIN"), "{v}");
    let ada = f.steward.human("ada").unwrap();
    f.steward.approvals().unwrap().set_pin(&ada, "482916", steward_core::time::now_secs()).unwrap();
    for body in [json!({}), json!({"pin": "000000"})] {
        let (s, v) = post(&f.app, &format!("/approvals/{c}/approve"), body).await;
        assert_eq!((s, code(&v)), (StatusCode::FORBIDDEN, "APPROVAL_PIN_REQUIRED"), "{v}");
    }
    let (_, d) = get(&f.app, &format!("/approvals/{c}")).await;
    assert_eq!(d["approval"]["status"], "requested");
    let (s, v) = post(&f.app, &format!("/approvals/{c}/approve"), json!({"pin": "482916"})).await;
    assert_eq!((s, v["status"].as_str()), (StatusCode::OK, Some("approved")), "{v}");

    let (s, d) = get(&f.app, &format!("/approvals/{a}")).await;
    assert_eq!(s, StatusCode::OK);
    let events: Vec<&str> =
        d["events"].as_array().unwrap().iter().map(|e| e["event"].as_str().unwrap()).collect();
    assert_eq!(events, ["requested", "denied"]);
    let (_, denied) = get(&f.app, "/approvals?status=denied").await;
    assert_eq!(denied.as_array().unwrap().len(), 1);
    // Nothing was journaled by deciding.
    let (_, ops) = get(&f.app, "/ops").await;
    assert_eq!(ops, json!([]));
}

#[tokio::test]
async fn policy_ops_and_audit() {
    let f = fixture();
    let (s, p) = get(&f.app, "/policy").await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(p["current"]["version"], 0);
    assert!(p["tools"].as_array().unwrap().iter().any(|t| t["name"] == "mail.send"));
    let put = |body: Value| {
        let app = f.app.clone();
        async move { call(&app, Method::PUT, "/policy/mail.send", Some(TOKEN), Some(body), &[]).await }
    };
    let (s, v) = put(json!({"level": "secure"})).await;
    assert_eq!((s, v["version"].as_u64()), (StatusCode::OK, Some(1)), "{v}");
    assert_eq!(v["changed_by"], "ada");
    let (s, v) = put(json!({"level": "secure"})).await;
    assert_eq!((s, code(&v)), (StatusCode::BAD_REQUEST, "POLICY_NO_CHANGE"));
    let (s, v) = put(json!({"level": "confirm", "expect_version": 0})).await;
    assert_eq!((s, code(&v)), (StatusCode::CONFLICT, "POLICY_VERSION_CONFLICT"));
    let (s, v) = put(json!({"level": "L9"})).await;
    assert_eq!((s, code(&v)), (StatusCode::BAD_REQUEST, "POLICY_BAD_LEVEL"));
    let (s, v) = call(
        &f.app,
        Method::PUT,
        "/policy/NotATool",
        Some(TOKEN),
        Some(json!({"level": "L2"})),
        &[],
    )
    .await;
    assert_eq!((s, code(&v)), (StatusCode::BAD_REQUEST, "POLICY_BAD_TOOL_NAME"), "{v}");
    // A same-origin browser and a configured origin may change state.
    let (s, _) = call(
        &f.app,
        Method::PUT,
        "/policy/mail.send",
        Some(TOKEN),
        Some(json!({"level": "confirm"})),
        &[("origin", "http://127.0.0.1:4317")],
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    let (s, _) = call(
        &f.app,
        Method::PUT,
        "/policy/mail.send",
        Some(TOKEN),
        Some(json!({"level": "secure"})),
        &[("origin", "https://phone.example:4318")],
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    let (s, h) = get(&f.app, "/policy?history=2").await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(
        (h["current"]["version"].as_u64(), h["history"].as_array().map(Vec::len)),
        (Some(3), Some(2))
    );
    let (s, v) = get(&f.app, "/policy?history=101").await;
    assert_eq!((s, code(&v)), (StatusCode::BAD_REQUEST, "POLICY_OUT_OF_RANGE"));

    let (s, ops) = get(&f.app, "/ops?state=confirmed&limit=100").await;
    assert_eq!((s, ops), (StatusCode::OK, json!([])));
    for (uri, status, want) in [
        ("/ops?state=bogus", 400, "JOURNAL_INVALID"),
        ("/ops?limit=0", 400, "JOURNAL_INVALID"),
        ("/ops?limit=101", 400, "JOURNAL_INVALID"),
        ("/ops/42", 404, "JOURNAL_NOT_FOUND"),
    ] {
        let (s, v) = get(&f.app, uri).await;
        assert_eq!((s.as_u16(), code(&v)), (status, want), "{uri}: {v}");
    }

    let (s, a) = get(&f.app, "/audit?event_type=policy.changed&limit=2").await;
    assert_eq!(s, StatusCode::OK, "{a}");
    let events = a["events"].as_array().unwrap();
    assert_eq!(events.len(), 2);
    assert!(events.iter().all(|e| e["actor"] == "ada"));
    for (uri, want) in
        [("/audit?risk=extreme", "AUDIT_BAD_RISK"), ("/audit?limit=201", "LIMIT_OUT_OF_RANGE")]
    {
        let (s, v) = get(&f.app, uri).await;
        assert_eq!((s, code(&v)), (StatusCode::BAD_REQUEST, want), "{uri}: {v}");
    }
}

#[test]
fn openapi_document_covers_every_route_and_is_pinned() {
    let doc = openapi::document();
    for r in routes() {
        let op = &doc["paths"][r.path][r.method.as_str().to_ascii_lowercase()];
        assert!(op.is_object(), "{} {} missing from the document", r.method, r.path);
        assert_eq!(op["security"] == json!([]), r.public, "{}", r.path);
    }
    // Every $ref resolves.
    fn refs(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(m) => {
                if let Some(Value::String(r)) = m.get("$ref") {
                    out.push(r.clone());
                }
                m.values().for_each(|x| refs(x, out));
            }
            Value::Array(a) => a.iter().for_each(|x| refs(x, out)),
            _ => {}
        }
    }
    let mut all = Vec::new();
    refs(&doc, &mut all);
    for r in all {
        let name = r.strip_prefix("#/components/schemas/").expect("a component ref");
        assert!(
            doc["components"]["schemas"][name].is_object()
                || doc["components"]["schemas"][name].is_boolean(),
            "{r}"
        );
    }
    let pinned =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/snapshots/openapi.json");
    let text = serde_json::to_string_pretty(&doc).unwrap() + "\n";
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        std::fs::create_dir_all(pinned.parent().unwrap()).unwrap();
        std::fs::write(&pinned, &text).unwrap();
    }
    let committed = std::fs::read_to_string(&pinned).unwrap_or_default();
    assert!(
        committed == text,
        "the API changed: review it and run UPDATE_SNAPSHOTS=1 cargo test -p steward-server --test http"
    );
}

#[tokio::test]
async fn a_real_socket_loopback_by_default_and_graceful_shutdown() {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    assert!(ServeConfig::default().listen.ip().is_loopback());
    let f = fixture();
    let steward = Arc::clone(&f.steward);
    let state = move || {
        AppState::new(
            Arc::clone(&steward),
            AccessToken::new(TOKEN).unwrap(),
            OriginPolicy::loopback(),
            "ada",
        )
    };
    let public = ServeConfig { listen: "0.0.0.0:0".parse().unwrap(), tls: None };
    let e = serve(state(), &public, |_| {}, async {}).await.unwrap_err();
    assert!(matches!(e, ServeError::TlsRequired(_)), "{e}");

    let config = ServeConfig { listen: "127.0.0.1:0".parse().unwrap(), tls: None };
    let running = spawn(state(), config).await.unwrap();
    let addr = running.addr;
    assert!(addr.ip().is_loopback());
    let mut conn = tokio::net::TcpStream::connect(addr).await.unwrap();
    let req = format!(
        "GET /stats HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {TOKEN}\r\nConnection: close\r\n\r\n"
    );
    conn.write_all(req.as_bytes()).await.unwrap();
    let mut response = String::new();
    conn.read_to_string(&mut response).await.unwrap();
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    assert!(response.contains("messages_live"));
    tokio::time::timeout(std::time::Duration::from_secs(10), running.stop())
        .await
        .unwrap()
        .unwrap();
    assert!(tokio::net::TcpStream::connect(addr).await.is_err(), "stopped listening");
}

#[tokio::test]
async fn pairing_gives_a_device_token_and_a_cookie_that_can_be_revoked() {
    let f = fixture();
    // A code from an authenticated session; the pairing itself is public.
    let (s, code) = post(&f.app, "/pairing-codes", json!({})).await;
    assert_eq!(s, StatusCode::OK, "{code}");
    let code = code["code"].as_str().unwrap().to_owned();
    let pair = |body: Value, origin: Option<&str>| {
        let mut b = Request::builder()
            .method(Method::POST)
            .uri("/pair")
            .header(header::HOST, "127.0.0.1:4317")
            .header(header::CONTENT_TYPE, "application/json");
        if let Some(o) = origin {
            b = b.header(header::ORIGIN, o);
        }
        b.body(Body::from(body.to_string())).unwrap()
    };
    // A cross-site page cannot pair itself.
    let (s, _, v) =
        call_raw(&f.app, pair(json!({"code": code, "name": "evil"}), Some("https://evil.example")))
            .await;
    assert_eq!((s, code_of(&v)), (StatusCode::FORBIDDEN, "ORIGIN_NOT_ALLOWED"));
    let (s, headers, v) = call_raw(
        &f.app,
        pair(
            json!({"code": code.to_lowercase(), "name": "Ada's phone"}),
            Some("http://127.0.0.1:4317"),
        ),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let token = v["token"].as_str().unwrap().to_owned();
    let device = v["device"]["id"].as_i64().unwrap();
    let cookie = headers[header::SET_COOKIE].to_str().unwrap();
    assert!(
        cookie.starts_with(&format!("steward_device={token};"))
            && cookie.contains("HttpOnly")
            && cookie.contains("SameSite=Strict")
            && !cookie.contains("Secure"),
        "{cookie}"
    );
    // The code worked once.
    let (s, _, v) = call_raw(&f.app, pair(json!({"code": code, "name": "again"}), None)).await;
    assert_eq!((s, code_of(&v)), (StatusCode::FORBIDDEN, "PAIRING_CODE_INVALID"));
    let (s, _, v) = call_raw(&f.app, pair(json!({"code": "x"}), None)).await;
    assert_eq!((s.as_u16(), code_of(&v)), (422, "BAD_JSON"));

    // The device token works as a bearer token and as the cookie; it acts for the person.
    let (s, _) = call(&f.app, Method::GET, "/stats", Some(&token), None, &[]).await;
    assert_eq!(s, StatusCode::OK);
    let with_cookie = |uri: &str| {
        Request::builder()
            .uri(uri)
            .header(header::HOST, "localhost:4317")
            .header(header::COOKIE, format!("theme=dark; steward_device={token}"))
            .body(Body::empty())
            .unwrap()
    };
    let (s, _, _) = call_raw(&f.app, with_cookie("/stats")).await;
    assert_eq!(s, StatusCode::OK);
    let id = request_approval(&f.steward, Level::Confirm);
    let (s, v) = call(
        &f.app,
        Method::POST,
        &format!("/approvals/{id}/deny"),
        Some(&token),
        Some(json!({})),
        &[],
    )
    .await;
    assert_eq!((s, v["decided_by"].as_str()), (StatusCode::OK, Some("ada")), "{v}");
    let (_, devices) = get(&f.app, "/devices").await;
    assert_eq!(devices[0]["name"], "Ada's phone");

    // Revoked: at once, for the header and the cookie.
    let (s, v) = post(&f.app, &format!("/devices/{device}/revoke"), json!({})).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert!(v["revoked_at"].is_i64());
    let (s, v) = call(&f.app, Method::GET, "/stats", Some(&token), None, &[]).await;
    assert_eq!((s, code_of(&v)), (StatusCode::UNAUTHORIZED, "TOKEN_INVALID"));
    let (s, _, _) = call_raw(&f.app, with_cookie("/stats")).await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
    let (s, v) = post(&f.app, "/devices/999/revoke", json!({})).await;
    assert_eq!((s, code_of(&v)), (StatusCode::NOT_FOUND, "DEVICE_NOT_FOUND"));

    // The pairing page is public, and its headers forbid sniffing and framing.
    let (s, headers, _) = call_raw(
        &f.app,
        Request::builder()
            .uri("/pair")
            .header(header::HOST, "localhost")
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(headers[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
    assert!(
        headers[header::CONTENT_SECURITY_POLICY]
            .to_str()
            .unwrap()
            .contains("frame-ancestors 'none'")
    );
}

fn code_of(v: &Value) -> &str {
    v["code"].as_str().unwrap_or("")
}

#[tokio::test]
async fn an_idempotency_key_gives_one_effect_also_across_a_restart() {
    let f = fixture();
    let put = |app: Router, key: &'static str, body: Value| async move {
        call(
            &app,
            Method::PUT,
            "/policy/mail.send",
            Some(TOKEN),
            Some(body),
            &[("idempotency-key", key)],
        )
        .await
    };
    let (s, first) = put(f.app.clone(), "k-1", json!({"level": "secure"})).await;
    assert_eq!((s, first["version"].as_u64()), (StatusCode::OK, Some(1)));
    // Again: the first response, no second change (without the key it would be POLICY_NO_CHANGE).
    let (s, again) = put(f.app.clone(), "k-1", json!({"level": "secure"})).await;
    assert_eq!((s, &again), (StatusCode::OK, &first));
    // The same key with another body: 422, nothing changed.
    let (s, v) = put(f.app.clone(), "k-1", json!({"level": "confirm"})).await;
    assert_eq!((s.as_u16(), code(&v)), (422, "IDEMPOTENCY_KEY_REUSED"));
    assert_eq!(f.steward.policy().unwrap().version, 1);
    // A typed error is remembered too: the retry gets it again, not a second attempt.
    let (s, e1) = put(f.app.clone(), "k-2", json!({"level": "L9"})).await;
    let (s2, e2) = put(f.app.clone(), "k-2", json!({"level": "L9"})).await;
    assert_eq!(
        (s, s2, code(&e1)),
        (StatusCode::BAD_REQUEST, StatusCode::BAD_REQUEST, "POLICY_BAD_LEVEL")
    );
    assert_eq!(e1, e2);
    // A decision, replayed after a restart: a new server over the same home.
    let id = request_approval(&f.steward, Level::Confirm);
    let deny = |app: Router| async move {
        let req = Request::builder()
            .method(Method::POST)
            .uri(format!("/approvals/{id}/deny"))
            .header(header::HOST, "127.0.0.1")
            .header(header::AUTHORIZATION, format!("Bearer {TOKEN}"))
            .header(header::CONTENT_TYPE, "application/json")
            .header("idempotency-key", "deny-once")
            .body(Body::from("{}"))
            .unwrap();
        call_raw(&app, req).await
    };
    let (s, h, v) = deny(f.app.clone()).await;
    assert_eq!((s, v["status"].as_str()), (StatusCode::OK, Some("denied")));
    assert!(h.get("idempotent-replayed").is_none());
    let home = f.steward.home().to_owned();
    drop(f.app);
    let steward = Arc::new(Steward::builder().home(&home).open().unwrap());
    let state = AppState::new(
        Arc::clone(&steward),
        AccessToken::new(TOKEN).unwrap(),
        OriginPolicy::loopback(),
        "ada",
    );
    let (s, h, replayed) = deny(app(state)).await;
    assert_eq!(
        (s, &replayed),
        (StatusCode::OK, &v),
        "the first response, not APPROVAL_ALREADY_RESOLVED"
    );
    assert_eq!(h["idempotent-replayed"], "true");
    let events = steward.approval_detail(id).unwrap().events;
    assert_eq!(events.iter().filter(|e| e.event == "denied").count(), 1);
    let (s, v) = call(
        &app(AppState::new(
            steward,
            AccessToken::new(TOKEN).unwrap(),
            OriginPolicy::loopback(),
            "ada",
        )),
        Method::POST,
        "/pairing-codes",
        Some(TOKEN),
        Some(json!({})),
        &[("idempotency-key", "bad key")],
    )
    .await;
    assert_eq!((s, code(&v)), (StatusCode::BAD_REQUEST, "IDEMPOTENCY_KEY_INVALID"));
}

#[tokio::test]
async fn attachments_only_through_registered_tokens() {
    let f = fixture();
    let (_, page) = get(&f.app, "/search?has_attachments=true&limit=1").await;
    let id = page["messages"][0]["id"].as_i64().expect("the demo mailbox has attachments");
    let (_, m) = get(&f.app, &format!("/messages/{id}")).await;
    let att = &m["attachments"][0];
    let position = att["position"].as_i64().unwrap();
    let (s, g) =
        post(&f.app, "/attachments", json!({"message_id": id, "position": position})).await;
    assert_eq!(s, StatusCode::OK, "{g}");
    let token = g["token"].as_str().unwrap();
    assert_eq!(token.len(), 32);
    let req = |uri: String| {
        Request::builder()
            .uri(uri)
            .header(header::HOST, "127.0.0.1:4317")
            .header(header::AUTHORIZATION, format!("Bearer {TOKEN}"))
            .body(Body::empty())
            .unwrap()
    };
    let res = f.app.clone().oneshot(req(format!("/attachments/{token}"))).await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let h = res.headers().clone();
    let bytes = res.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(bytes.len() as i64, att["size"].as_i64().unwrap());
    assert_eq!(h[header::CONTENT_TYPE], att["mime_type"].as_str().unwrap());
    assert_eq!(h[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
    assert!(h[header::CONTENT_DISPOSITION].to_str().unwrap().starts_with("attachment; filename="));
    assert!(h[header::CONTENT_SECURITY_POLICY].to_str().unwrap().starts_with("sandbox"));
    // Anything but a registered token is a 404: paths, blob hashes, guesses.
    let sha = att["sha256"].as_str().unwrap();
    for bad in [
        "0123456789abcdef0123456789abcdef".to_owned(),
        sha.to_owned(),
        "..%2F..%2Fsteward.db".to_owned(),
        "%2Fetc%2Fpasswd".to_owned(),
    ] {
        let (s, v) = get(&f.app, &format!("/attachments/{bad}")).await;
        assert_eq!((s, code(&v)), (StatusCode::NOT_FOUND, "ATTACHMENT_TOKEN_UNKNOWN"), "{bad}");
    }
    let (s, v) = get(&f.app, "/attachments/blobs/x").await;
    assert_eq!((s, code(&v)), (StatusCode::NOT_FOUND, "NO_SUCH_ROUTE"));
    let (s, v) = post(&f.app, "/attachments", json!({"message_id": id, "position": 99})).await;
    assert_eq!((s, code(&v)), (StatusCode::NOT_FOUND, "ATTACHMENT_NOT_FOUND"));
    let (s, v) = post(&f.app, "/attachments", json!({"path": "/etc/passwd"})).await;
    assert_eq!((s.as_u16(), code(&v)), (422, "BAD_JSON"));
}

#[tokio::test]
async fn system_status_observes_without_starting_work() {
    let f = fixture();
    let before: Vec<_> =
        std::fs::read_dir(f.steward.home()).unwrap().map(|e| e.unwrap().file_name()).collect();
    let (s, st) = get(&f.app, "/system/status").await;
    assert_eq!(s, StatusCode::OK, "{st}");
    let item = |name: &str| {
        st["items"].as_array().unwrap().iter().find(|i| i["name"] == name).cloned().unwrap()
    };
    assert_eq!(item("store.mirror")["status"], "ok");
    assert_eq!(
        item("ingest")["status"],
        "warning",
        "the demo mailbox has malformed files on purpose"
    );
    assert_eq!(item("index.lexical")["status"], "ok");
    assert_eq!(item("watches")["status"], "unknown");
    assert_eq!(item("store.ops")["status"], "unknown", "ops.db is not created by looking");
    assert!(["ok", "warning", "error"].contains(&item("disk")["status"].as_str().unwrap()));
    assert_eq!(st["status"], "warning");
    let after: Vec<_> =
        std::fs::read_dir(f.steward.home()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(before, after, "no store was created");
}

#[tokio::test]
async fn a_tls_listener_serves_https_and_only_https() {
    use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let f = fixture();
    let dir = tempfile::tempdir().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();
    let key = KeyPair::generate().unwrap();
    let leaf =
        CertificateParams::new(vec!["localhost".to_owned()]).unwrap().signed_by(&key, &ca).unwrap();
    let (cert_path, key_path) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    std::fs::write(&cert_path, leaf.pem()).unwrap();
    std::fs::write(&key_path, key.serialize_pem()).unwrap();

    // A bad key file is a typed error, not a plain listener.
    let bad = ServeConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        tls: Some((cert_path.clone(), dir.path().join("missing.pem"))),
    };
    let state = || {
        AppState::new(
            Arc::clone(&f.steward),
            AccessToken::new(TOKEN).unwrap(),
            OriginPolicy::loopback(),
            "ada",
        )
    };
    let e = serve(state(), &bad, |_| {}, async {}).await.unwrap_err();
    assert!(matches!(e, ServeError::Tls { .. }), "{e}");

    // With a certificate, a non-loopback address is allowed.
    let config =
        ServeConfig { listen: "0.0.0.0:0".parse().unwrap(), tls: Some((cert_path, key_path)) };
    let running = spawn(state(), config).await.unwrap();
    let port = running.addr.port();
    let mut roots = tokio_rustls::rustls::RootCertStore::empty();
    roots.add(ca.der().clone()).unwrap();
    let client = tokio_rustls::rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(client));
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let name = tokio_rustls::rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let mut tls = connector.connect(name, tcp).await.unwrap();
    tls.write_all(format!("GET /stats HTTP/1.1\r\nHost: localhost:{port}\r\nAuthorization: Bearer {TOKEN}\r\nConnection: close\r\n\r\n").as_bytes()).await.unwrap();
    let mut response = Vec::new();
    let _ = tls.read_to_end(&mut response).await;
    let response = String::from_utf8_lossy(&response);
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    assert!(response.contains("messages_live"));
    // Pairing over TLS sets a Secure cookie (it is never sent in clear).
    let code =
        f.steward.access().unwrap().new_pairing_code(steward_core::time::now_secs()).unwrap();
    let body = json!({"code": code.code, "name": "phone"}).to_string();
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let name = tokio_rustls::rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let mut tls = connector.connect(name, tcp).await.unwrap();
    tls.write_all(format!("POST /pair HTTP/1.1\r\nHost: localhost:{port}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len()).as_bytes()).await.unwrap();
    let mut response = Vec::new();
    let _ = tls.read_to_end(&mut response).await;
    let response = String::from_utf8_lossy(&response);
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    let cookie = response
        .lines()
        .find(|l| l.to_ascii_lowercase().starts_with("set-cookie:"))
        .unwrap_or_default();
    assert!(cookie.contains("HttpOnly") && cookie.ends_with("; Secure"), "{cookie}");
    // Plain HTTP on the TLS port gets no HTTP answer.
    let mut plain = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    plain
        .write_all(b"GET /health HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(std::time::Duration::from_secs(5), plain.read_to_end(&mut answer))
        .await;
    assert!(
        !String::from_utf8_lossy(&answer).contains("\"ok\""),
        "served plain HTTP on the TLS port"
    );
    tokio::time::timeout(std::time::Duration::from_secs(10), running.stop())
        .await
        .unwrap()
        .unwrap();
}

#[tokio::test]
async fn watches_are_created_listed_stopped_and_their_events_read() {
    let f = fixture();
    let now = steward_core::time::now_secs();
    let at = |secs: i64| steward_core::time::CivilTime::from_unix(secs).rfc3339();
    let def = |when: String| {
        json!({"source": "time", "resource_ref": when, "instruction": "remind me to call Ada",
               "rules": [{"id": "ring", "event": "time.reached", "once": true}]})
    };
    let (s, w) = post(&f.app, "/watches", def(at(now + 3_600))).await;
    assert_eq!(s, StatusCode::OK, "{w}");
    assert_eq!((w["status"].as_str(), w["source"].as_str()), (Some("active"), Some("time")));
    let id = w["id"].as_i64().unwrap();
    let (s, soon) = post(&f.app, "/watches", def(at(now + 60))).await;
    assert_eq!(s, StatusCode::OK, "{soon}");
    let (_, list) = get(&f.app, "/watches?status=active").await;
    assert_eq!(list.as_array().unwrap().len(), 2);
    for (body, status, want) in [
        (
            json!({"source": "nope", "resource_ref": "x", "instruction": "i", "rules": [{"id": "a", "event": "e"}]}),
            400,
            "WATCH_UNKNOWN_SOURCE",
        ),
        (
            json!({"source": "time", "resource_ref": "tomorrow", "instruction": "i", "rules": [{"id": "a", "event": "e"}]}),
            400,
            "WATCH_BAD_RESOURCE",
        ),
        (
            json!({"source": "time", "resource_ref": at(now + 60), "instruction": "i", "rules": []}),
            400,
            "WATCH_INVALID",
        ),
        (
            json!({"source": "time", "resource_ref": at(now + 60), "instruction": "i", "rules": [{"id": "a", "event": "time.reached", "grants": [{"tool": "mail.send"}]}]}),
            400,
            "WATCH_INVALID",
        ),
        (
            json!({"source": "time", "resource_ref": at(now + 60), "instruction": "i", "rules": [{"id": "a", "event": "time.reached", "grants": [{"tool": "mail.send", "constraints": {"fields": {"to": {"kind": "exact", "value": ["a@b.c"]}, "subject": {"kind": "exact", "value": "s"}, "body": {"kind": "exact", "value": "b"}}}}]}]}),
            400,
            "WATCH_NEEDS_APPROVAL",
        ),
        (json!({"source": "time"}), 422, "BAD_JSON"),
    ] {
        let (s, v) = post(&f.app, "/watches", body).await;
        assert_eq!((s.as_u16(), code(&v)), (status, want), "{v}");
    }
    // Stopping is idempotent; a stopped watch stays stopped.
    for _ in 0..2 {
        let (s, v) = post(&f.app, &format!("/watches/{id}/stop"), json!({})).await;
        assert_eq!((s, v["status"].as_str()), (StatusCode::OK, Some("stopped")));
    }
    let (s, v) = post(&f.app, "/watches/999/stop", json!({})).await;
    assert_eq!((s, code(&v)), (StatusCode::NOT_FOUND, "WATCH_NOT_FOUND"));
    // The engine's poll (what the server's poller runs), a minute and a half later.
    let report = f.steward.watches().unwrap().poll(now + 90).unwrap();
    assert_eq!((report.queued, report.completed), (1, 1));
    let (s, events) = get(&f.app, "/watches/events?pending=true").await;
    assert_eq!(s, StatusCode::OK);
    let events = events.as_array().unwrap();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0]["event"]["type"], "time.reached");
    assert_eq!(events[0]["matched_rules"], json!(["ring"]));
    assert_eq!(events[0]["watch_id"], soon["id"]);
    // A state that is not one is refused by the query's own type (states are enums).
    for (uri, want) in
        [("/watches?status=bogus", "BAD_QUERY"), ("/watches/events?limit=101", "WATCH_INVALID")]
    {
        let (s, v) = get(&f.app, uri).await;
        assert_eq!((s, code(&v)), (StatusCode::BAD_REQUEST, want), "{uri}");
        if uri.contains("bogus") {
            let message = v["message"].as_str().unwrap_or_default();
            assert!(message.contains("status") && message.contains("active"), "{v}");
        }
    }
}

#[tokio::test]
async fn a_watch_with_grants_is_proposed_and_starts_when_the_person_approves_it() {
    let f = fixture();
    let now = steward_core::time::now_secs();
    let at = steward_core::time::CivilTime::from_unix(now + 3_600).rfc3339();
    let granted = json!({"source": "time", "resource_ref": at, "instruction": "tell Ada I am late",
        "rules": [{"id": "mail", "event": "time.reached", "once": true,
            "grants": [{"tool": "mail.send", "constraints": {"fields": {
                "to": {"kind": "exact", "value": ["ada@example.org"]},
                "subject": {"kind": "exact", "value": "Late"},
                "body": {"kind": "exact", "value": "Ten minutes late."}}}}]}]});
    let (s, p) = post(&f.app, "/watches/proposals", granted.clone()).await;
    assert_eq!(s, StatusCode::OK, "{p}");
    assert_eq!(p["outcome"], "needs_approval", "{p}");
    assert_eq!(p["tool"], "watch.create_agent");
    let summary = p["summary"].as_str().unwrap();
    assert!(summary.contains("mail.send") && summary.contains("ada@example.org"), "{summary}");
    assert!(p["requested_by"].as_str().unwrap().starts_with("agent:web:"), "{p}");
    // Nothing runs before the decision.
    let (_, list) = get(&f.app, "/watches").await;
    assert_eq!(list, json!([]));
    let id = p["id"].as_i64().unwrap();
    let (s, v) = post(&f.app, &format!("/approvals/{id}/approve"), json!({})).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let (_, list) = get(&f.app, "/watches").await;
    let list = list.as_array().unwrap();
    assert_eq!(list.len(), 1);
    assert_eq!(
        (list[0]["approval_id"].as_i64(), list[0]["status"].as_str()),
        (Some(id), Some("active"))
    );
    // Without grants a proposal starts at once; a bad one is the same typed error as a create.
    let (s, p) = post(
        &f.app,
        "/watches/proposals",
        json!({"source": "time", "resource_ref": at,
        "instruction": "ring", "rules": [{"id": "ring", "event": "time.reached"}]}),
    )
    .await;
    assert_eq!(
        (s, p["outcome"].as_str(), p["status"].as_str()),
        (StatusCode::OK, Some("started"), Some("active"))
    );
    let mut bad = granted;
    bad["rules"][0]["grants"][0]["tool"] = json!("shell.run");
    let (s, v) = post(&f.app, "/watches/proposals", bad).await;
    assert_eq!((s.as_u16(), code(&v)), (400, "WATCH_INVALID"), "{v}");
    let (_, list) = get(&f.app, "/watches").await;
    assert_eq!(list.as_array().unwrap().len(), 2, "the refused proposal made nothing");
}

#[test]
fn serve_drains_the_embedding_queue_in_the_background_and_stops_with_the_server() {
    use steward_connectors::testing::models::{
        Reply, ScriptedServer, embeddings_answer, hashed_embedding,
    };
    use steward_core::embed::{EmbedConfig, OpenAiEmbedder};
    let model = ScriptedServer::start(|req, _| {
        Reply::Json(200, embeddings_answer(&req.inputs(), |t| hashed_embedding(t, 64)))
    });
    let dir = tempfile::tempdir().unwrap();
    let maildir = dir.path().join("maildir");
    generate_maildir(&maildir, &DemoOptions::new(60)).unwrap();
    // The blocking HTTP client is made and dropped outside the async runtime, as `steward
    // serve` does.
    let embedder = OpenAiEmbedder::new(EmbedConfig::new(&model.base_url, "hash-64")).unwrap();
    let steward = Arc::new(
        Steward::builder()
            .home(dir.path().join("home"))
            .embedder(Arc::new(embedder))
            .open()
            .unwrap(),
    );
    let opts = SyncOptions { account: Some("demo".to_owned()), cancel: None };
    let synced = steward.sync_mail(&MaildirSource::new(&maildir), &opts, &mut |_| {}).unwrap();
    let live = steward.mirror().stats().unwrap().messages_live;
    assert!(live > 0 && synced.added > 0);
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let s = Arc::clone(&steward);
    let embedded = runtime.block_on(async move {
        // The server runs the core's runner: its embedding job drains the queue.
        let runner = steward_core::runner::Runner::new(
            Arc::clone(&s),
            steward_core::runner::RunnerConfig::default(),
            steward_core::runner::Services::default(),
        );
        let state = AppState::new(
            Arc::clone(&s),
            AccessToken::new(TOKEN).unwrap(),
            OriginPolicy::loopback(),
            "ada",
        )
        .with_runner(runner);
        let config = ServeConfig { listen: "127.0.0.1:0".parse().unwrap(), tls: None };
        let running = spawn(state, config).await.unwrap();
        // Nobody asked: the server embeds what the mirror holds (a backlog is drained by runs
        // that follow each other closely).
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(75);
        let embedded = loop {
            let (done, _, _) = s.vectors().unwrap().embed_summary("hash-64").unwrap();
            if done >= live || std::time::Instant::now() > deadline {
                break done;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        };
        tokio::time::timeout(std::time::Duration::from_secs(10), running.stop())
            .await
            .unwrap()
            .unwrap();
        embedded
    });
    assert_eq!(embedded, live);
    // Stopped: no more requests reach the model.
    let seen = model.requests().len();
    std::thread::sleep(std::time::Duration::from_millis(1_500));
    assert_eq!(model.requests().len(), seen);
    drop(runtime);
}

#[tokio::test]
async fn the_jobs_route_shows_the_runners_jobs_and_says_when_there_is_none() {
    use steward_core::runner::{JobName, Runner, RunnerConfig, Services};
    let f = fixture();
    let (status, body) = get(&f.app, "/system/jobs").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert_eq!(code(&body), "JOBS_NO_RUNNER");
    let runner = Runner::new(Arc::clone(&f.steward), RunnerConfig::default(), Services::default());
    let ran = runner.run_once(Some(JobName::ApprovalExpiry)).unwrap();
    assert_eq!(ran.len(), 1);
    let state = AppState::new(
        Arc::clone(&f.steward),
        AccessToken::new(TOKEN).unwrap(),
        OriginPolicy::loopback(),
        "ada",
    )
    .with_runner(runner);
    let (status, body) = get(&app(state), "/system/jobs").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let jobs = body.as_array().unwrap();
    assert_eq!(jobs.len(), JobName::ALL.len());
    let job = |n: &str| jobs.iter().find(|j| j["name"] == n).unwrap().clone();
    assert_eq!(job("approval-expiry")["runs"], 1);
    assert_eq!(job("approval-expiry")["last_outcome"], "ok");
    assert_eq!(job("watch-poll")["runs"], 0);
    assert!(job("send-due")["unavailable"].as_str().unwrap().contains("SMTP"));
    assert!(job("mail-reconcile")["unavailable"].as_str().unwrap().contains("mail.sources"));
}

#[tokio::test(flavor = "multi_thread")]
async fn chats_start_turns_that_run_on_the_server_and_are_followed_by_cursor() {
    use steward_connectors::testing::models::{Reply, ScriptedServer, chat_answer};
    use steward_core::{
        agent::{Agent, AgentConfig},
        tools::Toolbox,
    };
    // Without an agent the chat routes say so.
    let plain = fixture();
    let (status, body) = get(&plain.app, "/chats").await;
    assert_eq!((status, code(&body)), (StatusCode::SERVICE_UNAVAILABLE, "AGENT_UNAVAILABLE"));

    let model = ScriptedServer::start(|_, n| match n {
        0 => Reply::Json(
            200,
            chat_answer("m", "", &[("c1", "mail.search", r#"{"query":"","limit":2}"#)], (40, 4, 0)),
        ),
        _ => Reply::Json(200, chat_answer("m", "Two mails.", &[], (60, 5, 0))),
    });
    let dir = tempfile::tempdir().unwrap();
    let maildir = dir.path().join("maildir");
    generate_maildir(&maildir, &DemoOptions::new(30)).unwrap();
    let llm = steward_connectors::testing::models::one_chat_target(&model.base_url, "m");
    let steward =
        Arc::new(Steward::builder().home(dir.path().join("home")).llm(llm).open().unwrap());
    let opts = SyncOptions { account: Some("demo".to_owned()), cancel: None };
    steward.sync_mail(&MaildirSource::new(&maildir), &opts, &mut |_| {}).unwrap();
    let agent =
        Agent::open(Arc::new(Toolbox::new(Arc::clone(&steward))), AgentConfig::default()).unwrap();
    let state = AppState::new(
        Arc::clone(&steward),
        AccessToken::new(TOKEN).unwrap(),
        OriginPolicy::new(&[], &[]).unwrap(),
        "ada",
    )
    .with_agent(agent);
    let app = app(state);
    let (status, chat) = post(&app, "/chats", json!(null)).await;
    assert_eq!(status, StatusCode::OK, "{chat}");
    let id = chat["id"].as_str().unwrap().to_owned();
    let (status, started) =
        post(&app, &format!("/chats/{id}/turns"), json!({"text": "What is new?"})).await;
    assert_eq!(status, StatusCode::OK, "{started}");
    let run = started["run_id"].as_str().unwrap().to_owned();
    // Follow the events by cursor until the turn ends.
    let mut after = 0;
    let mut types = Vec::new();
    while !types.contains(&"turn_ended".to_owned()) {
        let (status, page) = get(&app, &format!("/chats/{id}/events?after={after}&wait=5")).await;
        assert_eq!(status, StatusCode::OK, "{page}");
        for e in page.as_array().unwrap() {
            after = e["seq"].as_i64().unwrap();
            types.push(e["event"]["type"].as_str().unwrap().to_owned());
        }
        assert!(types.len() < 100);
    }
    assert!(types.contains(&"tool_finished".to_owned()), "{types:?}");
    let (_, turn) = get(&app, &format!("/runs/{run}")).await;
    assert_eq!(
        (turn["status"].as_str(), turn["end_reason"].as_str()),
        (Some("ended"), Some("completed"))
    );
    let (_, detail) = get(&app, &format!("/chats/{id}")).await;
    assert_eq!(detail["messages"].as_array().unwrap().len(), 4);
    assert_eq!(detail["tool_calls"][0]["status"], "ran");
    let (_, cancelled) = post(&app, &format!("/runs/{run}/cancel"), json!(null)).await;
    assert_eq!(cancelled["cancelled"], false, "an ended run is not cancelled");
    // Outside the documented ranges: refused at once, never a long wait or a silent clamp.
    for q in ["wait=26", "wait=600", "limit=0", "limit=501"] {
        let (status, body) = get(&app, &format!("/chats/{id}/events?{q}")).await;
        assert_eq!((status, code(&body)), (StatusCode::BAD_REQUEST, "BAD_QUERY"), "{q}: {body}");
    }
    let (status, body) = post(&app, &format!("/chats/{id}/turns"), json!({"text": "  "})).await;
    assert_eq!((status, code(&body)), (StatusCode::BAD_REQUEST, "AGENT_INVALID_INPUT"));
    let (status, body) = get(&app, "/chats/nope").await;
    assert_eq!((status, code(&body)), (StatusCode::NOT_FOUND, "CHAT_NOT_FOUND"));
    let (status, _) = post(&app, &format!("/chats/{id}/delete"), json!(null)).await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = get(&app, &format!("/chats/{id}")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn memory_review_search_and_forget_over_http() {
    use steward_core::memory::{MemoryKind, MemorySource, NewMemory, ProposeOutcome, Sensitivity};
    let f = fixture();
    let fact = |text: &str| NewMemory {
        text: text.to_owned(),
        kind: MemoryKind::Preference,
        subject: Some("person:ada@example.org".to_owned()),
        valid_from: None,
        valid_to: None,
        confidence: None,
        sources: vec![MemorySource::Chat { chat: "c1".to_owned() }],
        supersedes: Vec::new(),
        sensitivity: Sensitivity::Normal,
    };
    let ProposeOutcome::Proposed { id } =
        f.steward.memory_propose("agent:steward", &fact("Ada drinks oolong tea.")).unwrap()
    else {
        panic!()
    };
    let ProposeOutcome::Proposed { id: other } =
        f.steward.memory_propose("agent:steward", &fact("Ada hates mornings.")).unwrap()
    else {
        panic!()
    };
    let (s, inbox) = get(&f.app, "/memory/inbox").await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(inbox.as_array().unwrap().len(), 2);
    // Searching finds nothing before a person accepts.
    let (_, hits) = get(&f.app, "/memory/search?q=oolong").await;
    assert_eq!(hits, json!([]));
    let (s, note) = post(
        &f.app,
        &format!("/memory/proposals/{id}/accept"),
        json!({"text": "Ada drinks oolong tea, no sugar."}),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{note}");
    assert_eq!(note["meta"]["review"]["by"], "ada");
    assert_eq!(note["meta"]["review"]["decision"], "edited");
    let (s, t) =
        post(&f.app, &format!("/memory/proposals/{other}/reject"), json!({"reason": "wrong"}))
            .await;
    assert_eq!((s, t["by"].as_str()), (StatusCode::OK, Some("ada")));
    let (s, again) = post(&f.app, &format!("/memory/proposals/{other}/reject"), json!({})).await;
    assert_eq!((s, code(&again)), (StatusCode::NOT_FOUND, "MEMORY_NOT_FOUND"));
    let (_, hits) = get(&f.app, "/memory/search?q=oolong&kinds=preference").await;
    assert_eq!(hits[0]["note"]["meta"]["id"], id.as_str());
    let (s, bad) = get(&f.app, "/memory/search?q=oolong&kinds=rumour").await;
    assert_eq!((s, code(&bad)), (StatusCode::BAD_REQUEST, "MEMORY_BAD_QUERY"));
    let (s, dry) = post(
        &f.app,
        "/memory/forget",
        json!({"selector": {"by": "subject", "value": "person:ada@example.org"}, "dry_run": true}),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{dry}");
    assert_eq!(dry["notes"].as_array().unwrap().len(), 1);
    let (_, gone) =
        post(&f.app, "/memory/forget", json!({"selector": {"by": "id", "value": id}})).await;
    assert_eq!(gone["notes"][0]["id"], id.as_str());
    let (s, missing) = get(&f.app, &format!("/memory/notes/{id}")).await;
    assert_eq!((s, code(&missing)), (StatusCode::NOT_FOUND, "MEMORY_NOT_FOUND"));
    let (s, r) = post(&f.app, "/memory/reconcile", json!(null)).await;
    assert_eq!((s, r["notes"].as_u64()), (StatusCode::OK, Some(0)), "{r}");
}

/// GET of `uri` with `headers`, returning status, headers and the raw body.
async fn get_raw(
    app: &Router,
    uri: &str,
    headers: &[(&str, &str)],
) -> (StatusCode, axum::http::HeaderMap, Vec<u8>) {
    let mut b = Request::builder().method(Method::GET).uri(uri);
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        b = b.header(header::HOST, "127.0.0.1:4317");
    }
    for (k, v) in headers {
        b = b.header(*k, *v);
    }
    let res = app.clone().oneshot(b.body(Body::empty()).unwrap()).await.unwrap();
    let (parts, body) = res.into_parts();
    (parts.status, parts.headers, body.collect().await.unwrap().to_bytes().to_vec())
}

/// The quoted absolute paths (`"/…"`) in a text.
fn quoted_paths(text: &str) -> Vec<String> {
    text.split('"')
        .skip(1)
        .step_by(2)
        .filter(|s| s.starts_with('/') && !s.starts_with("//") && !s.contains(' '))
        .map(str::to_owned)
        .collect()
}

#[tokio::test]
async fn the_web_client_is_served_at_the_root_with_its_security_headers() {
    use steward_server::http::web;
    let f = fixture();
    // The shell needs no token (it holds no data) and says how it may be used.
    let (s, h, body) = get_raw(&f.app, "/", &[]).await;
    assert_eq!(s, StatusCode::OK);
    assert!(h[header::CONTENT_TYPE].to_str().unwrap().starts_with("text/html"));
    let csp = h[header::CONTENT_SECURITY_POLICY].to_str().unwrap();
    for part in [
        "default-src 'self'",
        "script-src 'self'",
        "frame-ancestors 'none'",
        "object-src 'none'",
        "require-trusted-types-for 'script'",
    ] {
        assert!(csp.contains(part), "{csp}");
    }
    assert!(!csp.contains("unsafe"), "no inline script or eval: {csp}");
    assert_eq!(h[header::REFERRER_POLICY], "no-referrer");
    assert_eq!(h[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
    let index = String::from_utf8(body).unwrap();
    assert!(!index.contains("<script>"), "no inline script");
    assert!(
        !index.split_whitespace().any(|w| w.starts_with("on") && w.contains('=')),
        "no inline handler"
    );

    // Everything the shell, the service worker and the router name is served, and nothing else.
    let served: Vec<&str> = web::paths().collect();
    let (_, _, sw) = get_raw(&f.app, "/sw.js", &[]).await;
    let sw = String::from_utf8(sw).unwrap();
    let (_, _, app_js) = get_raw(&f.app, "/app/app.js", &[]).await;
    let app_js = String::from_utf8(app_js).unwrap();
    let pages: Vec<String> = app_js
        .split("PAGES = [")
        .nth(1)
        .unwrap()
        .split("];")
        .next()
        .unwrap()
        .split("[\"")
        .skip(1)
        .map(|s| format!("/app/pages/{}.js", s.split('"').next().unwrap()))
        .collect();
    assert!(pages.len() >= 9, "{pages:?}");
    for p in quoted_paths(&index).into_iter().chain(quoted_paths(&sw)).chain(pages.clone()) {
        assert!(served.contains(&p.as_str()), "{p} is named but not embedded");
        let (s, _, _) = get_raw(&f.app, &p, &[]).await;
        assert_eq!(s, StatusCode::OK, "{p}");
    }
    for p in pages {
        assert!(sw.contains(&format!("\"{p}\"")), "the offline shell lacks {p}");
    }
    let (s, h, _) = get_raw(&f.app, "/sw.js", &[]).await;
    assert_eq!((s, h[header::CACHE_CONTROL].to_str().unwrap()), (StatusCode::OK, "no-store"));
    let (s, _, body) = get_raw(&f.app, "/app/nope.js", &[]).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    assert_eq!(code(&serde_json::from_slice(&body).unwrap()), "NO_SUCH_ROUTE");
    // API answers are never sniffed either.
    let (_, h, _) = get_raw(&f.app, "/health", &[]).await;
    assert_eq!(h[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
    // The Host check guards the app like the API (DNS rebinding).

    let (s, _, _) = get_raw(&f.app, "/", &[("host", "evil.example")]).await;
    assert_eq!(s, StatusCode::MISDIRECTED_REQUEST);

    // The app's code never turns text into markup or code, and never names another origin.
    let mut gzipped = 0;
    for p in &served {
        let (_, h, plain) = get_raw(&f.app, p, &[]).await;
        assert!(h.get(header::CONTENT_ENCODING).is_none());
        let text = String::from_utf8(plain.clone()).unwrap();
        if p.ends_with(".js") {
            for banned in [
                "innerHTML",
                "outerHTML",
                "insertAdjacentHTML",
                "document.write",
                "eval(",
                "new Function",
            ] {
                assert!(!text.contains(banned), "{p} uses {banned}");
            }
        }
        let text = text.replace("http://www.w3.org/2000/svg", "");
        assert!(
            !text.contains("http://") && !text.contains("https://"),
            "{p} names another origin"
        );
        let (_, h, z) = get_raw(&f.app, p, &[("accept-encoding", "br, gzip;q=0.9")]).await;
        assert_eq!(h[header::CONTENT_ENCODING], "gzip", "{p}");
        let mut back = Vec::new();
        std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&z[..]), &mut back).unwrap();
        assert_eq!(back, plain, "{p}");
        gzipped += z.len();
    }
    // The whole app, every page included, is under the first-load budget (150 KB compressed).
    assert!(gzipped <= 150 * 1024, "{gzipped} bytes gzipped");
    eprintln!("the web client: {} files, {gzipped} bytes gzipped", served.len());
}

#[tokio::test]
async fn usage_reports_the_window_and_refuses_a_bad_one() {
    let f = fixture();
    let (s, r) = get(&f.app, "/usage").await;
    assert_eq!(s, StatusCode::OK, "{r}");
    assert_eq!(
        (r["total"]["requests"].as_i64(), r["by_day"].as_array().map(Vec::len)),
        (Some(0), Some(0))
    );
    let (s, r) = get(&f.app, "/usage?since=all").await;
    assert_eq!((s, r["since"].as_i64()), (StatusCode::OK, Some(0)), "{r}");
    for uri in ["/usage?since=yesterday-ish", "/usage?until=7d"] {
        let (s, r) = get(&f.app, uri).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{uri}: {r}");
        assert!(["USAGE_BAD_SINCE", "BAD_QUERY"].contains(&code(&r)), "{uri}: {r}");
    }
}
