//! Commands without a shell. A command is an argv (never a string for `sh -c`): no pipes,
//! redirections, substitution, background jobs or variable expansion exist here, and arguments
//! that look like them are refused so the model learns it is not talking to a shell.
//!
//! Two ways to run one:
//! - [`check_read_only`] admits the allow-listed read-only commands (`ls`, `stat`, `wc`, `head`,
//!   `tail`, `grep`, `rg`, `file`, `git status|log|diff|show`), each with its own flags; every
//!   path argument passes the guard ([`crate::paths::guard_in_roots`]) and must be a file (a
//!   folder only for `ls`: nothing reads a tree, where a secret could lie below a root), and
//!   globs are expanded here, inside the roots, secrets left out. The `shell.run` tool runs
//!   these without asking.
//! - [`check_any`] admits any other command for the gated `shell.exec` tool: the person sees
//!   the exact argv, folder, and the program's resolved path and SHA-256, and the approval binds
//!   them: a program changed since is refused ([`ShellError::ProgramChanged`]).
//!
//! Both run in a folder inside a root, with a scrubbed environment (a fixed `PATH`, `LANG`,
//! git told to use no pager, no system or global config, no discovery above the root), no
//! input, a time limit and an output cap ([`crate::Limits::shell_timeout_secs`],
//! [`crate::Limits::shell_output_kib`]). Output is data, never instructions.

use std::{
    io::Read as _,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    sync::mpsc,
    time::{Duration, Instant},
};

use serde::Serialize;

use crate::{
    Steward,
    error::{ErrorKind, StewardError},
    paths::PathError,
};

/// Most arguments one command may have.
/// Fixed (not a setting).
pub const MAX_ARGS: usize = 64;
/// Longest argument, characters.
/// Fixed (not a setting).
pub const MAX_ARG_CHARS: usize = 4_096;
/// Most paths one glob may expand to.
/// Fixed (not a setting).
pub const MAX_GLOB_MATCHES: usize = 1_000;
/// Where programs are looked for, in order (the environment's `PATH` is not used).
pub const SEARCH_PATH: &[&str] = &["/usr/local/bin", "/usr/bin", "/bin"];

/// Why a command was not run (or did not finish).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ShellError {
    /// Shell syntax in an argument: there is no shell.
    #[error("{0}: there is no shell here; pass one command as a list of arguments")]
    ShellSyntax(String),
    /// The command or one of its flags is not on the read-only list.
    #[error("{0}")]
    NotAllowed(String),
    /// The argv is malformed (empty, too long).
    #[error("{0}")]
    BadCommand(String),
    /// A path argument or the folder is refused by the guard.
    #[error(transparent)]
    Path(#[from] PathError),
    /// The program is not installed.
    #[error("{0}: no such program in {path}", path = SEARCH_PATH.join(":"))]
    NoProgram(String),
    /// The program changed since the call was approved.
    #[error(
        "{path} changed since the command was approved (its SHA-256 is now {now}): nothing was run"
    )]
    ProgramChanged {
        /// The program.
        path: PathBuf,
        /// Its hash now.
        now: String,
    },
    /// The program could not be started or read.
    #[error("{0}")]
    Io(String),
}

impl StewardError for ShellError {
    fn code(&self) -> &'static str {
        match self {
            Self::ShellSyntax(_) => "SHELL_SYNTAX",
            Self::NotAllowed(_) => "SHELL_NOT_ALLOWED",
            Self::BadCommand(_) => "SHELL_BAD_COMMAND",
            Self::Path(e) => e.code(),
            Self::NoProgram(_) => "SHELL_NO_PROGRAM",
            Self::ProgramChanged { .. } => "SHELL_PROGRAM_CHANGED",
            Self::Io(_) => "SHELL_IO",
        }
    }

    fn kind(&self) -> ErrorKind {
        match self {
            Self::ShellSyntax(_) | Self::BadCommand(_) => ErrorKind::InvalidInput,
            Self::NotAllowed(_) => ErrorKind::Denied,
            Self::Path(e) => e.kind(),
            Self::NoProgram(_) => ErrorKind::NotFound,
            Self::ProgramChanged { .. } => ErrorKind::Conflict,
            Self::Io(_) => ErrorKind::Unavailable,
        }
    }
}

/// A command checked and ready to run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Checked {
    /// The program, resolved.
    pub program: PathBuf,
    /// Its SHA-256 (hex) when checked.
    pub program_sha256: String,
    /// The arguments after the program, globs expanded.
    pub args: Vec<String>,
    /// The folder it runs in (canonical, inside a root).
    pub cwd: PathBuf,
    /// The root that folder lies under.
    pub root: PathBuf,
    /// For git, the repository it runs on (named to git, never discovered).
    pub git_repo: Option<PathBuf>,
}

/// What a command did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Ran {
    /// The program and arguments as run.
    pub argv: Vec<String>,
    /// The folder.
    pub cwd: PathBuf,
    /// Its exit code (`None` when it was stopped).
    pub exit_code: Option<i32>,
    /// Its standard output (lossy UTF-8), cut at the bound.
    pub stdout: String,
    /// Its standard error, cut at the bound.
    pub stderr: String,
    /// Whether either output was cut.
    pub truncated: bool,
    /// Whether it was stopped at the time limit.
    pub timed_out: bool,
}

/// Refuses arguments that are shell syntax (there is no shell to give it meaning).
fn no_shell_syntax(argv: &[String]) -> Result<(), ShellError> {
    if argv.is_empty() {
        return Err(ShellError::BadCommand("no command given".to_owned()));
    }
    if argv.len() > MAX_ARGS {
        return Err(ShellError::BadCommand(format!("more than {MAX_ARGS} arguments")));
    }
    for a in argv {
        if a.chars().count() > MAX_ARG_CHARS {
            return Err(ShellError::BadCommand(format!(
                "an argument is longer than {MAX_ARG_CHARS} characters"
            )));
        }
        if a.contains('\0') {
            return Err(ShellError::BadCommand("an argument holds a NUL character".to_owned()));
        }
        const OPERATORS: [&str; 12] =
            ["|", "||", "&&", ";", ";;", "&", ">", ">>", "<", "<<", "2>", "2>&1"];
        if OPERATORS.contains(&a.as_str())
            || a.contains("$(")
            || a.contains("${")
            || a.contains('`')
            || a.starts_with('>')
            || a.starts_with('<')
            || a.starts_with('$')
        {
            return Err(ShellError::ShellSyntax(format!("{a:?}")));
        }
    }
    Ok(())
}

/// The program `name` resolves to in [`SEARCH_PATH`] (a name with `/` is a path, relative to
/// `cwd`, the folder the command runs in).
pub fn resolve_program(name: &str, cwd: &Path) -> Result<PathBuf, ShellError> {
    let found = if name.contains('/') {
        Some(cwd.join(name))
    } else {
        SEARCH_PATH.iter().map(|d| Path::new(d).join(name)).find(|p| p.is_file())
    };
    found
        .and_then(|p| p.canonicalize().ok())
        .filter(|p| p.is_file())
        .ok_or_else(|| ShellError::NoProgram(name.to_owned()))
}

/// The SHA-256 (hex) of the file at `path`.
pub fn sha256_of(path: &Path) -> Result<String, ShellError> {
    use sha2::Digest as _;
    let mut f = std::fs::File::open(path)
        .map_err(|e| ShellError::Io(format!("{}: {e}", path.display())))?;
    let mut h = sha2::Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = f.read(&mut buf).map_err(|e| ShellError::Io(format!("{}: {e}", path.display())))?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(h.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

/// A read-only command's profile.
struct Profile {
    name: &'static str,
    /// Single-letter flags that may be grouped (`-la`).
    letters: &'static str,
    /// Flags that take a value (`-n 5`, `--max-count=5`).
    with_value: &'static [&'static str],
    /// Other long flags taken as they are.
    long: &'static [&'static str],
    /// Whether `-NUM` is a flag (head, tail).
    numeric: bool,
    /// The positional arguments before the paths that are not paths (grep's pattern).
    patterns: usize,
    /// Whether a path may be a folder (only listing a folder reads none of its files).
    folders: bool,
}

const PROFILES: &[Profile] = &[
    Profile {
        name: "ls",
        letters: "laAhtrS1dFip",
        with_value: &[],
        long: &["--color=never", "--full-time"],
        numeric: false,
        patterns: 0,
        folders: true,
    },
    Profile {
        name: "stat",
        letters: "Lt",
        with_value: &["-c", "--format", "--printf"],
        long: &[],
        numeric: false,
        patterns: 0,
        folders: true,
    },
    Profile {
        name: "wc",
        letters: "lwcmL",
        with_value: &[],
        long: &[],
        numeric: false,
        patterns: 0,
        folders: false,
    },
    Profile {
        name: "head",
        letters: "qv",
        with_value: &["-n", "-c", "--lines", "--bytes"],
        long: &[],
        numeric: true,
        patterns: 0,
        folders: false,
    },
    Profile {
        name: "tail",
        letters: "qv",
        with_value: &["-n", "-c", "--lines", "--bytes"],
        long: &[],
        numeric: true,
        patterns: 0,
        folders: false,
    },
    Profile {
        name: "grep",
        letters: "inviclLwxEFHhoqsa",
        with_value: &["-e", "-m", "-A", "-B", "-C", "--max-count", "--regexp"],
        long: &["--color=never"],
        numeric: false,
        patterns: 1,
        folders: false,
    },
    Profile {
        name: "rg",
        letters: "inviclwxFHoqsSU",
        with_value: &["-e", "-m", "-A", "-B", "-C", "--max-count", "--regexp"],
        long: &[
            "--no-heading",
            "--color=never",
            "--line-number",
            "--fixed-strings",
            "--ignore-case",
        ],
        numeric: false,
        patterns: 1,
        folders: false,
    },
    Profile {
        name: "file",
        letters: "bLiz",
        with_value: &[],
        long: &["--mime-type", "--brief"],
        numeric: false,
        patterns: 0,
        folders: false,
    },
];

/// git's read-only subcommands and their flags.
const GIT_SUBCOMMANDS: &[&str] = &["status", "log", "diff", "show"];
/// Flags taken as they are.
const GIT_FLAGS: &[&str] = &[
    "--oneline",
    "--stat",
    "--shortstat",
    "--name-only",
    "--name-status",
    "--short",
    "-s",
    "--porcelain",
    "--graph",
    "--decorate",
    "--no-decorate",
    "--patch",
    "-p",
    "--no-patch",
    "--cached",
    "--staged",
    "--reverse",
    "--all",
    "--branch",
    "-b",
    "--no-color",
    "--color=never",
    "--abbrev-commit",
    "--summary",
    "--no-renames",
    "--first-parent",
];
/// Flags with a value, only in the attached form (`--since=2025-01-01`): a split value could be
/// a flag git reads on its own (`-U --output=…`).
const GIT_VALUED: &[&str] = &[
    "--max-count",
    "--since",
    "--until",
    "--author",
    "--grep",
    "--date",
    "--unified",
    "--pretty",
    "--format",
];
/// The options every git run gets from Steward (before the subcommand): no pager, no hooks, no
/// monitor, no signature program, no refresh that writes the index (and, after a diffing
/// subcommand, `--no-ext-diff --no-textconv`).
const GIT_OPTIONS: &[&str] = &[
    "--no-pager",
    "-c",
    "core.fsmonitor=false",
    "-c",
    "core.pager=cat",
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "diff.autoRefreshIndex=false",
    "-c",
    "gpg.program=false",
    "-c",
    "safe.bareRepository=explicit",
    "-c",
    "protocol.allow=never",
];
/// Keys of a repository's own config that would make git run a program or read elsewhere.
const GIT_CONFIG_REFUSED: &[&str] = &[
    "filter",
    "textconv",
    "external",
    "pager",
    "fsmonitor",
    "hookspath",
    "sshcommand",
    "askpass",
    "editor",
    "include",
    "gpg",
    "showsignature",
    "worktree",
    "gitproxy",
    "command",
];

/// Checks `args` against `p`; returns the path arguments (after expansion) in place.
fn check_profile(
    steward: &Steward,
    p: &Profile,
    args: &[String],
    cwd: &Path,
) -> Result<Vec<String>, ShellError> {
    let refuse = |a: &str| {
        ShellError::NotAllowed(format!(
            "{} {a}: not an allowed flag of {} (read-only profile)",
            p.name, p.name
        ))
    };
    let mut out = Vec::new();
    // With a pattern given by -e, every positional argument is a file (as grep and rg read it).
    let given_e = args.iter().any(|a| a == "-e" || a == "--regexp" || a.starts_with("--regexp="));
    let mut positional = if given_e { p.patterns } else { 0usize };
    let mut paths = 0usize;
    let mut only_positional = false;
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        i += 1;
        if !only_positional && a == "--" {
            only_positional = true;
            out.push(a.clone());
            continue;
        }
        if !only_positional && a.starts_with('-') && a.len() > 1 {
            if p.long.contains(&a.as_str()) {
                out.push(a.clone());
                continue;
            }
            let (flag, inline) = match a.split_once('=') {
                Some((f, v)) if a.starts_with("--") => (f, Some(v)),
                _ => (a.as_str(), None),
            };
            if p.with_value.contains(&flag) {
                out.push(a.clone());
                if inline.is_none() {
                    let v = args
                        .get(i)
                        .ok_or_else(|| ShellError::BadCommand(format!("{flag} needs a value")))?;
                    out.push(v.clone());
                    i += 1;
                }
                continue;
            }
            if p.numeric && a[1..].chars().all(|c| c.is_ascii_digit()) {
                out.push(a.clone());
                continue;
            }
            if !a.starts_with("--") && a[1..].chars().all(|c| p.letters.contains(c)) {
                out.push(a.clone());
                continue;
            }
            return Err(refuse(a));
        }
        if positional < p.patterns {
            positional += 1;
            out.push(a.clone());
            continue;
        }
        for path in expand(steward, a, cwd)? {
            let guarded = steward.guard_path(&path)?;
            // A FIFO or a device would block or never end.
            if !(guarded.is_file() || guarded.is_dir()) {
                return Err(ShellError::NotAllowed(format!(
                    "{}: not a regular file or folder",
                    guarded.display()
                )));
            }
            if guarded.is_dir() && !p.folders {
                return Err(ShellError::NotAllowed(format!(
                    "{}: {} reads files one by one here, not a folder's tree (a secret may lie \
                     below); name the files or a glob",
                    guarded.display(),
                    p.name
                )));
            }
            out.push(guarded.to_string_lossy().into_owned());
            paths += 1;
        }
    }
    // Without a path, grep and the others would read their input (there is none) or `.`.
    if paths == 0 && p.name != "ls" {
        return Err(ShellError::BadCommand(format!("{}: name the file(s) to read", p.name)));
    }
    if p.name == "rg" {
        out.insert(0, "--no-config".to_owned());
    }
    Ok(out)
}

/// `arg` as paths: itself, or the files its glob (`*`, `?` in its last part) matches in its
/// folder, secrets left out, at most [`MAX_GLOB_MATCHES`].
fn expand(steward: &Steward, arg: &str, cwd: &Path) -> Result<Vec<PathBuf>, ShellError> {
    let path = if Path::new(arg).is_absolute() { PathBuf::from(arg) } else { cwd.join(arg) };
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    if !name.contains(['*', '?']) {
        return Ok(vec![path]);
    }
    let dir = path.parent().unwrap_or(cwd);
    if dir.to_string_lossy().contains(['*', '?']) {
        return Err(ShellError::NotAllowed(format!("{arg}: a glob may only be in the last part")));
    }
    let dir = steward.guard_path(dir)?;
    let re = {
        let mut re = String::from("^");
        for c in name.chars() {
            match c {
                '*' => re.push_str(".*"),
                '?' => re.push('.'),
                c => re.push_str(&regex::escape(&c.to_string())),
            }
        }
        re.push('$');
        regex::Regex::new(&re).map_err(|e| ShellError::BadCommand(format!("{arg}: {e}")))?
    };
    let mut out = Vec::new();
    let entries =
        std::fs::read_dir(&dir).map_err(|e| ShellError::Io(format!("{}: {e}", dir.display())))?;
    for e in entries.flatten() {
        let n = e.file_name().to_string_lossy().into_owned();
        // A glob does not match hidden names unless it starts with a dot, as in a shell.
        if (n.starts_with('.') && !name.starts_with('.')) || !re.is_match(&n) {
            continue;
        }
        let p = e.path();
        if steward.guard_path(&p).is_ok() {
            out.push(p);
            if out.len() > MAX_GLOB_MATCHES {
                return Err(ShellError::NotAllowed(format!(
                    "{arg} matches more than {MAX_GLOB_MATCHES} files"
                )));
            }
        }
    }
    out.sort();
    if out.is_empty() {
        return Err(ShellError::BadCommand(format!("{arg}: no file matches")));
    }
    Ok(out)
}

/// The folder `cwd` (else the first root), guarded, and the root it lies under.
fn folder(steward: &Steward, cwd: Option<&str>) -> Result<(PathBuf, PathBuf), ShellError> {
    let roots: Vec<PathBuf> =
        steward.file_roots().iter().filter_map(|r| r.canonicalize().ok()).collect();
    let first = roots.first().cloned().ok_or_else(|| {
        ShellError::NotAllowed("no folder is shared with Steward: set [files] roots".to_owned())
    })?;
    let dir = match cwd {
        Some(c) => steward.guard_path(Path::new(c))?,
        None => first,
    };
    if !dir.is_dir() {
        return Err(ShellError::BadCommand(format!("{}: not a folder", dir.display())));
    }
    let root = roots
        .iter()
        .filter(|r| dir.starts_with(r))
        .max_by_key(|r| r.as_os_str().len())
        .cloned()
        .ok_or_else(|| PathError::OutsideRoots { path: dir.clone() })?;
    Ok((dir, root))
}

/// The exclusions (`:(exclude)` pathspecs) that keep secrets below a root out of git's answers.
fn secret_exclusions() -> Vec<String> {
    let mut out = Vec::new();
    for d in crate::paths::SECRET_DIRS {
        out.push(format!(":(exclude,glob,icase)**/{d}/**"));
    }
    for n in crate::paths::SECRET_NAMES {
        out.push(format!(":(exclude,glob,icase)**/{n}"));
    }
    for e in crate::paths::SECRET_EXTENSIONS {
        out.push(format!(":(exclude,glob,icase)**/*.{e}"));
    }
    for n in [".env", ".env.*", "*.env", "id_*"] {
        out.push(format!(":(exclude,glob,icase)**/{n}"));
    }
    out
}

/// Whether `rev` names a commit of the repository at `repo` (a range's ends each).
fn is_commit(repo: &Path, rev: &str) -> bool {
    if rev.is_empty() || rev.starts_with('-') || rev.contains(':') {
        return false;
    }
    let ends: Vec<&str> = if let Some((a, b)) = rev.split_once("...") {
        vec![a, b]
    } else if let Some((a, b)) = rev.split_once("..") {
        vec![a, b]
    } else {
        vec![rev]
    };
    ends.into_iter().filter(|e| !e.is_empty()).all(|e| {
        let mut cmd = git_command(repo);
        cmd.args(["rev-parse", "--verify", "--quiet", "--end-of-options"])
            .arg(format!("{e}^{{commit}}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        cmd.status().is_ok_and(|s| s.success())
    })
}

/// git, run on the repository at `repo` only (its work tree and `.git` named, nothing found by
/// discovery), with [`GIT_OPTIONS`] and a scrubbed environment.
fn git_command(repo: &Path) -> Command {
    let program = resolve_program("git", repo).unwrap_or_else(|_| PathBuf::from("/usr/bin/git"));
    let mut cmd = Command::new(program);
    scrub(&mut cmd, repo);
    cmd.env("GIT_DIR", repo.join(".git")).env("GIT_WORK_TREE", repo).args(GIT_OPTIONS);
    cmd
}

/// The scrubbed environment of every command, run in `cwd`.
fn scrub(cmd: &mut Command, cwd: &Path) {
    cmd.current_dir(cwd)
        .env_clear()
        .env("PATH", SEARCH_PATH.join(":"))
        .env("LANG", "C.UTF-8")
        .env("LC_ALL", "C.UTF-8")
        .env("HOME", cwd)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_PAGER", "cat")
        .env("PAGER", "cat")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_OPTIONAL_LOCKS", "0")
        .stdin(Stdio::null());
}

/// Checks git's read-only use (see the module's notes): the subcommand first (no global
/// option: `git -c core.pager=…` is refused), its flags from a list (valued ones attached),
/// every argument before `--` a commit of the repository, every one after it a plain path
/// inside it that names no secret, and a repository (a `.git` folder at or below the root)
/// whose own config and attributes set nothing that would run a program. The secrets below the
/// root are excluded from every answer.
fn check_git(
    args: &[String],
    cwd: &Path,
    root: &Path,
) -> Result<(Vec<String>, PathBuf), ShellError> {
    let sub = args.first().map(String::as_str).unwrap_or("");
    if !GIT_SUBCOMMANDS.contains(&sub) {
        return Err(ShellError::NotAllowed(format!(
            "git {sub}: only git status, log, diff and show run without asking (no option \
             before the subcommand)"
        )));
    }
    let repo = cwd
        .ancestors()
        .take_while(|d| d.starts_with(root))
        .find(|d| d.join(".git").exists())
        .ok_or_else(|| {
            ShellError::NotAllowed(format!(
                "{}: not inside a git repository under the shared folder",
                cwd.display()
            ))
        })?
        .to_path_buf();
    let dot_git = repo.join(".git");
    let linked = dot_git.symlink_metadata().is_ok_and(|m| m.file_type().is_symlink());
    if !dot_git.is_dir() || linked {
        return Err(ShellError::NotAllowed(format!(
            "{}: a .git that is not a folder may point outside the shared folders",
            dot_git.display()
        )));
    }
    if dot_git.join("commondir").exists() || dot_git.join("modules").exists() {
        return Err(ShellError::NotAllowed(format!(
            "{}: a linked work tree or submodules read configs elsewhere: run it with shell.exec \
             (asks first)",
            repo.display()
        )));
    }
    let config = std::fs::read_to_string(dot_git.join("config")).unwrap_or_default().to_lowercase();
    if let Some(k) = GIT_CONFIG_REFUSED.iter().find(|k| config.contains(*k)) {
        return Err(ShellError::NotAllowed(format!(
            "{}: the repository's config sets {k}, which could run a program: run it with \
             shell.exec (asks first)",
            dot_git.join("config").display()
        )));
    }
    let attrs =
        std::fs::read_to_string(repo.join(".gitattributes")).unwrap_or_default().to_lowercase();
    let info_attrs =
        std::fs::read_to_string(dot_git.join("info/attributes")).unwrap_or_default().to_lowercase();
    if [attrs, info_attrs].iter().any(|a| a.contains("filter") || a.contains("diff=")) {
        return Err(ShellError::NotAllowed(format!(
            "{}: its attributes name filters or diff drivers: run it with shell.exec (asks first)",
            repo.display()
        )));
    }
    let mut flags = vec![sub.to_owned()];
    if sub != "status" {
        flags.extend(["--no-ext-diff".to_owned(), "--no-textconv".to_owned()]);
    }
    let mut revs = Vec::new();
    let mut paths = Vec::new();
    let mut i = 1;
    let mut after_dashes = false;
    while i < args.len() {
        let a = &args[i];
        i += 1;
        if after_dashes {
            let p = Path::new(a);
            let plain = !a.is_empty()
                && !a.starts_with(':')
                && !a.starts_with('-')
                && p.is_relative()
                && p.components().all(|c| {
                    matches!(c, std::path::Component::Normal(_) | std::path::Component::CurDir)
                });
            if !plain {
                return Err(ShellError::NotAllowed(format!(
                    "git {sub} -- {a}: a path inside the repository, relative, without `..` or magic"
                )));
            }
            if crate::paths::is_secret(p) {
                return Err(ShellError::Path(PathError::Sensitive {
                    path: repo.join(p),
                    why: "it names a secret".to_owned(),
                }));
            }
            paths.push(a.clone());
            continue;
        }
        if a == "--" {
            after_dashes = true;
            continue;
        }
        if a.starts_with('-') {
            let (flag, value) = a.split_once('=').map_or((a.as_str(), None), |(f, v)| (f, Some(v)));
            let numeric = a
                .strip_prefix('-')
                .is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()));
            let unified = a
                .strip_prefix("-U")
                .is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()));
            if GIT_FLAGS.contains(&a.as_str()) || numeric || unified {
                flags.push(a.clone());
            } else if a == "-n" {
                let v =
                    args.get(i).filter(|v| !v.is_empty() && v.chars().all(|c| c.is_ascii_digit()));
                let v = v.ok_or_else(|| ShellError::BadCommand("-n needs a number".to_owned()))?;
                flags.push(a.clone());
                flags.push(v.clone());
                i += 1;
            } else if GIT_VALUED.contains(&flag) && value.is_some() {
                if (flag == "--format" || flag == "--pretty")
                    && value.is_some_and(|v| v.contains("%G"))
                {
                    return Err(ShellError::NotAllowed(
                        "git: a format asking for signatures (%G…) runs gpg".to_owned(),
                    ));
                }
                flags.push(a.clone());
            } else {
                return Err(ShellError::NotAllowed(format!(
                    "git {sub} {a}: not an allowed flag (read-only profile; valued flags as \
                     --name=value)"
                )));
            }
            continue;
        }
        if !is_commit(&repo, a) {
            return Err(ShellError::NotAllowed(format!(
                "git {sub} {a}: not a commit of the repository (name paths after --)"
            )));
        }
        revs.push(a.clone());
    }
    let mut out = flags;
    out.extend(revs);
    out.push("--".to_owned());
    if paths.is_empty() {
        out.push(".".to_owned());
    }
    out.extend(paths);
    out.extend(secret_exclusions());
    Ok((out, repo))
}

/// Checks `argv` in `cwd` as a read-only command (see the module's notes).
pub fn check_read_only(
    steward: &Steward,
    argv: &[String],
    cwd: Option<&str>,
) -> Result<Checked, ShellError> {
    no_shell_syntax(argv)?;
    let (cwd, root) = folder(steward, cwd)?;
    let name = argv[0].as_str();
    let (args, repo) = if name == "git" {
        let (args, repo) = check_git(&argv[1..], &cwd, &root)?;
        (args, Some(repo))
    } else {
        let p = PROFILES.iter().find(|p| p.name == name).ok_or_else(|| {
            ShellError::NotAllowed(format!(
                "{name}: not a read-only command Steward runs without asking (ls, stat, wc, head, \
                 tail, grep, rg, file, git status|log|diff|show); shell.exec asks the person first"
            ))
        })?;
        (check_profile(steward, p, &argv[1..], &cwd)?, None)
    };
    let program = resolve_program(name, &cwd)?;
    let program_sha256 = sha256_of(&program)?;
    Ok(Checked { program, program_sha256, args, cwd, root, git_repo: repo })
}

/// Checks `argv` in `cwd` as any command (for a gated call): no shell syntax, a folder inside a
/// root, the program resolved and hashed.
pub fn check_any(
    steward: &Steward,
    argv: &[String],
    cwd: Option<&str>,
) -> Result<Checked, ShellError> {
    no_shell_syntax(argv)?;
    let (cwd, root) = folder(steward, cwd)?;
    let program = resolve_program(&argv[0], &cwd)?;
    let program_sha256 = sha256_of(&program)?;
    Ok(Checked { program, program_sha256, args: argv[1..].to_vec(), cwd, root, git_repo: None })
}

/// Reads `r` into a string of at most `cap` bytes; whether more was there.
fn drain(mut r: impl std::io::Read, cap: usize) -> (Vec<u8>, bool) {
    let mut out = Vec::new();
    let mut buf = [0u8; 8192];
    let mut more = false;
    loop {
        match r.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let room = cap.saturating_sub(out.len());
                out.extend_from_slice(&buf[..n.min(room)]);
                more |= n > room;
            }
        }
    }
    (out, more)
}

/// Runs `c` (checked, and when gated approved with `expected_sha256`) within the handle's
/// limits. The program's hash is checked again just before it starts. The command runs in a
/// process group of its own: at the time limit the whole group is killed, and output that a
/// stray process still holds open is not waited for.
pub fn run(steward: &Steward, c: &Checked, expected_sha256: &str) -> Result<Ran, ShellError> {
    let now = sha256_of(&c.program)?;
    if now != expected_sha256 {
        return Err(ShellError::ProgramChanged { path: c.program.clone(), now });
    }
    let limits = steward.limits();
    let cap = usize::try_from(limits.shell_output_kib).unwrap_or(usize::MAX).saturating_mul(1024);
    let mut cmd = match &c.git_repo {
        Some(repo) => {
            let mut cmd = git_command(repo);
            cmd.current_dir(&c.cwd);
            cmd
        }
        None => {
            let mut cmd = Command::new(&c.program);
            scrub(&mut cmd, &c.cwd);
            cmd
        }
    };
    #[cfg(unix)]
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    cmd.args(&c.args).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child =
        cmd.spawn().map_err(|e| ShellError::Io(format!("{}: {e}", c.program.display())))?;
    let (out, err) = (child.stdout.take(), child.stderr.take());
    let (out_tx, out_rx) = mpsc::channel();
    let (err_tx, err_rx) = mpsc::channel();
    let err_cap = cap / 4;
    std::thread::spawn(move || {
        let _ = out_tx.send(out.map(|o| drain(o, cap)).unwrap_or_default());
    });
    std::thread::spawn(move || {
        let _ = err_tx.send(err.map(|e| drain(e, err_cap)).unwrap_or_default());
    });
    let deadline = Instant::now() + Duration::from_secs(limits.shell_timeout_secs);
    let mut timed_out = false;
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break Some(s),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
            // The time limit, or a wait that failed: the whole group goes.
            Ok(None) | Err(_) => {
                kill_group(&mut child);
                timed_out = true;
                break child.wait().ok();
            }
        }
    };
    // Output a stray process of the group still holds is not waited for past a moment.
    let grace = Duration::from_secs(2);
    let (stdout, more_out) = out_rx.recv_timeout(grace).unwrap_or_default();
    let (stderr, more_err) = err_rx.recv_timeout(grace).unwrap_or_default();
    let mut argv = vec![c.program.to_string_lossy().into_owned()];
    argv.extend(c.args.iter().cloned());
    Ok(Ran {
        argv,
        cwd: c.cwd.clone(),
        exit_code: if timed_out { None } else { status.and_then(|s| s.code()) },
        stdout: String::from_utf8_lossy(&stdout).into_owned(),
        stderr: String::from_utf8_lossy(&stderr).into_owned(),
        truncated: more_out || more_err,
        timed_out,
    })
}

/// Kills `child` and every process of its group.
fn kill_group(child: &mut std::process::Child) {
    #[cfg(unix)]
    if let Some(pid) = rustix::process::Pid::from_raw(child.id() as i32) {
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
    }
    let _ = child.kill();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn shell_syntax_is_refused() {
        for bad in [
            v(&["ls", ";", "rm", "-rf", "/"]),
            v(&["ls", "$(rm -rf /)"]),
            v(&["ls", "`id`"]),
            v(&["cat", "a", "|", "sh"]),
            v(&["echo", "x", ">", "/etc/passwd"]),
            v(&["echo", ">/etc/passwd"]),
            v(&["ls", "${HOME}"]),
            v(&["ls", "$HOME"]),
            v(&["sleep", "10", "&"]),
        ] {
            let e = no_shell_syntax(&bad).unwrap_err();
            assert_eq!(e.code(), "SHELL_SYNTAX", "{bad:?}");
        }
        assert_eq!(no_shell_syntax(&[]).unwrap_err().code(), "SHELL_BAD_COMMAND");
        no_shell_syntax(&v(&["grep", "-n", "a|b", "notes.txt"])).unwrap();
    }
}
