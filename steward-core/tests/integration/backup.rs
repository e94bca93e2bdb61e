//! Backup and restore: a restored home has every table of every primary store as it was; one
//! flipped byte fails verification naming the file; secrets stay out unless asked for; a
//! backup or a restore never writes over anything.

use std::{
    collections::{BTreeMap, BTreeSet},
    path::{Path, PathBuf},
};

use serde_json::json;
use sha2::{Digest, Sha256};
use steward_core::{
    ErrorKind, Steward, StewardError,
    access::TOKEN_FILE,
    approval::NewApproval,
    audit::AuditQuery,
    backup::{
        self, BackupError, BackupFileKind, BackupIssue, BackupOptions, PRIMARY_STORES,
        SMTP_PASSWORD_COPY,
    },
    mirror::hex,
    policy::Level,
};

const NOW: i64 = 1_800_000_000;
const BLOB: &[u8] = b"%PDF-1.4 an attachment's bytes";

/// A home with every primary store, approvals (and their audit rows) and one blob.
fn populated(root: &Path) -> Steward {
    let s = Steward::builder().home(root.join("home")).open().unwrap();
    let approvals = s.approvals().unwrap();
    for i in 0..5 {
        let to = format!("person{i}@example.org");
        approvals
            .request(
                &NewApproval {
                    chat: Some("chat-1".into()),
                    requested_by: "agent:assistant".into(),
                    tool: "mail.send".into(),
                    input: json!({"to": [to], "subject": "Hi", "body": "text"}),
                    summary: format!("Send \"Hi\" to {to}"),
                    level: Level::Confirm,
                    timeout_secs: None,
                    taint: None,
                },
                None,
                NOW + i,
            )
            .unwrap();
    }
    s.journal().unwrap();
    s.watches().unwrap();
    s.usage().unwrap();
    s.policy_store().unwrap();
    // A chat (chats.db is the agent's, opened through a second handle on the same home).
    {
        let other = std::sync::Arc::new(Steward::builder().home(root.join("home")).open().unwrap());
        let tools = std::sync::Arc::new(steward_core::tools::Toolbox::new(other));
        let agent =
            steward_core::agent::Agent::open(tools, steward_core::agent::AgentConfig::default())
                .unwrap();
        let chat = agent.create_chat().unwrap();
        agent.rename_chat(&chat.id, "Lunch plans").unwrap();
    }
    let sha = blob_sha();
    let dir = s.home().join("blobs").join(&sha[..2]);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(&sha), BLOB).unwrap();
    s
}

fn blob_sha() -> String {
    hex(&Sha256::digest(BLOB))
}

/// Per table: the row count and a hash of every row's values (order-independent).
fn tables(db: &Path) -> BTreeMap<String, (usize, String)> {
    let c = rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
        .unwrap();
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
            (t, (rows.len(), hex(&Sha256::digest(rows.join("\n")))))
        })
        .collect()
}

/// Every regular file under `dir`, relative, `/`-separated.
fn files_under(dir: &Path) -> Vec<(String, PathBuf)> {
    let mut out = Vec::new();
    let mut stack = vec![(dir.to_path_buf(), String::new())];
    while let Some((d, rel)) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let name = e.file_name().to_string_lossy().into_owned();
            let child = if rel.is_empty() { name } else { format!("{rel}/{name}") };
            if e.file_type().unwrap().is_dir() {
                stack.push((e.path(), child));
            } else {
                out.push((child, e.path()));
            }
        }
    }
    out.sort();
    out
}

#[cfg(unix)]
fn mode(p: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

fn no_progress() -> impl FnMut(&backup::BackupProgress) {
    |_: &backup::BackupProgress| {}
}

#[test]
fn a_restored_home_has_every_table_of_every_store_and_rebuilds_its_indexes() {
    let dir = tempfile::tempdir().unwrap();
    let s = populated(dir.path());
    // A derived index exists in the home; it is never copied.
    s.vectors().unwrap();
    assert!(s.home().join("index/vectors.db").exists());
    let target = dir.path().join("backups/first");
    let mut reports = Vec::new();
    let m = s
        .backup_create(&target, &BackupOptions::default(), &mut |p: &backup::BackupProgress| {
            reports.push(*p)
        })
        .unwrap();

    for store in PRIMARY_STORES {
        let f = m.file(store).unwrap_or_else(|| panic!("{store} is in the backup"));
        assert_eq!(f.kind, BackupFileKind::Store);
        assert!(f.user_version.unwrap() >= 1, "{store}");
    }
    let sha = blob_sha();
    let blob = m.file(&format!("blobs/{}/{sha}", &sha[..2])).unwrap();
    assert_eq!((blob.kind, blob.sha256.as_str()), (BackupFileKind::Blob, sha.as_str()));
    assert!(m.files.iter().all(|f| !f.path.starts_with("index")));
    assert!(m.omitted.iter().any(|o| o.path == "index/"));
    assert!(!target.join("index").exists());
    assert_eq!(m.format, backup::MANIFEST_FORMAT);
    let last = reports.last().unwrap();
    assert_eq!((last.files_done, last.files_total), (m.files.len() as u64, m.files.len() as u64));
    assert_eq!(last.bytes_done, m.total_bytes());
    // Renamed into place once complete: no staging directory is left.
    let siblings: Vec<String> = std::fs::read_dir(dir.path().join("backups"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(siblings, ["first"]);
    #[cfg(unix)]
    {
        assert_eq!(mode(&target), 0o700);
        assert_eq!(mode(&target.join("blobs").join(&sha[..2])), 0o700);
        for (rel, p) in files_under(&target) {
            assert_eq!(mode(&p), 0o600, "{rel}");
        }
    }
    // A store's copy is one self-contained file.
    let names: BTreeSet<String> = files_under(&target).into_iter().map(|(r, _)| r).collect();
    assert!(!names.iter().any(|n| n.ends_with("-wal") || n.ends_with("-shm")), "{names:?}");

    assert_eq!(backup::verify(&target, &mut no_progress()).unwrap(), m);

    let new_home = dir.path().join("restored");
    let r = backup::restore(&target, &new_home, &mut no_progress()).unwrap();
    assert_eq!(r.files, m.files.len() as u64);
    assert_eq!(r.stores.len(), PRIMARY_STORES.len());
    assert!(!r.secrets_restored);
    for store in PRIMARY_STORES {
        let before = tables(&s.home().join(store));
        assert!(!before.is_empty(), "{store} has tables");
        assert_eq!(tables(&new_home.join(store)), before, "{store}");
    }
    assert_eq!(tables(&new_home.join("steward.db"))["approvals"].0, 5);
    assert_eq!(std::fs::read(new_home.join("blobs").join(&sha[..2]).join(&sha)).unwrap(), BLOB);
    #[cfg(unix)]
    {
        assert_eq!(mode(&new_home), 0o700);
        for (rel, p) in files_under(&new_home) {
            assert_eq!(mode(&p), 0o600, "{rel}");
        }
    }

    // The restored home opens and reads; its derived indexes are made anew on first use.
    assert!(!new_home.join("index").exists());
    let restored = Steward::builder().home(&new_home).open().unwrap();
    let audit = |s: &Steward| s.audit().unwrap().query(&AuditQuery::default()).unwrap().len();
    assert_eq!(audit(&restored), audit(&s));
    assert!(audit(&restored) >= 5);
    restored.vectors().unwrap();
    assert!(new_home.join("index/vectors.db").exists());
    assert_eq!(restored.rebuild_indexes().unwrap().lexical_documents, 0);
    restored.mirror().database().integrity_check().unwrap();
}

#[test]
fn one_flipped_byte_fails_verification_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let s = populated(dir.path());
    let target = dir.path().join("backup");
    s.backup_create(&target, &BackupOptions::default(), &mut no_progress()).unwrap();

    let audit_db = target.join("audit.db");
    let mut bytes = std::fs::read(&audit_db).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x01;
    std::fs::write(&audit_db, &bytes).unwrap();
    let e = backup::verify(&target, &mut no_progress()).unwrap_err();
    assert_eq!((e.code(), e.kind()), ("BACKUP_MISMATCH", ErrorKind::Corrupt));
    assert!(e.to_string().contains("audit.db (changed)"), "{e}");
    let BackupError::Mismatch { problems, .. } = &e else { panic!("{e:?}") };
    assert_eq!(problems.len(), 1, "only the flipped file: {problems:?}");

    // A missing file and one the manifest does not list are named as well: all of them.
    let sha = blob_sha();
    std::fs::remove_file(target.join("blobs").join(&sha[..2]).join(&sha)).unwrap();
    std::fs::write(target.join("notes.txt"), b"not part of it").unwrap();
    let e = backup::verify(&target, &mut no_progress()).unwrap_err();
    let BackupError::Mismatch { problems, .. } = &e else { panic!("{e:?}") };
    let named: BTreeSet<(String, BackupIssue)> =
        problems.iter().map(|p| (p.path.clone(), p.issue)).collect();
    let expected: BTreeSet<(String, BackupIssue)> = [
        ("audit.db".to_owned(), BackupIssue::Changed),
        (format!("blobs/{}/{sha}", &sha[..2]), BackupIssue::Missing),
        ("notes.txt".to_owned(), BackupIssue::Unexpected),
    ]
    .into_iter()
    .collect();
    assert_eq!(named, expected);
    let text = e.to_string();
    assert!(text.contains("notes.txt") && text.contains(&sha), "{text}");

    // A restore verifies first and writes nothing from a backup that does not verify.
    let home = dir.path().join("never");
    let e = backup::restore(&target, &home, &mut no_progress()).unwrap_err();
    assert_eq!(e.code(), "BACKUP_MISMATCH");
    assert!(!home.exists());
}

#[test]
fn secrets_stay_out_of_a_backup_unless_included() {
    let dir = tempfile::tempdir().unwrap();
    let s = populated(dir.path());
    let home = s.home().to_path_buf();
    steward_core::access::owner_token(&home, None).unwrap();
    let token = std::fs::read_to_string(home.join(TOKEN_FILE)).unwrap();
    let password_file = dir.path().join("smtp-pass");
    std::fs::write(&password_file, "smtp-Zq93-pass\n").unwrap();
    let config = format!(
        "# my settings\n[embed]\nendpoint = \"https://embed.example.com/v1\"\nmodel = \"e5\"\n\
         api_key = \"sk-embed-Zq93\"\n\n[llm.targets.main]\nbase_url = \"https://llm.example.com/v1\"\n\
         model = \"big\"\napi_key = \"sk-llm-Zq93\"\n\n[mail]\naccount = \"me\"\n\
         from = \"me@example.org\"\nsmtp_host = \"smtp.example.org\"\nsmtp_username = \"me\"\n\
         smtp_password_file = {:?}\n",
        password_file.display().to_string()
    );
    std::fs::write(home.join("config.toml"), &config).unwrap();

    let plain = dir.path().join("plain");
    let m = s.backup_create(&plain, &BackupOptions::default(), &mut no_progress()).unwrap();
    assert!(!m.secrets_included);
    for (rel, p) in files_under(&plain) {
        let text = String::from_utf8_lossy(&std::fs::read(&p).unwrap()).into_owned();
        assert!(!text.contains("Zq93"), "{rel} holds a secret");
        assert!(!text.contains(token.trim()), "{rel} holds the access token");
    }
    assert!(m.file(TOKEN_FILE).is_none() && m.file(SMTP_PASSWORD_COPY).is_none());
    let mut stripped = m.stripped_keys.clone();
    stripped.sort();
    assert_eq!(stripped, ["embed.api_key", "llm.targets.main.api_key"]);
    let omitted: Vec<&str> = m.omitted.iter().map(|o| o.path.as_str()).collect();
    assert!(omitted.contains(&TOKEN_FILE), "{omitted:?}");
    assert!(omitted.contains(&password_file.display().to_string().as_str()), "{omitted:?}");
    // What is not a secret is all still there, where a secret is kept included.
    let kept: toml::Table =
        toml::from_str(&std::fs::read_to_string(plain.join("config.toml")).unwrap()).unwrap();
    assert_eq!(kept["embed"]["endpoint"].as_str(), Some("https://embed.example.com/v1"));
    assert_eq!(kept["llm"]["targets"]["main"]["model"].as_str(), Some("big"));
    assert_eq!(
        kept["mail"]["smtp_password_file"].as_str(),
        Some(password_file.display().to_string().as_str())
    );

    let full = dir.path().join("full");
    let opts = BackupOptions { include_secrets: true };
    let m = s.backup_create(&full, &opts, &mut no_progress()).unwrap();
    assert!(m.secrets_included && m.stripped_keys.is_empty());
    assert_eq!(std::fs::read_to_string(full.join("config.toml")).unwrap(), config);
    assert_eq!(std::fs::read_to_string(full.join(TOKEN_FILE)).unwrap(), token);
    assert_eq!(m.file(TOKEN_FILE).unwrap().kind, BackupFileKind::Secret);
    let copy = m.file(SMTP_PASSWORD_COPY).unwrap();
    assert_eq!(copy.source.as_deref(), Some(password_file.display().to_string().as_str()));
    assert_eq!(std::fs::read_to_string(full.join(SMTP_PASSWORD_COPY)).unwrap(), "smtp-Zq93-pass\n");

    let new_home = dir.path().join("restored");
    let r = backup::restore(&full, &new_home, &mut no_progress()).unwrap();
    assert!(r.secrets_restored);
    assert_eq!(r.smtp_password_file, Some(new_home.join(SMTP_PASSWORD_COPY)));
    // The restored token is accepted as it is (a token file others can read is refused).
    let restored = steward_core::access::owner_token(&new_home, None).unwrap();
    assert!(restored.matches(token.trim()));

    // A secret left in a comment of a configuration with no secret key stays out too.
    std::fs::write(
        home.join("config.toml"),
        "[embed]\nendpoint = \"https://embed.example.com/v1\"\nmodel = \"e5\"\n\
         # api_key = \"sk-old-Zq93\" (moved to STEWARD_EMBED_API_KEY)\n",
    )
    .unwrap();
    let commented = dir.path().join("commented");
    let m = s.backup_create(&commented, &BackupOptions::default(), &mut no_progress()).unwrap();
    assert!(m.stripped_keys.is_empty(), "{:?}", m.stripped_keys);
    let kept = std::fs::read_to_string(commented.join("config.toml")).unwrap();
    assert!(!kept.contains("Zq93"), "a commented secret was copied: {kept}");
    assert!(kept.contains("https://embed.example.com/v1"), "{kept}");
}

#[test]
fn a_manifest_that_is_not_a_regular_file_is_refused_without_reading_it() {
    let dir = tempfile::tempdir().unwrap();
    let s = populated(dir.path());
    let target = dir.path().join("backup");
    s.backup_create(&target, &BackupOptions::default(), &mut no_progress()).unwrap();
    // A link to a device that never ends: refused as it is, never read.
    std::fs::remove_file(target.join("manifest.json")).unwrap();
    std::os::unix::fs::symlink("/dev/zero", target.join("manifest.json")).unwrap();
    let e = backup::verify(&target, &mut no_progress()).unwrap_err();
    assert_eq!(e.code(), "BACKUP_MANIFEST_INVALID", "{e}");
    assert!(e.to_string().contains("not a regular file"), "{e}");
    let home = dir.path().join("restored");
    let e = backup::restore(&target, &home, &mut no_progress()).unwrap_err();
    assert_eq!(e.code(), "BACKUP_MANIFEST_INVALID", "{e}");
    assert!(!home.exists(), "nothing restored");
}

#[test]
fn a_home_inside_the_backup_is_refused_and_the_backup_stays_whole() {
    let dir = tempfile::tempdir().unwrap();
    let s = populated(dir.path());
    let target = dir.path().join("backup");
    s.backup_create(&target, &BackupOptions::default(), &mut no_progress()).unwrap();
    let inside = target.join("home");
    let e = backup::restore(&target, &inside, &mut no_progress()).unwrap_err();
    assert_eq!((e.code(), e.kind()), ("BACKUP_TARGET_INVALID", ErrorKind::InvalidInput), "{e}");
    assert!(!inside.exists(), "nothing restored");
    backup::verify(&target, &mut no_progress()).expect("the backup still verifies");
}

#[test]
fn nothing_is_ever_written_over() {
    let dir = tempfile::tempdir().unwrap();
    let s = populated(dir.path());
    let target = dir.path().join("backup");
    s.backup_create(&target, &BackupOptions::default(), &mut no_progress()).unwrap();

    // Not over another backup, not inside the home.
    let e = s.backup_create(&target, &BackupOptions::default(), &mut no_progress()).unwrap_err();
    assert_eq!((e.code(), e.kind()), ("BACKUP_TARGET_EXISTS", ErrorKind::Conflict));
    let inside = s.home().join("backups/today");
    let e = s.backup_create(&inside, &BackupOptions::default(), &mut no_progress()).unwrap_err();
    assert_eq!((e.code(), e.kind()), ("BACKUP_TARGET_INVALID", ErrorKind::InvalidInput));
    // An empty directory is fine.
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    s.backup_create(&empty, &BackupOptions::default(), &mut no_progress()).unwrap();
    backup::verify(&empty, &mut no_progress()).unwrap();

    // Not into a home that has anything in it; an empty one is fine.
    let occupied = dir.path().join("occupied");
    std::fs::create_dir(&occupied).unwrap();
    std::fs::write(occupied.join("keep.txt"), b"mine").unwrap();
    let e = backup::restore(&target, &occupied, &mut no_progress()).unwrap_err();
    assert_eq!((e.code(), e.kind()), ("BACKUP_TARGET_NOT_EMPTY", ErrorKind::Conflict));
    let left: Vec<_> = std::fs::read_dir(&occupied).unwrap().collect();
    assert_eq!(left.len(), 1);
    assert_eq!(std::fs::read(occupied.join("keep.txt")).unwrap(), b"mine");
    let e = backup::restore(&target, s.home(), &mut no_progress()).unwrap_err();
    assert_eq!(e.code(), "BACKUP_TARGET_NOT_EMPTY");
    let fresh = dir.path().join("fresh");
    std::fs::create_dir(&fresh).unwrap();
    backup::restore(&target, &fresh, &mut no_progress()).unwrap();

    // A directory without a manifest is not a backup (an interrupted one keeps its
    // `.pending-` name and has none).
    let pending = dir.path().join(".pending-backup-1-2-3");
    std::fs::create_dir(&pending).unwrap();
    std::fs::write(pending.join("mirror.db"), b"half").unwrap();
    let e = backup::verify(&pending, &mut no_progress()).unwrap_err();
    assert_eq!((e.code(), e.kind()), ("BACKUP_MANIFEST_MISSING", ErrorKind::NotFound));

    // A manifest naming a path outside the backup is refused before anything is read.
    let manifest = target.join(backup::MANIFEST_FILE);
    let mut v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&manifest).unwrap()).unwrap();
    v["files"][0]["path"] = json!("../escape.db");
    std::fs::write(&manifest, serde_json::to_vec(&v).unwrap()).unwrap();
    let e = backup::verify(&target, &mut no_progress()).unwrap_err();
    assert_eq!((e.code(), e.kind()), ("BACKUP_MANIFEST_INVALID", ErrorKind::Corrupt));
    // And one from a newer Steward is refused as such.
    v["format"] = json!(99);
    std::fs::write(&manifest, serde_json::to_vec(&v).unwrap()).unwrap();
    let e = backup::verify(&target, &mut no_progress()).unwrap_err();
    assert_eq!(e.code(), "BACKUP_FORMAT_UNKNOWN");
}
