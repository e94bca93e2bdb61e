//! The `steward` command end to end: demo, index, stats, typed errors and exit codes.

use std::process::Command;

fn steward() -> Command {
    Command::new(env!("CARGO_BIN_EXE_steward"))
}

fn json(out: &std::process::Output) -> serde_json::Value {
    assert!(out.status.success(), "stderr: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("one JSON object on stdout")
}

#[test]
fn demo_then_index_then_stats() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let out = steward()
        .arg("--home")
        .arg(&home)
        .args(["demo", "--messages", "150", "--json", "--no-serve"])
        .output()
        .unwrap();
    let demo = json(&out);
    // The messages asked for, the story's mails and perhaps a draft.
    let story = steward_connectors::mail::demo::STORY.len() as u64;
    assert_eq!(
        demo["added"],
        150 + story
            + u64::from(home.join("demo-maildir/.Drafts/cur").read_dir().unwrap().count() > 0)
    );
    // The promotion pass (a scripted stand-in: no model here) proposed the story's facts; they
    // wait in the memory inbox for review and none is a note yet.
    let inbox = std::fs::read_dir(home.join("memory/inbox")).unwrap().count() as u64;
    assert_eq!(inbox, story);
    assert_eq!(std::fs::read_dir(home.join("memory/notes")).map_or(0, Iterator::count), 0);
    assert_eq!(demo["error_count"], 3);

    let md = home.join("demo-maildir");
    let again = json(
        &steward()
            .arg("--home")
            .arg(&home)
            .args(["index", "mail", "--maildir"])
            .arg(&md)
            .args(["--account", "demo", "--json"])
            .output()
            .unwrap(),
    );
    assert_eq!(again["mode"], "reconcile");
    assert_eq!(again["added"], 0);
    assert_eq!(again["updated"], 0);

    let stats =
        json(&steward().arg("--home").arg(&home).args(["stats", "--json"]).output().unwrap());
    assert_eq!(stats["error_count"], 3);
    assert!(stats["tables"]["messages"].as_u64().unwrap() >= 150);
    assert!(stats["messages_by_role"]["inbox"].as_u64().unwrap() > 0);
    assert_eq!(stats["messages_by_body_state"]["full"], stats["messages_live"]);

    // Human output names what to try next.
    let human = steward().arg("--home").arg(&home).args(["stats"]).output().unwrap();
    assert!(String::from_utf8_lossy(&human.stdout).contains("messages by mailbox role"));

    // The demo's calendars and address book came with it: this week has its meeting, the two
    // Marco Rossi cards are one person, and "Anna" needs the person to choose.
    let today = chrono::Utc::now().date_naive();
    let week = steward()
        .arg("--home")
        .arg(&home)
        .args(["calendar", "agenda", "--json", "--from"])
        .arg((today - chrono::Duration::days(7)).to_string())
        .arg("--to")
        .arg((today + chrono::Duration::days(14)).to_string())
        .output()
        .unwrap();
    assert!(week.status.success(), "{}", String::from_utf8_lossy(&week.stderr));
    let week = String::from_utf8_lossy(&week.stdout);
    assert!(week.contains("Weekly team meeting"), "{week}");
    assert!(week.contains("Dentista / Dentist"), "{week}");
    let resolve = |text: &str| {
        let out = steward()
            .arg("--home")
            .arg(&home)
            .args(["contacts", "resolve", text, "--json"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()
    };
    assert_eq!(resolve("Anna")["status"], "ambiguous");
    let school = resolve("Anna della scuola");
    assert_eq!(school["status"], "resolved", "{school}");
    assert_eq!(school["candidates"][0]["email"], "anna.ricci@scuola-manzoni.example.it");
    let marco = resolve("Marco Rossi");
    assert_eq!(marco["candidates"][0]["email"], "marco.rossi@studio-rossi.it");

    // The sample documents came too, shared through config.toml and indexed: a question finds
    // the lease's notice clause on its second page.
    let config = std::fs::read_to_string(home.join("config.toml")).unwrap();
    assert!(config.contains("demo-documents"), "{config}");
    let found = steward()
        .arg("--home")
        .arg(&home)
        .args(["files", "search", "notice registered letter", "--json"])
        .output()
        .unwrap();
    assert!(found.status.success(), "{}", String::from_utf8_lossy(&found.stderr));
    // One JSON line per passage, best first.
    let found = String::from_utf8_lossy(&found.stdout).into_owned();
    let first: serde_json::Value = serde_json::from_str(found.lines().next().unwrap()).unwrap();
    assert!(
        first["path"].as_str().unwrap().ends_with("Home/lease-via-roma-12-signed.pdf"),
        "{found}"
    );
    assert_eq!(first["unit"], 2, "{found}");
    // A second demo keeps the config as it is (the folder is shared once).
    let again = steward()
        .arg("--home")
        .arg(&home)
        .args(["demo", "--messages", "20", "--json", "--no-serve"])
        .output()
        .unwrap();
    assert!(again.status.success(), "{}", String::from_utf8_lossy(&again.stderr));
    assert_eq!(std::fs::read_to_string(home.join("config.toml")).unwrap(), config);
}

#[test]
fn bad_input_is_a_typed_error_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let missing = dir.path().join("no-such-maildir");
    let out = steward()
        .arg("--home")
        .arg(&home)
        .args(["index", "mail", "--maildir"])
        .arg(&missing)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("error[MAIL_SOURCE_NOT_FOUND]"), "{err}");

    let not_maildir = dir.path().join("plain");
    std::fs::create_dir_all(&not_maildir).unwrap();
    let out = steward()
        .arg("--home")
        .arg(&home)
        .args(["index", "mail", "--maildir"])
        .arg(&not_maildir)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("MAIL_SOURCE_WRONG_FORMAT"));

    let out = steward()
        .arg("--home")
        .arg(&home)
        .args(["index", "mail", "--maildir"])
        .arg(&not_maildir)
        .args(["--account", " "])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));

    // Nothing was mirrored by the failed calls.
    let stats =
        json(&steward().arg("--home").arg(&home).args(["stats", "--json"]).output().unwrap());
    assert_eq!(stats["tables"]["messages"], 0);
    assert_eq!(stats["tables"]["accounts"], 0);

    // Two sources at once is refused by the argument parser.
    let out = steward().args(["index", "mail", "--maildir", "a", "--mbox", "b"]).output().unwrap();
    assert!(!out.status.success());
}

#[test]
fn read_and_thread_commands() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    json(
        &steward()
            .arg("--home")
            .arg(&home)
            .args(["demo", "--messages", "80", "--json", "--no-serve"])
            .output()
            .unwrap(),
    );
    let m = json(
        &steward()
            .arg("--home")
            .arg(&home)
            .args(["read", "1", "--chars", "50", "--json"])
            .output()
            .unwrap(),
    );
    assert_eq!(m["id"], 1);
    assert!(m["body"]["text"].as_str().unwrap().chars().count() <= 50);
    assert!(m["body"]["total_chars"].as_u64().unwrap() > 0);
    let thread = m["thread_id"].as_i64().unwrap();
    let page = json(
        &steward()
            .arg("--home")
            .arg(&home)
            .args(["thread", &thread.to_string(), "--json"])
            .output()
            .unwrap(),
    );
    assert!(page["messages"].as_array().unwrap().iter().any(|e| e["id"] == 1));
    let rebuilt = json(
        &steward().arg("--home").arg(&home).args(["index", "rebuild", "--json"]).output().unwrap(),
    );
    assert!(rebuilt["lexical_documents"].as_u64().unwrap() >= 80);
    let out = steward().arg("--home").arg(&home).args(["read", "424242"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("error[MESSAGE_NOT_FOUND]"));
    let out =
        steward().arg("--home").arg(&home).args(["read", "1", "--chars", "0"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("LIMIT_OUT_OF_RANGE"));
}

#[test]
fn search_command_flags_formats_and_typed_errors() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let run = |args: &[&str]| steward().arg("--home").arg(&home).args(args).output().unwrap();
    json(&run(&["demo", "--messages", "300", "--json", "--no-serve"]));
    // Free text: a page with provenance, snippets and paging.
    let page = json(&run(&["search", "invoice", "--limit", "3", "--json"]));
    let msgs = page["messages"].as_array().unwrap();
    assert_eq!(msgs.len(), 3);
    assert_eq!(page["semantic"], "disabled");
    assert_eq!(page["page"]["next_offset"], 3);
    assert_eq!(msgs[0]["provenance"]["lexical"], 1);
    let hit = format!("{} {}", msgs[0]["subject"], msgs[0]["snippet"]).to_lowercase();
    assert!(hit.contains("invoice"), "{hit}");
    // Substrings and filters: every result satisfies them.
    let page = json(&run(&[
        "search",
        "--from",
        "rossi",
        "--after",
        "2025-06-01",
        "--before",
        "2025-11-01T00:00:00Z",
        "--per-message",
        "--limit",
        "20",
        "--json",
    ]));
    let msgs = page["messages"].as_array().unwrap();
    assert!(!msgs.is_empty());
    for m in msgs {
        let f = m["from"].to_string().to_lowercase();
        assert!(f.contains("rossi"), "{f}");
        let d = m["date"].as_str().unwrap();
        assert!(("2025-06-01".."2025-11-01").contains(&d), "{d}");
    }
    let unread = json(&run(&["search", "--unread", "--role", "inbox", "--json"]));
    assert!(unread["messages"].as_array().unwrap().iter().all(|m| m["unread"] == true));
    // Compact: numbered lines and the ids in the same order.
    let out = run(&["search", "invoice", "--limit", "2", "--compact"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("1. #"), "{text}");
    assert!(text.contains("\nids: ["), "{text}");
    // Absent: nothing, exit 0.
    let page = json(&run(&["search", "--body-contains", "no such phrase anywhere", "--json"]));
    assert!(page["messages"].as_array().unwrap().is_empty());
    // Bad arguments: exit 2, one line naming the typed error.
    for (args, code) in [
        (&["search", "--after", "June"][..], "INVALID_DATE"),
        (&["search", "x", "--limit", "0"][..], "LIMIT_OUT_OF_RANGE"),
        (&["search", "x", "--limit", "101"][..], "LIMIT_OUT_OF_RANGE"),
        (&["search", "--from", "ab"][..], "SUBSTRING_TOO_SHORT"),
        (&["search", "--sort", "random"][..], "INVALID_SORT"),
        (&["search", "--role", "spam-ish"][..], "INVALID_ROLE"),
        (&["search", "--account", "nobody"][..], "ACCOUNT_NOT_FOUND"),
        (&["search", "--after", "2025-02-01", "--before", "2025-01-01"][..], "EMPTY_RANGE"),
    ] {
        let out = run(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.starts_with(&format!("error[{code}]")), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
    }
}

fn run_with_stdin(args: &[&str], stdin: &str) -> std::process::Output {
    use std::io::Write as _;
    let mut child = steward()
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
    child.wait_with_output().unwrap()
}

#[test]
fn approvals_policy_and_audit_commands() {
    use steward_core::{approval::NewApproval, policy::Level};
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let h = home.to_str().unwrap();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    let ids: Vec<i64> = {
        let s = steward_core::Steward::builder().home(&home).open().unwrap();
        let new = |level, to: &str| NewApproval {
            chat: Some("c1".into()),
            requested_by: "agent:assistant".into(),
            tool: "mail.send".into(),
            input: serde_json::json!({"to": [to], "subject": "Hi", "body": "text"}),
            summary: format!("Send to {to}"),
            level,
            timeout_secs: None,
            taint: None,
        };
        [
            (Level::Confirm, "a@example.com"),
            (Level::Confirm, "b@example.com"),
            (Level::Secure, "c@example.com"),
        ]
        .into_iter()
        .map(|(l, to)| s.approvals().unwrap().request(&new(l, to), None, now as i64).unwrap().id)
        .collect()
    };
    let list =
        steward().args(["--home", h, "approvals", "list", "--pending", "--json"]).output().unwrap();
    assert!(list.status.success(), "{list:?}");
    assert_eq!(json(&list).as_array().unwrap().len(), 3);

    // Approve with an edit from stdin: the edited input is what runs.
    let edit = r#"{"to": ["a2@example.com"], "subject": "Hi", "body": "text"}"#;
    let out = run_with_stdin(
        &[
            "--home",
            h,
            "approvals",
            "approve",
            &ids[0].to_string(),
            "--edit",
            "-",
            "--as",
            "emma",
            "--json",
        ],
        edit,
    );
    assert!(out.status.success(), "{out:?}");
    let a = json(&out);
    assert_eq!(a["status"], "edited");
    assert_eq!(a["effective_input"]["to"][0], "a2@example.com");
    assert_eq!(a["decided_by"], "emma");
    // A second resolution is refused and changes nothing.
    let again =
        steward().args(["--home", h, "approvals", "deny", &ids[0].to_string()]).output().unwrap();
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("APPROVAL_ALREADY_RESOLVED"));
    // Revise needs feedback; an agent identity cannot act through the command either.
    let bare =
        steward().args(["--home", h, "approvals", "revise", &ids[1].to_string()]).output().unwrap();
    assert_eq!(bare.status.code(), Some(2));
    let agent = steward()
        .args(["--home", h, "approvals", "approve", &ids[1].to_string(), "--as", "agent:assistant"])
        .output()
        .unwrap();
    assert_eq!(agent.status.code(), Some(2), "{agent:?}");
    assert!(String::from_utf8_lossy(&agent.stderr).contains("APPROVAL_BAD_PERSON"));
    let revise = steward()
        .args([
            "--home",
            h,
            "approvals",
            "revise",
            &ids[1].to_string(),
            "--note",
            "ask Bob first",
            "--json",
        ])
        .output()
        .unwrap();
    assert_eq!(json(&revise)["status"], "revision_requested");

    // Secure: no PIN set, then a wrong PIN, then the right one.
    let id3 = ids[2].to_string();
    let no_pin = run_with_stdin(&["--home", h, "approvals", "approve", &id3, "--pin"], "1234\n");
    assert!(String::from_utf8_lossy(&no_pin.stderr).contains("APPROVAL_NO_PIN"), "{no_pin:?}");
    let set = run_with_stdin(&["--home", h, "approvals", "set-pin", "--as", "emma"], "4821\n");
    assert!(set.status.success(), "{set:?}");
    let wrong = run_with_stdin(&["--home", h, "approvals", "approve", &id3, "--pin"], "0000\n");
    assert!(String::from_utf8_lossy(&wrong.stderr).contains("APPROVAL_PIN_REQUIRED"), "{wrong:?}");
    let show = steward().args(["--home", h, "approvals", "show", &id3, "--json"]).output().unwrap();
    assert_eq!(json(&show)["approval"]["status"], "requested");
    let right =
        run_with_stdin(&["--home", h, "approvals", "approve", &id3, "--pin", "--json"], "4821\n");
    assert_eq!(json(&right)["status"], "approved", "{right:?}");

    // Policy: a person's change is versioned; a bad level changes nothing.
    let bad = steward().args(["--home", h, "policy", "set", "mail.send", "L9"]).output().unwrap();
    assert_eq!(bad.status.code(), Some(2));
    let set = steward()
        .args(["--home", h, "policy", "set", "mail.send", "secure", "--as", "emma", "--json"])
        .output()
        .unwrap();
    assert_eq!(json(&set)["version"], 1, "{set:?}");
    let show = steward()
        .args(["--home", h, "policy", "show", "--history", "5", "--json"])
        .output()
        .unwrap();
    let p = json(&show);
    assert_eq!(p["current"]["version"], 1);
    assert_eq!(p["current"]["policy"]["overrides"]["mail.send"], "secure");
    assert!(p["tools"].as_array().unwrap().iter().any(|t| t["name"] == "policy.set"));

    // Audit: the change and every resolution are there, filters work, bad filters are typed.
    let audit = steward()
        .args(["--home", h, "audit", "--type", "policy.changed", "--json"])
        .output()
        .unwrap();
    let events = json(&audit)["events"].as_array().unwrap().clone();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0]["actor"], "emma");
    let all =
        steward().args(["--home", h, "audit", "--tool", "mail.send", "--json"]).output().unwrap();
    let types: Vec<String> = json(&all)["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["event_type"].as_str().unwrap().to_owned())
        .collect();
    assert!(types.iter().any(|t| t.contains("edited")), "{types:?}");
    assert!(types.iter().any(|t| t.contains("pin")), "PIN failures are audited: {types:?}");
    let risk = steward().args(["--home", h, "audit", "--risk", "severe"]).output().unwrap();
    assert_eq!(risk.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&risk.stderr).contains("AUDIT_BAD_RISK"));
}

#[test]
fn ops_list_and_show_read_the_journal() {
    use steward_core::journal::NewOperation;
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let h = home.to_str().unwrap();
    let id = {
        let s = steward_core::Steward::builder().home(&home).open().unwrap();
        let j = s.journal().unwrap();
        let new = |key: &str, at: Option<i64>| NewOperation {
            kind: "mail.send".into(),
            idempotency_key: key.into(),
            input: serde_json::json!({"to": ["a@example.com"], "subject": "s", "body": "b"}),
            expected: serde_json::json!({}),
            approval_id: None,
            scheduled_for: at,
        };
        j.record(&new("later", Some(1_900_000_000)), 1_800_000_000).unwrap();
        j.record(&new("now", None), 1_800_000_000).unwrap().id
    };
    let list = steward()
        .args(["--home", h, "ops", "list", "--state", "started", "--json"])
        .output()
        .unwrap();
    let page = json(&list);
    assert_eq!(page.as_array().unwrap().len(), 1);
    assert_eq!(page[0]["idempotency_key"], "now");
    let show =
        steward().args(["--home", h, "ops", "show", &id.to_string(), "--json"]).output().unwrap();
    assert_eq!(json(&show)["input"]["body"], "b");
    let bad = steward().args(["--home", h, "ops", "list", "--state", "sent"]).output().unwrap();
    assert_eq!(bad.status.code(), Some(2));
    let missing = steward().args(["--home", h, "ops", "show", "999"]).output().unwrap();
    assert_eq!(missing.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("JOURNAL_NOT_FOUND"));
}

#[test]
fn mail_send_goes_through_policy_approval_journal_and_confirmation() {
    use steward_connectors::testing::{SinkOptions, SmtpSink};
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let h = home.to_str().unwrap();
    let md = dir.path().join("Mail");
    for sub in ["cur", "new", "tmp"] {
        std::fs::create_dir_all(md.join(sub)).unwrap();
    }
    let sink = SmtpSink::start(
        dir.path(),
        &SinkOptions { sent_maildir: Some(md.join(".Sent")), ..SinkOptions::default() },
    );
    let body = dir.path().join("body.txt");
    std::fs::write(&body, "See you at nine.\n").unwrap();
    let run = |args: &[&str]| {
        steward()
            .args(["--home", h])
            .args(args)
            .env("STEWARD_SMTP_HOST", "127.0.0.1")
            .env("STEWARD_SMTP_PORT", sink.port.to_string())
            .env("STEWARD_SMTP_SECURITY", "plain")
            .env("STEWARD_MAIL_FROM", "ada@example.org")
            .env("STEWARD_MAIL_ACCOUNT", "me")
            .output()
            .unwrap()
    };
    let send = |extra: &[&str]| {
        let mut args = vec!["mail", "send", "--to", "bob@example.org", "--subject", "Nine"];
        args.extend(["--body-file", body.to_str().unwrap(), "--as", "Ada", "--json"]);
        args.extend(extra);
        run(&args)
    };
    // Without --yes the send waits for a person: nothing journaled, nothing delivered.
    let pending = json(&send(&[]));
    assert_eq!(pending["outcome"], "pending", "{pending}");
    let id = pending["approval"]["id"].as_i64().unwrap().to_string();
    let early = run(&["mail", "send-approved", &id]);
    assert!(String::from_utf8_lossy(&early.stderr).contains("APPROVAL_NOT_APPROVED"));
    assert!(sink.deliveries().is_empty());
    let ok = run(&["approvals", "approve", &id, "--as", "Ada"]);
    assert!(ok.status.success(), "{}", String::from_utf8_lossy(&ok.stderr));
    let sent = json(&run(&["mail", "send-approved", &id, "--json"]));
    assert_eq!(sent["operation"]["state"], "backend_returned", "{sent}");
    let again = json(&run(&["mail", "send-approved", &id, "--json"]));
    assert_eq!(again["operation"]["id"], sent["operation"]["id"]);
    assert_eq!(sink.deliveries().len(), 1, "one approval, one mail");

    // --yes: the person approves on the spot.
    let now = json(&send(&["--yes"]));
    assert_eq!(now["operation"]["state"], "backend_returned", "{now}");
    assert_eq!(sink.deliveries().len(), 2);
    // Scheduled: journaled now, sent by send-due when due (here: already due).
    let later = json(&send(&["--yes", "--at", "2099-01-01T09:00:00Z"]));
    assert_eq!(later["operation"]["state"], "scheduled");
    let due = json(&run(&["ops", "send-due", "--json"]));
    assert_eq!(due["claimed"], 0);

    // The Sent copies are mirrored; one pass confirms both sends.
    let idx =
        run(&["index", "mail", "--maildir", md.to_str().unwrap(), "--account", "me", "--json"]);
    assert!(idx.status.success());
    let pass = json(&run(&["ops", "confirm", "--json"]));
    assert_eq!(
        (pass["checked"].as_u64(), pass["confirmed"].as_u64()),
        (Some(2), Some(2)),
        "{pass}"
    );
    let confirmed = json(&run(&["ops", "list", "--state", "confirmed", "--json"]));
    assert_eq!(confirmed.as_array().unwrap().len(), 2);

    // No configuration: a typed error, nothing journaled.
    let bare = steward()
        .args(["--home", h, "mail", "send-approved", &id])
        .env_remove("STEWARD_SMTP_HOST")
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&bare.stderr).contains("MAIL_CONFIG"), "{bare:?}");
    // A denied namespace is a denial, not a request.
    assert!(run(&["policy", "deny-namespace", "mail.", "--as", "Ada"]).status.success());
    let denied = send(&["--yes"]);
    assert!(String::from_utf8_lossy(&denied.stderr).contains("MAIL_DENIED"), "{denied:?}");
    assert_eq!(sink.deliveries().len(), 2);
}

#[test]
fn a_send_that_ends_failed_prints_the_operation_and_exits_non_zero() {
    use steward_connectors::testing::{SinkOptions, SmtpSink};
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let h = home.to_str().unwrap();
    let sink = SmtpSink::start(
        dir.path(),
        &SinkOptions { reject_rcpt: Some("carol@example.org".into()), ..SinkOptions::default() },
    );
    let body = dir.path().join("body.txt");
    std::fs::write(&body, "See you at nine.\n").unwrap();
    let run = |args: &[&str]| {
        steward()
            .args(["--home", h])
            .args(args)
            .env("STEWARD_SMTP_HOST", "127.0.0.1")
            .env("STEWARD_SMTP_PORT", sink.port.to_string())
            .env("STEWARD_SMTP_SECURITY", "plain")
            .env("STEWARD_MAIL_FROM", "ada@example.org")
            .env("STEWARD_MAIL_ACCOUNT", "me")
            .output()
            .unwrap()
    };
    let send = |key: &str, extra: &[&str]| {
        let mut args = vec!["mail", "send", "--to", "carol@example.org", "--subject", key];
        args.extend(["--body-file", body.to_str().unwrap(), "--as", "Ada"]);
        args.extend(extra);
        run(&args)
    };
    let refused = |out: &std::process::Output| {
        assert_eq!(out.status.code(), Some(1), "{out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("error[MAIL_SEND_FAILED]"), "{err}");
    };
    // Approved, then refused by the server: the operation is printed, and the exit says so.
    let pending = json(&send("Nine", &["--json"]));
    let id = pending["approval"]["id"].as_i64().unwrap().to_string();
    assert!(run(&["approvals", "approve", &id, "--as", "Ada"]).status.success());
    let out = run(&["mail", "send-approved", &id, "--json"]);
    refused(&out);
    let op: serde_json::Value = serde_json::from_slice(&out.stdout).expect("the operation");
    assert_eq!(op["operation"]["state"], "failed", "{op}");
    // Again: the same operation (nothing resent), still a failure.
    let again = run(&["mail", "send-approved", &id]);
    refused(&again);
    let text = String::from_utf8_lossy(&again.stdout);
    assert!(text.contains(&format!("operation #{} failed", op["operation"]["id"])), "{text}");
    // Approved on the spot: the same.
    let now = send("Ten", &["--yes", "--json"]);
    refused(&now);
    let op: serde_json::Value = serde_json::from_slice(&now.stdout).expect("the operation");
    assert_eq!(op["operation"]["state"], "failed", "{op}");
    assert!(sink.deliveries().is_empty());
}

#[test]
fn watch_commands_create_poll_list_stop() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let h = home.to_str().unwrap();
    let run = |args: &[&str]| steward().arg("--home").arg(h).args(args).output().unwrap();
    // An instant a minute ago: true from the start, so never replayed.
    let def = dir.path().join("watch.json");
    let past = steward_core::time::CivilTime::from_unix(steward_core::time::now_secs() - 60);
    let text = serde_json::json!({"source": "time", "resource_ref": past.rfc3339(),
        "instruction": "a minute ago", "rules": [{"id": "r", "event": "time.reached"}]});
    std::fs::write(&def, text.to_string()).unwrap();
    let w = json(&run(&["watch", "create", def.to_str().unwrap(), "--json"]));
    assert_eq!(w["status"], "active");
    let id = w["id"].as_i64().unwrap().to_string();
    let poll = json(&run(&["watch", "poll", "--json"]));
    assert_eq!((poll["checked"].as_u64(), poll["queued"].as_u64()), (Some(1), Some(0)));
    let list = json(&run(&["watch", "list", "--json"]));
    assert_eq!(list[0]["status"], "completed");
    assert_eq!(json(&run(&["watch", "events", "--json"])), serde_json::json!([]));
    assert_eq!(json(&run(&["watch", "stop", &id, "--json"]))["status"], "completed");
    // Bad input: a typed error and exit status 2.
    std::fs::write(&def, r#"{"source": "time", "resource_ref": "2026-01-01", "instruction": "x", "rules": [{"id": "r", "event": "e"}]}"#).unwrap();
    let bad = run(&["watch", "create", def.to_str().unwrap()]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("WATCH_BAD_RESOURCE"));
    let missing = run(&["watch", "stop", "99"]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("WATCH_NOT_FOUND"));

    // Grants: the file becomes an approval request; approving it starts the watch.
    let soon = steward_core::time::CivilTime::from_unix(steward_core::time::now_secs() + 3_600);
    let granted = serde_json::json!({"source": "time", "resource_ref": soon.rfc3339(),
        "instruction": "mail my sister", "rules": [{"id": "m", "event": "time.reached", "once": true,
        "grants": [{"tool": "mail.send", "constraints": {"fields": {
            "to": {"kind": "exact", "value": ["sister@example.com"]},
            "subject": {"kind": "exact", "value": "Hi"},
            "body": {"kind": "template", "template": "It is {{event.at}}."}}}}]}]});
    std::fs::write(&def, granted.to_string()).unwrap();
    let proposal = json(&run(&["watch", "create", def.to_str().unwrap(), "--json"]));
    assert_eq!(proposal["outcome"], "needs_approval", "{proposal}");
    assert_eq!(proposal["tool"], "watch.create_agent");
    let before = json(&run(&["watch", "list", "--json"])).as_array().unwrap().len();
    let approval = proposal["id"].as_i64().unwrap().to_string();
    let ok = run(&["approvals", "approve", &approval, "--as", "Ada", "--json"]);
    assert!(ok.status.success(), "{ok:?}");
    let list = json(&run(&["watch", "list", "--json"]));
    assert_eq!(list.as_array().unwrap().len(), before + 1);
    assert_eq!(list[0]["approval_id"].as_i64().unwrap().to_string(), approval);
}

#[test]
fn serve_keeps_serving_when_its_stdout_is_closed() {
    use std::io::{Read as _, Write as _};
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    // A free port, chosen here: the server's address line goes nowhere.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut child = steward()
        .arg("--home")
        .arg(&home)
        .args(["serve", "--port", &port.to_string()])
        .env_remove("STEWARD_AUTH_TOKEN")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // The reader goes away before the server prints anything: every status line meets a
    // broken pipe.
    drop(child.stdout.take());
    let addr = format!("127.0.0.1:{port}");
    let health = || {
        let Ok(mut conn) = std::net::TcpStream::connect(&addr) else { return false };
        let asked =
            write!(conn, "GET /health HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
        let mut reply = String::new();
        asked.is_ok()
            && conn.read_to_string(&mut reply).is_ok()
            && reply.starts_with("HTTP/1.1 200")
    };
    let mut up = false;
    for _ in 0..300 {
        if health() {
            up = true;
            break;
        }
        assert!(child.try_wait().unwrap().is_none(), "the server exited on a closed stdout");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(up, "the server never answered");
    // Answered, and it is still there to answer again.
    assert!(health());
    assert!(child.try_wait().unwrap().is_none(), "the server exited on a closed stdout");
    let killed = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    assert!(killed.success());
    child.wait().unwrap();
}

#[test]
fn serve_listens_on_loopback_prints_a_pairing_link_and_stops_on_sigterm() {
    use std::io::{BufRead as _, BufReader, Read as _, Write as _};
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    // A non-loopback address without TLS is refused before anything listens.
    let refused = steward()
        .arg("--home")
        .arg(&home)
        .args(["serve", "--listen", "0.0.0.0", "--port", "0"])
        .output()
        .unwrap();
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("SERVE_TLS_REQUIRED"));
    let mut child = steward()
        .arg("--home")
        .arg(&home)
        .args(["serve", "--port", "0"])
        .env_remove("STEWARD_AUTH_TOKEN")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let (mut listening, mut pairing) = (String::new(), String::new());
    out.read_line(&mut listening).unwrap();
    out.read_line(&mut pairing).unwrap();
    assert!(listening.starts_with("listening on http://127.0.0.1:"), "{listening}");
    assert!(pairing.contains("/pair#"), "{pairing}");
    let addr =
        listening.split_whitespace().nth(2).unwrap().trim_start_matches("http://").to_owned();
    // The token file was made, private; /health answers without it.
    let token = std::fs::read_to_string(home.join("auth-token")).unwrap();
    assert_eq!(token.len(), 64);
    let mut conn = std::net::TcpStream::connect(&addr).unwrap();
    write!(conn, "GET /health HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").unwrap();
    let mut reply = String::new();
    conn.read_to_string(&mut reply).unwrap();
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    let killed = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    assert!(killed.success());
    let status = child.wait().unwrap();
    let mut rest = String::new();
    out.read_to_string(&mut rest).unwrap();
    assert!(status.success(), "{status:?}");
    assert!(rest.contains("stopped"), "{rest}");
}

/// A loopback server answering each request whose path starts with a key of `routes`.
fn viaggiatreno(routes: Vec<(String, u16, String)>) -> String {
    use std::io::{BufRead as _, BufReader, Write as _};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}/", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for mut conn in listener.incoming().flatten() {
            let mut reader = BufReader::new(conn.try_clone().unwrap());
            let mut line = String::new();
            let _ = reader.read_line(&mut line);
            let mut h = String::new();
            while reader.read_line(&mut h).is_ok_and(|n| n > 2) {
                h.clear();
            }
            let path = line.split_whitespace().nth(1).unwrap_or("/").trim_start_matches('/');
            let (status, body) = routes
                .iter()
                .find(|(p, _, _)| path.starts_with(p.as_str()))
                .map_or((404, String::new()), |(_, s, b)| (*s, b.clone()));
            let _ = write!(
                conn,
                "HTTP/1.1 {status} X\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    base
}

#[test]
fn trains_next_and_status_over_a_replayed_endpoint() {
    let Some(path) = steward_connectors::testing::corpus(
        "viaggiatreno/monga-viaggiatreno_ha/1767481200000.json",
    ) else {
        return;
    };
    let run_text = std::fs::read_to_string(path).unwrap();
    let run: serde_json::Value = serde_json::from_str(&run_text).unwrap();
    let (day, departs) =
        (run["dataPartenzaTreno"].as_i64().unwrap(), run["orarioPartenza"].as_i64().unwrap());
    let board = serde_json::json!([{"numeroTreno": 9600, "codOrigine": "S01700",
        "dataPartenzaTreno": day, "orarioPartenza": departs}]);
    let base = viaggiatreno(vec![
        ("autocompletaStazione/Milano".into(), 200, "MILANO CENTRALE|S01700\n".into()),
        ("autocompletaStazione/Torino".into(), 200, "TORINO PORTA NUOVA|S00219\n".into()),
        ("partenze/S01700/".into(), 200, board.to_string()),
        (format!("andamentoTreno/S01700/9600/{day}"), 200, run_text),
    ]);
    let dir = tempfile::tempdir().unwrap();
    let cmd = |args: &[&str]| {
        steward()
            .arg("--home")
            .arg(dir.path())
            .args(args)
            .env("VIAGGIATRENO_BASE_URL", &base)
            .output()
            .unwrap()
    };
    let after = steward_core::time::CivilTime::from_unix(departs / 1_000 - 600).rfc3339();
    let next = json(&cmd(&[
        "trains",
        "next",
        "Milano Centrale",
        "Torino Porta Nuova",
        "--after",
        &after,
        "--json",
    ]));
    assert_eq!(next["status"], "found", "{next}");
    assert_eq!(next["snapshot"]["number"], 9600);
    let train_ref = next["train_ref"].as_str().unwrap().to_owned();
    let status = json(&cmd(&["trains", "status", &train_ref, "--json"]));
    assert_eq!(
        (status["status"].as_str(), status["snapshot"]["platform"].as_str()),
        (Some("live"), Some("7"))
    );
    let bad = cmd(&["trains", "status", "vt1_nope"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("TRAIN_BAD_REF"), "{bad:?}");
    let bad_time =
        cmd(&["trains", "next", "Milano Centrale", "Torino Porta Nuova", "--after", "tomorrow"]);
    assert_eq!(bad_time.status.code(), Some(2));
}

#[test]
fn usage_reports_the_ledger_by_service_action_model_and_day() {
    use steward_core::llm::{AttemptRecord, RequestRecord, TokenUsage, UsageLedger};
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let now = steward_core::time::now_secs();
    {
        let ledger = UsageLedger::open(&home, &steward_core::Limits::default()).unwrap();
        let rec = |service: Option<&str>, at: i64, outcome: &'static str| RequestRecord {
            at,
            service: service.map(str::to_owned),
            action: service.map(|_| "chat.turn".to_owned()),
            capability: "tier-1".into(),
            target: Some("cloud".into()),
            model: Some("big".into()),
            outcome,
            streamed: false,
            usage: TokenUsage { input: 100, output: 10, cache_read: 0, cache_write: 0 },
            cost_micros: 250,
            priced: true,
            latency_ms: 40,
            error: None,
        };
        let attempt = |outcome: &'static str| AttemptRecord {
            target: "cloud".into(),
            model: "big".into(),
            status: Some(200),
            outcome,
            latency_ms: 20,
            error: None,
            stream_mode: steward_core::llm::STREAM_NONE,
            headers_ms: Some(15),
        };
        ledger
            .record(&rec(Some("agent"), now - 60, "ok"), &[attempt("failed"), attempt("ok")])
            .unwrap();
        ledger.record(&rec(None, now - 120, "failed"), &[attempt("failed")]).unwrap();
        ledger.record(&rec(Some("agent"), now - 30 * 86_400, "ok"), &[attempt("ok")]).unwrap();
    }
    let run = |args: &[&str]| steward().arg("--home").arg(&home).args(args).output().unwrap();
    let week = json(&run(&["usage", "--json"]));
    assert_eq!(week["total"]["requests"], 2, "{week}");
    assert_eq!(week["total"]["attempts"], 3);
    assert_eq!(week["total"]["failed"], 1);
    assert_eq!(week["unattributed"], 1);
    let services: Vec<&str> =
        week["by_service"].as_array().unwrap().iter().map(|g| g["key"].as_str().unwrap()).collect();
    assert_eq!(services, ["agent", "unknown"]);
    assert_eq!(week["by_model"][0]["key"], "big");
    assert_eq!(json(&run(&["usage", "--since", "all", "--json"]))["total"]["requests"], 3);
    let bad = run(&["usage", "--since", "yesterday-ish"]);
    assert_eq!(bad.status.code(), Some(2));
}

#[test]
fn tools_list_call_and_run_approved_go_through_the_permission_order() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let run = |args: &[&str]| steward().arg("--home").arg(&home).args(args).output().unwrap();
    json(&run(&["demo", "--messages", "60", "--json", "--no-serve"]));
    let inv = json(&run(&["tools", "list", "--json"]));
    let names = |k: &str| -> Vec<String> {
        inv[k].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap().to_owned()).collect()
    };
    assert!(names("available").contains(&"mail.search".to_owned()));
    assert!(names("unavailable").contains(&"mail.send".to_owned()), "no SMTP configured");
    let found =
        json(&run(&["tools", "call", "mail.search", r#"{"query":"","limit":3}"#, "--json"]));
    assert_eq!(found["outcome"], "ran");
    assert_eq!(found["result"]["sources"].as_array().unwrap().len(), 3);
    assert_eq!(found["result"]["untrusted"], true);
    // Bad input: a typed error, exit 2, nothing decided.
    let bad = run(&["tools", "call", "mail.read", r#"{"message_id":1,"x":1}"#]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("TOOL_INPUT_INVALID"));
    // A gated tool leaves a request and runs nothing until a person approves it.
    let watch = r#"{"source":"time","resource_ref":"2099-01-01T00:00:00Z","instruction":"x","rules":[{"id":"r","event":"time.reached"}]}"#;
    let proposed = json(&run(&["tools", "call", "watches.propose", watch, "--json"]));
    assert_eq!(proposed["outcome"], "ran", "{proposed}");
    // A person raises watches.propose to confirm: now a call waits for them.
    json(&run(&["policy", "set", "watches.propose", "confirm", "--json"]));
    let gated = json(&run(&["tools", "call", "watches.propose", watch, "--json"]));
    assert_eq!(gated["outcome"], "awaiting_approval", "{gated}");
    let id = gated["approval"]["id"].as_i64().unwrap().to_string();
    let listed = || json(&run(&["tools", "call", "watches.list", "{}", "--json"]));
    assert_eq!(listed()["result"]["sources"].as_array().unwrap().len(), 1, "only the first watch");
    let early = run(&["tools", "run-approved", &id]);
    assert!(!early.status.success());
    assert!(String::from_utf8_lossy(&early.stderr).contains("APPROVAL_NOT_APPROVED"));
    json(&run(&["approvals", "approve", &id, "--json"]));
    let ran = json(&run(&["tools", "run-approved", &id, "--json"]));
    assert_eq!(ran["tool"], "watches.propose");
    assert_eq!(listed()["result"]["sources"].as_array().unwrap().len(), 2);
}

#[test]
fn chat_streams_json_events_then_the_result_and_chats_show_it() {
    use steward_connectors::testing::models::{Reply, ScriptedServer, chat_answer};
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    json(
        &steward()
            .arg("--home")
            .arg(&home)
            .args(["demo", "--messages", "30", "--json", "--no-serve"])
            .output()
            .unwrap(),
    );
    let model = ScriptedServer::start(|_, n| match n {
        0 => Reply::Json(
            200,
            chat_answer("m", "", &[("c1", "mail.search", r#"{"query":"","limit":2}"#)], (50, 5, 0)),
        ),
        _ => Reply::Json(200, chat_answer("m", "Two recent mails.", &[], (80, 6, 0))),
    });
    let run = |args: &[&str], with_model: bool| {
        let mut c = steward();
        c.arg("--home").arg(&home).args(args);
        if with_model {
            c.env("STEWARD_LLM_BASE_URL", &model.base_url).env("STEWARD_LLM_MODEL", "m");
        } else {
            c.env_remove("STEWARD_LLM_BASE_URL");
        }
        c.output().unwrap()
    };
    let out = run(&["chat", "--json", "What is new?"], true);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let result = lines.last().unwrap();
    assert_eq!(result["end_reason"], "completed", "{result}");
    assert_eq!(result["text"], "Two recent mails.");
    assert_eq!(result["usage"]["model_calls"], 2);
    assert_eq!(result["usage"]["input_tokens"], 130);
    let types: Vec<&str> =
        lines[..lines.len() - 1].iter().map(|e| e["event"]["type"].as_str().unwrap()).collect();
    assert_eq!(types.first(), Some(&"turn_started"));
    assert_eq!(types.last(), Some(&"turn_ended"));
    assert!(types.contains(&"tool_finished"), "{types:?}");
    let chat = result["chat_id"].as_str().unwrap().to_owned();
    let listed = json(&run(&["chats", "list", "--json"], false));
    assert_eq!(listed[0]["id"], chat.as_str());
    let shown = json(&run(&["chats", "show", &chat, "--json"], false));
    assert_eq!(shown["messages"].as_array().unwrap().len(), 4);
    assert_eq!(shown["tool_calls"][0]["status"], "ran");
    assert!(run(&["chats", "delete", &chat], false).status.success());
    let gone = run(&["chats", "show", &chat], false);
    assert!(String::from_utf8_lossy(&gone.stderr).contains("CHAT_NOT_FOUND"));
    // Without a model: a typed error, nothing started.
    let none = run(&["chat", "--json", "hello"], false);
    assert!(!none.status.success());
    assert!(String::from_utf8_lossy(&none.stderr).contains("AGENT_NO_MODEL"));
}

#[test]
fn ctrl_c_cancels_the_running_turn_which_ends_in_order_and_runs_no_tool() {
    use std::{
        io::BufRead as _,
        sync::{Mutex, mpsc},
        time::Duration,
    };
    use steward_connectors::testing::models::{Reply, ScriptedServer, chat_answer};
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    json(
        &steward()
            .arg("--home")
            .arg(&home)
            .args(["demo", "--messages", "20", "--json", "--no-serve"])
            .output()
            .unwrap(),
    );
    // The model holds its first answer (a tool call) until the test lets it go.
    let (release, held) = mpsc::channel::<()>();
    let held = Mutex::new(held);
    let model = ScriptedServer::start(move |_, n| {
        if n == 0 {
            held.lock().unwrap().recv_timeout(Duration::from_secs(60)).expect("released");
        }
        Reply::Json(
            200,
            chat_answer("m", "", &[("c1", "mail.search", r#"{"query":"","limit":2}"#)], (50, 5, 0)),
        )
    });
    let mut child = steward()
        .arg("--home")
        .arg(&home)
        .args(["chat", "--json", "What is new?"])
        .env("STEWARD_LLM_BASE_URL", &model.base_url)
        .env("STEWARD_LLM_MODEL", "m")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let lines = |r: Box<dyn std::io::Read + Send>| {
        let (tx, rx) = mpsc::channel::<String>();
        std::thread::spawn(move || {
            for l in std::io::BufReader::new(r).lines().map_while(Result::ok) {
                let _ = tx.send(l);
            }
        });
        rx
    };
    let out = lines(Box::new(child.stdout.take().unwrap()));
    let err = lines(Box::new(child.stderr.take().unwrap()));
    let first = out.recv_timeout(Duration::from_secs(60)).expect("the turn starts");
    assert!(first.contains("turn_started"), "{first}");
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap());
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).unwrap();
    let said = loop {
        let l = err.recv_timeout(Duration::from_secs(60)).expect("Ctrl-C is acknowledged");
        if l.contains("cancelling run") {
            break l;
        }
    };
    assert!(said.contains("run_"), "{said}");
    release.send(()).unwrap();
    let status = child.wait().unwrap();
    assert!(status.success(), "a cancelled turn is an orderly end: {status:?}");
    let rest: Vec<serde_json::Value> =
        out.iter().map(|l| serde_json::from_str(&l).unwrap()).collect();
    let result = rest.last().unwrap();
    assert_eq!(result["end_reason"], "cancelled", "{result}");
    assert_eq!(result["usage"]["tool_calls"], 0, "no tool ran: {result}");
    assert!(
        rest.iter().all(|e| e["event"]["type"] != "tool_started"),
        "nothing started after the cancel"
    );
    assert_eq!(model.requests().len(), 1, "no model call after the cancel");
}

#[test]
fn calendar_agenda_expands_an_ics_file_in_a_zone_and_refuses_a_window_too_long() {
    let dir = tempfile::tempdir().unwrap();
    let ics = dir.path().join("team.ics");
    std::fs::write(
        &ics,
        "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//t//EN\r\nBEGIN:VEVENT\r\nUID:weekly@t\r\n\
         DTSTART;TZID=Europe/Rome:20250324T090000\r\nDURATION:PT1H\r\n\
         RRULE:FREQ=WEEKLY;COUNT=3\r\nSUMMARY:Riunione\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n",
    )
    .unwrap();
    let out = steward()
        .args(["calendar", "agenda", "--ics"])
        .arg(&ics)
        .args(["--from", "2025-03-01", "--to", "2025-04-30", "--tz", "Europe/Rome", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let starts: Vec<&str> = lines.iter().filter_map(|l| l["start"].as_str()).collect();
    // Across the change to summer time the meeting stays at 09:00 on the wall clock.
    assert_eq!(
        starts,
        ["2025-03-24T09:00:00+01:00", "2025-03-31T09:00:00+02:00", "2025-04-07T09:00:00+02:00"]
    );
    assert_eq!(lines[0]["calendar"], "team.ics");
    assert_eq!(lines[0]["summary"], "Riunione");
    assert_eq!(lines[1]["recurrence_id"], "2025-03-31T09:00:00");
    let long = steward()
        .args(["calendar", "agenda", "--ics"])
        .arg(&ics)
        .args(["--from", "2025-01-01", "--to", "2026-06-01", "--json"])
        .output()
        .unwrap();
    assert!(!long.status.success());
    assert!(String::from_utf8_lossy(&long.stderr).contains("CALENDAR_BAD_WINDOW"), "{long:?}");
}

#[test]
fn calendar_free_lists_the_slots_left_in_working_hours_and_refuses_bad_hours() {
    let dir = tempfile::tempdir().unwrap();
    let ics = dir.path().join("me.ics");
    // Monday 24 March 2025: a meeting 10:00–11:30, an invitation I declined 14:00–15:00, a
    // transparent reminder over the afternoon.
    std::fs::write(
        &ics,
        "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//t//EN\r\n\
         BEGIN:VEVENT\r\nUID:m@t\r\nDTSTART;TZID=Europe/Rome:20250324T100000\r\nDURATION:PT1H30M\r\n\
         SUMMARY:Riunione\r\nEND:VEVENT\r\n\
         BEGIN:VEVENT\r\nUID:d@t\r\nDTSTART;TZID=Europe/Rome:20250324T140000\r\nDURATION:PT1H\r\n\
         SUMMARY:Declined\r\nATTENDEE;PARTSTAT=DECLINED:mailto:Me@Example.org\r\nEND:VEVENT\r\n\
         BEGIN:VEVENT\r\nUID:t@t\r\nDTSTART;TZID=Europe/Rome:20250324T130000\r\nDURATION:PT4H\r\n\
         SUMMARY:Reminder\r\nTRANSP:TRANSPARENT\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n",
    )
    .unwrap();
    let free = |extra: &[&str]| {
        let out = steward()
            .args(["calendar", "free", "--ics"])
            .arg(&ics)
            .args(["--from", "2025-03-24", "--to", "2025-03-25", "--tz", "Europe/Rome", "--json"])
            .args(extra)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).unwrap();
                format!("{}/{}", v["start"].as_str().unwrap(), v["end"].as_str().unwrap())
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(
        free(&["--me", "me@example.org"]),
        [
            "2025-03-24T09:00:00+01:00/2025-03-24T10:00:00+01:00",
            "2025-03-24T11:30:00+01:00/2025-03-24T18:00:00+01:00"
        ]
    );
    // Without my address the declined invitation is busy; with a 90-minute minimum only the
    // long afternoon slot is left.
    assert_eq!(
        free(&["--min-minutes", "90"]),
        [
            "2025-03-24T11:30:00+01:00/2025-03-24T14:00:00+01:00",
            "2025-03-24T15:00:00+01:00/2025-03-24T18:00:00+01:00"
        ]
    );
    assert_eq!(
        free(&["--hours", "08:00-10:00"]),
        ["2025-03-24T08:00:00+01:00/2025-03-24T10:00:00+01:00"]
    );
    let bad = steward()
        .args(["calendar", "free", "--ics"])
        .arg(&ics)
        .args(["--from", "2025-03-24", "--to", "2025-03-25", "--hours", "18:00-09:00"])
        .output()
        .unwrap();
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("CALENDAR_BAD_HOURS"), "{bad:?}");
}

#[test]
fn contacts_are_indexed_searched_and_resolved_and_a_reindex_counts_what_changed() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let book = dir.path().join("book");
    std::fs::create_dir_all(&book).unwrap();
    let card = |uid: &str, body: &str| {
        format!("BEGIN:VCARD\r\nVERSION:3.0\r\nUID:{uid}\r\n{body}END:VCARD\r\n")
    };
    std::fs::write(
        book.join("a.vcf"),
        card("a", "FN:Anna Rossi\r\nORG:Polimi\r\nEMAIL:anna@polimi.it\r\nTEL:02 1234 5678\r\n"),
    )
    .unwrap();
    std::fs::write(
        book.join("b.vcf"),
        card("b", "FN:Anna Bianchi\r\nEMAIL:anna.b@example.org\r\n"),
    )
    .unwrap();
    let run = |args: &[&str]| {
        let out = steward().arg("--home").arg(&home).args(args).output().unwrap();
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let first: serde_json::Value = serde_json::from_str(
        run(&["index", "contacts", "--vdir", book.to_str().unwrap(), "--region", "IT", "--json"])
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        (first["added"].as_u64(), first["contacts"].as_u64()),
        (Some(2), Some(2)),
        "{first}"
    );
    // The same books again change nothing; one card gone is counted.
    let again =
        run(&["index", "contacts", "--vdir", book.to_str().unwrap(), "--region", "IT", "--json"]);
    assert!(again.contains("\"added\":0") && again.contains("\"changed\":0"), "{again}");
    let found: serde_json::Value = serde_json::from_str(
        run(&["contacts", "search", "polimi", "--json"]).lines().next().unwrap(),
    )
    .unwrap();
    assert_eq!(found["name"], "Anna Rossi");
    assert_eq!(found["phones"][0], "+390212345678");
    let r: serde_json::Value =
        serde_json::from_str(run(&["contacts", "resolve", "Anna", "--json"]).trim()).unwrap();
    assert_eq!(r["status"], "ambiguous", "{r}");
    assert_eq!(r["candidates"].as_array().unwrap().len(), 2);
    let r: serde_json::Value =
        serde_json::from_str(run(&["contacts", "resolve", "Anna from Polimi", "--json"]).trim())
            .unwrap();
    assert_eq!(
        (r["status"].as_str(), r["candidates"][0]["email"].as_str()),
        (Some("resolved"), Some("anna@polimi.it"))
    );
    std::fs::remove_file(book.join("b.vcf")).unwrap();
    let gone = run(&["index", "contacts", "--vdir", book.to_str().unwrap(), "--json"]);
    assert!(gone.contains("\"removed\":1") && gone.contains("\"contacts\":1"), "{gone}");
    let bad = steward()
        .arg("--home")
        .arg(&home)
        .args(["contacts", "resolve", "the", "--json"])
        .output()
        .unwrap();
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("CONTACTS_EMPTY_QUERY"), "{bad:?}");
}

#[test]
fn calendars_are_indexed_then_asked_from_the_store_and_a_second_index_reads_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(
        home.join("config.toml"),
        "[calendar]\ntime_zone = \"Europe/Rome\"\nme = [\"Me@Example.org\"]\nworking_hours = \"09:00-13:00\"\n",
    )
    .unwrap();
    let cal = dir.path().join("cal").join("work");
    std::fs::create_dir_all(&cal).unwrap();
    std::fs::write(cal.join("displayname"), "Lavoro").unwrap();
    std::fs::write(
        cal.join("weekly.ics"),
        "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//t//EN\r\nBEGIN:VEVENT\r\nUID:weekly@t\r\n\
         DTSTART;TZID=Europe/Rome:20250324T100000\r\nDURATION:PT1H\r\n\
         RRULE:FREQ=WEEKLY;COUNT=3\r\nSUMMARY:Riunione budget\r\nLOCATION:Sala Verdi\r\n\
         ATTENDEE;CN=Anna:mailto:anna@example.org\r\nEND:VEVENT\r\n\
         BEGIN:VEVENT\r\nUID:declined@t\r\nDTSTART;TZID=Europe/Rome:20250324T110000\r\nDURATION:PT1H\r\n\
         SUMMARY:Vendor pitch\r\nATTENDEE;PARTSTAT=DECLINED:mailto:me@example.org\r\nEND:VEVENT\r\n\
         END:VCALENDAR\r\n",
    )
    .unwrap();
    let run = |args: &[&str]| {
        let out = steward().arg("--home").arg(&home).args(args).output().unwrap();
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .collect::<Vec<_>>()
    };
    let root = dir.path().join("cal");
    let first =
        run(&["index", "calendar", "--vdir", root.to_str().unwrap(), "--account", "me", "--json"]);
    assert_eq!(
        (first[0]["added"].as_u64(), first[0]["events"].as_u64()),
        (Some(1), Some(2)),
        "{first:?}"
    );
    let again =
        run(&["index", "calendar", "--vdir", root.to_str().unwrap(), "--account", "me", "--json"]);
    assert_eq!((again[0]["unchanged"].as_u64(), again[0]["added"].as_u64()), (Some(1), Some(0)));
    // From the store, in the configured zone.
    let agenda =
        run(&["calendar", "agenda", "--from", "2025-03-24", "--to", "2025-04-14", "--json"]);
    let starts: Vec<&str> = agenda.iter().filter_map(|o| o["start"].as_str()).collect();
    assert_eq!(
        starts,
        [
            "2025-03-24T10:00:00+01:00",
            "2025-03-24T11:00:00+01:00",
            "2025-03-31T10:00:00+02:00",
            "2025-04-07T10:00:00+02:00"
        ]
    );
    assert_eq!(agenda[0]["calendar"], "me/work");
    // Working hours and my address come from [calendar]: the declined pitch takes no time.
    let free = run(&["calendar", "free", "--from", "2025-03-24", "--to", "2025-03-25", "--json"]);
    let spans: Vec<String> = free
        .iter()
        .map(|s| format!("{}/{}", s["start"].as_str().unwrap(), s["end"].as_str().unwrap()))
        .collect();
    assert_eq!(
        spans,
        [
            "2025-03-24T09:00:00+01:00/2025-03-24T10:00:00+01:00",
            "2025-03-24T11:00:00+01:00/2025-03-24T13:00:00+01:00"
        ]
    );
    let hits = run(&[
        "calendar",
        "search",
        "budget verdi",
        "--from",
        "2025-03-01",
        "--to",
        "2025-05-01",
        "--json",
    ]);
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0]["more_occurrences"], 2);
    assert!(
        run(&[
            "calendar",
            "search",
            "anna",
            "--from",
            "2025-03-01",
            "--to",
            "2025-05-01",
            "--json"
        ])
        .len()
            == 1,
        "attendees are searched"
    );
    assert!(
        run(&[
            "calendar",
            "search",
            "holiday",
            "--from",
            "2025-03-01",
            "--to",
            "2025-05-01",
            "--json"
        ])
        .is_empty()
    );
}

#[test]
fn index_calendar_and_contacts_from_caldav_and_carddav_with_a_password_file() {
    use steward_connectors::testing::radicale::{Collection, Radicale};
    let dir = tempfile::tempdir().unwrap();
    let server = Radicale::start(dir.path(), "giulia", "s3cret");
    server.collection("lavoro", Collection::Calendar, "Lavoro", Some("#1e88e5"));
    server.seed(
        "lavoro",
        "review.ics",
        "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//t//EN\r\nBEGIN:VEVENT\r\nUID:review@t\r\n\
         DTSTAMP:20250301T000000Z\r\nDTSTART;TZID=Europe/Rome:20250305T150000\r\nDURATION:PT1H\r\n\
         SUMMARY:Budget review\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n",
    );
    server.collection("rubrica", Collection::AddressBook, "Rubrica", None);
    server.seed(
        "rubrica",
        "anna.vcf",
        "BEGIN:VCARD\r\nVERSION:3.0\r\nUID:anna\r\nFN:Anna Ricci\r\nEMAIL:anna@example.it\r\nEND:VCARD\r\n",
    );
    let pw = server.password_file(&dir.path().join("pw"));
    let home = dir.path().join("home");
    let index = |what: &str, flag: &str| {
        steward()
            .arg("--home")
            .arg(&home)
            .args(["index", what, flag, &server.url, "--username", "giulia", "--password-file"])
            .arg(&pw)
            .args(["--account", "dav", "--json"])
            .output()
            .unwrap()
    };
    // A password file others can read is refused, with its code, before anything is sent.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&pw, std::fs::Permissions::from_mode(0o644)).unwrap();
        let out = index("calendar", "--caldav");
        assert!(!out.status.success());
        assert!(String::from_utf8_lossy(&out.stderr).contains("DAV_SECRET_UNREADABLE"), "{out:?}");
        std::fs::set_permissions(&pw, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    let out = index("calendar", "--caldav");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report: serde_json::Value =
        serde_json::from_str(String::from_utf8_lossy(&out.stdout).lines().next().unwrap()).unwrap();
    assert_eq!((report["calendars"].as_u64(), report["added"].as_u64()), (Some(1), Some(1)));
    let out = index("contacts", "--carddav");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let out = steward()
        .arg("--home")
        .arg(&home)
        .args(["contacts", "resolve", "Anna", "--json"])
        .output()
        .unwrap();
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (r["status"].as_str(), r["candidates"][0]["email"].as_str()),
        (Some("resolved"), Some("anna@example.it"))
    );
    // Plain http with credentials to another machine is refused.
    let out = steward()
        .arg("--home")
        .arg(&home)
        .args([
            "index",
            "calendar",
            "--caldav",
            "http://dav.example.org/",
            "--username",
            "u",
            "--password-file",
        ])
        .arg(&pw)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("DAV_INSECURE"), "{out:?}");
}

#[test]
fn index_files_then_find_them_with_json_pages_and_typed_errors() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().canonicalize().unwrap();
    let (home, docs) = (base.join("home"), base.join("docs"));
    std::fs::create_dir_all(docs.join("2025")).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(docs.join("2025/invoice.pdf"), b"%PDF").unwrap();
    std::fs::write(docs.join("notes.txt"), b"x").unwrap();
    std::fs::write(docs.join(".env"), b"SECRET=1").unwrap();
    std::fs::write(home.join("config.toml"), format!("[files]\nroots = [{docs:?}]\n")).unwrap();
    let run = |args: &[&str]| steward().arg("--home").arg(&home).args(args).output().unwrap();
    let out = run(&["index", "files", "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report = json(&out);
    let (files, documents) = (&report["files"], &report["documents"]);
    assert_eq!((files["files"].as_u64(), files["added"].as_u64()), (Some(2), Some(2)));
    // Both are documents; the four-byte "PDF" is damaged, the note is indexed.
    assert_eq!(
        (documents["documents"].as_u64(), documents["indexed"].as_u64()),
        (Some(2), Some(1))
    );
    assert_eq!(documents["failed"][0][1], "DOCS_DAMAGED");
    let out = run(&["files", "find", "--glob", "2025/*.pdf", "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let lines: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2, "one file, then the page: {lines:?}");
    assert_eq!(lines[0]["path"], docs.join("2025/invoice.pdf").to_string_lossy().as_ref());
    assert_eq!(lines[1]["total"], 1);
    // A cursor that is not ours is a typed error on stderr and a non-zero exit.
    let out = run(&["files", "find", "--cursor", "nope"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("FILES_BAD_QUERY"));
}

#[test]
fn memory_commands_review_search_and_forget_with_a_receipt() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let vault = dir.path().join("vault");
    std::fs::create_dir_all(&vault).unwrap();
    std::fs::write(
        vault.join("MEMORY.md"),
        "- Ada's locker code is 4471.\n- Ada rides a red bicycle.\n",
    )
    .unwrap();
    let run = |args: &[&str]| steward().arg("--home").arg(&home).args(args).output().unwrap();
    let import = json(&run(&["memory", "import", vault.to_str().unwrap(), "--json"]));
    assert_eq!(import["added"], 2);
    let inbox = run(&["memory", "inbox", "--json"]);
    assert!(inbox.status.success());
    // The proposals in the order of the file: the locker code, then the bicycle.
    let proposals: Vec<serde_json::Value> = String::from_utf8_lossy(&inbox.stdout)
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .collect();
    assert_eq!(proposals.len(), 2);
    let id_of = |word: &str| {
        proposals
            .iter()
            .find(|p| p["note"]["body"].as_str().unwrap().contains(word))
            .unwrap()["note"]["meta"]["id"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let ids = [id_of("locker"), id_of("bicycle")];
    // An agent identity is refused; nothing is accepted.
    let refused = run(&["memory", "accept", &ids[0], "--as", "agent:steward"]);
    assert_eq!(refused.status.code(), Some(2), "{}", String::from_utf8_lossy(&refused.stderr));
    let none = run(&["memory", "search", "locker", "--json"]);
    assert!(none.stdout.is_empty());
    // Accepted, edited, found.
    let edited = json(&run(&[
        "memory",
        "edit",
        &ids[0],
        "--text",
        "Ada's gym locker code is 4471.",
        "--as",
        "ada",
        "--json",
    ]));
    assert_eq!(edited["meta"]["review"]["decision"], "edited");
    let found = json(&run(&["memory", "search", "gym locker", "--json"]));
    assert_eq!(found["note"]["meta"]["id"], ids[0].as_str());
    // Rejected: not proposed again by a second import of other bytes holding it.
    assert!(run(&["memory", "reject", &ids[1], "--as", "ada"]).status.success());
    std::fs::write(vault.join("MEMORY.md"), "- Ada rides a red bicycle!\n").unwrap();
    let again = json(&run(&["memory", "import", vault.to_str().unwrap(), "--json"]));
    assert_eq!(
        (again["added"].as_u64(), again["suppressed"].as_u64()),
        (Some(0), Some(1)),
        "{again}"
    );
    // Forget prints the receipt; the note is gone.
    let receipt = json(&run(&["memory", "forget", "--query", "locker", "--as", "ada", "--json"]));
    assert_eq!(receipt["notes"][0]["id"], ids[0].as_str());
    assert_eq!(receipt["dry_run"], false);
    assert!(run(&["memory", "search", "locker", "--json"]).stdout.is_empty());
    let shown = run(&["memory", "show", &ids[0]]);
    assert_eq!(shown.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&shown.stderr).contains("MEMORY_NOT_FOUND"));
    // A forget needs a selector.
    assert_eq!(run(&["memory", "forget"]).status.code(), Some(2));
}
