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

pub(super) fn call(tb: &Toolbox, tool: &str, input: Value) -> ToolOutcome {
    tb.call(
        &ToolCall { actor: "agent:test", chat: Some("chat-1"), tool, input: &input },
        &DecisionContext::default(),
    )
    .unwrap_or_else(|e| panic!("{tool}: {e}"))
}

/// Asks for `tool`, has the person approve, runs it: the operation's id.
pub(super) fn approved(s: &Steward, tb: &Toolbox, tool: &str, input: Value) -> i64 {
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

pub(super) fn home_with(dir: &std::path::Path, source: &str) -> (Arc<Steward>, Toolbox) {
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

pub(super) fn sync(s: &Arc<Steward>) {
    let runner = steward_connectors::home::runner(Arc::clone(s)).unwrap();
    let r = runner.run_once(Some(steward_core::runner::JobName::PimSync)).unwrap();
    assert_eq!(r[0].outcome, steward_core::runner::JobOutcome::Ok, "{r:?}");
}

pub(super) fn confirm(s: &Arc<Steward>, op: i64) -> OpState {
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
    // Changed on the server with If-Match: moved an hour later (keeping its hour), renamed.
    let change =
        json!({ "event_id": id, "title": "Review (moved)", "start": "2026-03-12T11:00:00+01:00" });
    let upd = approved(&s, &tb, "calendar.update_event", change);
    assert_eq!(s.read_write_operation(upd).unwrap().state, OpState::BackendReturned);
    assert_eq!(confirm(&s, upd), OpState::Confirmed);
    let evidence = s.read_write_operation(upd).unwrap().evidence.unwrap();
    assert_eq!(evidence["matched_on"], "uid+fields", "{evidence}");
    sync(&s);
    let agenda = s.agenda(from, from + chrono::Duration::days(1)).unwrap();
    let seen: Vec<_> =
        agenda.iter().map(|o| (o.item.summary.as_str(), o.item.end.to_rfc3339())).collect();
    assert_eq!(seen, [("Review (moved)", "2026-03-12T12:00:00+01:00".to_owned())]);
    let del = approved(&s, &tb, "calendar.delete_event", json!({ "event_id": id }));
    assert_eq!(confirm(&s, del), OpState::Confirmed);
    sync(&s);
    assert!(s.agenda(from, from + chrono::Duration::days(1)).unwrap().is_empty());
}

/// An item another app wrote: its own zone definition, a property Steward does not know, an
/// alarm, and a weekly stand-up.
pub(super) const FOREIGN: &str = "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//Other//App//EN\r\n\
BEGIN:VTIMEZONE\r\nTZID:Europe/Rome\r\nBEGIN:STANDARD\r\nDTSTART:19701025T030000\r\n\
RRULE:FREQ=YEARLY;BYMONTH=10;BYDAY=-1SU\r\nTZOFFSETFROM:+0200\r\nTZOFFSETTO:+0100\r\nEND:STANDARD\r\n\
BEGIN:DAYLIGHT\r\nDTSTART:19700329T020000\r\nRRULE:FREQ=YEARLY;BYMONTH=3;BYDAY=-1SU\r\n\
TZOFFSETFROM:+0100\r\nTZOFFSETTO:+0200\r\nEND:DAYLIGHT\r\nEND:VTIMEZONE\r\n\
BEGIN:VEVENT\r\nUID:standup@other\r\nDTSTAMP:20260101T000000Z\r\n\
DTSTART;TZID=Europe/Rome:20260302T090000\r\nDTEND;TZID=Europe/Rome:20260302T091500\r\n\
RRULE:FREQ=WEEKLY;COUNT=6\r\nSUMMARY:Stand-up\r\nX-OTHER-COLOR:teal\r\n\
BEGIN:VALARM\r\nACTION:DISPLAY\r\nDESCRIPTION:Stand-up\r\nTRIGGER:-PT5M\r\nEND:VALARM\r\n\
END:VEVENT\r\nEND:VCALENDAR\r\n";

fn occurrences(s: &Steward, day: &str, days: i64) -> Vec<(String, String)> {
    let from = chrono::DateTime::parse_from_rfc3339(&format!("{day}T00:00:00+01:00")).unwrap();
    s.agenda(from.to_utc(), from.to_utc() + chrono::Duration::days(days))
        .unwrap()
        .into_iter()
        .map(|o| (o.item.start.to_rfc3339(), o.item.summary))
        .collect()
}

#[test]
fn an_approved_change_edits_the_item_in_place_and_keeps_what_steward_does_not_know() {
    let dir = tempfile::tempdir().unwrap();
    let vdir = dir.path().join("cal");
    std::fs::create_dir_all(vdir.join("work")).unwrap();
    let item = vdir.join("work/standup.ics");
    std::fs::write(&item, FOREIGN).unwrap();
    let (s, tb) =
        home_with(dir.path(), &format!("kind = \"vdir\"\npath = {vdir:?}\naccount = \"me\"\n"));
    sync(&s);
    let id = steward_core::calendar::store::event_id("me/work", "standup@other", "");

    // A repeating event's times change one occurrence at a time: refused before anyone is
    // asked, and so is an occurrence the rule does not have.
    for bad in [
        json!({ "event_id": id, "start": "2026-03-09T10:00:00+01:00" }),
        json!({ "event_id": id, "occurrence": "2026-03-10T09:00:00", "title": "x" }),
        json!({ "event_id": id }),
    ] {
        let r = tb.call(
            &ToolCall {
                actor: "agent:test",
                chat: None,
                tool: "calendar.update_event",
                input: &bad,
            },
            &DecisionContext::default(),
        );
        assert!(r.is_err(), "{bad}: {r:?}");
    }
    assert_eq!(std::fs::read_to_string(&item).unwrap(), FOREIGN, "nothing written");

    // The series renamed: the card says what changes; the file keeps its name and every
    // line Steward did not change.
    let ToolOutcome::AwaitingApproval { approval } =
        call(&tb, "calendar.update_event", json!({ "event_id": id, "title": "Daily stand-up" }))
    else {
        panic!()
    };
    assert_eq!(approval.summary, "Change \"Stand-up\" in me/work: title \"Daily stand-up\"");
    let op = approved(
        &s,
        &tb,
        "calendar.update_event",
        json!({ "event_id": id, "title": "Daily stand-up" }),
    );
    let text = std::fs::read_to_string(&item).unwrap();
    for kept in
        ["X-OTHER-COLOR:teal", "TRIGGER:-PT5M", "RRULE:FREQ=WEEKLY;COUNT=6", "TZOFFSETTO:+0200"]
    {
        assert!(text.contains(kept), "{kept} kept: {text}");
    }
    assert!(
        text.contains("SUMMARY:Daily stand-up\r\n") && text.contains("SEQUENCE:1\r\n"),
        "{text}"
    );
    let names: Vec<_> =
        std::fs::read_dir(vdir.join("work")).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(names, ["standup.ics"], "same name, no .tmp left");
    assert_eq!(confirm(&s, op), OpState::Confirmed);
    sync(&s);

    // One occurrence moved (start alone: it keeps its 15 minutes) becomes an override.
    let one = json!({ "event_id": id, "occurrence": "2026-03-09T09:00:00", "start": "2026-03-10T11:00:00+01:00" });
    let ToolOutcome::AwaitingApproval { approval } =
        call(&tb, "calendar.update_event", one.clone())
    else {
        panic!()
    };
    assert_eq!(
        approval.summary,
        "Change \"Daily stand-up\" (the occurrence of 2026-03-09 09:00) in me/work: from \
         2026-03-09 09:00–09:15 to 2026-03-10 11:00–11:15"
    );
    let op = approved(&s, &tb, "calendar.update_event", one);
    assert_eq!(confirm(&s, op), OpState::Confirmed);
    sync(&s);
    assert_eq!(
        occurrences(&s, "2026-03-02", 14),
        [
            ("2026-03-02T09:00:00+01:00".to_owned(), "Daily stand-up".to_owned()),
            ("2026-03-10T11:00:00+01:00".to_owned(), "Daily stand-up".to_owned()),
        ]
    );
    let text = std::fs::read_to_string(&item).unwrap();
    assert!(text.contains("RECURRENCE-ID;TZID=Europe/Rome:20260309T090000\r\n"), "{text}");
    assert_eq!(text.matches("BEGIN:VEVENT").count(), 2);

    // A file changed by another app since it was read is not edited: nothing journaled.
    let journaled = s.list_write_operations(None, 0, 50).unwrap().len();
    std::fs::write(&item, text.replace("X-OTHER-COLOR:teal", "X-OTHER-COLOR:red")).unwrap();
    let ToolOutcome::AwaitingApproval { approval } =
        call(&tb, "calendar.update_event", json!({ "event_id": id, "location": "Sala 2" }))
    else {
        panic!()
    };
    let me = s.human("Ada").unwrap();
    s.decide_approval(approval.id, DecisionKind::Approve, &DecisionInput::default(), &me).unwrap();
    let e = tb.run_approved(approval.id, "agent:test").unwrap_err();
    assert_eq!(e.code(), "CALENDAR_ITEM_CHANGED", "{e}");
    assert_eq!(s.list_write_operations(None, 0, 50).unwrap().len(), journaled);
    assert!(std::fs::read_to_string(&item).unwrap().contains("X-OTHER-COLOR:red"));
}

#[test]
fn invitations_are_mails_of_their_own_approval_never_sent_by_creating_the_event() {
    use steward_connectors::{
        mail::smtp::{Security, SmtpConfig, SmtpSender},
        testing::{SinkOptions, SmtpSink},
    };
    let dir = tempfile::tempdir().unwrap();
    let vdir = dir.path().join("cal");
    std::fs::create_dir_all(vdir.join("work")).unwrap();
    std::fs::write(vdir.join("work/standup.ics"), FOREIGN.replace(
        "SUMMARY:Stand-up\r\n",
        "SUMMARY:Stand-up\r\nORGANIZER:mailto:bob@other.org\r\nATTENDEE:mailto:ada@example.org\r\n",
    ))
    .unwrap();
    let (s, _) =
        home_with(dir.path(), &format!("kind = \"vdir\"\npath = {vdir:?}\naccount = \"me\"\n"));
    sync(&s);
    let sent = dir.path().join("Sent");
    let sink = SmtpSink::start(
        dir.path(),
        &SinkOptions { sent_maildir: Some(sent.clone()), ..SinkOptions::default() },
    );
    let sender = steward_core::outbox::Sender {
        account: "a".into(),
        from: "ada@example.org".into(),
        from_name: Some("Ada".into()),
    };
    let smtp =
        SmtpSender::new(SmtpConfig::new("127.0.0.1", sink.port, Security::Plain, sender.clone()))
            .unwrap();
    let targets = steward_connectors::home::calendar_targets(s.home()).unwrap();
    let tb = Toolbox::new(Arc::clone(&s))
        .with_calendar_targets(targets)
        .with_mail_sender(Arc::new(smtp), sender);

    // Creating an event with attendees lists them, names the person organizer, sends nothing.
    let create = json!({"title": "Review", "start": "2026-03-12T10:00:00+01:00",
        "end": "2026-03-12T11:00:00+01:00", "calendar": "me/work", "attendees": ["Anna@Example.it"]});
    let op = approved(&s, &tb, "calendar.create_event", create);
    assert_eq!(confirm(&s, op), OpState::Confirmed);
    sync(&s);
    assert!(sink.deliveries().is_empty(), "no invitation without its own approval");
    let uid = s.read_write_operation(op).unwrap().input["uid"].as_str().unwrap().to_owned();
    let id = steward_core::calendar::store::event_id("me/work", &uid, "");

    // The invitation waits for its own approval; its card says who and what.
    let ToolOutcome::AwaitingApproval { approval } =
        call(&tb, "calendar.invite", json!({ "event_id": id }))
    else {
        panic!()
    };
    assert_eq!(approval.summary, "Invite anna@example.it to \"Review\" (2026-03-12 10:00–11:00)");
    assert!(sink.deliveries().is_empty());
    let mail = approved(&s, &tb, "calendar.invite", json!({ "event_id": id }));
    let delivered = sink.deliveries();
    assert_eq!(delivered.len(), 1, "one mail, even run twice");
    assert_eq!(delivered[0]["rcpt_tos"], json!(["anna@example.it"]));
    assert_eq!(s.read_write_operation(mail).unwrap().kind, "mail.send");

    // What arrived: the body and an iTIP REQUEST any calendar app (and Steward's reader) reads.
    let raw = std::fs::read_dir(sent.join("cur")).unwrap().next().unwrap().unwrap().path();
    let raw = std::fs::read(raw).unwrap();
    use mail_parser::MimeHeaders as _;
    let msg = mail_parser::MessageParser::default().parse(&raw).unwrap();
    assert_eq!(msg.subject(), Some("Invitation: Review @ 2026-03-12 10:00–11:00"));
    let itip = msg
        .parts
        .iter()
        .find(|p| {
            p.content_type().is_some_and(|c| {
                c.ctype() == "text"
                    && c.subtype() == Some("calendar")
                    && c.attribute("method").is_some_and(|m| m.eq_ignore_ascii_case("REQUEST"))
            })
        })
        .and_then(|p| p.text_contents())
        .expect("a text/calendar; method=REQUEST part")
        .to_owned();
    assert!(itip.contains("METHOD:REQUEST\r\n"), "{itip}");
    assert!(itip.contains("ORGANIZER:mailto:ada@example.org\r\n"), "{itip}");
    let read = steward_connectors::calendar::ics::read_ics(&itip).unwrap();
    assert_eq!(read.events.len(), 1);
    assert_eq!(read.events[0].uid, uid);
    assert_eq!(read.events[0].attendees[0].email, "anna@example.it");
    let start = read.events[0].start.instant(chrono_tz::Europe::Rome);
    assert_eq!(start.to_rfc3339(), "2026-03-12T10:00:00+01:00");

    // Another's event is not the person's to invite to: refused before anyone is asked.
    let theirs = steward_core::calendar::store::event_id("me/work", "standup@other", "");
    let r = tb.call(
        &ToolCall {
            actor: "agent:test",
            chat: None,
            tool: "calendar.invite",
            input: &json!({ "event_id": theirs }),
        },
        &DecisionContext::default(),
    );
    assert!(r.unwrap_err().to_string().contains("bob@other.org"));
    assert_eq!(sink.deliveries().len(), 1);

    // The mail goes to exactly whom the card named: an attendee added at the source after the
    // approval is not invited by it, and one removed since makes it refuse.
    let item = s.calendar_store().unwrap().event_item(&id).unwrap().unwrap();
    let path = vdir.join("work").join(&item.href);
    let original = std::fs::read_to_string(&path).unwrap();
    let asked = |tb: &Toolbox| {
        let ToolOutcome::AwaitingApproval { approval } =
            call(tb, "calendar.invite", json!({ "event_id": id }))
        else {
            panic!()
        };
        let me = s.human("Ada").unwrap();
        s.decide_approval(approval.id, DecisionKind::Approve, &DecisionInput::default(), &me)
            .unwrap();
        approval
    };
    let approval = asked(&tb);
    assert_eq!(
        approval.normalized_input["attendees"],
        json!(["anna@example.it"]),
        "the card's list is the input's"
    );
    std::fs::write(
        &path,
        original.replace(
            "ATTENDEE;PARTSTAT=NEEDS-ACTION;RSVP=TRUE:mailto:anna@example.it",
            "ATTENDEE;PARTSTAT=NEEDS-ACTION;RSVP=TRUE:mailto:anna@example.it\r\nATTENDEE:mailto:eve@example.net",
        ),
    )
    .unwrap();
    sync(&s);
    tb.run_approved(approval.id, "agent:test").unwrap();
    let delivered = sink.deliveries();
    assert_eq!(delivered.len(), 2);
    assert_eq!(delivered[1]["rcpt_tos"], json!(["anna@example.it"]), "eve was not on the card");
    let approval = asked(&tb);
    std::fs::write(&path, original.replace("mailto:anna@example.it", "mailto:bruno@example.it"))
        .unwrap();
    let e = tb.run_approved(approval.id, "agent:test").unwrap_err();
    assert_eq!(e.code(), "CALENDAR_ITEM_CHANGED", "{e}");
    assert_eq!(sink.deliveries().len(), 2);
    // The model may narrow the list, never widen it.
    let r = tb.call(
        &ToolCall {
            actor: "agent:test",
            chat: None,
            tool: "calendar.invite",
            input: &json!({ "event_id": id, "attendees": ["mallory@example.net"] }),
        },
        &DecisionContext::default(),
    );
    assert!(r.unwrap_err().to_string().contains("not an attendee"));
}

/// A target that journals fine but never applies: the write's answer is lost (a timeout).
struct Lost(Arc<dyn steward_core::calendar::write::CalendarTarget>);

impl steward_core::calendar::write::CalendarTarget for Lost {
    fn account(&self) -> &str {
        self.0.account()
    }

    fn apply(
        &self,
        _: &steward_core::calendar::write::CalendarWrite,
    ) -> Result<Option<String>, steward_core::calendar::write::WriteError> {
        Err(steward_core::calendar::write::WriteError {
            maybe_applied: true,
            message: "timed out".into(),
        })
    }

    fn observe(
        &self,
        w: &steward_core::calendar::write::CalendarWrite,
    ) -> Result<steward_core::calendar::write::Observed, steward_core::calendar::write::WriteError>
    {
        self.0.observe(w)
    }
}

#[test]
fn a_change_never_applied_is_never_confirmed_and_all_day_changes_confirm_across_dst() {
    use steward_core::calendar::write::EventUpdate;
    let dir = tempfile::tempdir().unwrap();
    let vdir = dir.path().join("cal");
    std::fs::create_dir_all(vdir.join("work")).unwrap();
    std::fs::write(
        vdir.join("work/holiday.ics"),
        "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//t//t//EN\r\nBEGIN:VEVENT\r\nUID:holiday@t\r\n\
         DTSTAMP:20260101T000000Z\r\nDTSTART;VALUE=DATE:20260327\r\nDTEND;VALUE=DATE:20260403\r\n\
         SUMMARY:Vacanza\r\nLOCATION:Firenze\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n",
    )
    .unwrap();
    let (s, tb) =
        home_with(dir.path(), &format!("kind = \"vdir\"\npath = {vdir:?}\naccount = \"me\"\n"));
    sync(&s);
    let id = steward_core::calendar::store::event_id("me/work", "holiday@t", "");
    let targets = steward_connectors::home::calendar_targets(s.home()).unwrap();
    // A location-only change whose write is lost: the item still looks like every field but
    // the one it set, and it is never taken for done.
    let now = steward_core::time::now_secs();
    let plan = s
        .plan_event_update(&EventUpdate {
            event_id: id.clone(),
            location: Some("Siena".into()),
            ..EventUpdate::default()
        })
        .unwrap();
    let w = s.read_and_prepare_update(&plan, targets[0].as_ref(), now).unwrap();
    let op = s.write_calendar(&w, "lost-1", None, &Lost(Arc::clone(&targets[0])), now).unwrap();
    assert_eq!(op.state, OpState::Unknown);
    for k in 0..=steward_core::journal::CONFIRMATION_LIMIT {
        s.confirm_calendar_writes(&targets, now + 120 + k * 60).unwrap();
    }
    assert_eq!(s.read_write_operation(op.id).unwrap().state, OpState::RetryExhausted);
    // The same change applied: the days across the change to summer time still confirm.
    let renamed = approved(
        &s,
        &tb,
        "calendar.update_event",
        json!({ "event_id": id, "title": "Vacanza in Toscana", "location": "Siena" }),
    );
    assert_eq!(confirm(&s, renamed), OpState::Confirmed);
}

#[test]
fn a_uid_the_source_rewrites_becomes_an_alias_that_still_names_the_event() {
    let dir = tempfile::tempdir().unwrap();
    let vdir = dir.path().join("cal");
    std::fs::create_dir_all(vdir.join("work")).unwrap();
    let (s, tb) =
        home_with(dir.path(), &format!("kind = \"vdir\"\npath = {vdir:?}\naccount = \"me\"\n"));
    sync(&s);
    let create = |title: &str| {
        let op = approved(
            &s,
            &tb,
            "calendar.create_event",
            json!({"title": title, "start": "2026-03-13T10:00:00+01:00",
                   "end": "2026-03-13T11:00:00+01:00", "calendar": "me/work"}),
        );
        let w = s.read_write_operation(op).unwrap().input;
        (
            op,
            w["uid"].as_str().unwrap().to_owned(),
            vdir.join("work").join(w["href"].as_str().unwrap()),
        )
    };
    // The source keeps the event under a UID of its own, as some servers do after a PUT.
    let (op, uid, path) = create("Retro");
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, text.replace(&format!("UID:{uid}"), "UID:server-assigned-1")).unwrap();
    assert_eq!(confirm(&s, op), OpState::Confirmed);
    let evidence = s.read_write_operation(op).unwrap().evidence.unwrap();
    assert_eq!(
        (evidence["matched_on"].as_str(), evidence["uid"].as_str()),
        (Some("alias"), Some("server-assigned-1"))
    );
    sync(&s);
    // The id Steward handed out for its UID still names the event: a change and a delete
    // through it reach the item the source keeps.
    let id = steward_core::calendar::store::event_id("me/work", &uid, "");
    let upd = approved(
        &s,
        &tb,
        "calendar.update_event",
        json!({ "event_id": id, "title": "Retro (moved)" }),
    );
    assert_eq!(confirm(&s, upd), OpState::Confirmed);
    assert!(std::fs::read_to_string(&path).unwrap().contains("SUMMARY:Retro (moved)\r\n"));
    sync(&s);
    let del = approved(&s, &tb, "calendar.delete_event", json!({ "event_id": id }));
    assert_eq!(confirm(&s, del), OpState::Confirmed);
    assert!(!path.exists());

    // Another event in its place (another title) is no evidence: never confirmed as ours.
    let (op, uid, path) = create("Planning");
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(
        &path,
        text.replace(&format!("UID:{uid}"), "UID:other")
            .replace("SUMMARY:Planning", "SUMMARY:Other"),
    )
    .unwrap();
    assert_eq!(confirm(&s, op), OpState::BackendReturned);
}
