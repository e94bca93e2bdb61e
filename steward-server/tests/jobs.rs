//! The background runner through `steward serve` only: nobody runs a command, yet scheduled
//! mail goes out once and is confirmed from the configured Maildir, and a watch's granted
//! `mail.send` runs once, also across a killed and restarted server.

use std::{
    io::{BufRead, BufReader},
    path::Path,
    process::{Child, Command, Stdio},
};

use steward_connectors::testing::{SinkOptions, SmtpSink};

fn steward(home: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_steward"));
    c.arg("--home").arg(home);
    c
}

fn json(out: &std::process::Output) -> serde_json::Value {
    assert!(out.status.success(), "stderr: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("one JSON value on stdout")
}

/// `steward serve` on a free loopback port, started once it prints where it listens.
fn serve(home: &Path) -> Child {
    let mut child = steward(home)
        .args(["serve", "--port", "0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    assert!(line.starts_with("listening on"), "{line}");
    child
}

/// Checks `done` every 100 ms, at most `checks` times; true once it holds.
fn eventually(checks: usize, mut done: impl FnMut() -> bool) -> bool {
    for _ in 0..checks {
        if done() {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    done()
}

fn runs(home: &Path, job: &str) -> i64 {
    let status = json(&steward(home).args(["jobs", "status", "--json"]).output().unwrap());
    status.as_array().unwrap().iter().find(|j| j["name"] == job).unwrap()["runs"].as_i64().unwrap()
}

#[test]
fn the_server_sends_scheduled_mail_once_confirms_it_and_runs_a_grant_once_across_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let md = dir.path().join("Mail");
    for sub in ["cur", "new", "tmp"] {
        std::fs::create_dir_all(md.join(sub)).unwrap();
    }
    let sink = SmtpSink::start(
        dir.path(),
        &SinkOptions { sent_maildir: Some(md.join(".Sent")), ..SinkOptions::default() },
    );
    std::fs::write(
        home.join("config.toml"),
        format!(
            "[mail]\naccount = \"me\"\nfrom = \"ada@example.org\"\nsmtp_host = \"127.0.0.1\"\n\
             smtp_port = {}\nsmtp_security = \"plain\"\n\n\
             [[mail.sources]]\nkind = \"maildir\"\npath = \"{}\"\naccount = \"me\"\n\n\
             [jobs.send-due]\ninterval_secs = 1\n[jobs.mail-reconcile]\ninterval_secs = 1\n\
             [jobs.confirm-writes]\ninterval_secs = 1\n[jobs.watch-poll]\ninterval_secs = 1\n\
             [jobs.watch-deliver]\ninterval_secs = 1\n",
            sink.port,
            md.display()
        ),
    )
    .unwrap();
    let run = |args: &[&str]| steward(&home).args(args).output().unwrap();

    // A mail scheduled two seconds ahead, journaled now; nothing is sent by the command.
    let body = dir.path().join("body.txt");
    std::fs::write(&body, "See you at nine.\n").unwrap();
    let at = steward_core::time::CivilTime::from_unix(steward_core::time::now_secs() + 2);
    let scheduled = json(&run(&[
        "mail",
        "send",
        "--to",
        "bob@example.org",
        "--subject",
        "Nine",
        "--body-file",
        body.to_str().unwrap(),
        "--as",
        "Ada",
        "--yes",
        "--at",
        &at.rfc3339(),
        "--json",
    ]));
    assert_eq!(scheduled["operation"]["state"], "scheduled", "{scheduled}");

    // A watch whose rule grants one mail to my sister when its time comes (eight seconds
    // ahead: the watch must be created and approved before it, by three commands, on a loaded
    // machine too — a time already past when the watch starts is its baseline, not an event;
    // CI once took longer than three seconds here).
    let soon = steward_core::time::CivilTime::from_unix(steward_core::time::now_secs() + 8);
    let def = dir.path().join("watch.json");
    let granted = serde_json::json!({"source": "time", "resource_ref": soon.rfc3339(),
        "instruction": "mail my sister when it is time", "rules": [{"id": "m",
        "event": "time.reached", "once": true, "grants": [{"tool": "mail.send", "constraints": {
            "fields": {"to": {"kind": "exact", "value": ["sister@example.com"]},
            "subject": {"kind": "exact", "value": "On my way"},
            "body": {"kind": "template", "template": "Leaving now ({{event.at}})."}}}}]}]});
    std::fs::write(&def, granted.to_string()).unwrap();
    let proposal = json(&run(&["watch", "create", def.to_str().unwrap(), "--json"]));
    assert_eq!(proposal["outcome"], "needs_approval", "{proposal}");
    let approval = proposal["id"].as_i64().unwrap().to_string();
    assert!(run(&["approvals", "approve", &approval, "--as", "Ada"]).status.success());
    assert!(sink.deliveries().is_empty(), "nothing is sent before the server runs");

    let mut server = serve(&home);
    let confirmed = |n: usize| {
        let ops = json(&run(&["ops", "list", "--state", "confirmed", "--json"]));
        ops.as_array().unwrap().len() == n
    };
    // Both mails go out, each once, and both are confirmed from their Sent copies.
    assert!(eventually(600, || confirmed(2)), "not confirmed: {:?}", sink.deliveries());
    let delivered = sink.deliveries();
    assert_eq!(delivered.len(), 2, "{delivered:?}");
    let to: Vec<_> =
        delivered.iter().map(|d| d["rcpt_tos"][0].as_str().unwrap().to_owned()).collect();
    assert!(
        to.contains(&"bob@example.org".to_owned()) && to.contains(&"sister@example.com".to_owned())
    );
    // The watch event was delivered into the feed with its text, once.
    let events = json(&run(&["watch", "events", "--json"]));
    let ev = &events.as_array().unwrap()[0];
    assert_eq!(ev["status"], "delivered", "{events}");
    assert_eq!(ev["notification"], ev["event"]["fallback_text"], "{events}");
    assert_eq!(events.as_array().unwrap().len(), 1, "{events}");

    // Killed without warning, then started again: more cycles of every job, nothing again.
    server.kill().unwrap();
    server.wait().unwrap();
    let before = runs(&home, "send-due") + runs(&home, "watch-deliver");
    let mut server = serve(&home);
    assert!(
        eventually(600, || runs(&home, "send-due") + runs(&home, "watch-deliver") >= before + 6)
    );
    assert_eq!(sink.deliveries().len(), 2, "nothing sent twice: {:?}", sink.deliveries());
    let ops = json(&run(&["ops", "list", "--json"]));
    assert_eq!(ops.as_array().unwrap().len(), 2, "{ops}");
    // Stopped politely: every job recorded, none left running.
    let _ = Command::new("kill").arg("-TERM").arg(server.id().to_string()).status();
    assert!(server.wait().unwrap().success());
    let status = json(&run(&["jobs", "status", "--json"]));
    for j in status.as_array().unwrap() {
        assert_eq!(j["running"], false, "{j}");
        if j["unavailable"].is_null() && j["name"] != "mail-embed" {
            assert!(j["runs"].as_i64().unwrap() >= 1, "{j}");
        }
    }
}

/// Shifts every epoch-millisecond value of a recorded run by `delta` ms.
fn shift_ms(v: &mut serde_json::Value, delta: i64) {
    use serde_json::Value;
    match v {
        Value::Number(n) => {
            if let Some(x) =
                n.as_i64().filter(|x| (1_600_000_000_000..2_000_000_000_000).contains(x))
            {
                *v = serde_json::json!(x + delta);
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|x| shift_ms(x, delta)),
        Value::Object(m) => m.values_mut().for_each(|x| shift_ms(x, delta)),
        _ => {}
    }
}

#[test]
fn the_server_notices_a_platform_change_and_delivers_it_once() {
    use std::sync::{Arc, Mutex};

    use steward_connectors::{
        testing::models::{Reply, ScriptedServer},
        trains::TrainRef,
    };
    // REG 136 Como Lago → Milano Cadorna, recorded before departure, moved to leave in an hour.
    let Some(path) = steward_connectors::testing::corpus(
        "viaggiatreno/monga-viaggiatreno_ha/1767394800000.json",
    ) else {
        return;
    };
    let mut run: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let now = steward_core::time::now_secs();
    let departs = run["fermate"][0]["partenza_teorica"].as_i64().unwrap();
    shift_ms(&mut run, (now + 3_600) * 1_000 - departs);
    run["fermate"][0]["binarioEffettivoPartenzaDescrizione"] = serde_json::Value::Null;
    let stops = run["fermate"].as_array().unwrap().clone();
    let (from, to) =
        (stops[0]["id"].as_str().unwrap(), stops[stops.len() - 1]["id"].as_str().unwrap());
    let day = run["dataPartenzaTreno"].as_i64().unwrap();
    let wanted = format!("/v1/andamentoTreno/{from}/136/{day}");
    let served = Arc::new(Mutex::new(run.clone()));
    let server = {
        let (served, wanted) = (Arc::clone(&served), wanted.clone());
        ScriptedServer::start(move |req, _| {
            if req.path == wanted {
                Reply::Raw(200, Vec::new(), served.lock().unwrap().to_string().into_bytes())
            } else {
                Reply::Raw(404, Vec::new(), Vec::new())
            }
        })
    };
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(
        home.join("config.toml"),
        "[jobs.watch-poll]\ninterval_secs = 1\n[jobs.watch-deliver]\ninterval_secs = 1\n",
    )
    .unwrap();
    let run_cli = |args: &[&str]| {
        steward(&home).args(args).env("VIAGGIATRENO_BASE_URL", &server.base_url).output().unwrap()
    };
    let train_ref = TrainRef {
        v: 1,
        number: 136,
        origin_id: from.to_owned(),
        day_ms: day,
        from_id: from.to_owned(),
        to_id: to.to_owned(),
    }
    .encode();
    let def = dir.path().join("watch.json");
    std::fs::write(
        &def,
        serde_json::json!({"source": "train", "resource_ref": train_ref,
            "instruction": "tell me the platform",
            "rules": [{"id": "platform", "event": "train.platform_announced"}]})
        .to_string(),
    )
    .unwrap();
    let w = json(&run_cli(&["watch", "create", def.to_str().unwrap(), "--json"]));
    assert_eq!(w["status"], "active", "{w}");

    let mut served_cmd = steward(&home);
    served_cmd.env("VIAGGIATRENO_BASE_URL", &server.base_url);
    let mut server_process = {
        let mut child = served_cmd
            .args(["serve", "--port", "0"])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        assert!(line.starts_with("listening on"), "{line}");
        Serving(child)
    };
    let asked = || server.requests().iter().filter(|r| r.path == wanted).count();
    // The server polls by itself; nothing changed yet, so nothing is queued.
    let seen = asked();
    assert!(eventually(300, || asked() >= seen + 2), "the server did not poll");
    assert_eq!(json(&run_cli(&["watch", "events", "--json"])), serde_json::json!([]));
    // The platform is announced (the recording has none, programmed or effective, before).
    served.lock().unwrap()["fermate"][0]["binarioEffettivoPartenzaDescrizione"] = "2".into();
    let delivered = || {
        let events = json(&run_cli(&["watch", "events", "--json"]));
        events.as_array().unwrap().iter().filter(|e| e["status"] == "delivered").count()
    };
    assert!(eventually(300, || delivered() == 1), "no delivered notification");
    // More polls of the same state: still one event, delivered once.
    let seen = asked();
    assert!(eventually(300, || asked() >= seen + 3));
    let events = json(&run_cli(&["watch", "events", "--json"]));
    let events = events.as_array().unwrap();
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["event"]["type"], "train.platform_announced", "{events:?}");
    assert!(events[0]["notification"].as_str().unwrap().contains('2'), "{events:?}");
    let _ = Command::new("kill").arg("-TERM").arg(server_process.0.id().to_string()).status();
    assert!(server_process.0.wait().unwrap().success());
}

/// A server that is killed when the test ends, also when an assertion fails (a server left
/// running would hold the test's output pipes open).
struct Serving(Child);

impl Drop for Serving {
    fn drop(&mut self) {
        if self.0.try_wait().is_ok_and(|s| s.is_none()) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}
