//! The web client in a real browser: Debian's chromium, driven by npm `playwright-core`
//! (`tests/support/browser`, installed by `scripts/test`), against the real `steward serve` on
//! a demo home, with a scripted model server and a loopback SMTP sink at the outer edges.
//!
//! The flows run in `tests/support/browser/flows.mjs`, which fails on anything it sees go
//! wrong (a script from hostile mail, a request to another origin, an accessibility
//! violation); this side then checks what must and must not have happened behind the page:
//! exactly one mail delivered, the denied request recorded with the person's note, the
//! accepted proposal a note, nothing else sent.

use std::{
    io::{BufRead as _, BufReader},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
};

use serde_json::{Value, json};
use steward_connectors::testing::{
    SinkOptions, SmtpSink,
    models::{Reply, ScriptedServer, chat_answer},
    workspace_root,
};
use steward_core::{Steward, approval::NewApproval, memory::NewMemory, policy::Level};

fn steward() -> Command {
    Command::new(env!("CARGO_BIN_EXE_steward"))
}

/// The browser and its driver, or why not. With `STEWARD_REQUIRE_BROWSER` set (scripts/test
/// sets it) their absence fails the test instead of skipping it.
fn browser() -> Option<(PathBuf, PathBuf)> {
    let driver = workspace_root().join("tests/support/browser");
    let chromium = std::env::var_os("STEWARD_CHROMIUM")
        .map_or_else(|| PathBuf::from("/usr/bin/chromium"), PathBuf::from);
    let missing = if !driver.join("node_modules/playwright-core").exists() {
        Some("playwright-core is not installed (scripts/test runs npm ci in tests/support/browser)")
    } else if !chromium.exists() {
        Some("chromium is not installed (scripts/test installs Debian's chromium)")
    } else {
        None
    };
    if let Some(why) = missing {
        assert!(std::env::var_os("STEWARD_REQUIRE_BROWSER").is_none(), "required here: {why}");
        println!("SKIP the_web_client_in_a_real_browser: {why}");
        return None;
    }
    Some((driver, chromium))
}

/// Hostile mail, mirrored like any other: markup, scripts, links and a large body must stay
/// text in the page.
fn hostile_mail(maildir: &Path) {
    let big = "All work and no play. ".repeat(5 * 1024 * 1024 / 22);
    let messages = [
        (
            "hostile-1",
            "text/html; charset=utf-8",
            "Hostile markup HOSTILEMARK",
            "<script>window.__pwned = 1; alert('pwned')</script>\
             <img src=\"http://evil.example/pixel.gif\" onerror=\"window.__pwned = 2\">\
             <a href=\"javascript:window.__pwned=3\">click</a> <a href=\"data:text/html,<script>alert(1)</script>\">data</a>\
             <style>@import url(http://evil.example/x.css); body{background:url(http://evil.example/bg)}</style>\
             <svg onload=\"window.__pwned = 4\"><script>window.__pwned = 5</script></svg>\
             <iframe src=\"http://evil.example/\"></iframe> HOSTILEMARK body"
                .to_owned(),
        ),
        (
            "hostile-2",
            "text/plain; charset=utf-8",
            "Plain \u{202E}gnp.exe\u{202C} bidi HOSTILEMARK",
            "<script>window.__pwned = 6</script> javascript:alert(1) \u{202E}txt.exe\u{202C} HOSTILEMARK".to_owned(),
        ),
        ("hostile-3", "text/plain; charset=utf-8", "Huge body HOSTILEMARK", format!("HOSTILEMARK {big}")),
    ];
    for (name, ctype, subject, body) in messages {
        let raw = format!(
            "From: Mallory <mallory@evil.example>\r\nTo: Giulia Bianchi <giulia.bianchi@example.it>\r\n\
             Subject: {subject}\r\nDate: Mon, 30 Nov 2026 09:00:00 +0000\r\nMessage-ID: <{name}@evil.example>\r\n\
             MIME-Version: 1.0\r\nContent-Type: {ctype}\r\nContent-Transfer-Encoding: 8bit\r\n\r\n{body}\r\n"
        );
        std::fs::write(maildir.join("cur").join(format!("{name}.web:2,")), raw).unwrap();
    }
}

/// The demo home, with SMTP to the sink, hostile mail mirrored, two memory proposals and four
/// requests waiting for the person: one to deny with a note, a secure one to approve with the
/// PIN, one left waiting (the screenshots show it), one denied while the live feed is cut.
fn home(dir: &Path, sink: &SmtpSink) -> (PathBuf, [i64; 4]) {
    let home = dir.join("home");
    let out = steward()
        .arg("--home")
        .arg(&home)
        .args(["demo", "--messages", "60", "--json", "--no-serve"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let config = std::fs::read_to_string(home.join("config.toml")).unwrap_or_default();
    std::fs::write(
        home.join("config.toml"),
        format!(
            "{config}\n[mail]\naccount = \"me\"\nfrom = \"giulia.bianchi@example.it\"\nsmtp_host = \"127.0.0.1\"\n\
             smtp_port = {}\nsmtp_security = \"plain\"\n",
            sink.port
        ),
    )
    .unwrap();
    let maildir = home.join("demo-maildir");
    hostile_mail(&maildir);
    let out = steward()
        .arg("--home")
        .arg(&home)
        .args(["index", "mail", "--maildir"])
        .arg(&maildir)
        .args(["--account", "demo", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));

    let steward = Steward::builder().home(&home).open().unwrap();
    for (text, subject) in [
        ("Anna prefers calls after 18:00.", "person:anna@example.org"),
        ("The building's heating is serviced every October.", "place:home"),
    ] {
        let fact: NewMemory = serde_json::from_value(json!({
            "text": text, "kind": "preference", "subject": subject, "confidence": 0.8,
        }))
        .unwrap();
        steward.memory_propose("agent:assistant", &fact).unwrap();
    }
    let approvals = steward.approvals().unwrap();
    let now = steward_core::time::now_secs();
    let ada = steward.human("ada").unwrap();
    approvals.set_pin(&ada, PIN, now).unwrap();
    let mut ids = [0; 4];
    for (i, (to, subject, level)) in [
        ("boss@example.org", "I quit", Level::Confirm),
        ("bank@example.org", "Wire the deposit", Level::Secure),
        ("school@example.org", "Lucia is ill today", Level::Confirm),
        ("plumber@example.org", "Tuesday works", Level::Confirm),
    ]
    .into_iter()
    .enumerate()
    {
        let request = NewApproval {
            chat: None,
            requested_by: "agent:assistant".into(),
            tool: "mail.send".into(),
            input: json!({"to": [to], "subject": subject, "body": "Sent from the web test."}),
            summary: format!("Mail {to}: {subject}"),
            level,
            timeout_secs: None,
            taint: None,
        };
        ids[i] = approvals.request(&request, None, now).unwrap().id;
    }
    (home, ids)
}

/// The person's PIN for secure requests.
const PIN: &str = "482916";

/// The model: asked about Anna, it proposes one `mail.send`; told the tool's outcome, it
/// says it is done; anything else (a chat's title) gets a few words.
fn model() -> ScriptedServer {
    ScriptedServer::start(|req, _| {
        let messages = req.body["messages"].as_array().cloned().unwrap_or_default();
        let last = messages.last().cloned().unwrap_or(Value::Null);
        let text = |m: &Value| m["content"].as_str().unwrap_or("").to_owned();
        let answer = if last["role"] == "tool" {
            chat_answer("m", "Done: the mail to Anna is on its way.", &[], (80, 9, 0))
        } else if req.body.get("tools").is_some() && text(&last).contains("Anna") {
            let args = r#"{"to":["anna@example.org"],"subject":"Dinner","body":"See you at 8."}"#;
            chat_answer("m", "", &[("call_1", "mail.send", args)], (60, 12, 0))
        } else {
            chat_answer("m", "Dinner with Anna", &[], (20, 3, 0))
        };
        Reply::Json(200, answer)
    })
}

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `steward serve` on a free port: the server, its base URL and its pairing link.
fn serve(home: &Path, model: &ScriptedServer) -> (Server, String, String) {
    let mut child = steward()
        .arg("--home")
        .arg(home)
        .args(["serve", "--port", "0", "--as", "ada"])
        .env("STEWARD_LLM_BASE_URL", &model.base_url)
        .env("STEWARD_LLM_MODEL", "m")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let server = Server(child);
    let (mut base, mut pair) = (None, None);
    while base.is_none() || pair.is_none() {
        let line = lines.next().expect("the server stopped before it listened").unwrap();
        if let Some(rest) = line.strip_prefix("listening on ") {
            base = rest.split_whitespace().next().map(str::to_owned);
        } else if let Some(url) = line.split_whitespace().find(|w| w.contains("/pair#")) {
            pair = Some(url.to_owned());
        }
    }
    // Keep reading (a full pipe would block the server).
    std::thread::spawn(move || for _ in lines {});
    (server, base.unwrap(), pair.unwrap())
}

#[test]
fn the_web_client_in_a_real_browser() {
    let Some((driver, chromium)) = browser() else { return };
    let dir = tempfile::tempdir().unwrap();
    let sink = SmtpSink::start(dir.path(), &SinkOptions::default());
    let (home, [deny, secure, left, outage]) = home(dir.path(), &sink);
    let model = model();
    let (server, base, pair) = serve(&home, &model);
    let shots = std::env::var_os("STEWARD_SCREENSHOTS");
    let out = Command::new("node")
        .arg(driver.join("flows.mjs"))
        .env("STEWARD_BASE", &base)
        .env("STEWARD_PAIR_URL", &pair)
        .env("STEWARD_CHROMIUM", &chromium)
        .env("STEWARD_DENY_APPROVAL", deny.to_string())
        .env("STEWARD_SECURE_APPROVAL", secure.to_string())
        .env("STEWARD_PIN", PIN)
        .env("STEWARD_OUTAGE_APPROVAL", outage.to_string())
        .envs(shots.map(|s| ("STEWARD_SCREENSHOTS", s)))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the browser flows failed:\n{stdout}\n{stderr}");
    let summary = stdout.lines().rev().find(|l| l.starts_with('{')).unwrap_or("");
    let seen: Value = serde_json::from_str(summary)
        .unwrap_or_else(|e| panic!("no summary from the flows ({e}):\n{stdout}\n{stderr}"));
    eprintln!("{seen}");
    let flows = seen["flows"].as_array().map_or(0, Vec::len);
    assert!(flows >= 10, "every flow ran: {seen}");
    let axe = seen["axe"].as_object().expect("axe results");
    assert!(axe.len() >= 10 && axe.values().all(|v| v == 0), "{seen}");
    drop(server);

    // Behind the page: exactly one mail left, the one the person approved in the chat.
    let sent = sink.deliveries();
    assert_eq!(sent.len(), 1, "{sent:?}");
    let raw = sent[0].to_string();
    assert!(raw.contains("anna@example.org") && !raw.contains("boss@example.org"), "{raw}");
    // The model was told the outcome after the approval, and asked nothing about the boss.
    let asked = model.requests();
    assert!(asked.iter().any(|r| {
        r.body["messages"].as_array().is_some_and(|m| m.iter().any(|m| m["role"] == "tool"))
    }));
    let steward = Steward::builder().home(&home).open().unwrap();
    let approvals = steward.approvals().unwrap();
    let status = |id| serde_json::to_value(approvals.get(id).unwrap().status).unwrap();
    let denied = approvals.get(deny).unwrap();
    assert_eq!(status(deny), "denied", "{denied:?}");
    assert_eq!(denied.note.as_deref(), Some("Not this one."));
    // The secure one: a wrong PIN changed nothing, the right one approved it, as the person.
    assert_eq!(status(secure), "approved");
    let events: Vec<String> = approvals.events(secure).unwrap().into_iter().map(|e| e.0).collect();
    assert!(events.contains(&"pin_failed".to_owned()), "{events:?}");
    assert_eq!(approvals.get(secure).unwrap().decided_by.as_deref(), Some("ada"));
    assert_eq!(status(left), "requested");
    assert_eq!(status(outage), "denied");
    // The proposal the person accepted is a note recall reads; the others (the one seeded here,
    // the demo story's three) still wait.
    let inbox = steward.memory_inbox().unwrap();
    assert_eq!(inbox.len(), 4, "{inbox:?}");
    assert!(inbox.iter().all(|p| !p.note.body.contains("Anna prefers calls")), "{inbox:?}");
    let hits = steward
        .memory_search(&serde_json::from_value(json!({"text": "Anna calls", "limit": 5})).unwrap())
        .unwrap();
    assert_eq!(hits.len(), 1, "{hits:?}");
}
