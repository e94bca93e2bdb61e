//! iCalendar reading and expansion: never a panic; the file's bounds hold; every event read
//! expands (or fails with a typed error) in a bounded window around its start.
#![no_main]

use libfuzzer_sys::fuzz_target;
use steward_connectors::calendar::{
    ics::{MAX_FILE_ERRORS, MAX_FILE_EVENTS},
    read_ics,
};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let Ok(read) = read_ics(&text) else { return };
    assert!(read.events.len() <= MAX_FILE_EVENTS);
    assert!(read.errors.len() <= MAX_FILE_ERRORS);
    let zone = chrono_tz::Europe::Rome;
    for e in read.events.iter().take(20) {
        let start = e.start.instant(zone).with_timezone(&chrono::Utc);
        let (from, to) = (start - chrono::Duration::days(10), start + chrono::Duration::days(50));
        if let Ok(items) = steward_core::calendar::agenda(std::slice::from_ref(e), zone, from, to, 1000) {
            assert!(items.len() <= 1000);
            assert!(items.iter().all(|i| i.end >= i.start));
        }
    }
});
