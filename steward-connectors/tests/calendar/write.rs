//! Calendar writes through the journal: an event created by the agent's tool only after the
//! person approves, written once into the vdir (where khal's layout and Steward's own reader
//! find it), confirmed by reading the vdir back; deleted the same way; a delete refused when
//! the file changed since it was read; and the same against a real CalDAV server.

use std::sync::Arc;

use serde_json::{Value, json};
use steward_connectors::testing::radicale::{Collection, Radicale};
use steward_core::{
    Steward, StewardError as _, ToolCall,
    approval::{DecisionInput, DecisionKind},
    journal::OpState,
    policy::DecisionContext,
    tools::{SourceRef, ToolOutcome, Toolbox},
};

fn call(tb: &Toolbox, tool: &str, input: Value) -> ToolOutcome {
    tb.call(
        &ToolCall { actor: "agent:test", chat: Some("chat-1"), tool, input: &input },
        &DecisionContext::default(),
    )
    .unwrap_or_else(|e| panic!("{tool}: {e}"))
}

/// Asks for `tool`, has the person approve, runs it: the operation's id.
fn approved(s: &Steward, tb: &Toolbox, tool: &str, input: Value) -> i64 {
    let ToolOutcome::AwaitingApproval { approval } = call(tb, tool, input) else {
        panic!("{tool} must wait for a person");
    };
    let me = s.human("Ada").unwrap();
    s.decide_approval(approval.id, DecisionKind::Approve, &DecisionInput::default(), &me).unwrap();
    let out = tb.run_approved(approval.id, "agent:test").unwrap();
    let again = tb.run_approved(approval.id, "agent:test").unwrap();
    assert_eq!(again.sources, out.sources, "running it again is the same operation");
    let SourceRef::Operation { id } = out.sources[0] else { panic!("{out:?}") };
    id
}

fn home_with(dir: &std::path::Path, source: &str) -> (Arc<Steward>, Toolbox) {
    let home = dir.join("home");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(
        home.join("config.toml"),
        format!("[calendar]\ntime_zone = \"Europe/Rome\"\n\n[[calendar.sources]]\n{source}"),
    )
    .unwrap();
    let s = Arc::new(steward_connectors::home::open(Some(home)).unwrap());
    let tb = steward_connectors::home::toolbox(Arc::clone(&s)).unwrap();
    (s, tb)
}

fn sync(s: &Arc<Steward>) {
    let runner = steward_connectors::home::runner(Arc::clone(s)).unwrap();
    let r = runner.run_once(Some(steward_core::runner::JobName::PimSync)).unwrap();
    assert_eq!(r[0].outcome, steward_core::runner::JobOutcome::Ok, "{r:?}");
}

fn confirm(s: &Arc<Steward>, op: i64) -> OpState {
    let targets = steward_connectors::home::calendar_targets(s.home()).unwrap();
    let later = steward_core::time::now_secs() + 120;
    s.confirm_calendar_writes(&targets, later).unwrap();
    s.read_write_operation(op).unwrap().state
}

#[test]
fn an_approved_event_is_written_once_into_the_vdir_confirmed_and_deleted_the_same_way() {
    let dir = tempfile::tempdir().unwrap();
    let vdir = dir.path().join("cal");
    std::fs::create_dir_all(vdir.join("work")).unwrap();
    std::fs::write(vdir.join("work/displayname"), "Work").unwrap();
    let (s, tb) =
        home_with(dir.path(), &format!("kind = \"vdir\"\npath = {vdir:?}\naccount = \"me\"\n"));
    sync(&s);

    let input = json!({
        "title": "Dentista, controllo",
        "start": "2026-03-10T17:00:00+01:00",
        "end": "2026-03-10T17:45:00+01:00",
        "location": "Via Roma 1",
    });
    let before = std::fs::read_dir(vdir.join("work")).unwrap().count();
    let op = approved(&s, &tb, "calendar.create_event", input);
    let files: Vec<_> = std::fs::read_dir(vdir.join("work"))
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".ics"))
        .collect();
    assert_eq!(files.len(), 1, "one item written, no .tmp left: {files:?}");
    assert_eq!(std::fs::read_dir(vdir.join("work")).unwrap().count(), before + 1);
    let text = std::fs::read_to_string(vdir.join("work").join(&files[0])).unwrap();
    assert!(text.contains("SUMMARY:Dentista\\, controllo\r\n"), "{text}");
    assert!(text.contains("DTSTART;TZID=Europe/Rome:20260310T170000\r\n"), "{text}");
    assert_eq!(s.read_write_operation(op).unwrap().state, OpState::BackendReturned);

    // Confirmation reads the vdir back; the store reads the event like any other.
    assert_eq!(confirm(&s, op), OpState::Confirmed);
    sync(&s);
    let from = chrono::DateTime::parse_from_rfc3339("2026-03-10T00:00:00+01:00").unwrap().to_utc();
    let agenda = s.agenda(from, from + chrono::Duration::days(1)).unwrap();
    assert_eq!(agenda.len(), 1);
    assert_eq!(agenda[0].item.summary, "Dentista, controllo");
    assert_eq!(agenda[0].item.start.to_rfc3339(), "2026-03-10T17:00:00+01:00");
    assert_eq!(agenda[0].calendar, "me/work");

    // Deleting it: the file goes, and confirmation sees it gone.
    let hits = s
        .search_events(&steward_core::calendar::store::EventQuery {
            text: Some("dentista".into()),
            from: Some(from),
            to: Some(from + chrono::Duration::days(2)),
            ..Default::default()
        })
        .unwrap();
    // The card says what goes.
    let ToolOutcome::AwaitingApproval { approval } =
        call(&tb, "calendar.delete_event", json!({ "event_id": hits[0].id }))
    else {
        panic!()
    };
    assert_eq!(
        approval.summary,
        "Delete \"Dentista, controllo\" from me/work (every occurrence, if it repeats)"
    );
    // An event that is not there is refused before anyone is asked.
    let nothing = tb.call(
        &ToolCall {
            actor: "agent:test",
            chat: None,
            tool: "calendar.delete_event",
            input: &json!({ "event_id": "evt-0000" }),
        },
        &DecisionContext::default(),
    );
    assert!(nothing.is_err(), "{nothing:?}");
    let del = approved(&s, &tb, "calendar.delete_event", json!({ "event_id": hits[0].id }));
    assert!(!vdir.join("work").join(&files[0]).exists());
    assert_eq!(confirm(&s, del), OpState::Confirmed);

    // A delete of a file changed since it was read is refused by the vdir: nothing removed.
    let op2 = approved(
        &s,
        &tb,
        "calendar.create_event",
        json!({"title": "Palestra", "start": "2026-03-11T07:00:00+01:00", "end": "2026-03-11T08:00:00+01:00"}),
    );
    assert_eq!(confirm(&s, op2), OpState::Confirmed);
    sync(&s);
    let gym = s
        .search_events(&steward_core::calendar::store::EventQuery {
            text: Some("palestra".into()),
            from: Some(from),
            to: Some(from + chrono::Duration::days(3)),
            ..Default::default()
        })
        .unwrap();
    let path = std::fs::read_dir(vdir.join("work"))
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "ics"))
        .unwrap();
    std::fs::write(
        &path,
        std::fs::read_to_string(&path).unwrap().replace("Palestra", "Palestra (edited)"),
    )
    .unwrap();
    let refused = approved(&s, &tb, "calendar.delete_event", json!({ "event_id": gym[0].id }));
    let op = s.read_write_operation(refused).unwrap();
    assert_eq!(op.state, OpState::Failed, "{op:?}");
    assert!(op.error.unwrap_or_default().contains("changed since"));
    assert!(path.exists(), "the edited file stays");

    // Bad times are refused before anything is journaled.
    let ToolOutcome::AwaitingApproval { approval } = call(
        &tb,
        "calendar.create_event",
        json!({"title": "x", "start": "2026-03-11T09:00:00+01:00", "end": "2026-03-11T08:00:00+01:00"}),
    ) else {
        panic!()
    };
    let me = s.human("Ada").unwrap();
    s.decide_approval(approval.id, DecisionKind::Approve, &DecisionInput::default(), &me).unwrap();
    let e = tb.run_approved(approval.id, "agent:test").unwrap_err();
    assert_eq!(e.code(), "CALENDAR_WRITE_INVALID");
    assert_eq!(s.list_write_operations(None, 0, 50).unwrap().len(), 4, "nothing journaled for it");
}

#[test]
fn an_approved_event_is_created_and_deleted_on_a_caldav_server_with_conditional_requests() {
    let dir = tempfile::tempdir().unwrap();
    let server = Radicale::start(dir.path(), "giulia", "s3cret");
    server.collection("lavoro", Collection::Calendar, "Lavoro", None);
    let pw = server.password_file(&dir.path().join("pw"));
    let (s, tb) = home_with(
        dir.path(),
        &format!(
            "kind = \"caldav\"\nurl = \"{}\"\nusername = \"giulia\"\npassword_file = {pw:?}\naccount = \"dav\"\n",
            server.url
        ),
    );
    sync(&s);
    let op = approved(
        &s,
        &tb,
        "calendar.create_event",
        json!({"title": "Review", "start": "2026-03-12T10:00:00+01:00", "end": "2026-03-12T11:00:00+01:00",
               "calendar": "dav/lavoro", "attendees": ["Anna@Example.it"]}),
    );
    assert_eq!(s.read_write_operation(op).unwrap().state, OpState::BackendReturned);
    assert_eq!(confirm(&s, op), OpState::Confirmed);
    sync(&s);
    let from = chrono::DateTime::parse_from_rfc3339("2026-03-12T00:00:00+01:00").unwrap().to_utc();
    let agenda = s.agenda(from, from + chrono::Duration::days(1)).unwrap();
    assert_eq!(agenda.iter().map(|o| o.item.summary.as_str()).collect::<Vec<_>>(), ["Review"]);
    let id = steward_core::calendar::store::event_id("dav/lavoro", &agenda[0].item.uid, "");
    let del = approved(&s, &tb, "calendar.delete_event", json!({ "event_id": id }));
    assert_eq!(confirm(&s, del), OpState::Confirmed);
    sync(&s);
    assert!(s.agenda(from, from + chrono::Duration::days(1)).unwrap().is_empty());
}
