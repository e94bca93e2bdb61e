//! `files.save_attachment` over a real mirror: nothing is written before a person approves,
//! never after a denial, exactly the approved bytes into the approved folder; the collision
//! rules (a free name is written, the same bytes are never written twice, other bytes under
//! the name get a numbered name, nothing is overwritten, a link at the name is never
//! followed); a stranger's file name cleaned and a model's bad name refused; a folder outside
//! the shared ones refused; bytes that are not the approved ones refused with nothing left
//! behind.

use std::{
    path::{Path, PathBuf},
    sync::Arc,
};

use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};
use steward_core::{
    Steward, StewardError as _, ToolCall,
    approval::{DecisionInput, DecisionKind},
    files::{SaveOutcome, SavePlan},
    policy::DecisionContext,
    tools::{SourceRef, ToolError, ToolOutcome, Toolbox},
};

use super::fixtures::{message_rowid, mirror_maildir, write};

/// `%PDF-1.4` and a few bytes, as the mail carries them in base64.
const PDF_B64: &str = "JVBERi0xLjQKJcfsj6IKMSAwIG9iago8PD4+CmVuZG9iagp0cmFpbGVyCjw8Pj4KJSVFT0YK";

fn mail() -> Vec<u8> {
    format!(
        concat!(
            "From: Carla <carla@example.org>\nTo: Ada <ada@example.org>\n",
            "Subject: Invoice and notes\nDate: Tue, 7 Jan 2025 09:00:00 +0000\n",
            "Message-ID: <save.tools@example.org>\nMIME-Version: 1.0\n",
            "Content-Type: multipart/mixed; boundary=\"b1\"\n\n",
            "--b1\nContent-Type: text/plain; charset=utf-8\n\nAttached.\n",
            "--b1\nContent-Type: text/plain; charset=utf-8\n",
            "Content-Disposition: attachment; filename=\"minutes.txt\"\n\n",
            "Minutes: the budget is approved.\n",
            "--b1\nContent-Type: application/pdf\nContent-Transfer-Encoding: base64\n",
            "Content-Disposition: attachment; filename=\"invoice.pdf\"\n\n{}\n",
            "--b1\nContent-Type: application/x-sh\n",
            "Content-Disposition: attachment; filename=\"../../.config/evil\u{202E}fdp.sh\"\n\n",
            "rm -rf ~\n",
            "--b1\nContent-Type: text/plain\n",
            "Content-Disposition: attachment; filename=\"../.ssh/authorized_keys\"\n\n",
            "ssh-ed25519 AAAA attacker\n",
            "--b1--\n"
        ),
        PDF_B64
    )
    .into_bytes()
}

struct Rig {
    _dir: tempfile::TempDir,
    steward: Arc<Steward>,
    root: PathBuf,
    outside: PathBuf,
    id: i64,
}

fn rig() -> Rig {
    let dir = tempfile::tempdir().unwrap();
    let md = dir.path().join("Maildir");
    write(&md.join("cur/save:2,S"), &mail(), 100);
    let root = dir.path().join("Downloads");
    let outside = dir.path().join("elsewhere");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    let root = root.canonicalize().unwrap();
    let s = Steward::builder()
        .home(dir.path().join("home"))
        .file_roots(vec![root.clone()])
        .open()
        .unwrap();
    mirror_maildir(&s, &md);
    let id = message_rowid(dir.path(), "save.tools@example.org");
    Rig { steward: Arc::new(s), root, outside: outside.canonicalize().unwrap(), _dir: dir, id }
}

impl Rig {
    /// The position of the attachment the mail names `name` (as `mail.read` lists it).
    fn position(&self, name: &str) -> i64 {
        let tb = Toolbox::new(Arc::clone(&self.steward));
        let read = match call(&tb, "mail.read", json!({"message_id": self.id})) {
            Ok(ToolOutcome::Ran { result, .. }) => *result,
            other => panic!("mail.read: {other:?}"),
        };
        read.sources
            .iter()
            .find_map(|s| match s {
                SourceRef::Attachment { position, name: Some(n), .. } if n == name => {
                    Some(*position)
                }
                _ => None,
            })
            .unwrap_or_else(|| panic!("no attachment {name} in {:?}", read.sources))
    }

    /// Every file name in the shared folder, sorted.
    fn files(&self) -> Vec<String> {
        names(&self.root)
    }
}

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

fn call(tb: &Toolbox, tool: &str, input: Value) -> Result<ToolOutcome, ToolError> {
    tb.call(
        &ToolCall { actor: "agent:test", chat: Some("chat-1"), tool, input: &input },
        &DecisionContext::default(),
    )
}

/// Asks to save, approves (with `edit` when given) as the person, runs the approval.
fn save_approved(r: &Rig, tb: &Toolbox, input: Value, edit: Option<Value>) -> Value {
    let Ok(ToolOutcome::AwaitingApproval { approval }) =
        call(tb, "files.save_attachment", input.clone())
    else {
        panic!("files.save_attachment must wait for a person: {input}");
    };
    let me = r.steward.human("Ada").unwrap();
    let decision = DecisionInput { edit, ..DecisionInput::default() };
    r.steward.decide_approval(approval.id, DecisionKind::Approve, &decision, &me).unwrap();
    tb.run_approved(approval.id, "agent:test").unwrap().data
}

fn sha(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

fn pdf_bytes() -> Vec<u8> {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.decode(PDF_B64).unwrap()
}

#[test]
fn an_attachment_is_saved_only_once_approved_never_over_a_file_and_never_twice() {
    let r = rig();
    let tb = Toolbox::new(Arc::clone(&r.steward));
    let pdf = r.position("invoice.pdf");
    let input = json!({"message_id": r.id, "position": pdf});

    // The card names the folder, the name, the size and the hash; nothing is written yet.
    let Ok(ToolOutcome::AwaitingApproval { approval }) =
        call(&tb, "files.save_attachment", input.clone())
    else {
        panic!("files.save_attachment must wait for a person");
    };
    let want = pdf_bytes();
    assert_eq!(approval.normalized_input["folder"], json!(r.root.to_string_lossy()));
    assert_eq!(approval.normalized_input["name"], "invoice.pdf");
    assert_eq!(approval.normalized_input["sha256"], json!(sha(&want)));
    assert_eq!(approval.normalized_input["size"], json!(want.len()));
    assert!(approval.summary.contains("invoice.pdf"), "{}", approval.summary);
    assert_eq!(
        tb.run_approved(approval.id, "agent:test").unwrap_err().code(),
        "APPROVAL_NOT_APPROVED"
    );
    assert!(r.files().is_empty(), "{:?}", r.files());

    // A denied request writes nothing, ever.
    let me = r.steward.human("Ada").unwrap();
    r.steward
        .decide_approval(approval.id, DecisionKind::Deny, &DecisionInput::default(), &me)
        .unwrap();
    assert_eq!(
        tb.run_approved(approval.id, "agent:test").unwrap_err().code(),
        "APPROVAL_NOT_APPROVED"
    );
    assert!(r.files().is_empty(), "{:?}", r.files());

    // Approved: exactly the mail's bytes, under the name, not executable.
    let saved = save_approved(&r, &tb, input.clone(), None);
    assert_eq!(saved["outcome"], "written", "{saved}");
    assert_eq!(saved["renamed"], false);
    let path = r.root.join("invoice.pdf");
    assert_eq!(std::fs::read(&path).unwrap(), want);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o111, 0, "an attachment is never made executable: {mode:o}");
    }
    // Saved again (another approval): the same bytes are there, nothing is written.
    let again = save_approved(&r, &tb, input.clone(), None);
    assert_eq!(again["outcome"], "already_there", "{again}");
    assert_eq!(r.files(), ["invoice.pdf"]);

    // Other bytes under the name are never overwritten: the next free numbered name.
    let minutes = r.position("minutes.txt");
    std::fs::write(r.root.join("minutes.txt"), b"my own minutes").unwrap();
    std::fs::write(r.root.join("minutes (2).txt"), b"older minutes").unwrap();
    let m = save_approved(&r, &tb, json!({"message_id": r.id, "position": minutes}), None);
    assert_eq!((m["outcome"].as_str(), m["renamed"].as_bool()), (Some("written"), Some(true)));
    assert_eq!(std::fs::read(r.root.join("minutes.txt")).unwrap(), b"my own minutes");
    assert_eq!(std::fs::read(r.root.join("minutes (2).txt")).unwrap(), b"older minutes");
    let third = std::fs::read_to_string(r.root.join("minutes (3).txt")).unwrap();
    assert!(third.contains("the budget is approved"), "{third}");
    // ...and saving it once more finds its numbered copy instead of making a fourth.
    let m2 = save_approved(&r, &tb, json!({"message_id": r.id, "position": minutes}), None);
    assert_eq!(m2["outcome"], "already_there", "{m2}");
    assert_eq!(m2["path"], json!(r.root.join("minutes (3).txt").to_string_lossy()));

    // A link at the name is taken, never followed: what it points to is untouched.
    #[cfg(unix)]
    {
        let target = r.outside.join("victim.pdf");
        std::fs::write(&target, b"victim").unwrap();
        std::fs::remove_file(&path).unwrap();
        std::os::unix::fs::symlink(&target, &path).unwrap();
        let s = save_approved(&r, &tb, input.clone(), None);
        assert_eq!(s["path"], json!(r.root.join("invoice (2).pdf").to_string_lossy()), "{s}");
        assert_eq!(std::fs::read(&target).unwrap(), b"victim");
    }

    // The person edits the name before approving: the edit is checked and saved as edited.
    let e = save_approved(
        &r,
        &tb,
        input,
        Some(json!({"message_id": r.id, "position": pdf, "name": "2026-01 invoice.pdf"})),
    );
    assert_eq!(e["path"], json!(r.root.join("2026-01 invoice.pdf").to_string_lossy()), "{e}");
    assert_eq!(std::fs::read(r.root.join("2026-01 invoice.pdf")).unwrap(), want);
    // No temporary file is left anywhere.
    assert!(r.files().iter().all(|n| !n.ends_with(".part")), "{:?}", r.files());
}

#[test]
fn names_and_folders_from_strangers_or_the_model_are_cleaned_or_refused_before_any_write() {
    let r = rig();
    let tb = Toolbox::new(Arc::clone(&r.steward));
    let s = &r.steward;
    let script = r.position("../../.config/evil\u{202E}fdp.sh");
    let keys = r.position("../.ssh/authorized_keys");

    // A stranger's name loses its path, its hidden dot and the reordering character.
    let plan = s.plan_attachment_save(r.id, script, None, None).unwrap();
    assert_eq!((plan.folder.as_path(), plan.name.as_str()), (r.root.as_path(), "evilfdp.sh"));
    // A name that would plant a key is refused outright.
    let e = s.plan_attachment_save(r.id, keys, None, None).unwrap_err();
    assert_eq!(e.code(), "FILES_SAVE_BAD_NAME", "{e}");

    // The model's own name must be a plain name: refused, not changed behind its back.
    for bad in ["../x.pdf", ".env", "a/b.pdf", "server.pem", "x\u{202E}.pdf", ""] {
        let e = s.plan_attachment_save(r.id, script, None, Some(bad)).unwrap_err();
        assert_eq!(e.code(), "FILES_SAVE_BAD_NAME", "{bad:?}: {e}");
        let refused = call(
            &tb,
            "files.save_attachment",
            json!({
                "message_id": r.id, "position": script, "name": bad
            }),
        );
        assert!(matches!(refused, Err(ToolError::InvalidInput { .. })), "{bad:?}: {refused:?}");
    }
    // A folder outside the shared ones, directly or through a link, is refused.
    let e = s.plan_attachment_save(r.id, script, Some(&r.outside), None).unwrap_err();
    assert_eq!(e.code(), "PATH_OUTSIDE_ROOTS", "{e}");
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink(&r.outside, r.root.join("out")).unwrap();
        let e = s.plan_attachment_save(r.id, script, Some(Path::new("out")), None).unwrap_err();
        assert_eq!(e.code(), "PATH_OUTSIDE_ROOTS", "{e}");
    }
    // An attachment the message does not have.
    let e = s.plan_attachment_save(r.id, 99, None, None).unwrap_err();
    assert_eq!(e.code(), "ATTACHMENT_NOT_FOUND", "{e}");

    // Bytes that are not the approved ones are refused, and nothing is left behind.
    let mut wrong = plan.clone();
    wrong.sha256 = "0".repeat(64);
    assert_eq!(s.save_attachment(&wrong).unwrap_err().code(), "FILES_SAVE_CHANGED");
    let elsewhere = SavePlan { folder: r.outside.clone(), ..plan.clone() };
    let e = s.save_attachment(&elsewhere).unwrap_err();
    assert_eq!(e.code(), "PATH_OUTSIDE_ROOTS", "{e}");
    let names_now = r.files();
    assert!(
        names_now.iter().all(|n| n == "out"),
        "nothing written by a refused save: {names_now:?}"
    );
    assert!(names(&r.outside).is_empty());

    // The cleaned name saves, as data: the script is not run, not executable.
    let done = s.save_attachment(&plan).unwrap();
    assert_eq!(done.outcome, SaveOutcome::Written);
    let script_text = std::fs::read_to_string(r.root.join("evilfdp.sh")).unwrap();
    assert!(script_text.starts_with("rm -rf ~"), "{script_text:?}");
    // The default level asks the person.
    let level = s.tools().get("files.save_attachment").unwrap().default_level;
    assert_eq!(format!("{level:?}"), "Confirm");
}
