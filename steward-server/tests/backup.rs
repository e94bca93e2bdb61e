//! Backups of a home: taken while a sync writes (consistent, restorable, and the restored home
//! finishes the sync), and through the `steward backup` command (every table of every store
//! equal after a restore, one flipped byte named, secrets left out unless asked for).

use std::{
    collections::BTreeMap,
    hash::{Hash as _, Hasher as _},
    path::{Path, PathBuf},
    process::Command,
    sync::atomic::{AtomicU64, Ordering},
    time::{Duration, Instant},
};

use steward_connectors::mail::{
    MaildirSource,
    demo::{DemoOptions, generate_maildir},
};
use steward_core::{
    Limits, Steward,
    backup::{self, BackupOptions, BackupProgress, PRIMARY_STORES},
    mirror::{Progress, ProgressPhase, SyncOptions},
};

fn steward(home: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_steward"));
    c.arg("--home").arg(home);
    c
}

fn json(out: &std::process::Output) -> serde_json::Value {
    assert!(out.status.success(), "stderr: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("one JSON value on stdout")
}

fn read_only(db: &Path) -> rusqlite::Connection {
    rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap()
}

fn count(db: &Path, sql: &str) -> i64 {
    read_only(db).query_row(sql, [], |r| r.get(0)).unwrap()
}

/// Per table: the row count and a hash of every row's values (order-independent).
fn tables(db: &Path) -> BTreeMap<String, (usize, u64)> {
    let c = read_only(db);
    let names: Vec<String> = c
        .prepare(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' \
             ORDER BY name",
        )
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    names
        .into_iter()
        .map(|t| {
            let mut stmt = c.prepare(&format!("SELECT * FROM \"{t}\"")).unwrap();
            let n = stmt.column_count();
            let mut rows: Vec<String> = stmt
                .query_map([], |r| {
                    let values: rusqlite::Result<Vec<String>> = (0..n)
                        .map(|i| r.get::<_, rusqlite::types::Value>(i).map(|v| format!("{v:?}")))
                        .collect();
                    Ok(values?.join("|"))
                })
                .unwrap()
                .map(Result::unwrap)
                .collect();
            rows.sort();
            let mut h = std::collections::hash_map::DefaultHasher::new();
            rows.hash(&mut h);
            (t, (rows.len(), h.finish()))
        })
        .collect()
}

/// Every regular file under `dir`.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            if e.file_type().unwrap().is_dir() {
                stack.push(e.path());
            } else {
                out.push(e.path());
            }
        }
    }
    out
}

/// Every attachment blob the mirror in `home` names is in its `blobs/`, with that content.
fn assert_blobs_present(home: &Path) -> usize {
    let c = read_only(&home.join("mirror.db"));
    let shas: Vec<String> = c
        .prepare("SELECT DISTINCT sha256 FROM attachments WHERE sha256 IS NOT NULL")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    for sha in &shas {
        let p = home.join("blobs").join(&sha[..2]).join(sha);
        assert!(p.is_file(), "blob {sha} is missing from {}", home.display());
    }
    shas.len()
}

/// Waits (5 ms steps, at most a minute) until `done` holds; true if it did.
fn eventually(mut done: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(60) {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    done()
}

fn identities(db: &Path) -> Vec<String> {
    read_only(db)
        .prepare("SELECT identity FROM messages WHERE deleted_at IS NULL ORDER BY identity")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

#[test]
fn a_backup_taken_while_a_sync_writes_is_consistent_and_the_restored_home_finishes_it() {
    let dir = tempfile::tempdir().unwrap();
    let md = dir.path().join("Mail");
    generate_maildir(&md, &DemoOptions::new(2_000)).unwrap();
    let home = dir.path().join("home");
    let mut limits = Limits::default();
    limits.ingest_batch = 50;
    let s = Steward::builder().home(&home).limits(limits.clone()).open().unwrap();
    let mirror_db = home.join("mirror.db");
    let target = dir.path().join("backup");
    let batches = AtomicU64::new(0);
    let source = MaildirSource::new(&md);
    let opts = SyncOptions { account: Some("demo".into()), cancel: None };

    let (manifest, before) = std::thread::scope(|scope| {
        let syncing = scope.spawn(|| {
            s.sync_mail(&source, &opts, &mut |p: &Progress| {
                if p.phase == ProgressPhase::Ingesting {
                    batches.fetch_add(1, Ordering::SeqCst);
                    // Slow enough that the backup starts and ends within the run.
                    std::thread::sleep(Duration::from_millis(10));
                }
            })
        });
        assert!(eventually(|| batches.load(Ordering::SeqCst) >= 3), "the sync started");
        let before = count(&mirror_db, "SELECT count(*) FROM messages");
        let mut first = true;
        let manifest = s
            .backup_create(&target, &BackupOptions::default(), &mut |p: &BackupProgress| {
                if std::mem::take(&mut first) {
                    // mirror.db (the first store) is copied; the sync goes on committing while
                    // the rest of the backup runs.
                    assert_eq!(p.files_done, 1);
                    let seen = batches.load(Ordering::SeqCst);
                    assert!(
                        eventually(|| batches.load(Ordering::SeqCst) > seen),
                        "the sync committed again during the backup"
                    );
                }
            })
            .unwrap();
        syncing.join().unwrap().unwrap();
        (manifest, before)
    });
    let after = count(&mirror_db, "SELECT count(*) FROM messages");
    assert!(manifest.file("mirror.db").is_some());

    let restored = dir.path().join("restored");
    backup::restore(&target, &restored, &mut |_: &BackupProgress| {}).unwrap();
    let copy = restored.join("mirror.db");
    let check: String =
        read_only(&copy).query_row("PRAGMA integrity_check", [], |r| r.get(0)).unwrap();
    assert_eq!(check, "ok");
    // A state the source had at some point during the run: more than before the backup,
    // less than at the end, with the run not finished yet.
    let during = count(&copy, "SELECT count(*) FROM messages");
    assert!(before <= during && during < after, "{before} <= {during} < {after}");
    let unfinished = count(
        &copy,
        "SELECT count(*) FROM sync_runs WHERE finished_at IS NULL AND files_done < files_total",
    );
    assert_eq!(unfinished, 1, "the snapshot caught the run in the middle");
    // Every attachment a copied row names was copied too.
    assert_blobs_present(&restored);

    // The restored home opens and the next sync finishes what the interrupted run left.
    let r = Steward::builder().home(&restored).limits(limits).open().unwrap();
    r.sync_mail(&source, &opts, &mut |_: &Progress| {}).unwrap();
    assert_eq!(identities(&copy), identities(&mirror_db));
    assert_blobs_present(&restored);
}

#[test]
fn the_command_backs_up_verifies_and_restores_every_table_and_names_a_flipped_byte() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    json(
        &steward(&home)
            .args(["demo", "--messages", "300", "--json", "--no-serve"])
            .output()
            .unwrap(),
    );
    // Secrets in the configuration and the access token.
    std::fs::write(
        home.join("config.toml"),
        "[llm.targets.main]\nbase_url = \"https://llm.example.com/v1\"\nmodel = \"big\"\n\
         api_key = \"sk-live-Zq93\"\n",
    )
    .unwrap();
    steward_core::access::owner_token(&home, None).unwrap();
    let token = std::fs::read_to_string(home.join(steward_core::access::TOKEN_FILE)).unwrap();

    let target = dir.path().join("backup");
    let made = json(
        &steward(&home).args(["backup", "create"]).arg(&target).arg("--json").output().unwrap(),
    );
    assert_eq!(made["secrets_included"], false);
    assert_eq!(made["stripped_keys"], serde_json::json!(["llm.targets.main.api_key"]));
    assert!(made["blobs"].as_u64().unwrap() > 0);
    assert!(made["stores"].as_array().unwrap().iter().any(|s| s["path"] == "mirror.db"));
    for p in files_under(&target) {
        let text = String::from_utf8_lossy(&std::fs::read(&p).unwrap()).into_owned();
        assert!(!text.contains("Zq93"), "{} holds the API key", p.display());
        assert!(!text.contains(token.trim()), "{} holds the access token", p.display());
    }
    // Derived indexes and the demo's own Maildir are not part of it.
    assert!(home.join("index").exists() && !target.join("index").exists());
    assert!(home.join("demo-maildir").exists() && !target.join("demo-maildir").exists());

    let verified = json(
        &steward(&home).args(["backup", "verify"]).arg(&target).arg("--json").output().unwrap(),
    );
    assert_eq!(verified["files"], made["files"]);

    let restored = dir.path().join("restored");
    let report = json(
        &steward(&restored)
            .args(["backup", "restore"])
            .arg(&target)
            .arg("--json")
            .output()
            .unwrap(),
    );
    assert_eq!(report["files"], made["files"]);
    let mut compared = 0;
    for store in PRIMARY_STORES {
        if home.join(store).exists() {
            assert_eq!(tables(&restored.join(store)), tables(&home.join(store)), "{store}");
            compared += 1;
        }
    }
    assert!(compared >= 1);
    assert!(assert_blobs_present(&restored) > 0);
    // The text index is not restored; it is rebuilt on first use, and search finds mail.
    assert!(!restored.join("index").exists());
    let page = json(
        &steward(&restored).args(["search", "invoice", "--limit", "5", "--json"]).output().unwrap(),
    );
    let hits = page["messages"].as_array().unwrap();
    assert!(!hits.is_empty());
    for m in hits {
        let text = format!("{} {}", m["subject"], m["snippet"]).to_lowercase();
        assert!(text.contains("invoice"), "{text}");
    }
    assert!(restored.join("index/lexical").exists());

    // Restoring over a home with something in it is refused.
    let out = steward(&restored).args(["backup", "restore"]).arg(&target).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("error[BACKUP_TARGET_NOT_EMPTY]"));

    // One flipped byte: verification fails and names the file.
    let db = target.join("mirror.db");
    let mut bytes = std::fs::read(&db).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x80;
    std::fs::write(&db, &bytes).unwrap();
    let out = steward(&home).args(["backup", "verify"]).arg(&target).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("error[BACKUP_MISMATCH]") && err.contains("mirror.db (changed)"), "{err}");

    // With --include-secrets, the secrets are in it as they were.
    let full = dir.path().join("full");
    let made = json(
        &steward(&home)
            .args(["backup", "create"])
            .arg(&full)
            .args(["--include-secrets", "--json"])
            .output()
            .unwrap(),
    );
    assert_eq!(made["secrets_included"], true);
    assert_eq!(
        std::fs::read_to_string(full.join(steward_core::access::TOKEN_FILE)).unwrap(),
        token
    );
    assert!(std::fs::read_to_string(full.join("config.toml")).unwrap().contains("sk-live-Zq93"));
}
