//! Interop with the tools vdir users already have: khal lists what Steward wrote into their
//! calendars (an event created through the journal, an occurrence moved by an override), and a
//! card khard writes is read by Steward as khard shows it, and khard reads the demo address
//! book as Steward does. khal and khard come from PyPI into `target/py-venv` (scripts/test
//! installs them); without them these tests fail, they never skip.

use std::{path::Path, process::Command};

use serde_json::json;
use steward_connectors::{
    contacts::phone::region,
    pim::{PimFrom, index_books},
};

use super::write::{FOREIGN, approved, confirm, home_with, sync};

fn tool(name: &str) -> std::path::PathBuf {
    let path = steward_connectors::testing::python().with_file_name(name);
    assert!(
        path.exists(),
        "{} is missing: scripts/test installs {name} into target/py-venv",
        path.display()
    );
    path
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().expect("run");
    assert!(out.status.success(), "{cmd:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

fn khal(dir: &Path, vdir: &Path, args: &[&str]) -> String {
    let conf = dir.join("khal.conf");
    std::fs::write(
        &conf,
        format!(
            "[calendars]\n[[work]]\npath = {}\ntype = calendar\n\n[locale]\ntimeformat = %H:%M\n\
             dateformat = %Y-%m-%d\nlongdateformat = %Y-%m-%d\ndatetimeformat = %Y-%m-%d %H:%M\n\
             longdatetimeformat = %Y-%m-%d %H:%M\nlocal_timezone = Europe/Rome\n\
             default_timezone = Europe/Rome\n\n[sqlite]\npath = {}\n",
            vdir.join("work").display(),
            dir.join("khal.db").display()
        ),
    )
    .unwrap();
    run(Command::new(tool("khal")).arg("-c").arg(&conf).args(args).env("TZ", "Europe/Rome"))
}

fn khard(dir: &Path, book: &Path, args: &[&str]) -> String {
    let conf = dir.join("khard.conf");
    std::fs::write(
        &conf,
        format!(
            "[addressbooks]\n[[family]]\npath = {}\n\n[general]\ndebug = no\ndefault_action = list\n\
             editor = /bin/true\nmerge_editor = /bin/true\n\n[contact table]\n\
             display = formatted_name\ngroup_by_addressbook = no\nreverse = no\n\
             show_nicknames = no\nshow_uids = no\nsort = last_name\nlocalize_dates = yes\n\
             preferred_phone_number_type = pref, cell, home\n\
             preferred_email_address_type = pref, work, home\n\n[vcard]\n\
             preferred_version = 3.0\nsearch_in_source_files = no\nskip_unparsable = no\n",
            book.display()
        ),
    )
    .unwrap();
    run(Command::new(tool("khard")).arg("-c").arg(&conf).args(args))
}

#[test]
fn khal_lists_the_events_steward_created_and_moved_in_a_vdir() {
    let dir = tempfile::tempdir().unwrap();
    let vdir = dir.path().join("cal");
    std::fs::create_dir_all(vdir.join("work")).unwrap();
    std::fs::write(vdir.join("work/standup.ics"), FOREIGN).unwrap();
    let (s, tb) =
        home_with(dir.path(), &format!("kind = \"vdir\"\npath = {vdir:?}\naccount = \"me\"\n"));
    sync(&s);
    let created = approved(
        &s,
        &tb,
        "calendar.create_event",
        json!({"title": "Dentista", "start": "2026-03-10T17:00:00+01:00",
               "end": "2026-03-10T17:45:00+01:00", "location": "Via Roma 1"}),
    );
    assert_eq!(confirm(&s, created), steward_core::journal::OpState::Confirmed);
    let id = steward_core::calendar::store::event_id("me/work", "standup@other", "");
    let moved = approved(
        &s,
        &tb,
        "calendar.update_event",
        json!({"event_id": id, "occurrence": "2026-03-09T09:00:00",
               "start": "2026-03-10T11:00:00+01:00", "title": "Stand-up (moved)"}),
    );
    assert_eq!(confirm(&s, moved), steward_core::journal::OpState::Confirmed);
    let listed = khal(
        dir.path(),
        &vdir,
        &["list", "--format", "{start} {end} {title}", "--day-format", "", "2026-03-09", "2d"],
    );
    let lines: Vec<&str> = listed.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(
        lines,
        [
            "2026-03-10 11:00 2026-03-10 11:15 Stand-up (moved)",
            "2026-03-10 17:00 2026-03-10 17:45 Dentista",
        ],
        "khal sees the created event and the moved occurrence (none left at 03-09 09:00)"
    );
}

#[test]
fn a_card_khard_writes_is_read_as_khard_shows_it_and_khard_reads_the_demo_book() {
    let dir = tempfile::tempdir().unwrap();
    let book = dir.path().join("contacts/family");
    std::fs::create_dir_all(&book).unwrap();
    let card = dir.path().join("anna.yaml");
    std::fs::write(
        &card,
        "First name : Anna\nLast name : Bianchi\nOrganisation : Politecnico di Milano\n\
         Phone :\n    cell : 333 123 4567\nEmail :\n    work : Anna.Bianchi@Polimi.it\n",
    )
    .unwrap();
    khard(dir.path(), &book, &["new", "-a", "family", "-i", card.to_str().unwrap()]);
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let s = steward_connectors::home::open(Some(home)).unwrap();
    let done = index_books(&s, "local", PimFrom::Vdir(&dir.path().join("contacts")), region("IT"))
        .unwrap();
    assert_eq!((done.report.cards, done.errors.len()), (1, 0), "{done:?}");
    let anna = &s.contacts().unwrap()[0];
    assert_eq!(anna.name, "Anna Bianchi");
    assert_eq!(anna.emails, ["anna.bianchi@polimi.it"]);
    assert_eq!(anna.phones, ["+393331234567"]);
    assert_eq!(anna.org.as_deref(), Some("Politecnico di Milano"));
    let r = s.resolve_recipient("Anna from Polimi").unwrap();
    assert_eq!(r.candidates[0].email, "anna.bianchi@polimi.it");

    // The demo address book: khard lists the same addresses Steward indexes.
    let (cal, contacts) = (dir.path().join("demo-cal"), dir.path().join("demo-contacts"));
    steward_connectors::calendar::demo::write_demo_pim(&cal, &contacts, 1_790_000_000).unwrap();
    let books: Vec<_> = std::fs::read_dir(&contacts).unwrap().map(|e| e.unwrap().path()).collect();
    let mut theirs = Vec::new();
    for b in &books {
        let out = khard(dir.path(), b, &["email", "--parsable"]);
        // Lines are `address<TAB>name<TAB>type`; the header line has no tab.
        theirs.extend(
            out.lines()
                .filter(|l| l.contains('\t'))
                .filter_map(|l| l.split('\t').next())
                .map(str::to_lowercase),
        );
    }
    theirs.sort();
    theirs.dedup();
    let home2 = dir.path().join("home2");
    std::fs::create_dir_all(&home2).unwrap();
    let s2 = steward_connectors::home::open(Some(home2)).unwrap();
    index_books(&s2, "demo", PimFrom::Vdir(&contacts), region("IT")).unwrap();
    let mut ours: Vec<String> = s2.contacts().unwrap().into_iter().flat_map(|c| c.emails).collect();
    ours.sort();
    ours.dedup();
    assert!(!ours.is_empty());
    assert_eq!(ours, theirs);
}
