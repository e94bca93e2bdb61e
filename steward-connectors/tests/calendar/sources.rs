//! Calendar sources: a vdir of two collections (what khal and vdirsyncer keep) read into
//! events and expanded into an agenda — a weekly meeting in Rome across the DST change with an
//! exception and a moved occurrence, an all-day event, a floating time, a cancelled override —
//! bad items as per-item errors that stop nothing; and every iCalendar file of the corpora read
//! without a panic.

use std::path::Path;

use chrono::{TimeZone, Utc};
use steward_connectors::{
    calendar::{agenda_of, read_ics_file, read_vdir},
    testing::corpus,
};

pub(crate) const WORK: &str = "BEGIN:VCALENDAR\r
VERSION:2.0\r
PRODID:-//test//EN\r
BEGIN:VTIMEZONE\r
TZID:W. Europe Standard Time\r
X-LIC-LOCATION:Europe/Rome\r
BEGIN:STANDARD\r
DTSTART:19701025T030000\r
TZOFFSETFROM:+0200\r
TZOFFSETTO:+0100\r
END:STANDARD\r
END:VTIMEZONE\r
BEGIN:VEVENT\r
UID:standup@example.org\r
DTSTART;TZID=W. Europe Standard Time:20250317T090000\r
DTEND;TZID=W. Europe Standard Time:20250317T093000\r
RRULE:FREQ=WEEKLY;BYDAY=MO;UNTIL=20250414T080000Z\r
EXDATE;TZID=W. Europe Standard Time:20250324T090000\r
SUMMARY:Stand-up\r
LOCATION:Sala riunioni\r
END:VEVENT\r
BEGIN:VEVENT\r
UID:standup@example.org\r
RECURRENCE-ID;TZID=W. Europe Standard Time:20250407T090000\r
DTSTART;TZID=W. Europe Standard Time:20250408T110000\r
DTEND;TZID=W. Europe Standard Time:20250408T113000\r
SEQUENCE:2\r
SUMMARY:Stand-up (moved)\r
END:VEVENT\r
END:VCALENDAR\r
";

pub(crate) const HOME: &str = "BEGIN:VCALENDAR\r
VERSION:2.0\r
PRODID:-//test//EN\r
BEGIN:VEVENT\r
UID:trip@example.org\r
DTSTART;VALUE=DATE:20250329\r
DTEND;VALUE=DATE:20250331\r
SUMMARY:Weekend in Firenze\r
TRANSP:TRANSPARENT\r
END:VEVENT\r
BEGIN:VEVENT\r
UID:dentist@example.org\r
DTSTART:20250402T150000\r
DURATION:PT45M\r
SUMMARY:Dentista\r
END:VEVENT\r
END:VCALENDAR\r
";

const BROKEN: &str = "BEGIN:VCALENDAR\r
VERSION:2.0\r
BEGIN:VEVENT\r
UID:no-start@example.org\r
SUMMARY:No start\r
END:VEVENT\r
END:VCALENDAR\r
";

pub(crate) fn write_vdir(root: &Path) {
    let work = root.join("work");
    let home = root.join("home");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(work.join("displayname"), "Lavoro\n").unwrap();
    std::fs::write(work.join("color"), "#ff0000").unwrap();
    std::fs::write(work.join("standup.ics"), WORK).unwrap();
    std::fs::write(work.join("broken.ics"), BROKEN).unwrap();
    // Not items: a write in progress and an extensionless file.
    std::fs::write(work.join("half.ics.tmp"), &WORK[..40]).unwrap();
    std::fs::write(work.join("README"), "notes").unwrap();
    std::fs::write(home.join("home.ics"), HOME).unwrap();
}

#[test]
fn a_vdir_becomes_an_agenda_with_recurrences_zones_and_exceptions_done_right() {
    let dir = tempfile::tempdir().unwrap();
    write_vdir(dir.path());
    let cals = read_vdir(dir.path()).unwrap();
    let ids: Vec<&str> = cals.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(ids, ["home", "work"]);
    let work = &cals[1];
    assert_eq!(work.display_name.as_deref(), Some("Lavoro"));
    assert_eq!(work.color.as_deref(), Some("#ff0000"));
    // The broken item is an error of its own; the rest of the collection is read.
    assert_eq!(work.errors.len(), 1, "{:?}", work.errors);
    assert_eq!(work.errors[0].code, "ICS_NO_DTSTART");
    assert_eq!(work.events.len(), 2, "the master and its override");
    let rome = chrono_tz::Europe::Rome;
    let from = Utc.with_ymd_and_hms(2025, 3, 1, 0, 0, 0).unwrap();
    let to = Utc.with_ymd_and_hms(2025, 5, 1, 0, 0, 0).unwrap();
    let items = agenda_of(&cals, rome, from, to, 100).unwrap();
    let seen: Vec<(String, String, String)> = items
        .iter()
        .map(|i| (i.item.start.to_rfc3339(), i.item.summary.clone(), i.calendar.clone()))
        .collect();
    let expect = [
        ("2025-03-17T09:00:00+01:00", "Stand-up", "work"),
        // 03-24 excluded; the change to summer time on 03-30 keeps 09:00 on the wall clock.
        ("2025-03-29T00:00:00+01:00", "Weekend in Firenze", "home"),
        ("2025-03-31T09:00:00+02:00", "Stand-up", "work"),
        // Floating: 15:00 in the person's zone.
        ("2025-04-02T15:00:00+02:00", "Dentista", "home"),
        // 04-07 moved to 04-08 11:00 by its override (another SEQUENCE: still the same one).
        ("2025-04-08T11:00:00+02:00", "Stand-up (moved)", "work"),
        // UNTIL 08:00Z is 10:00 in Rome: 04-14 09:00 is the last.
        ("2025-04-14T09:00:00+02:00", "Stand-up", "work"),
    ];
    let expect: Vec<(String, String, String)> =
        expect.iter().map(|(a, b, c)| ((*a).into(), (*b).into(), (*c).into())).collect();
    assert_eq!(seen, expect);
    let trip = items.iter().find(|i| i.item.uid == "trip@example.org").unwrap();
    assert!(trip.item.all_day && trip.item.transparent);
    // Two days across the change: 47 hours of wall-clock days.
    assert_eq!((trip.item.end - trip.item.start).num_hours(), 47);
    let moved = items.iter().find(|i| i.item.summary == "Stand-up (moved)").unwrap();
    assert_eq!(moved.item.recurrence_id.as_deref(), Some("2025-04-07T09:00:00"));
    // A window too long is refused, not cut.
    let long = Utc.with_ymd_and_hms(2026, 6, 1, 0, 0, 0).unwrap();
    let e = agenda_of(&cals, rome, from, long, 100).unwrap_err();
    assert_eq!(steward_core::StewardError::code(&e), "CALENDAR_BAD_WINDOW");
}

#[test]
fn a_cancelled_override_removes_its_occurrence() {
    let dir = tempfile::tempdir().unwrap();
    let text = WORK.replace(
        "SUMMARY:Stand-up (moved)\r\n",
        "SUMMARY:Stand-up (moved)\r\nSTATUS:CANCELLED\r\n",
    );
    let file = dir.path().join("work.ics");
    std::fs::write(&file, text).unwrap();
    let cal = read_ics_file(&file);
    let from = Utc.with_ymd_and_hms(2025, 4, 1, 0, 0, 0).unwrap();
    let to = Utc.with_ymd_and_hms(2025, 4, 12, 0, 0, 0).unwrap();
    let items = agenda_of(&[cal], chrono_tz::Europe::Rome, from, to, 100).unwrap();
    assert!(items.is_empty(), "{items:?}");
}

#[test]
fn every_icalendar_file_of_the_corpora_is_read_or_refused_without_a_panic() {
    let mut files = Vec::new();
    for dir in ["icalendar-pypi", "libical-testdata", "vobject-testfiles"] {
        let Some(root) = corpus(dir) else { return };
        let mut stack = vec![root];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap().filter_map(Result::ok) {
                let p = e.path();
                if p.is_dir() {
                    stack.push(p);
                } else if p.extension().is_some_and(|x| x == "ics") {
                    files.push(p);
                }
            }
        }
    }
    assert!(files.len() >= 200, "{} files", files.len());
    let (mut events, mut refused) = (0usize, 0usize);
    let mut codes: std::collections::BTreeMap<&str, usize> = std::collections::BTreeMap::new();
    let rome = chrono_tz::Europe::Rome;
    let from = Utc.with_ymd_and_hms(2024, 1, 1, 0, 0, 0).unwrap();
    let to = Utc.with_ymd_and_hms(2024, 12, 31, 0, 0, 0).unwrap();
    for f in &files {
        let cal = read_ics_file(f);
        events += cal.events.len();
        refused += usize::from(cal.events.is_empty() && !cal.errors.is_empty());
        if std::env::var_os("STEWARD_DIFF_VERBOSE").is_some() {
            eprintln!("EVENTS {} {}", f.display(), cal.events.len());
        }
        for e in &cal.errors {
            *codes.entry(e.code).or_default() += 1;
            if std::env::var_os("STEWARD_DIFF_VERBOSE").is_some() {
                eprintln!("{}: {} {}", f.display(), e.code, e.message);
            }
        }
        // Expanding a year of whatever it holds ends in a result or a typed error.
        let _ = agenda_of(&[cal], rome, from, to, 1_000);
    }
    eprintln!(
        "calendar corpora: {} files, {events} events read, {refused} refused: {codes:?}",
        files.len()
    );
    assert!(events >= 200, "{events} events");
}

#[test]
fn a_malformed_time_is_an_item_error_and_a_bad_end_or_rule_keeps_the_event() {
    let text = "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//t//EN\r\n\
        BEGIN:VEVENT\r\nUID:short\r\nDTSTART:19970701T13000Z\r\nSUMMARY:Short time\r\nEND:VEVENT\r\n\
        BEGIN:VEVENT\r\nUID:end\r\nDTSTART:19970701T130000Z\r\nDTEND:1997X\r\nSUMMARY:Bad end\r\nEND:VEVENT\r\n\
        BEGIN:VEVENT\r\nUID:rule\r\nDTSTART:19970701T130000Z\r\nRRULE:FREQ=SOMETIMES\r\nSUMMARY:Bad rule\r\nEND:VEVENT\r\n\
        BEGIN:VEVENT\r\nUID\r\n\r\n :split\r\nDTSTART:19970702T130000Z\r\nSUMMARY:Split fold\r\nEND:VEVENT\r\n\
        END:VCALENDAR\r\n";
    let read = steward_connectors::calendar::read_ics(text).unwrap();
    let uids: Vec<&str> = read.events.iter().map(|e| e.uid.as_str()).collect();
    let codes: Vec<(&str, Option<&str>)> =
        read.errors.iter().map(|e| (e.code, e.uid.as_deref())).collect();
    eprintln!("{:?}", read.events.iter().map(|e| (&e.uid, e.start)).collect::<Vec<_>>());
    assert_eq!(uids, ["end", "rule", "split"], "{codes:?}");
    assert_eq!(
        codes,
        [
            ("ICS_BAD_TIME", Some("short")),
            ("ICS_BAD_DTEND", Some("end")),
            ("ICS_BAD_RRULE", Some("rule"))
        ]
    );
    // The bad end takes RFC 5545's default (a timed event ends when it starts); the bad rule
    // leaves one occurrence.
    assert_eq!(read.events[0].duration_secs, 0);
    assert!(read.events[1].recurrence.rule.is_none());
}

#[test]
fn a_zone_the_file_defines_itself_is_matched_to_the_iana_zone_and_its_recurrences_follow_it() {
    // A TZID no reader knows, defined by the file with EU rules: the weekly 20:00 stays 20:00
    // on the wall clock across the change back to winter time (26 October 2025).
    let text = "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//t//EN\r\n\
        BEGIN:VTIMEZONE\r\nTZID:/Europe/CUSTOM\r\n\
        BEGIN:DAYLIGHT\r\nTZOFFSETFROM:+0100\r\nTZOFFSETTO:+0200\r\nDTSTART:19700329T020000\r\n\
        RRULE:FREQ=YEARLY;BYMONTH=3;BYDAY=-1SU\r\nEND:DAYLIGHT\r\n\
        BEGIN:STANDARD\r\nTZOFFSETFROM:+0200\r\nTZOFFSETTO:+0100\r\nDTSTART:19701025T030000\r\n\
        RRULE:FREQ=YEARLY;BYMONTH=10;BYDAY=-1SU\r\nEND:STANDARD\r\nEND:VTIMEZONE\r\n\
        BEGIN:VTIMEZONE\r\nTZID:Nowhere\r\n\
        BEGIN:STANDARD\r\nTZOFFSETFROM:+0530\r\nTZOFFSETTO:+0517\r\nDTSTART:20000101T000000\r\nEND:STANDARD\r\n\
        END:VTIMEZONE\r\n\
        BEGIN:VEVENT\r\nUID:chat\r\nDTSTART;TZID=/Europe/CUSTOM:20251017T200000\r\nDURATION:PT1H\r\n\
        RRULE:FREQ=WEEKLY;COUNT=3\r\nSUMMARY:Chat\r\nEND:VEVENT\r\n\
        BEGIN:VEVENT\r\nUID:odd\r\nDTSTART;TZID=Nowhere:20251020T120000\r\nSUMMARY:Odd zone\r\nEND:VEVENT\r\n\
        END:VCALENDAR\r\n";
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("custom.ics");
    std::fs::write(&file, text).unwrap();
    let cal = read_ics_file(&file);
    assert!(cal.errors.is_empty(), "{:?}", cal.errors);
    let from = Utc.with_ymd_and_hms(2025, 10, 1, 0, 0, 0).unwrap();
    let to = Utc.with_ymd_and_hms(2025, 11, 30, 0, 0, 0).unwrap();
    let items = agenda_of(&[cal], chrono_tz::UTC, from, to, 100).unwrap();
    let starts: Vec<String> = items.iter().map(|i| i.item.start.to_rfc3339()).collect();
    assert_eq!(
        starts,
        [
            "2025-10-17T20:00:00+02:00",
            // A zone no IANA zone matches (+05:17) still gives the exact instant.
            "2025-10-20T06:43:00+00:00",
            "2025-10-24T20:00:00+02:00",
            "2025-10-31T20:00:00+01:00",
        ]
    );
}
