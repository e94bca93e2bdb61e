//! Stores: migrations from a frozen old schema, refusal of unknown versions, damage reported
//! (never "repaired" by deleting), the handle's validation.

use std::path::Path;

use steward_core::{ErrorKind, Limits, Steward, StewardError};

fn schema(path: &Path) -> Vec<(String, String, String)> {
    let c = rusqlite::Connection::open(path).unwrap();
    let mut stmt = c
        .prepare("SELECT type, name, coalesce(sql, '') FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' ORDER BY type, name")
        .unwrap();
    stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, squash(&r.get::<_, String>(2)?))))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

fn squash(sql: &str) -> String {
    sql.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn version(path: &Path) -> i64 {
    rusqlite::Connection::open(path)
        .unwrap()
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap()
}

#[test]
fn frozen_v1_upgrades_to_the_fresh_schema_and_keeps_its_data() {
    let dir = tempfile::tempdir().unwrap();
    let old_home = dir.path().join("old");
    std::fs::create_dir_all(&old_home).unwrap();
    {
        let c = rusqlite::Connection::open(old_home.join("mirror.db")).unwrap();
        c.execute_batch(include_str!("../fixtures/mirror_v1.sql")).unwrap();
    }
    assert_eq!(version(&old_home.join("mirror.db")), 1);

    let upgraded = Steward::builder().home(&old_home).open().unwrap();
    let fresh_home = dir.path().join("fresh");
    let fresh = Steward::builder().home(&fresh_home).open().unwrap();
    drop((upgraded, fresh));

    let latest = steward_core::mirror::SCHEMA.latest();
    assert!(latest > 1);
    assert_eq!(version(&old_home.join("mirror.db")), latest);
    assert_eq!(schema(&old_home.join("mirror.db")), schema(&fresh_home.join("mirror.db")));

    // The old row is still there and readable through the API.
    let s = Steward::builder().home(&old_home).open().unwrap();
    let stats = s.mirror().stats().unwrap();
    assert_eq!(stats.tables["messages"], 1);
    assert_eq!(stats.messages_by_role["inbox"], 1);
    s.mirror().database().integrity_check().unwrap();
}

#[test]
fn a_newer_schema_is_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path()).unwrap();
    let db = dir.path().join("mirror.db");
    {
        let c = rusqlite::Connection::open(&db).unwrap();
        c.execute_batch("CREATE TABLE future (x); PRAGMA user_version = 999;").unwrap();
    }
    let err = Steward::builder().home(dir.path()).open().unwrap_err();
    assert_eq!(err.code(), "STORE_VERSION_UNKNOWN");
    assert_eq!(err.kind(), ErrorKind::Corrupt);
    assert_eq!(version(&db), 999, "the file must not be modified");
}

#[test]
fn a_damaged_file_is_reported_not_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("mirror.db");
    let junk = b"this is not an SQLite database, it is junk left by something else".repeat(100);
    std::fs::write(&db, &junk).unwrap();
    let err = Steward::builder().home(dir.path()).open().unwrap_err();
    assert!(
        matches!(err.kind(), ErrorKind::Corrupt | ErrorKind::Unavailable),
        "{err}: {}",
        err.code()
    );
    assert_eq!(std::fs::read(&db).unwrap(), junk, "never delete or rewrite a damaged store");
}

#[test]
fn limits_are_validated_and_versions_reported() {
    let dir = tempfile::tempdir().unwrap();
    let mut bad = Limits::default();
    bad.ingest_batch = 0;
    let err = Steward::builder().home(dir.path()).limits(bad).open().unwrap_err();
    assert_eq!(err.code(), "STEWARD_INVALID_LIMIT");
    assert!(!dir.path().join("mirror.db").exists(), "nothing created on bad input");

    let s = Steward::builder().home(dir.path()).open().unwrap();
    let (sqlite, vec) = s.mirror().database().versions().unwrap();
    assert!(sqlite.starts_with('3'), "{sqlite}");
    assert!(vec.starts_with('v'), "sqlite-vec registered: {vec}");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.path()).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700, "the home is private");
    }
}
