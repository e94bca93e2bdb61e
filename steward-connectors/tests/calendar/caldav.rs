//! CalDAV against a real Radicale on loopback: discovery, a first full sync, an unchanged run
//! that downloads nothing, changes found through `sync-collection`, an expired token, wrong
//! credentials and a server that is gone — none of which loses a stored event.

use chrono::{TimeZone as _, Utc};
use steward_connectors::{
    calendar::sync::sync_caldav,
    dav::{DavAuth, DavClient, DavKind},
    testing::radicale::{Collection, Radicale},
};
use steward_core::calendar::store::{CalendarStore, EventQuery};

const ICS: &str = "text/calendar; charset=utf-8";

fn event(uid: &str, start: &str, summary: &str, extra: &str) -> String {
    format!(
        "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//test//EN\r\nBEGIN:VEVENT\r\nUID:{uid}\r\n\
         DTSTAMP:20250301T000000Z\r\nDTSTART;TZID=Europe/Rome:{start}\r\nDURATION:PT1H\r\n\
         SUMMARY:{summary}\r\n{extra}END:VEVENT\r\nEND:VCALENDAR\r\n"
    )
}

fn client(server: &Radicale, password: &str) -> DavClient {
    DavClient::with_auth(
        &server.url,
        DavAuth::Basic { user: server.user.clone(), password: password.to_owned() },
    )
    .unwrap()
}

fn summaries(store: &CalendarStore) -> Vec<String> {
    let rome = chrono_tz::Europe::Rome;
    let from = Utc.with_ymd_and_hms(2025, 3, 1, 0, 0, 0).unwrap();
    let to = Utc.with_ymd_and_hms(2025, 4, 1, 0, 0, 0).unwrap();
    store
        .agenda(rome, from, to, 1000)
        .unwrap()
        .into_iter()
        .map(|o| format!("{} {}", o.calendar, o.item.summary))
        .collect()
}

#[test]
fn caldav_mirrors_a_radicale_account_and_downloads_only_what_changed() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = Radicale::start(dir.path(), "giulia", "s3cret");
    server.collection("lavoro", Collection::Calendar, "Lavoro / Work", Some("#1e88e5"));
    server.collection("personale", Collection::Calendar, "Personale", None);
    server.seed(
        "lavoro",
        "weekly.ics",
        &event(
            "weekly@t",
            "20250303T093000",
            "Riunione settimanale",
            "RRULE:FREQ=WEEKLY;COUNT=4\r\n",
        ),
    );
    server.seed("lavoro", "review.ics", &event("review@t", "20250305T150000", "Budget review", ""));
    server.seed("personale", "dentist.ics", &event("dentist@t", "20250310T170000", "Dentista", ""));

    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let store = CalendarStore::open(&home, &steward_core::Limits::default()).unwrap();
    let rome = chrono_tz::Europe::Rome;
    let dav = client(&server, "s3cret");

    // Discovery: the principal's calendars with their names and colors.
    let found = dav.discover(DavKind::Calendars).unwrap();
    assert_eq!(found.iter().map(|c| c.id.as_str()).collect::<Vec<_>>(), ["lavoro", "personale"]);
    assert_eq!(found[0].name.as_deref(), Some("Lavoro / Work"));
    assert!(found.iter().all(|c| c.supports_sync), "Radicale offers sync-collection");

    // First run: every item.
    let (report, errors) = sync_caldav(&store, "work", &dav, rome).unwrap();
    assert_eq!((report.calendars, report.added, report.removed), (2, 3, 0), "{report:?}");
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(
        summaries(&store),
        [
            "work/lavoro Riunione settimanale",
            "work/lavoro Budget review",
            "work/lavoro Riunione settimanale",
            "work/personale Dentista",
            "work/lavoro Riunione settimanale",
            "work/lavoro Riunione settimanale",
        ]
    );
    let cals = store.calendars().unwrap();
    assert_eq!(cals[0].name.as_deref(), Some("Lavoro / Work"));
    assert_eq!(cals[0].color.as_deref(), Some("#1e88e5"));
    assert!(store.sync_token("work", "lavoro").unwrap().is_some(), "the token is kept");

    // Unchanged: discovery (3 requests) and one sync-collection per calendar; nothing
    // downloaded.
    let before = dav.requests();
    let (report, errors) = sync_caldav(&store, "work", &dav, rome).unwrap();
    assert_eq!((report.added, report.changed, report.removed), (0, 0, 0), "{report:?}");
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(dav.requests() - before, 5, "discovery and two listings, no download");

    // Changes made over HTTP: one event changed, one deleted, one added.
    assert_eq!(
        server.put(
            "lavoro",
            "review.ics",
            ICS,
            &event("review@t", "20250305T160000", "Budget review (moved)", "")
        ),
        204,
        "an update"
    );
    assert!(matches!(server.delete("personale", "dentist.ics"), 200 | 204));
    assert_eq!(
        server.put("personale", "gym.ics", ICS, &event("gym@t", "20250312T070000", "Palestra", "")),
        201
    );
    let before = dav.requests();
    let (report, _) = sync_caldav(&store, "work", &dav, rome).unwrap();
    assert_eq!((report.added, report.changed, report.removed), (1, 1, 1), "{report:?}");
    assert_eq!(dav.requests() - before, 7, "discovery, two deltas, one download each");
    let s = summaries(&store);
    assert!(s.contains(&"work/lavoro Budget review (moved)".to_owned()), "{s:?}");
    assert!(s.contains(&"work/personale Palestra".to_owned()), "{s:?}");
    assert!(!s.iter().any(|x| x.contains("Dentista")), "the deleted event is gone: {s:?}");
    let hits = store
        .search(
            rome,
            &EventQuery {
                text: Some("moved".into()),
                from: Some(Utc.with_ymd_and_hms(2025, 3, 1, 0, 0, 0).unwrap()),
                to: Some(Utc.with_ymd_and_hms(2025, 4, 1, 0, 0, 0).unwrap()),
                ..EventQuery::default()
            },
        )
        .unwrap();
    assert_eq!(hits.len(), 1);

    // A token the server no longer knows: the whole calendar is listed again, nothing lost.
    {
        let db = rusqlite::Connection::open(home.join("calendar.db")).unwrap();
        db.execute(
            "UPDATE calendars SET sync_token = 'http://radicale.org/ns/sync/0000' WHERE id = 'work/lavoro'",
            [],
        )
        .unwrap();
    }
    let (report, errors) = sync_caldav(&store, "work", &dav, rome).unwrap();
    assert_eq!((report.added, report.changed, report.removed), (0, 0, 0), "{report:?} {errors:?}");
    assert_ne!(
        store.sync_token("work", "lavoro").unwrap().as_deref(),
        Some("http://radicale.org/ns/sync/0000")
    );

    // A calendar deleted on the server leaves the mirror: its events and its listing go.
    let personal = summaries(&store).iter().filter(|x| x.starts_with("work/personale ")).count();
    assert!(personal > 0);
    assert!(matches!(server.delete("personale", ""), 200 | 204));
    let (report, errors) = sync_caldav(&store, "work", &dav, rome).unwrap();
    assert!(report.removed > 0, "{report:?} {errors:?}");
    assert!(!summaries(&store).iter().any(|x| x.starts_with("work/personale ")));
    let ids: Vec<String> = store.calendars().unwrap().into_iter().map(|c| c.id).collect();
    assert_eq!(ids, ["work/lavoro"]);
    let kept = summaries(&store);

    // Wrong credentials, then no server: reported with typed codes, nothing removed.
    let (report, errors) = sync_caldav(&store, "work", &client(&server, "wrong"), rome).unwrap();
    assert_eq!(report.removed, 0);
    assert_eq!(
        errors.iter().map(|e| e.code).collect::<Vec<_>>(),
        ["DAV_UNAUTHORIZED"],
        "{errors:?}"
    );
    server.stop();
    let (report, errors) = sync_caldav(&store, "work", &dav, rome).unwrap();
    assert_eq!(report.removed, 0);
    assert_eq!(
        errors.iter().map(|e| e.code).collect::<Vec<_>>(),
        ["DAV_UNREACHABLE"],
        "{errors:?}"
    );
    assert_eq!(summaries(&store), kept, "nothing lost to a failed run");
}

#[test]
fn caldav_and_carddav_sources_in_config_toml_are_kept_current_by_the_runner() {
    use steward_core::runner::{JobName, JobOutcome};
    let dir = tempfile::tempdir().unwrap();
    let server = Radicale::start(dir.path(), "giulia", "s3cret");
    server.collection("lavoro", Collection::Calendar, "Lavoro", None);
    server.seed("lavoro", "review.ics", &event("review@t", "20250305T150000", "Budget review", ""));
    server.collection("rubrica", Collection::AddressBook, "Rubrica", None);
    server.seed(
        "rubrica",
        "anna.vcf",
        "BEGIN:VCARD\r\nVERSION:3.0\r\nUID:anna\r\nFN:Anna Ricci\r\nEMAIL:anna@example.it\r\nEND:VCARD\r\n",
    );
    let secret = server.password_file(&dir.path().join("pw"));
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let dav = |kind: &str| {
        format!(
            "kind = \"{kind}\"\nurl = \"{}\"\nusername = \"giulia\"\npassword_file = {:?}\naccount = \"dav\"\n",
            server.url, secret
        )
    };
    std::fs::write(
        home.join("config.toml"),
        format!(
            "[calendar]\ntime_zone = \"Europe/Rome\"\n\n[[calendar.sources]]\n{}\n[[contacts.sources]]\n{}",
            dav("caldav"),
            dav("carddav")
        ),
    )
    .unwrap();
    let s = std::sync::Arc::new(steward_connectors::home::open(Some(home.clone())).unwrap());
    let runner = steward_connectors::home::runner(std::sync::Arc::clone(&s)).unwrap();
    let reports = runner.run_once(Some(JobName::PimSync)).unwrap();
    assert_eq!(reports[0].outcome, JobOutcome::Ok, "{:?}", reports[0]);
    let from = Utc.with_ymd_and_hms(2025, 3, 1, 0, 0, 0).unwrap();
    let to = Utc.with_ymd_and_hms(2025, 4, 1, 0, 0, 0).unwrap();
    let agenda = s.agenda(from, to).unwrap();
    assert_eq!(
        agenda.iter().map(|o| o.item.summary.as_str()).collect::<Vec<_>>(),
        ["Budget review"]
    );
    assert_eq!(agenda[0].calendar, "dav/lavoro");
    assert_eq!(s.contacts().unwrap()[0].emails, ["anna@example.it"]);

    // Entries that cannot work are refused when the config is read, each saying why.
    for (entry, why) in [
        ("kind = \"caldav\"\npath = \"/tmp/x\"\n", "needs a url"),
        (
            "kind = \"vdir\"\npath = \"/tmp/x\"\nurl = \"http://127.0.0.1/\"\n",
            "url and credentials are for DAV kinds",
        ),
        (
            "kind = \"caldav\"\nurl = \"http://127.0.0.1/\"\nusername = \"u\"\ntoken_file = \"/tmp/t\"\n",
            "token_file alone",
        ),
        ("kind = \"webcal\"\nurl = \"http://127.0.0.1/\"\n", "use vdir, ics or caldav"),
        (
            "kind = \"vdir\"\npath = \"/a\"\n\n[[calendar.sources]]\nkind = \"ics\"\npath = \"/b.ics\"\n",
            "share account \"local\"",
        ),
    ] {
        std::fs::write(home.join("config.toml"), format!("[[calendar.sources]]\n{entry}")).unwrap();
        let e = steward_connectors::home::pim_sources(&home).err().expect(entry);
        assert!(e.to_string().contains(why), "{entry}: {e}");
    }
}

/// A front server on loopback answering discovery as iCloud's `caldav.icloud.com` does: the
/// principal here, the calendar home set as an absolute URL on another host (`home`). Every
/// other request is refused, so a client that stayed here would fail.
fn front(home: String) -> String {
    use std::io::{BufRead as _, BufReader, Read as _, Write as _};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let (mut line, mut length, mut first) = (String::new(), 0usize, String::new());
            while reader.read_line(&mut line).unwrap_or(0) > 0 {
                if first.is_empty() {
                    first = line.clone();
                }
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap_or(0);
                }
                if line == "\r\n" {
                    break;
                }
                line.clear();
            }
            let mut body = vec![0; length];
            let _ = reader.read_exact(&mut body);
            let body = String::from_utf8_lossy(&body);
            let prop = if body.contains("calendar-home-set") {
                format!("<c:calendar-home-set><d:href>{home}</d:href></c:calendar-home-set>")
            } else if body.contains("current-user-principal") {
                "<d:current-user-principal><d:href>/giulia/</d:href></d:current-user-principal>"
                    .to_owned()
            } else {
                let _ = stream.write_all(
                    b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                );
                continue;
            };
            let xml = format!(
                "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<d:multistatus xmlns:d=\"DAV:\" \
                 xmlns:c=\"urn:ietf:params:xml:ns:caldav\"><d:response><d:href>/giulia/</d:href>\
                 <d:propstat><d:prop>{prop}</d:prop><d:status>HTTP/1.1 200 OK</d:status>\
                 </d:propstat></d:response></d:multistatus>"
            );
            let _ = write!(
                stream,
                "HTTP/1.1 207 Multi-Status\r\nContent-Type: application/xml; charset=utf-8\r\n\
                 Content-Length: {}\r\nConnection: close\r\n\r\n{xml}",
                xml.len()
            );
        }
    });
    format!("http://127.0.0.1:{port}/")
}

#[test]
fn a_calendar_home_on_another_host_of_the_same_site_is_followed_and_a_foreign_one_refused() {
    let dir = tempfile::tempdir().unwrap();
    let server = Radicale::start(dir.path(), "giulia", "s3cret");
    server.collection("lavoro", Collection::Calendar, "Lavoro", None);
    server.seed("lavoro", "review.ics", &event("review@t", "20250305T150000", "Budget review", ""));
    // The home set names the Radicale by another loopback name: requests follow it there.
    let home = server.url.replace("127.0.0.1", "localhost") + "giulia/";
    let auth = DavAuth::Basic { user: "giulia".into(), password: "s3cret".into() };
    let dav = DavClient::with_auth(&front(home), auth.clone()).unwrap();
    let found = dav.discover(DavKind::Calendars).unwrap();
    assert_eq!(found.iter().map(|c| c.id.as_str()).collect::<Vec<_>>(), ["lavoro"]);
    let home_dir = dir.path().join("home");
    std::fs::create_dir_all(&home_dir).unwrap();
    let store = CalendarStore::open(&home_dir, &steward_core::Limits::default()).unwrap();
    let (report, errors) = sync_caldav(&store, "icloud", &dav, chrono_tz::Europe::Rome).unwrap();
    assert_eq!((report.added, errors.len()), (1, 0), "{report:?} {errors:?}");
    assert_eq!(summaries(&store), ["icloud/lavoro Budget review"]);

    // A home set on a host outside the site is not followed: no credentials go there.
    for elsewhere in ["http://192.0.2.1/giulia/", "https://calendars.example.net/giulia/"] {
        let dav = DavClient::with_auth(&front(elsewhere.to_owned()), auth.clone()).unwrap();
        let e = dav.discover(DavKind::Calendars).unwrap_err();
        assert_eq!(steward_core::StewardError::code(&e), "DAV_FOREIGN_HOME", "{elsewhere}: {e}");
        assert_eq!(dav.requests(), 2, "principal and home set only");
    }
}
