//! Steward as an MCP server, driven by a real client: the official Python SDK (`mcp` on PyPI,
//! installed by `scripts/test`) over stdio (`steward mcp`) and over streamable HTTP (`/mcp` on
//! `steward serve`), against a demo home whose SMTP goes to a loopback sink. A gated send is
//! pending until a person approves it with the `steward` command, then runs exactly once; a
//! denied one is an error; bad requests are protocol errors and run nothing.

use std::{
    io::{BufRead, BufReader, Read, Write},
    path::Path,
    process::{Command, Stdio},
};

use serde_json::Value;
use steward_connectors::testing::{SinkOptions, SmtpSink, python};

const TOKEN: &str = "mcp-test-token-0123456789abcdef0123456789";

fn steward() -> Command {
    Command::new(env!("CARGO_BIN_EXE_steward"))
}

/// A demo home (40 messages) whose mail goes to `sink`.
fn home(dir: &Path, sink: &SmtpSink) -> std::path::PathBuf {
    let home = dir.join("home");
    let out = steward()
        .arg("--home")
        .arg(&home)
        .args(["demo", "--messages", "40", "--json", "--no-serve"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    std::fs::write(
        home.join("config.toml"),
        format!(
            "[mail]\naccount = \"me\"\nfrom = \"ada@example.org\"\nsmtp_host = \"127.0.0.1\"\n\
             smtp_port = {}\nsmtp_security = \"plain\"\n[mcp]\nwait_secs = 60\n",
            sink.port
        ),
    )
    .unwrap();
    home
}

/// Runs the Python client in `mode` and returns what it saw.
fn client(mode: &str, home: &Path, env: &[(&str, String)]) -> Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp_client.py");
    let out = Command::new(python())
        .arg(&script)
        .arg(mode)
        .env("STEWARD_BIN", env!("CARGO_BIN_EXE_steward"))
        .env("STEWARD_HOME_DIR", home)
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "the MCP client failed (is `mcp` installed in the test venv? scripts/test does): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("one JSON object")
}

/// What every transport must show.
fn check(seen: &Value, sink: &SmtpSink, home: &Path) {
    assert_eq!(seen["server"], "steward");
    let tools = &seen["tools"];
    assert_eq!(tools["mail.search"]["readOnlyHint"], true, "{tools}");
    assert_eq!(tools["mail.send"]["readOnlyHint"], false);
    assert_eq!(tools["mail.send"]["destructiveHint"], true);
    assert_eq!(tools["mail.send"]["openWorldHint"], true);
    // A read runs at once; mail is fenced as data for the client's model too.
    assert_eq!(seen["search"]["is_error"], false, "{}", seen["search"]);
    assert_eq!(seen["search"]["structured"]["status"], "ran");
    assert!(
        seen["search"]["text"].as_str().unwrap().contains("<untrusted_data tool=\"mail.search\"")
    );
    // A send waits for a person; asking again while it waits makes no second request.
    let first = &seen["first"];
    assert_eq!(first["status"], "pending_approval", "{first}");
    let id = first["approval_id"].as_i64().unwrap();
    assert_eq!(seen["waiting"]["approval_id"], id, "the same request");
    // Approved: the same call runs it, once.
    assert_eq!(seen["second"]["is_error"], false, "{}", seen["second"]);
    assert_eq!(seen["second"]["structured"]["status"], "ran");
    assert_eq!(seen["second"]["structured"]["approval_id"], id);
    let third = &seen["third"]["structured"];
    assert_eq!(third["status"], "pending_approval", "a third call does not run it: {third}");
    assert_ne!(third["approval_id"], id);
    // A call that asked for progress waits for the person and answers the result.
    let waited = &seen["waited"];
    assert_eq!(waited["is_error"], false, "{waited}");
    assert_eq!(waited["structured"]["status"], "ran", "{waited}");
    let told = waited["progress"][0].as_str().unwrap_or_default();
    assert!(told.starts_with("waiting for the person's approval #"), "{waited}");
    assert_eq!(sink.deliveries().len(), 2, "one mail per approval: {:?}", sink.deliveries());
    // Denied: an error the client's model reads.
    assert_eq!(seen["denied"]["is_error"], true);
    assert!(seen["denied"]["text"].as_str().unwrap().contains("declined"), "{}", seen["denied"]);
    // Mail as resources a client can attach: the newest listed, both templates, a read fenced
    // as data; a URI of another shape is not found.
    let resources = seen["resources"].as_array().unwrap();
    assert!(!resources.is_empty() && resources.len() <= 12, "{resources:?}");
    assert!(resources[0]["uri"].as_str().unwrap().starts_with("steward://mail/message/"));
    assert!(resources[0]["name"].as_str().unwrap().starts_with('#'));
    assert_eq!(
        seen["templates"],
        serde_json::json!(["steward://mail/message/{id}", "steward://mail/thread/{id}"])
    );
    assert!(seen["read"].as_str().unwrap().contains("<untrusted_data tool=\"mail.read\""));
    assert_eq!(seen["bad_resource"]["code"], -32002, "{}", seen["bad_resource"]);
    // Bad requests are protocol errors (invalid params); nothing ran.
    for bad in ["unknown_tool", "bad_input", "oversized"] {
        assert_eq!(seen[bad]["code"], -32602, "{bad}: {}", seen[bad]);
    }
    // The client is an agent of its own, by the name it gave, and cannot decide.
    let card = steward()
        .arg("--home")
        .arg(home)
        .args(["approvals", "show", &id.to_string(), "--json"])
        .output()
        .unwrap();
    let card: Value = serde_json::from_slice(&card.stdout).unwrap();
    let requested_by = card["approval"]["requested_by"].as_str().unwrap_or_default().to_owned();
    assert!(requested_by.starts_with("agent:mcp:pytest-mcp"), "{card}");
    // Its calls are counted in usage under its identity.
    let usage = steward()
        .arg("--home")
        .arg(home)
        .args(["usage", "--since", "all", "--json"])
        .output()
        .unwrap();
    let usage: Value = serde_json::from_slice(&usage.stdout).unwrap();
    let me = usage["by_agent"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["agent"].as_str().is_some_and(|n| n.starts_with("agent:mcp:pytest-mcp")))
        .cloned()
        .unwrap_or_else(|| panic!("{usage}"));
    // Ran: the search, the approved send, the waited-for send, the resource listing (a
    // search) and the resource read; pending: five answers; failed: the unknown tool and the
    // bad input (the oversized call never reached the toolbox).
    let counts = ["calls", "ran", "pending", "declined", "denied", "failed"].map(|k| me[k].clone());
    assert_eq!(counts, [13, 5, 5, 1, 0, 2].map(Value::from), "{me}");
}

#[test]
fn an_mcp_client_over_stdio_reads_at_once_and_sends_only_after_a_person_approves() {
    let dir = tempfile::tempdir().unwrap();
    let sink = SmtpSink::start(dir.path(), &SinkOptions::default());
    let home = home(dir.path(), &sink);
    let seen = client("stdio", &home, &[]);
    check(&seen, &sink, &home);
}

/// One raw HTTP/1.1 request to the server; returns the status code (from the status line).
fn status_of(port: u16, request: &str) -> u16 {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(30))).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut head = [0u8; 64];
    let n = s.read(&mut head).unwrap_or(0);
    String::from_utf8_lossy(&head[..n])
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

/// `steward serve`, stopped when the test ends (also when it fails).
struct Server(std::process::Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn an_mcp_client_over_http_goes_through_the_servers_token_and_host_checks() {
    let dir = tempfile::tempdir().unwrap();
    let sink = SmtpSink::start(dir.path(), &SinkOptions::default());
    let home = home(dir.path(), &sink);
    let mut server = Server(
        steward()
            .arg("--home")
            .arg(&home)
            .args(["serve", "--port", "0"])
            .env("STEWARD_AUTH_TOKEN", TOKEN)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let mut line = String::new();
    BufReader::new(server.0.stdout.take().unwrap()).read_line(&mut line).unwrap();
    // "listening on http://127.0.0.1:PORT  (send …)"
    let port: u16 = line
        .split_whitespace()
        .nth(2)
        .and_then(|a| a.rsplit(':').next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no port in {line:?}"));
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#;
    let post = |headers: &str| {
        format!(
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{headers}Content-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
    };
    assert_eq!(status_of(port, &post("")), 401, "no token");
    let authorized = post(&format!("Authorization: Bearer {TOKEN}\r\n"));
    // As on every route: a foreign Host may be DNS rebinding (421), a foreign Origin is a
    // page of another site (403).
    let foreign = authorized.replace(&format!("Host: 127.0.0.1:{port}"), "Host: evil.example");
    assert_eq!(status_of(port, &foreign), 421, "a foreign Host");
    let page = post(&format!("Authorization: Bearer {TOKEN}\r\nOrigin: https://evil.example\r\n"));
    assert_eq!(status_of(port, &page), 403, "a foreign Origin");
    let seen = client(
        "http",
        &home,
        &[("MCP_URL", format!("http://127.0.0.1:{port}/mcp")), ("MCP_TOKEN", TOKEN.to_owned())],
    );
    drop(server);
    check(&seen, &sink, &home);
}

/// The MCP Inspector's CLI (npm `@modelcontextprotocol/inspector`, pinned in
/// `tests/support/inspector`, installed there by `scripts/test`) against `steward mcp`.
fn inspector(home: &Path, args: &[&str]) -> (i32, Value) {
    let cli = steward_connectors::testing::workspace_root().join(
        "tests/support/inspector/node_modules/@modelcontextprotocol/inspector/clients/cli/build/index.js",
    );
    let out = Command::new("node")
        .arg(&cli)
        .arg(env!("CARGO_BIN_EXE_steward"))
        .arg("mcp")
        .arg("-e")
        .arg(format!("STEWARD_HOME={}", home.display()))
        .args(args)
        .args(["--format", "json", "-q"])
        .output()
        .unwrap();
    let code = out.status.code().unwrap_or(-1);
    let text = if out.stdout.is_empty() { &out.stderr } else { &out.stdout };
    let seen = serde_json::from_slice(text).unwrap_or_else(|_| {
        Value::String(format!(
            "{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    });
    (code, seen)
}

#[test]
fn the_mcp_inspector_cli_lists_and_calls_steward_s_tools() {
    let cli = steward_connectors::testing::workspace_root()
        .join("tests/support/inspector/node_modules/@modelcontextprotocol/inspector");
    if !cli.exists() {
        assert!(
            std::env::var_os("STEWARD_REQUIRE_INSPECTOR").is_none(),
            "the MCP Inspector is required here and missing (scripts/test installs it)"
        );
        eprintln!("skipped: the MCP Inspector is not installed (scripts/test installs it)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let sink = SmtpSink::start(dir.path(), &SinkOptions::default());
    let home = home(dir.path(), &sink);
    let (code, listed) = inspector(&home, &["--method", "tools/list"]);
    assert_eq!(code, 0, "{listed}");
    let names: Vec<&str> = listed["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(names.contains(&"mail.search") && names.contains(&"mail.send"), "{names:?}");
    let search = ["--method", "tools/call", "--tool-name", "mail.search"];
    let (code, found) = inspector(
        &home,
        &[&search[..], &["--tool-args-json", r#"{"query":"","limit":2}"#]].concat(),
    );
    assert_eq!(code, 0, "{found}");
    assert_eq!(found["result"]["structuredContent"]["status"], "ran", "{found}");
    // A gated call is pending for the Inspector too: nothing is sent.
    let send = ["--method", "tools/call", "--tool-name", "mail.send", "--tool-args-json"];
    let mail = r#"{"to":["bob@example.org"],"subject":"From the Inspector","body":"Hi."}"#;
    let (code, pending) = inspector(&home, &[&send[..], &[mail]].concat());
    assert_eq!(code, 0, "{pending}");
    assert_eq!(pending["result"]["structuredContent"]["status"], "pending_approval", "{pending}");
    assert_eq!(sink.deliveries().len(), 0);
    // An unknown tool: the Inspector's "tool not found" exit (5); nothing ran.
    let unknown = ["--method", "tools/call", "--tool-name", "mail.nope"];
    let (code, seen) = inspector(&home, &unknown);
    assert_eq!(code, 5, "{seen}");
}
