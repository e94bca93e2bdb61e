//! calendar.db: a vdir reconciled like the mail mirror (new, changed, vanished, unchanged items
//! not read again, a re-run changes nothing, a vanished item's events come back with the same
//! ids), its agenda the same as the files' own, BM25 search with absent topics returning
//! nothing, and free/busy over the store.

use chrono::{TimeZone, Utc};
use steward_connectors::calendar::{agenda_of, read_vdir, sync::sync_vdir};
use steward_core::{
    Limits,
    calendar::{
        WorkingHours,
        store::{CalendarStore, EventQuery},
    },
};

use super::sources::{HOME, write_vdir};

#[test]
fn a_vdir_is_reconciled_item_by_item_and_answers_like_its_files() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("cal");
    write_vdir(&root);
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let store = CalendarStore::open(&home, &Limits::default()).unwrap();
    let rome = chrono_tz::Europe::Rome;
    let (r, errors) = sync_vdir(&store, "me", &root, rome).unwrap();
    assert_eq!((r.calendars, r.added, r.changed, r.removed, r.events), (2, 3, 0, 0, 4), "{r:?}");
    assert_eq!(errors.iter().map(|e| e.code).collect::<Vec<_>>(), ["ICS_NO_DTSTART"]);
    // Nothing changed: nothing read, nothing written.
    let (r, errors) = sync_vdir(&store, "me", &root, rome).unwrap();
    assert_eq!((r.added, r.changed, r.removed, r.unchanged, r.events), (0, 0, 0, 3, 4), "{r:?}");
    assert!(errors.is_empty(), "an unchanged item is not read again: {errors:?}");

    // The store's agenda is the files' own.
    let from = Utc.with_ymd_and_hms(2025, 3, 1, 0, 0, 0).unwrap();
    let to = Utc.with_ymd_and_hms(2025, 5, 1, 0, 0, 0).unwrap();
    let stored: Vec<(String, String)> = store
        .agenda(rome, from, to, 100)
        .unwrap()
        .iter()
        .map(|o| (o.item.start.to_rfc3339(), o.item.summary.clone()))
        .collect();
    let direct: Vec<(String, String)> = agenda_of(&read_vdir(&root).unwrap(), rome, from, to, 100)
        .unwrap()
        .iter()
        .map(|o| (o.item.start.to_rfc3339(), o.item.summary.clone()))
        .collect();
    assert_eq!(stored, direct);
    assert_eq!(stored.len(), 6);

    // Search: every word must match (diacritics folded); absent topics return nothing.
    let q = |text: &str| EventQuery {
        text: Some(text.into()),
        from: Some(from),
        to: Some(to),
        ..EventQuery::default()
    };
    let hits = store.search(rome, &q("stand up")).unwrap();
    assert_eq!(hits.len(), 1, "{hits:?}");
    assert_eq!(hits[0].item.start.to_rfc3339(), "2025-03-17T09:00:00+01:00");
    assert_eq!(hits[0].more_occurrences, 3);
    assert_eq!(hits[0].calendar, "me/work");
    assert!(store.search(rome, &q("sala riunioni")).unwrap().len() == 1, "location is searched");
    assert!(store.search(rome, &q("firenze")).unwrap()[0].item.all_day);
    assert!(store.search(rome, &q("dentist")).unwrap().is_empty(), "no stemming into a guess");
    assert!(store.search(rome, &q("quantum chromodynamics")).unwrap().is_empty());
    // An FTS operator in the text is a word, never syntax.
    assert!(store.search(rome, &q("NEAR(stand up) OR *")).unwrap().is_empty());
    let browse = store
        .search(rome, &EventQuery { from: Some(from), to: Some(to), ..EventQuery::default() })
        .unwrap();
    assert_eq!(browse.len(), 3, "every event with an occurrence in the window: {browse:?}");

    // Free/busy over the store: the transparent weekend takes no time.
    let fb = store
        .free_busy(
            rome,
            Utc.with_ymd_and_hms(2025, 3, 31, 0, 0, 0).unwrap(),
            Utc.with_ymd_and_hms(2025, 4, 1, 0, 0, 0).unwrap(),
            30,
            &WorkingHours::default(),
            &[],
        )
        .unwrap();
    assert_eq!(fb.busy.len(), 1);
    assert_eq!(fb.free[0].start.to_rfc3339(), "2025-03-31T09:30:00+02:00");

    // A changed item is read again; a vanished one's events are soft-deleted and come back
    // with the same ids.
    let before = store.search(rome, &q("firenze")).unwrap()[0].id.clone();
    let home_ics = root.join("home").join("home.ics");
    std::fs::write(&home_ics, HOME.replace("Dentista", "Dentista (spostato)")).unwrap();
    let (r, _) = sync_vdir(&store, "me", &root, rome).unwrap();
    assert_eq!((r.added, r.changed, r.removed), (0, 1, 0), "{r:?}");
    assert_eq!(store.search(rome, &q("spostato")).unwrap().len(), 1);
    std::fs::remove_file(&home_ics).unwrap();
    let (r, _) = sync_vdir(&store, "me", &root, rome).unwrap();
    assert_eq!((r.removed, r.events), (1, 2), "{r:?}");
    assert!(store.search(rome, &q("firenze")).unwrap().is_empty());
    assert_eq!(store.agenda(rome, from, to, 100).unwrap().len(), 4);
    std::fs::write(&home_ics, HOME).unwrap();
    let (r, _) = sync_vdir(&store, "me", &root, rome).unwrap();
    assert_eq!((r.added, r.events), (1, 4), "{r:?}");
    assert_eq!(store.search(rome, &q("firenze")).unwrap()[0].id, before);
    // A root that lists nothing (an unmounted share) retires nothing.
    let empty = dir.path().join("empty-root");
    std::fs::create_dir_all(&empty).unwrap();
    let (r, _) = sync_vdir(&store, "me", &empty, rome).unwrap();
    assert_eq!(r.removed, 0, "{r:?}");
    assert_eq!(store.search(rome, &q("firenze")).unwrap().len(), 1);
    // A calendar folder removed takes its events; put back, it is read whole again.
    let names = |s: &steward_core::calendar::store::CalendarStore| -> Vec<String> {
        s.calendars().unwrap().into_iter().map(|c| c.id).collect()
    };
    assert_eq!(names(&store), ["me/home", "me/work"]);
    let aside = dir.path().join("home-aside");
    std::fs::rename(root.join("home"), &aside).unwrap();
    let (r, _) = sync_vdir(&store, "me", &root, rome).unwrap();
    assert_eq!((r.removed, r.events), (1, 2), "{r:?}");
    assert_eq!(names(&store), ["me/work"]);
    assert!(store.search(rome, &q("firenze")).unwrap().is_empty());
    std::fs::rename(&aside, root.join("home")).unwrap();
    let (r, _) = sync_vdir(&store, "me", &root, rome).unwrap();
    assert_eq!((r.added, r.events), (1, 4), "{r:?}");
    assert_eq!(names(&store), ["me/home", "me/work"]);
    assert_eq!(store.search(rome, &q("firenze")).unwrap()[0].id, before);
    // Bad questions are typed errors.
    let e = store.search(rome, &q("   ")).unwrap();
    assert_eq!(e.len(), 3, "blank text is a browse");
    let e = store.search(rome, &q("…")).unwrap_err();
    assert_eq!(steward_core::StewardError::code(&e), "CALENDAR_BAD_QUERY");
    let e = store.agenda(rome, to, from, 100).unwrap_err();
    assert_eq!(steward_core::StewardError::code(&e), "CALENDAR_BAD_WINDOW");
}

#[test]
fn the_agent_tools_answer_from_the_store_in_the_persons_zone_and_mark_events_as_data() {
    use steward_core::{
        Steward, ToolCall,
        calendar::CalendarSettings,
        policy::DecisionContext,
        tools::{SourceRef, ToolOutcome, Toolbox},
    };
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("cal");
    write_vdir(&root);
    let rome = chrono_tz::Europe::Rome;
    let settings = CalendarSettings { zone: rome, ..CalendarSettings::default() };
    let s = std::sync::Arc::new(
        Steward::builder()
            .home(dir.path().join("home"))
            .calendar_settings(settings)
            .open()
            .unwrap(),
    );
    sync_vdir(s.calendar_store().unwrap(), "me", &root, rome).unwrap();
    let tb = Toolbox::new(std::sync::Arc::clone(&s));
    let run = |tool: &str, input: serde_json::Value| {
        let call = ToolCall { actor: "agent:test", chat: Some("c"), tool, input: &input };
        match tb.call(&call, &DecisionContext::default()) {
            Ok(ToolOutcome::Ran { result, .. }) => Ok(*result),
            Ok(other) => panic!("{tool} did not run: {other:?}"),
            Err(e) => Err(e),
        }
    };
    let a = run("calendar.agenda", serde_json::json!({ "from": "2025-03-31", "to": "2025-04-03" }))
        .unwrap();
    assert_eq!(
        a.text,
        "Agenda 2025-03-31 to 2025-04-03 (2 occurrences):\n\
         - Mon 2025-03-31 09:00–09:30 +02:00 Stand-up @ Sala riunioni [me/work]\n\
         - Wed 2025-04-02 15:00–15:45 +02:00 Dentista [me/home]"
    );
    assert!(a.untrusted, "event text is written by others: data, never orders");
    assert!(matches!(a.sources[0], SourceRef::Event { .. }));
    let f = run(
        "calendar.free_busy",
        serde_json::json!({ "from": "2025-03-31", "to": "2025-04-01", "min_minutes": 60 }),
    )
    .unwrap();
    assert!(f.text.contains("- Mon 2025-03-31 09:30–18:00 +02:00 (510 min)"), "{}", f.text);
    assert!(!f.untrusted, "free/busy shows only times");
    let q = run(
        "calendar.search",
        serde_json::json!({ "query": "firenze", "from": "2025-03-01", "to": "2025-04-30" }),
    )
    .unwrap();
    assert!(
        q.text.contains(
            "Sat 2025-03-29 to Sun 2025-03-30 (all day) Weekend in Firenze (free) [me/home]"
        ),
        "{}",
        q.text
    );
    // Bad input is a typed error and runs nothing.
    assert!(
        run("calendar.agenda", serde_json::json!({ "from": "next week", "to": "2025-04-03" }))
            .is_err()
    );
    assert!(
        run("calendar.agenda", serde_json::json!({ "from": "2025-01-01", "to": "2026-06-01" }))
            .is_err()
    );
    assert!(
        run(
            "calendar.free_busy",
            serde_json::json!({ "from": "2025-03-31", "to": "2025-04-01", "min_minutes": 1 })
        )
        .is_err()
    );
}

#[test]
fn the_runner_keeps_configured_calendars_and_address_books_current_and_reports_a_missing_one() {
    use steward_core::runner::{JobName, JobOutcome};
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("cal");
    write_vdir(&root);
    let book = dir.path().join("book");
    std::fs::create_dir_all(&book).unwrap();
    std::fs::write(
        book.join("anna.vcf"),
        "BEGIN:VCARD\r\nVERSION:3.0\r\nUID:a\r\nFN:Anna Rossi\r\nEMAIL:anna@polimi.it\r\nTEL:02 1234 5678\r\nEND:VCARD\r\n",
    )
    .unwrap();
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(
        home.join("config.toml"),
        format!(
            "[calendar]\ntime_zone = \"Europe/Rome\"\n\n[[calendar.sources]]\nkind = \"vdir\"\npath = {:?}\naccount = \"me\"\n\n\
             [[calendar.sources]]\nkind = \"ics\"\npath = {:?}\n\n\
             [contacts]\nregion = \"IT\"\n\n[[contacts.sources]]\nkind = \"vdir\"\npath = {:?}\n",
            root,
            dir.path().join("missing.ics"),
            book
        ),
    )
    .unwrap();
    let s = std::sync::Arc::new(steward_connectors::home::open(Some(home.clone())).unwrap());
    let runner = steward_connectors::home::runner(std::sync::Arc::clone(&s)).unwrap();
    assert_eq!(runner.unavailable(JobName::PimSync), None);
    let reports = runner.run_once(Some(JobName::PimSync)).unwrap();
    let r = &reports[0];
    // The missing file is reported; the vdir and the book were still brought in.
    assert_eq!(r.outcome, JobOutcome::Ok, "{r:?}");
    assert!(r.summary.contains("3 sources"), "{}", r.summary);
    let from = Utc.with_ymd_and_hms(2025, 3, 1, 0, 0, 0).unwrap();
    let to = Utc.with_ymd_and_hms(2025, 5, 1, 0, 0, 0).unwrap();
    assert_eq!(s.agenda(from, to).unwrap().len(), 6);
    let people = s.contacts().unwrap();
    assert_eq!(people[0].phones, ["+390212345678"]);
    // A second pass reads nothing again and changes nothing.
    let again = runner.run_once(Some(JobName::PimSync)).unwrap();
    assert!(again[0].summary.contains("0 items changed, 1 could not be read"), "{:?}", again[0]);
    // Another folder indexed by hand into a configured source's account is refused (it would
    // retire that source's calendars); the configured folder itself is its own.
    use steward_connectors::pim::{PimFrom, index_calendars};
    let other = dir.path().join("other");
    std::fs::create_dir_all(other.join("x")).unwrap();
    let e = index_calendars(&s, "me", PimFrom::Vdir(&other)).unwrap_err();
    assert_eq!(steward_core::StewardError::code(&e), "PIM_ACCOUNT_TAKEN", "{e}");
    assert_eq!(s.agenda(from, to).unwrap().len(), 6, "nothing retired");
    index_calendars(&s, "me", PimFrom::Vdir(&root)).unwrap();
    index_calendars(&s, "elsewhere", PimFrom::Vdir(&other)).unwrap();
    // Without sources the job says what to configure.
    std::fs::write(home.join("config.toml"), "").unwrap();
    let bare = steward_connectors::home::runner(std::sync::Arc::clone(&s)).unwrap();
    assert!(bare.unavailable(JobName::PimSync).unwrap().contains("[[calendar.sources]]"));
}

/// Events around now with every shape the expansion handles: long rules started long ago,
/// rules with UNTIL, COUNT and BYDAY, the 31st of each month, all-day spans across window
/// edges, a floating time, an override and a cancelled occurrence.
fn write_around_now(root: &std::path::Path) {
    use chrono::{Datelike as _, Duration};
    let dir = root.join("extra");
    std::fs::create_dir_all(&dir).unwrap();
    let today = Utc::now().date_naive();
    let d = |days: i64| (today + Duration::days(days)).format("%Y%m%d").to_string();
    let ev = |name: &str, body: String| {
        std::fs::write(
            dir.join(format!("{name}.ics")),
            format!(
                "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//t//EN\r\n{}END:VCALENDAR\r\n",
                body.replace('\n', "\r\n")
            ),
        )
        .unwrap();
    };
    ev(
        "daily",
        format!(
            "BEGIN:VEVENT\nUID:daily\nDTSTART;TZID=Europe/Rome:{}T073000\nDURATION:PT30M\nRRULE:FREQ=DAILY;INTERVAL=3\nSUMMARY:Run\nEND:VEVENT\n",
            d(-700)
        ),
    );
    ev(
        "weekly",
        format!(
            "BEGIN:VEVENT\nUID:weekly\nDTSTART;TZID=America/New_York:{}T090000\nDURATION:PT1H\nRRULE:FREQ=WEEKLY;BYDAY=MO,TH\nSUMMARY:Sync\nEND:VEVENT\n\
         BEGIN:VEVENT\nUID:weekly\nRECURRENCE-ID;TZID=America/New_York:{}T090000\nDTSTART;TZID=America/New_York:{}T150000\nDURATION:PT1H\nSUMMARY:Sync moved\nEND:VEVENT\n",
            // A Monday long ago; the override moves this week's Monday.
            d(-(700 + i64::from(today.weekday().num_days_from_monday()))),
            d(-i64::from(today.weekday().num_days_from_monday())),
            d(-i64::from(today.weekday().num_days_from_monday())),
        ),
    );
    ev(
        "monthly31",
        "BEGIN:VEVENT\nUID:m31\nDTSTART:20230131T120000Z\nDURATION:PT2H\nRRULE:FREQ=MONTHLY\nSUMMARY:Month end\nEND:VEVENT\n"
            .to_owned(),
    );
    ev(
        "until",
        format!(
            "BEGIN:VEVENT\nUID:until\nDTSTART;TZID=Europe/Rome:{}T180000\nDURATION:PT1H\nRRULE:FREQ=WEEKLY;UNTIL={}T235959Z\nEXDATE;TZID=Europe/Rome:{}T180000\nSUMMARY:Course\nEND:VEVENT\n",
            d(-400),
            d(20),
            d(-400 + 7 * 57)
        ),
    );
    ev(
        "count",
        format!(
            "BEGIN:VEVENT\nUID:count\nDTSTART;TZID=Europe/Rome:{}T100000\nDURATION:PT1H\nRRULE:FREQ=DAILY;COUNT=30\nSUMMARY:Therapy\nEND:VEVENT\n",
            d(-10)
        ),
    );
    ev(
        "trip",
        format!(
            "BEGIN:VEVENT\nUID:trip\nDTSTART;VALUE=DATE:{}\nDTEND;VALUE=DATE:{}\nSUMMARY:Trip\nEND:VEVENT\n",
            d(-3),
            d(9)
        ),
    );
    ev(
        "floating",
        format!(
            "BEGIN:VEVENT\nUID:floating\nDTSTART:{}T083000\nDURATION:PT8H\nRRULE:FREQ=WEEKLY;INTERVAL=2\nSUMMARY:Office\nEND:VEVENT\n",
            d(-300)
        ),
    );
    ev("yearly", "BEGIN:VEVENT\nUID:leap\nDTSTART;VALUE=DATE:20200229\nRRULE:FREQ=YEARLY\nSUMMARY:Leap\nEND:VEVENT\n".to_owned());
}

#[test]
fn occurrences_kept_expanded_in_memory_answer_exactly_like_expanding_each_window() {
    use chrono::Duration;
    let dir = tempfile::tempdir().unwrap();
    let (cal, book) = (dir.path().join("cal"), dir.path().join("book"));
    steward_connectors::calendar::demo::write_demo_pim(&cal, &book, Utc::now().timestamp())
        .unwrap();
    write_around_now(&cal);
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let store = CalendarStore::open(&home, &Limits::default()).unwrap();
    let rome = chrono_tz::Europe::Rome;
    sync_vdir(&store, "me", &cal, rome).unwrap();
    let files = read_vdir(&cal).unwrap();
    let me = vec!["giulia.bianchi@example.it".to_owned()];
    let midnight = Utc::now().date_naive().and_hms_opt(0, 0, 0).unwrap().and_utc();
    let mut compared = 0;
    for (start, days) in
        [(-59, 1), (-30, 30), (-7, 7), (0, 1), (0, 7), (1, 14), (3, 60), (100, 90), (290, 7)]
    {
        let from = midnight + Duration::days(start) + Duration::hours(5);
        let to = from + Duration::days(days);
        let stored: Vec<String> = store
            .agenda(rome, from, to, 1000)
            .unwrap()
            .into_iter()
            .map(|o| {
                format!(
                    "{} {} {} {} {}",
                    o.calendar.trim_start_matches("me/"),
                    o.item.uid,
                    o.item.start,
                    o.item.end,
                    o.item.summary
                )
            })
            .collect();
        let direct: Vec<String> = agenda_of(&files, rome, from, to, 1000)
            .unwrap()
            .into_iter()
            .map(|o| {
                format!(
                    "{} {} {} {} {}",
                    o.calendar, o.item.uid, o.item.start, o.item.end, o.item.summary
                )
            })
            .collect();
        assert_eq!(stored, direct, "agenda from {from} for {days} days");
        compared += stored.len();
        let fb = store.free_busy(rome, from, to, 30, &WorkingHours::default(), &me).unwrap();
        let fb_direct = steward_connectors::calendar::free_busy_of(
            &files,
            rome,
            from,
            to,
            30,
            &WorkingHours::default(),
            &me,
        )
        .unwrap();
        assert_eq!(fb, fb_direct, "free/busy from {from} for {days} days");
    }
    assert!(compared > 100, "the windows hold occurrences: {compared}");
    // The kept lists answered (the agenda's and the busy ones, each built once).
    assert_eq!(store.expansions(), 2, "answered from the occurrences kept in memory");
    // A window outside the span kept is expanded on its own, the same way.
    let far = midnight + Duration::days(500);
    let stored = store.agenda(rome, far, far + Duration::days(7), 1000).unwrap();
    let direct = agenda_of(&files, rome, far, far + Duration::days(7), 1000).unwrap();
    assert_eq!(stored.len(), direct.len());
    assert!(!stored.is_empty());
}
