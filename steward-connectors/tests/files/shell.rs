//! Commands without a shell: the read-only allow-list runs real programs (ls, grep, wc, head,
//! git) on files under the roots; every classic escape is refused and nothing runs (a marker
//! file a successful escape would create stays absent); the gated path binds the program's hash.

use std::path::{Path, PathBuf};

use steward_core::{Steward, StewardError as _, shell};

fn v(a: &[&str]) -> Vec<String> {
    a.iter().map(|s| (*s).to_owned()).collect()
}

/// A home sharing `<dir>/share` (with a few files) and the marker an escape would create.
fn setup(dir: &Path, limits: Option<steward_core::Limits>) -> (Steward, PathBuf, PathBuf) {
    let share = dir.join("share");
    let home = dir.join("home");
    std::fs::create_dir_all(share.join("sub")).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(share.join("a.txt"), "the notice period is 30 days\nline two\n").unwrap();
    std::fs::write(share.join("b.txt"), "no notice here? yes, notice\n").unwrap();
    std::fs::write(share.join("server.pem"), "notice: PRIVATE KEY\n").unwrap();
    std::fs::write(share.join(".env"), "TOKEN=notice\n").unwrap();
    std::fs::write(dir.join("outside.txt"), "notice outside\n").unwrap();
    let share = share.canonicalize().unwrap();
    std::fs::write(home.join("config.toml"), format!("[files]\nroots = [{share:?}]\n")).unwrap();
    let mut b = steward_connectors::home::builder(Some(home));
    if let Some(l) = limits {
        b = b.limits(l);
    }
    (b.open().unwrap(), share.clone(), share.join("PWNED"))
}

fn run_ro(s: &Steward, argv: &[&str], cwd: Option<&str>) -> Result<shell::Ran, shell::ShellError> {
    let c = shell::check_read_only(s, &v(argv), cwd)?;
    let h = c.program_sha256.clone();
    shell::run(s, &c, &h)
}

#[test]
fn read_only_commands_run_on_files_in_the_roots_with_globs_expanded_here() {
    let dir = tempfile::tempdir().unwrap();
    let (s, share, _) = setup(dir.path(), None);
    let r = run_ro(&s, &["grep", "-n", "notice", "*.txt"], None).unwrap();
    assert_eq!(r.exit_code, Some(0), "{r:?}");
    assert!(r.stdout.contains("a.txt:1:the notice period"), "{}", r.stdout);
    assert!(r.stdout.contains("b.txt:1:"), "{}", r.stdout);
    // The glob left the key and the dotenv file out.
    assert!(!r.stdout.contains("PRIVATE") && !r.stdout.contains("TOKEN"), "{}", r.stdout);
    let r = run_ro(&s, &["wc", "-l", "a.txt"], None).unwrap();
    assert!(r.stdout.trim_start().starts_with('2'), "{}", r.stdout);
    let r = run_ro(&s, &["head", "-n", "1", "a.txt"], Some(share.to_str().unwrap())).unwrap();
    assert_eq!(r.stdout, "the notice period is 30 days\n");
    let r = run_ro(&s, &["ls", "-1"], None).unwrap();
    assert!(r.stdout.contains("a.txt") && r.stdout.contains("sub"), "{}", r.stdout);
}

#[test]
fn every_classic_escape_is_refused_and_nothing_runs() {
    let dir = tempfile::tempdir().unwrap();
    let (s, share, marker) = setup(dir.path(), None);
    let touch = format!("touch {}", marker.display());
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["ls", ";", "touch", "PWNED"], "SHELL_SYNTAX"),
        (vec!["ls", "$(touch PWNED)"], "SHELL_SYNTAX"),
        (vec!["ls", "`touch PWNED`"], "SHELL_SYNTAX"),
        (vec!["ls", "&&", "touch", "PWNED"], "SHELL_SYNTAX"),
        (vec!["grep", "x", "a.txt", ">", "PWNED"], "SHELL_SYNTAX"),
        (vec!["touch", "PWNED"], "SHELL_NOT_ALLOWED"),
        (vec!["sh", "-c", "touch PWNED"], "SHELL_NOT_ALLOWED"),
        (vec!["find", ".", "-exec", "touch", "PWNED", ";"], "SHELL_SYNTAX"),
        (vec!["find", ".", "-delete"], "SHELL_NOT_ALLOWED"),
        (vec!["git", "-c", &touch, "log"], "SHELL_NOT_ALLOWED"),
        (vec!["git", "log", "--output=PWNED"], "SHELL_NOT_ALLOWED"),
        (vec!["git", "diff", "--ext-diff"], "SHELL_NOT_ALLOWED"),
        (vec!["rg", "--pre", &touch, "x", "a.txt"], "SHELL_NOT_ALLOWED"),
        (vec!["grep", "-r", "notice", "."], "SHELL_NOT_ALLOWED"),
        (vec!["grep", "notice", "sub"], "SHELL_NOT_ALLOWED"),
        (vec!["tail", "-f", "a.txt"], "SHELL_NOT_ALLOWED"),
        (vec!["head", "/etc/passwd"], "PATH_OUTSIDE_ROOTS"),
        (vec!["head", "../outside.txt"], "PATH_OUTSIDE_ROOTS"),
        (vec!["head", ".env"], "PATH_SENSITIVE"),
        (vec!["grep", "KEY", "server.pem"], "PATH_SENSITIVE"),
        (vec!["grep", "notice"], "SHELL_BAD_COMMAND"),
    ];
    for (argv, code) in cases {
        let e = run_ro(&s, &argv, None).unwrap_err();
        assert_eq!(e.code(), code, "{argv:?}: {e}");
    }
    // A link inside the root to a file outside it.
    std::os::unix::fs::symlink(dir.path().join("outside.txt"), share.join("link.txt")).unwrap();
    assert_eq!(run_ro(&s, &["head", "link.txt"], None).unwrap_err().code(), "PATH_OUTSIDE_ROOTS");
    // A folder outside the roots.
    assert_eq!(run_ro(&s, &["ls"], Some("/etc")).unwrap_err().code(), "PATH_OUTSIDE_ROOTS");
    assert!(!marker.exists(), "an escape ran");
    assert!(share.join("a.txt").exists());
}

fn git(dir: &Path, args: &[&str]) {
    let ok = std::process::Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.org")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.org")
        .status()
        .unwrap()
        .success();
    assert!(ok, "git {args:?}");
}

#[test]
fn git_reads_a_repository_but_not_one_whose_config_would_run_a_program() {
    let dir = tempfile::tempdir().unwrap();
    let (s, share, marker) = setup(dir.path(), None);
    let repo = share.join("sub");
    std::fs::write(repo.join("plan.md"), "first\n").unwrap();
    git(&repo, &["init", "-q"]);
    git(&repo, &["add", "plan.md"]);
    git(&repo, &["commit", "-qm", "the first plan"]);
    let cwd = repo.to_str().unwrap();
    let r = run_ro(&s, &["git", "log", "--oneline"], Some(cwd)).unwrap();
    assert!(r.stdout.contains("the first plan"), "{r:?}");
    std::fs::write(repo.join("plan.md"), "second\n").unwrap();
    let r = run_ro(&s, &["git", "diff", "--stat"], Some(cwd)).unwrap();
    assert!(r.stdout.contains("plan.md"), "{r:?}");
    // A repository configured to run a program on read: refused, nothing runs.
    let mut config = std::fs::read_to_string(repo.join(".git/config")).unwrap();
    config.push_str(&format!("[core]\n\tpager = touch {}\n", marker.display()));
    std::fs::write(repo.join(".git/config"), config).unwrap();
    assert_eq!(run_ro(&s, &["git", "log"], Some(cwd)).unwrap_err().code(), "SHELL_NOT_ALLOWED");
    assert!(!marker.exists());
}

#[test]
fn git_and_grep_arguments_cannot_smuggle_a_flag_a_path_or_a_secret() {
    let dir = tempfile::tempdir().unwrap();
    let (s, share, marker) = setup(dir.path(), None);
    let repo = share.join("sub");
    std::fs::write(repo.join("plan.md"), "first\n").unwrap();
    std::fs::write(repo.join(".env"), "TOKEN=committed-secret\n").unwrap();
    git(&repo, &["init", "-q"]);
    git(&repo, &["add", "-f", "plan.md", ".env"]);
    git(&repo, &["commit", "-qm", "plan and env"]);
    std::fs::write(repo.join("plan.md"), "second\n").unwrap();
    let cwd = repo.to_str().unwrap();
    let out = marker.to_str().unwrap();
    let cases: Vec<Vec<String>> = vec![
        // A value git does not take lets the next argument through.
        vec!["git".into(), "diff".into(), "-U".into(), format!("--output={out}")],
        vec!["git".into(), "log".into(), "--pretty".into(), format!("--output={out}")],
        // Two paths, one outside the repository: git diff would read it (--no-index).
        vec!["git".into(), "diff".into(), "/etc/passwd".into(), "/dev/null".into()],
        vec!["git".into(), "diff".into(), "--".into(), "../../outside.txt".into()],
        // A committed secret, by revision:path or by pathspec.
        vec!["git".into(), "show".into(), "HEAD:.env".into()],
        vec!["git".into(), "log".into(), "-p".into(), "--".into(), ".env".into()],
        vec!["git".into(), "log".into(), "--format=%G?".into()],
        // With -e, grep's first positional is a file: a path outside must be guarded.
        vec!["grep".into(), "/etc/passwd".into(), "-e".into(), ".".into(), "a.txt".into()],
    ];
    for argv in cases {
        let a: Vec<&str> = argv.iter().map(String::as_str).collect();
        let e = run_ro(&s, &a, Some(cwd)).unwrap_err();
        assert!(
            ["SHELL_NOT_ALLOWED", "PATH_OUTSIDE_ROOTS", "PATH_SENSITIVE", "SHELL_BAD_COMMAND"]
                .contains(&e.code()),
            "{argv:?}: {e}"
        );
    }
    assert!(!marker.exists(), "a flag reached git");
    // The whole history, patches included, never shows the committed secret.
    let r = run_ro(&s, &["git", "log", "-p", "--stat"], Some(cwd)).unwrap();
    assert!(r.stdout.contains("plan.md") && !r.stdout.contains("committed-secret"), "{}", r.stdout);
    let r = run_ro(&s, &["git", "diff", "HEAD"], Some(cwd)).unwrap();
    assert!(r.stdout.contains("+second"), "{r:?}");
    let r = run_ro(&s, &["git", "show", "--stat", "HEAD"], Some(cwd)).unwrap();
    assert!(r.stdout.contains("plan and env") && !r.stdout.contains("committed-secret"));
}

#[test]
fn the_gated_path_binds_the_program_and_the_time_limit_stops_a_command() {
    let dir = tempfile::tempdir().unwrap();
    let mut limits = steward_core::Limits::default();
    limits.shell_timeout_secs = 1;
    let (s, share, marker) = setup(dir.path(), Some(limits));
    // A program the person approved, changed before it ran: refused, not run.
    let prog = dir.path().join("tool.sh");
    std::fs::write(&prog, "#!/bin/sh\necho approved\n").unwrap();
    std::fs::set_permissions(&prog, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let c = shell::check_any(&s, &v(&[prog.to_str().unwrap()]), None).unwrap();
    let approved = c.program_sha256.clone();
    assert_eq!(shell::run(&s, &c, &approved).unwrap().stdout, "approved\n");
    std::fs::write(&prog, format!("#!/bin/sh\ntouch {}\n", marker.display())).unwrap();
    let e = shell::run(&s, &c, &approved).unwrap_err();
    assert_eq!(e.code(), "SHELL_PROGRAM_CHANGED");
    assert!(!marker.exists());
    // Shell syntax is refused on the gated path too.
    assert_eq!(
        shell::check_any(&s, &v(&["ls", "|", "sh"]), None).unwrap_err().code(),
        "SHELL_SYNTAX"
    );
    // The time limit stops a command and what it started (its whole group).
    let c = shell::check_any(&s, &v(&["sh", "-c", "sleep 30 & sleep 30"]), None).unwrap();
    let h = c.program_sha256.clone();
    let r = shell::run(&s, &c, &h).unwrap();
    assert!(r.timed_out, "{r:?}");
    // The time limit stops a command that would not end.
    let c = shell::check_any(&s, &v(&["sleep", "30"]), Some(share.to_str().unwrap())).unwrap();
    let h = c.program_sha256.clone();
    let r = shell::run(&s, &c, &h).unwrap();
    assert!(r.timed_out && r.exit_code.is_none(), "{r:?}");
    // The policy: shell.run is automatic, shell.exec asks.
    let tools = s.tools();
    assert_eq!(format!("{:?}", tools.get("shell.run").unwrap().default_level), "Auto");
    assert_eq!(format!("{:?}", tools.get("shell.exec").unwrap().default_level), "Confirm");
}
