//! `files.db`: a walk of the roots lists their files (never a secret, the home or what a link
//! points to outside), and `find_files` answers by name, glob, extension, time and size, newest
//! first, page by page; a second walk changes only what changed.

use std::path::Path;

use steward_core::{StewardError as _, files::FileQuery};

fn file(path: &Path, bytes: usize, mtime: i64) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, vec![b'x'; bytes]).unwrap();
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(mtime.unsigned_abs());
    std::fs::File::options().write(true).open(path).unwrap().set_modified(t).unwrap();
}

fn names(page: &steward_core::files::FilePage) -> Vec<String> {
    page.files.iter().map(|f| f.path.file_name().unwrap().to_string_lossy().into_owned()).collect()
}

#[test]
fn a_walk_lists_the_roots_files_and_find_answers_newest_first() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().canonicalize().unwrap();
    let (docs, down, outside, home) =
        (base.join("Documents"), base.join("Downloads"), base.join("outside"), base.join("home"));
    std::fs::create_dir_all(&home).unwrap();
    let day = 86_400;
    file(&docs.join("Contratti/Lease signed.pdf"), 2_000, 1_700_000_000);
    file(&docs.join("Contratti/lease draft.docx"), 500, 1_700_000_000 - day);
    file(&docs.join("2025/invoice-03.pdf"), 120_000, 1_740_000_000);
    file(&docs.join("2025/deep/er/invoice-04.PDF"), 130_000, 1_745_000_000);
    file(&down.join("Invoice ACME.pdf"), 40_000, 1_750_000_000);
    file(&down.join("notes.txt"), 10, 1_600_000_000);
    // Never listed: secrets, and what a link points to outside the roots.
    file(&docs.join(".ssh/id_ed25519"), 10, 1_760_000_000);
    file(&docs.join("prod.env"), 10, 1_760_000_000);
    file(&outside.join("secret-plan.pdf"), 10, 1_760_000_000);
    std::os::unix::fs::symlink(&outside, docs.join("linked")).unwrap();
    std::os::unix::fs::symlink(outside.join("secret-plan.pdf"), docs.join("plan.pdf")).unwrap();
    std::fs::write(home.join("config.toml"), format!("[files]\nroots = [{docs:?}, {down:?}]\n"))
        .unwrap();
    let s = steward_connectors::home::open(Some(home.clone())).unwrap();
    let r = s.index_files().unwrap();
    assert_eq!((r.roots, r.files, r.added, r.removed, r.truncated), (2, 6, 6, 0, false), "{r:?}");

    let find = |q: FileQuery| s.find_files(&q).unwrap();
    let all = find(FileQuery::default());
    assert_eq!(
        names(&all),
        [
            "Invoice ACME.pdf",
            "invoice-04.PDF",
            "invoice-03.pdf",
            "Lease signed.pdf",
            "lease draft.docx",
            "notes.txt"
        ],
        "newest first, nothing secret, nothing outside"
    );
    let q = |f: fn(&mut FileQuery)| {
        let mut q = FileQuery::default();
        f(&mut q);
        names(&find(q))
    };
    assert_eq!(q(|q| q.name = Some("LEASE signed".into())), ["Lease signed.pdf"]);
    assert_eq!(q(|q| q.name = Some("ｉｎｖｏｉｃｅ".into())).len(), 3, "fullwidth folds");
    assert_eq!(q(|q| q.extension = Some(".pdf".into())).len(), 4);
    assert_eq!(q(|q| q.glob = Some("*.docx".into())), ["lease draft.docx"]);
    assert_eq!(q(|q| q.glob = Some("2025/*.pdf".into())), ["invoice-03.pdf"]);
    assert_eq!(q(|q| q.glob = Some("2025/**/*.pdf".into())), ["invoice-04.PDF", "invoice-03.pdf"]);
    assert_eq!(
        q(|q| q.modified_after = Some(1_745_000_000)),
        ["Invoice ACME.pdf", "invoice-04.PDF"]
    );
    assert_eq!(q(|q| q.modified_before = Some(1_700_000_000)), ["lease draft.docx", "notes.txt"]);
    assert_eq!(q(|q| q.min_size = Some(100_000)), ["invoice-04.PDF", "invoice-03.pdf"]);
    assert_eq!(q(|q| q.max_size = Some(500)), ["lease draft.docx", "notes.txt"]);
    let only_down = find(FileQuery { root: Some(down.clone()), ..FileQuery::default() });
    assert_eq!(names(&only_down), ["Invoice ACME.pdf", "notes.txt"]);

    // Pages: the cursor continues where the last page stopped.
    let first = find(FileQuery { limit: Some(4), ..FileQuery::default() });
    assert_eq!((first.files.len(), first.total), (4, 6));
    let rest =
        find(FileQuery { limit: Some(4), cursor: first.next_cursor, ..FileQuery::default() });
    assert_eq!(names(&rest), ["lease draft.docx", "notes.txt"]);
    assert_eq!(rest.next_cursor, None);

    // The agent's tool: the same answer, bounded, the names marked as data.
    let tb = steward_core::tools::Toolbox::new(std::sync::Arc::new(
        steward_connectors::home::open(Some(home.clone())).unwrap(),
    ));
    let ran = tb
        .call(
            &steward_core::ToolCall {
                actor: "agent:test",
                chat: None,
                tool: "files.find",
                input: &serde_json::json!({ "extension": "pdf", "limit": 2 }),
            },
            &steward_core::policy::DecisionContext::default(),
        )
        .unwrap();
    let steward_core::tools::ToolOutcome::Ran { result, .. } = ran else { panic!("{ran:?}") };
    assert!(result.text.starts_with("Files 1-2 of 4, newest first:"), "{}", result.text);
    assert!(result.text.contains("Invoice ACME.pdf") && result.text.contains("cursor \"2\""));
    assert!(result.sources.iter().all(steward_core::tools::SourceRef::untrusted));

    // Questions that cannot be asked are typed errors.
    for bad in [
        FileQuery { limit: Some(0), ..FileQuery::default() },
        FileQuery { limit: Some(201), ..FileQuery::default() },
        FileQuery { cursor: Some("x".into()), ..FileQuery::default() },
        FileQuery { root: Some(outside), ..FileQuery::default() },
        FileQuery { name: Some("x".repeat(300)), ..FileQuery::default() },
    ] {
        assert_eq!(s.find_files(&bad).unwrap_err().code(), "FILES_BAD_QUERY", "{bad:?}");
    }

    // A second walk changes only what changed.
    let r = s.index_files().unwrap();
    assert_eq!((r.added, r.changed, r.removed), (0, 0, 0), "{r:?}");
    file(&down.join("notes.txt"), 20, 1_760_000_100);
    std::fs::remove_file(docs.join("2025/invoice-03.pdf")).unwrap();
    file(&docs.join("new.md"), 5, 1_700_000_500);
    let r = s.index_files().unwrap();
    assert_eq!((r.added, r.changed, r.removed, r.files), (1, 1, 1, 6), "{r:?}");
    assert_eq!(names(&find(FileQuery { limit: Some(1), ..FileQuery::default() })), ["notes.txt"]);

    // The runner's job keeps the list current the same way.
    {
        use steward_core::runner::{JobName, JobOutcome};
        let s = std::sync::Arc::new(steward_connectors::home::open(Some(home.clone())).unwrap());
        let runner = steward_connectors::home::runner(std::sync::Arc::clone(&s)).unwrap();
        assert_eq!(runner.unavailable(JobName::FilesIndex), None);
        file(&down.join("later.pdf"), 5, 1_770_000_000);
        let r = runner.run_once(Some(JobName::FilesIndex)).unwrap();
        assert_eq!(r[0].outcome, JobOutcome::Ok, "{r:?}");
        assert!(r[0].summary.contains("1 new"), "{}", r[0].summary);
        assert_eq!(
            names(&s.find_files(&FileQuery { limit: Some(1), ..FileQuery::default() }).unwrap()),
            ["later.pdf"]
        );
        std::fs::remove_file(down.join("later.pdf")).unwrap();
        s.index_files().unwrap();
    }

    // A root dropped from the config takes its files with it; without roots, a typed error.
    std::fs::write(home.join("config.toml"), format!("[files]\nroots = [{docs:?}]\n")).unwrap();
    let s = steward_connectors::home::open(Some(home.clone())).unwrap();
    let r = s.index_files().unwrap();
    assert_eq!((r.removed, r.files), (2, 4), "{r:?}");
    std::fs::write(home.join("config.toml"), "").unwrap();
    let bare = std::sync::Arc::new(steward_connectors::home::open(Some(home)).unwrap());
    let runner = steward_connectors::home::runner(std::sync::Arc::clone(&bare)).unwrap();
    assert!(
        runner
            .unavailable(steward_core::runner::JobName::FilesIndex)
            .unwrap()
            .contains("[files] roots")
    );
    assert_eq!(bare.index_files().unwrap_err().code(), "FILES_NO_ROOTS");
    assert_eq!(bare.find_files(&FileQuery::default()).unwrap_err().code(), "FILES_NO_ROOTS");
}

/// Polls `f` up to `n` times, 100 ms apart; whether it became true (counted, not timed).
fn eventually(n: usize, mut f: impl FnMut() -> bool) -> bool {
    for _ in 0..n {
        if f() {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    false
}

#[test]
fn a_change_under_a_root_wakes_the_files_index_job_before_its_schedule() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().canonicalize().unwrap();
    let (docs, home) = (base.join("Documents"), base.join("home"));
    std::fs::create_dir_all(&docs).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    file(&docs.join("first.txt"), 10, 1_700_000_000);
    std::fs::write(home.join("config.toml"), format!("[files]\nroots = [{docs:?}]\n")).unwrap();
    let s = std::sync::Arc::new(steward_connectors::home::open(Some(home)).unwrap());
    let runner = steward_connectors::home::runner(std::sync::Arc::clone(&s)).unwrap();
    let handle = std::sync::Arc::new(runner).spawn().unwrap();
    let found = |name: &str| {
        let q = FileQuery { name: Some(name.to_owned()), ..FileQuery::default() };
        s.find_files(&q).is_ok_and(|p| p.total == 1)
    };
    // The first run (at start) lists what is there.
    assert!(eventually(300, || found("first")), "the first files-index run");
    // The job's schedule is 30 minutes away: only the watcher can make the next run now.
    file(&docs.join("later report.txt"), 10, 1_700_000_100);
    assert!(eventually(300, || found("later report")), "a change woke files-index");
    handle.stop();
}

#[test]
fn the_first_question_answered_by_sqlite_agrees_with_the_copy_in_memory() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().canonicalize().unwrap();
    let (docs, home) = (base.join("Documents"), base.join("home"));
    std::fs::create_dir_all(&home).unwrap();
    for i in 0..300i64 {
        let ext = ["pdf", "txt", "docx"][(i % 3) as usize];
        file(
            &docs.join(format!("d{}/Invoice {i} ACME.{ext}", i % 7)),
            (i * 10) as usize,
            1_700_000_000 + (i % 50) * 3600,
        );
    }
    std::fs::write(home.join("config.toml"), format!("[files]\nroots = [{docs:?}]\n")).unwrap();
    steward_connectors::home::open(Some(home.clone())).unwrap().index_files().unwrap();
    let queries = [
        FileQuery::default(),
        FileQuery { name: Some("invoice 1".into()), ..FileQuery::default() },
        FileQuery {
            name: Some("ACME".into()),
            extension: Some("PDF".into()),
            limit: Some(7),
            cursor: Some("14".into()),
            ..FileQuery::default()
        },
        FileQuery {
            min_size: Some(500),
            max_size: Some(1500),
            modified_after: Some(1_700_036_000),
            ..FileQuery::default()
        },
        FileQuery {
            modified_before: Some(1_700_010_000),
            root: Some(docs),
            ..FileQuery::default()
        },
    ];
    let warm = steward_connectors::home::open(Some(home.clone())).unwrap();
    warm.find_files(&FileQuery::default()).unwrap();
    for q in &queries {
        // A fresh handle's first question is answered by SQLite; the warm one's from memory.
        let cold = steward_connectors::home::open(Some(home.clone())).unwrap();
        let a = cold.find_files(q).unwrap();
        let b = warm.find_files(q).unwrap();
        assert_eq!(a, b, "{q:?}");
        assert!(!a.files.is_empty() || a.total == 0);
    }
}
