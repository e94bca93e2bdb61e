//! Command-line frontend: lower the flags into core requests, call the core, print the result.

use std::{
    io::IsTerminal, path::PathBuf, process::ExitCode, sync::atomic::AtomicBool, time::Duration,
};

use clap::{Args as ClapArgs, Parser, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use steward_connectors::mail::{
    EmlxSource, MaildirSource, MboxFlavor, MboxSource,
    demo::{DemoError, DemoOptions, MAX_DEMO_MESSAGES, generate_maildir},
    watch::{WatchOptions, watch_and_sync},
};
use steward_connectors::pim::PimFrom;
use steward_core::{
    ErrorKind, Steward, StewardError,
    mirror::{BodyWindow, MailSource, Progress, ProgressPhase, SyncOptions, SyncSummary},
    search::{SearchParams, SearchRequest},
};

/// Writes one line of the command's output. A closed pipe (`steward search … | head`) ends the
/// command quietly instead of panicking; other write errors are ignored like `println!` would
/// not be able to report them either.
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        if let Err(e) = writeln!(std::io::stdout().lock(), $($arg)*) {
            if e.kind() == std::io::ErrorKind::BrokenPipe {
                std::process::exit(0);
            }
        }
    }};
}

mod authority;
mod backup;
mod calendar;
mod chat;
mod contacts;
mod dav;
mod embed;
mod files;
mod jobs;
mod mail;
mod memory;
mod ops;
mod serve;
mod tools;
mod trains;
mod usage;
mod watch;

/// Prints `v` as one line of JSON.
fn json_line(v: &impl serde::Serialize) {
    out!("{}", serde_json::to_string(v).unwrap_or_else(|_| "null".to_owned()));
}

/// Steward: a local-first personal agent. This command mirrors and inspects local mail.
#[derive(Debug, Parser)]
#[command(name = "steward", version, about)]
pub(crate) struct Args {
    /// Data directory (default: $STEWARD_HOME, else the platform data dir).
    #[arg(long, global = true, value_name = "DIR")]
    home: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Mirror a local mail store.
    Index {
        #[command(subcommand)]
        what: IndexWhat,
    },
    /// Embed new and changed messages with the configured model (STEWARD_EMBED_ENDPOINT,
    /// STEWARD_EMBED_MODEL or [embed] in config.toml), so search finds them by meaning.
    Embed(embed::EmbedArgs),
    /// Counts per table, mailbox role and body state, and the files that failed.
    Stats {
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Search mail: free text (BM25, plus semantic when configured), substrings and filters.
    Search(Box<SearchArgs>),
    /// Read one message: headers, attachments and a bounded window of the body.
    Read {
        /// The message id (from `search`, `thread` or `stats`).
        id: i64,
        /// First body character to show (from the previous read's `next_offset`).
        #[arg(long, default_value_t = 0)]
        offset: usize,
        /// Body characters to show (at most 12000).
        #[arg(long, default_value_t = steward_core::mirror::read::READ_WINDOW_CHARS)]
        chars: usize,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// List a thread's messages, newest first.
    Thread {
        /// The thread id.
        id: i64,
        /// Skip this many messages.
        #[arg(long, default_value_t = 0)]
        offset: usize,
        /// Messages per page (at most 100).
        #[arg(long, default_value_t = steward_core::mirror::read::THREAD_PAGE)]
        limit: usize,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Pending and past approval requests; approve, deny or send back (you act as a person).
    Approvals {
        #[command(subcommand)]
        cmd: authority::ApprovalsCmd,
    },
    /// The tool policy: show it, or change a tool's level or rule (versioned, audited).
    Policy {
        #[command(subcommand)]
        cmd: authority::PolicyCmd,
    },
    /// Send mail through the policy, the approval flow and the write journal.
    Mail {
        #[command(subcommand)]
        cmd: mail::MailCmd,
    },
    /// The write journal: what was attempted, what the backend said, what confirmed it.
    Ops {
        #[command(subcommand)]
        cmd: ops::OpsCmd,
    },
    /// What the models cost: requests, tokens, cost and latency by service, action, model, day.
    Usage(usage::UsageArgs),
    /// Talk with the agent: one turn (streamed; approvals asked for inline on a terminal)
    /// or JSON lines.
    Chat(Box<chat::ChatArgs>),
    /// Serve the tools to an MCP client over stdio (for a desktop agent's configuration:
    /// `{"command": "steward", "args": ["mcp"]}`). Gated calls wait for a person's approval.
    Mcp,
    /// The chats: list, show, rename, delete.
    Chats {
        #[command(subcommand)]
        cmd: chat::ChatsCmd,
    },
    /// The agent's tools: what runs here, and one call through the policy and approvals.
    Tools {
        #[command(subcommand)]
        cmd: tools::ToolsCmd,
    },
    /// Calendars: the occurrences of a vdir's or an .ics file's events in a window
    /// (recurrences expanded, time zones and DST done right)
    Calendar {
        #[command(subcommand)]
        cmd: calendar::CalendarCmd,
    },
    /// Memory: review the proposals (accept, edit, reject), search the notes, forget with a
    /// receipt, reconcile after editing the note files, import existing markdown
    Memory {
        #[command(subcommand)]
        cmd: memory::MemoryCmd,
    },
    /// Contacts: search the indexed address books, resolve who a description means (never a
    /// guess: ambiguous descriptions list the candidates)
    Contacts {
        #[command(subcommand)]
        cmd: contacts::ContactsCmd,
    },
    /// Files: find them under the folders shared with Steward ([files] roots), newest first;
    /// read and search documents
    Files {
        #[command(subcommand)]
        cmd: files::FilesCmd,
    },
    /// Italian trains: the next direct train between two stations, a train's status.
    Trains {
        #[command(subcommand)]
        cmd: trains::TrainsCmd,
    },
    /// The background jobs (reconcile, embed, watches, scheduled sends, confirmation,
    /// approval expiry): run them once (cron) or until Ctrl-C, and see their last runs.
    Jobs {
        #[command(subcommand)]
        cmd: jobs::JobsCmd,
    },
    /// Back the home up, check a backup, restore one into a new home.
    Backup {
        #[command(subcommand)]
        cmd: backup::BackupCmd,
    },
    /// Durable watches: create, list, stop, poll, events, actions.
    Watch {
        #[command(subcommand)]
        cmd: watch::WatchCmd,
    },
    /// The redacted audit trail, newest first, with filters.
    Audit(Box<authority::AuditArgs>),
    /// Generate a realistic demo mailbox, mirror it, then serve it over HTTP (Ctrl-C stops).
    Demo {
        /// Messages to generate.
        #[arg(long, default_value_t = 2_000)]
        messages: usize,
        /// Print the summary as JSON.
        #[arg(long)]
        json: bool,
        /// Stop after mirroring instead of serving.
        #[arg(long)]
        no_serve: bool,
        #[command(flatten)]
        serve: serve::ServeArgs,
    },
    /// Serve the HTTP + WebSocket API (loopback by default; every route but /health needs the
    /// token).
    Serve(serve::ServeArgs),
}

#[derive(Debug, ClapArgs)]
#[command(group(clap::ArgGroup::new("scope").multiple(false)))]
#[command(group(clap::ArgGroup::new("format").multiple(false)))]
struct SearchArgs {
    /// Free text (never parsed as a query language).
    text: Option<String>,
    /// The sender's name or address contains this (at least 3 characters).
    #[arg(long, value_name = "S")]
    from: Option<String>,
    /// A To name or address contains this.
    #[arg(long, value_name = "S")]
    to: Option<String>,
    /// A Cc name or address contains this.
    #[arg(long, value_name = "S")]
    cc: Option<String>,
    /// The subject contains this.
    #[arg(long, value_name = "S")]
    subject_contains: Option<String>,
    /// The body contains this.
    #[arg(long, value_name = "S")]
    body_contains: Option<String>,
    /// Dated on or after (YYYY-MM-DD or RFC 3339).
    #[arg(long, value_name = "DATE")]
    after: Option<String>,
    /// Dated before (YYYY-MM-DD or RFC 3339).
    #[arg(long, value_name = "DATE")]
    before: Option<String>,
    /// Only unread messages.
    #[arg(long)]
    unread: bool,
    /// Only flagged messages.
    #[arg(long)]
    flagged: bool,
    /// Only messages with attachments.
    #[arg(long)]
    has_attachment: bool,
    /// Only this mailbox (by name).
    #[arg(long, value_name = "NAME", group = "scope")]
    mailbox: Option<String>,
    /// Only mailboxes with this role (inbox, sent, drafts, trash, junk, archive, all_mail).
    #[arg(long, value_name = "ROLE", group = "scope")]
    role: Option<String>,
    /// Only this account.
    #[arg(long, value_name = "NAME")]
    account: Option<String>,
    /// Browse order without text: date, date-asc or size.
    #[arg(long, value_name = "ORDER", default_value = "date")]
    sort: String,
    /// Every matching message instead of the best one per thread.
    #[arg(long)]
    per_message: bool,
    /// Results per page (1-100).
    #[arg(long, value_name = "N", default_value_t = steward_core::search::DEFAULT_LIMIT)]
    limit: usize,
    /// Results to skip (from the previous page's next_offset).
    #[arg(long, value_name = "N", default_value_t = 0)]
    offset: usize,
    /// Print the page as one JSON object.
    #[arg(long, group = "format")]
    json: bool,
    /// Print one line per hit and the ids (the rendering a model sees).
    #[arg(long, group = "format")]
    compact: bool,
}

#[derive(Debug, Subcommand)]
enum IndexWhat {
    /// Mirror mail from a Maildir, an mbox file or an Apple Mail folder.
    Mail(MailArgs),
    /// Index calendars (a vdir or an .ics file) into calendar.db.
    Calendar(calendar::IndexArgs),
    /// Index address books (a vdir or a .vcf file) into contacts.db.
    Contacts(contacts::ContactsArgs),
    /// Walk the shared folders ([files] roots) into files.db, then index the documents' text.
    Files {
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Drop and rebuild every derived index from the mirror.
    Rebuild {
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, ClapArgs)]
#[command(group(clap::ArgGroup::new("source").required(true).multiple(false)))]
struct MailArgs {
    /// A Maildir (with Maildir++ subfolders).
    #[arg(long, value_name = "PATH", group = "source")]
    maildir: Option<PathBuf>,
    /// An mbox file (or a directory of them).
    #[arg(long, value_name = "FILE", group = "source")]
    mbox: Option<PathBuf>,
    /// An Apple Mail folder holding .emlx files.
    #[arg(long, value_name = "DIR", group = "source")]
    emlx: Option<PathBuf>,
    /// mbox quoting: mboxrd (default) or mboxo.
    #[arg(long, value_name = "FLAVOR", default_value = "mboxrd")]
    mbox_flavor: String,
    /// Account name (default: the source folder's name).
    #[arg(long)]
    account: Option<String>,
    /// Print the summary as one JSON object on stdout.
    #[arg(long)]
    json: bool,
    /// Keep running: reconcile whenever the store changes (and every 5 minutes).
    #[arg(long)]
    watch: bool,
    /// Then embed what is new or changed (one drain; needs an embedding endpoint).
    #[arg(long)]
    embed: bool,
    /// Files parsed and committed per transaction (default 1024).
    #[arg(long, value_name = "N")]
    ingest_batch: Option<usize>,
    /// Parser threads (default: one per CPU).
    #[arg(long, value_name = "N")]
    threads: Option<usize>,
    /// Imports of at least N files into a smaller mirror build lookup indexes at the end
    /// (default 10000).
    #[arg(long, value_name = "N")]
    bulk_load_min_files: Option<usize>,
}

/// An error on its way out of the command: a stable code and a kind that picks the exit status.
struct Failure {
    code: String,
    kind: ErrorKind,
    message: String,
}

impl<E: StewardError> From<E> for Failure {
    fn from(e: E) -> Self {
        Self { code: e.code().to_owned(), kind: e.kind(), message: e.to_string() }
    }
}

fn usage(message: String) -> Failure {
    Failure { code: "CLI_INVALID_ARGUMENT".to_owned(), kind: ErrorKind::InvalidInput, message }
}

pub(crate) fn run(args: Args) -> ExitCode {
    let result = match args.command {
        Command::Index { what: IndexWhat::Mail(m) } => index_mail(args.home, m),
        Command::Index { what: IndexWhat::Rebuild { json } } => rebuild(args.home, json),
        Command::Index { what: IndexWhat::Contacts(a) } => contacts::index_contacts(args.home, a),
        Command::Index { what: IndexWhat::Calendar(a) } => calendar::index_calendar(args.home, a),
        Command::Index { what: IndexWhat::Files { json } } => files::index_files(args.home, json),
        Command::Files { cmd } => files::files(args.home, cmd),
        Command::Embed(a) => open(args.home).and_then(|s| embed::embed(&s, &a)),
        Command::Stats { json } => stats(args.home, json),
        Command::Demo { messages, json, no_serve, serve } => {
            demo(args.home, messages, json, (!no_serve).then_some(&serve))
        }
        Command::Serve(a) => open(args.home).and_then(|s| serve::serve(s, &a)),
        Command::Jobs { cmd } => jobs::jobs(args.home, cmd),
        Command::Backup { cmd } => backup::backup(args.home, cmd),
        Command::Search(a) => search(args.home, &a),
        Command::Read { id, offset, chars, json } => read(args.home, id, offset, chars, json),
        Command::Thread { id, offset, limit, json } => thread(args.home, id, offset, limit, json),
        Command::Approvals { cmd } => authority::approvals(args.home, cmd),
        Command::Policy { cmd } => authority::policy(args.home, cmd),
        Command::Audit(a) => authority::audit(args.home, *a),
        Command::Ops { cmd } => ops::ops(args.home, cmd),
        Command::Watch { cmd } => watch::watch(args.home, cmd),
        Command::Trains { cmd } => trains::trains(cmd),
        Command::Calendar { cmd } => calendar::calendar(args.home, cmd),
        Command::Contacts { cmd } => contacts::contacts(args.home, cmd),
        Command::Memory { cmd } => memory::memory(args.home, cmd),
        Command::Tools { cmd } => tools::tools(args.home, cmd),
        Command::Chat(a) => chat::chat(args.home, *a),
        Command::Chats { cmd } => chat::chats(args.home, cmd),
        Command::Mcp => mcp(args.home),
        Command::Usage(a) => usage::run(args.home, a),
        Command::Mail { cmd } => mail::mail(args.home, cmd),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => {
            #[expect(clippy::print_stderr, reason = "the command's error channel")]
            {
                eprintln!("error[{}]: {}", f.code, f.message);
            }
            if f.kind == ErrorKind::InvalidInput || f.kind == ErrorKind::NotFound {
                ExitCode::from(2)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}

/// `steward mcp`: the home's tools over stdio until the client hangs up.
fn mcp(home: Option<PathBuf>) -> Result<(), Failure> {
    let steward = std::sync::Arc::new(open(home)?);
    let toolbox = std::sync::Arc::new(steward_connectors::home::toolbox(steward)?);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| usage(format!("cannot start the runtime: {e}")))?;
    runtime.block_on(steward_server::mcp::serve_stdio(toolbox)).map_err(|e| Failure {
        code: "MCP_TRANSPORT".into(),
        kind: ErrorKind::Unavailable,
        message: e.to_string(),
    })
}

fn open(home: Option<PathBuf>) -> Result<Steward, Failure> {
    Ok(steward_connectors::home::open(home)?)
}

fn source_of(m: &MailArgs) -> Result<Box<dyn MailSource>, Failure> {
    let flavor = match m.mbox_flavor.as_str() {
        "mboxrd" => MboxFlavor::Mboxrd,
        "mboxo" => MboxFlavor::Mboxo,
        other => return Err(usage(format!("unknown mbox flavor {other:?} (mboxrd or mboxo)"))),
    };
    Ok(match (&m.maildir, &m.mbox, &m.emlx) {
        (Some(p), _, _) => Box::new(MaildirSource::new(p)),
        (_, Some(p), _) => Box::new(MboxSource::new(p).flavor(flavor)),
        (_, _, Some(p)) => Box::new(EmlxSource::new(p)),
        _ => return Err(usage("one of --maildir, --mbox or --emlx is required".to_owned())),
    })
}

fn progress_bar() -> ProgressBar {
    let pb =
        if std::io::stderr().is_terminal() { ProgressBar::new(0) } else { ProgressBar::hidden() };
    pb.set_style(
        ProgressStyle::with_template(
            "{spinner} {msg:10} [{bar:40}] {pos}/{len} files {per_sec} eta {eta}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> "),
    );
    pb.enable_steady_tick(Duration::from_millis(120));
    pb
}

fn sync_with_progress(
    steward: &Steward,
    source: &dyn MailSource,
    account: Option<String>,
) -> Result<SyncSummary, Failure> {
    let pb = progress_bar();
    let opts = SyncOptions { account, cancel: None };
    let summary = steward.sync_mail(source, &opts, &mut |p: &Progress| {
        pb.set_message(match p.phase {
            ProgressPhase::Scanning => "scanning",
            ProgressPhase::Ingesting => "ingesting",
            ProgressPhase::Finishing => "finishing",
        });
        pb.set_length(p.files_total);
        pb.set_position(p.files_done);
    });
    pb.finish_and_clear();
    Ok(summary?)
}

fn print_summary(s: &SyncSummary, json: bool) {
    if json {
        json_line(s);
        return;
    }
    out!(
        "{} {} of account {:?}:",
        s.format,
        match s.mode {
            steward_core::mirror::SyncMode::Backfill => "backfill",
            steward_core::mirror::SyncMode::Reconcile => "reconcile",
        },
        s.account
    );
    out!("  added          {}", s.added);
    out!("  updated        {}", s.updated);
    out!("  copies         {}", s.copies);
    out!(
        "  unchanged      {} (files skipped: {})",
        s.unchanged + s.files_unchanged,
        s.files_unchanged
    );
    out!("  paths removed  {}", s.paths_removed);
    out!("  soft-deleted   {}", s.soft_deleted);
    out!("  threads        {}", s.threads);
    out!("  errors         {}", s.error_count);
    for e in &s.errors {
        out!("    {} {}: {}", e.code, e.path, e.message);
    }
    out!("  {:.2} s, {:.0} messages/s", s.seconds, s.messages_per_second);
}

fn index_mail(home: Option<PathBuf>, m: MailArgs) -> Result<(), Failure> {
    // The flags win over `[limits]`.
    let (batch, threads, bulk) = (m.ingest_batch, m.threads, m.bulk_load_min_files);
    let steward = steward_connectors::home::builder(home)
        .adjust_limits(move |l| {
            if let Some(n) = batch {
                l.ingest_batch = n;
            }
            if let Some(n) = threads {
                l.ingest_threads = n;
            }
            if let Some(n) = bulk {
                l.bulk_load_min_files = n;
            }
        })
        .open()?;
    let source = source_of(&m)?;
    if m.embed && !steward.has_embedder() {
        return Err(steward_core::embed::EmbedRunError::NotConfigured.into());
    }
    if m.watch {
        let stop = AtomicBool::new(false);
        let (json, embed) = (m.json, m.embed);
        watch_and_sync(
            &steward,
            source.as_ref(),
            m.account.clone(),
            WatchOptions {
                debounce: Duration::from_millis(500),
                interval: Duration::from_secs(300),
            },
            &stop,
            &mut |r| match r {
                Ok(s) => {
                    print_summary(&s, json);
                    if embed {
                        embed_after_sync(&steward, json);
                    }
                }
                Err(e) => tracing::error!(code = e.code(), "reconcile failed: {e}"),
            },
        )?;
        return Ok(());
    }
    let summary = sync_with_progress(&steward, source.as_ref(), m.account.clone())?;
    print_summary(&summary, m.json);
    if m.embed {
        let report = embed::drain_with_progress(&steward, &Default::default(), None)?;
        return embed::finish(&report, m.json);
    }
    Ok(())
}

/// `index mail --watch --embed`: a drain after each reconcile; an endpoint that is down is
/// logged and retried after the next reconcile.
fn embed_after_sync(steward: &Steward, json: bool) {
    match embed::drain_with_progress(steward, &Default::default(), None) {
        Ok(r) => {
            if let Err(f) = embed::finish(&r, json) {
                tracing::warn!(code = %f.code, "{}", f.message);
            }
        }
        Err(f) => tracing::error!(code = %f.code, "embedding failed: {}", f.message),
    }
}

fn stats(home: Option<PathBuf>, json: bool) -> Result<(), Failure> {
    let steward = open(home)?;
    let s = steward.mail_stats()?;
    if json {
        json_line(&s);
        return Ok(());
    }
    out!("tables:");
    for (t, n) in &s.tables {
        out!("  {t:18} {n}");
    }
    out!("messages by mailbox role:");
    for (r, n) in &s.messages_by_role {
        out!("  {r:18} {n}");
    }
    out!("messages by body state:");
    for (b, n) in &s.messages_by_body_state {
        out!("  {b:18} {n}");
    }
    out!("live {}, soft-deleted {}", s.messages_live, s.messages_deleted);
    out!("files with errors: {}", s.error_count);
    for e in &s.errors {
        out!("  {} {}: {}", e.code, e.path, e.message);
    }
    Ok(())
}

fn demo(
    home: Option<PathBuf>,
    messages: usize,
    json: bool,
    serve_with: Option<&serve::ServeArgs>,
) -> Result<(), Failure> {
    if messages == 0 || messages > MAX_DEMO_MESSAGES {
        return Err(usage(format!("--messages must be between 1 and {MAX_DEMO_MESSAGES}")));
    }
    let steward = open(home)?;
    // The sample documents first: sharing them may change the config the handle opens with.
    let home_dir = steward.home().to_path_buf();
    // Written over its own files only: anything else saved there stays.
    let documents = home_dir.join(steward_core::paths::DEMO_DOCUMENTS_DIR);
    let docs = steward_connectors::docs::demo::write_demo_documents(&documents)
        .map_err(|source| DemoError::Write { root: documents.clone(), source })?;
    let share = steward_connectors::home::share_demo_documents(&home_dir).map_err(Failure::from)?;
    let steward = match share {
        steward_connectors::home::DemoShare::Configured(_) => {
            drop(steward);
            open(Some(home_dir))?
        }
        _ => steward,
    };
    let maildir = steward.home().join("demo-maildir");
    if maildir.exists() {
        std::fs::remove_dir_all(&maildir)
            .map_err(|source| DemoError::Write { root: maildir.clone(), source })?;
    }
    let report = generate_maildir(
        &maildir,
        &DemoOptions { story: Some(steward_core::time::now_secs()), ..DemoOptions::new(messages) },
    )?;
    let source = MaildirSource::new(&maildir);
    let summary = sync_with_progress(&steward, &source, Some("demo".to_owned()))?;
    print_summary(&summary, json);
    // A promotion pass over the recent mail (the story's): with the configured model, else a
    // scripted stand-in that says it is one. Its facts wait in the inbox for the person.
    let scripted = steward.llm_config().is_none();
    let promoted = if scripted {
        steward_connectors::mail::demo::promote_story(steward.home())
            .map_err(|e| usage(format!("the demo's promotion pass failed: {e}")))?
    } else {
        steward.promote_mail(None).map_err(Failure::from)?
    };
    // The demo person's calendars and address book, indexed like any other.
    let (calendars, contacts) =
        (steward.home().join("demo-calendars"), steward.home().join("demo-contacts"));
    for dir in [&calendars, &contacts] {
        if dir.exists() {
            std::fs::remove_dir_all(dir)
                .map_err(|source| DemoError::Write { root: dir.clone(), source })?;
        }
    }
    let pim = steward_connectors::calendar::demo::write_demo_pim(
        &calendars,
        &contacts,
        chrono::Utc::now().timestamp(),
    )
    .map_err(|source| DemoError::Write { root: calendars.clone(), source })?;
    let (cal, _) =
        steward_connectors::pim::index_calendars(&steward, "demo", PimFrom::Vdir(&calendars))
            .map_err(Failure::from)?;
    let people = steward_connectors::pim::index_books(
        &steward,
        "demo",
        PimFrom::Vdir(&contacts),
        steward_connectors::contacts::phone::region("IT"),
    )
    .map_err(Failure::from)?
    .report;
    // The shared folders (the sample documents among them) walked and their passages indexed.
    let shared = match share {
        steward_connectors::home::DemoShare::OtherRoots(_) => None,
        _ => {
            let bar = progress_bar();
            let r = steward.index_shared_folders(None, &mut |p| {
                bar.set_length(p.total as u64);
                bar.set_position(p.done as u64);
            });
            bar.finish_and_clear();
            Some(r.map_err(Failure::from)?)
        }
    };
    if !json {
        let home = steward.home().display();
        out!();
        out!(
            "Generated {} messages ({} files, {} malformed on purpose) in {}.",
            report.messages,
            report.files,
            report.malformed,
            maildir.display()
        );
        out!(
            "Wrote {} calendar items ({} events in {} calendars) and {} cards ({} people) beside it.",
            pim.calendar_items,
            cal.events,
            cal.calendars,
            pim.cards,
            people.contacts
        );
        match (&share, shared.as_ref().and_then(|r| r.documents.as_ref())) {
            (steward_connectors::home::DemoShare::OtherRoots(_), _) => out!(
                "Wrote {} sample documents in {} (other folders are shared in config.toml: add it to [files] roots to search it).",
                docs.files,
                documents.display()
            ),
            (_, Some(d)) => out!(
                "Wrote {} sample documents in {} (a shared folder); {} documents indexed, {} passages.",
                docs.files,
                documents.display(),
                d.documents,
                d.chunks
            ),
            (_, None) => out!("Wrote {} sample documents in {}.", docs.files, documents.display()),
        }
        out!(
            "Promoted recent mail to memory ({}): {} threads read, {} model calls, {} proposals waiting for review (the app's Memory page).",
            if scripted {
                "by a scripted stand-in, not a model: none is configured"
            } else {
                "with the configured model"
            },
            promoted.threads,
            promoted.calls,
            promoted.proposals
        );
        out!("Try next:");
        out!("  steward --home {home} stats");
        out!("  steward --home {home} memory inbox");
        out!("  steward --home {home} files search \"notice registered letter\"");
        out!(
            "  steward --home {home} calendar agenda --from $(date +%F) --to $(date -d '+7 days' +%F)"
        );
        out!("  steward --home {home} contacts resolve \"Anna della scuola\"");
        out!(
            "  steward --home {home} index mail --maildir {} --account demo   # re-run: nothing changes",
            maildir.display()
        );
        out!("  steward --home {home} index mail --maildir /path/to/your/Maildir");
        out!("  steward --home {home} index mail --emlx ~/Library/Mail/V10");
    }
    match serve_with {
        Some(a) => serve::serve(steward, a),
        None => Ok(()),
    }
}

fn search_request(a: &SearchArgs) -> Result<SearchRequest, Failure> {
    Ok(SearchParams {
        text: a.text.clone(),
        from: a.from.clone(),
        to: a.to.clone(),
        cc: a.cc.clone(),
        subject_contains: a.subject_contains.clone(),
        body_contains: a.body_contains.clone(),
        account: a.account.clone(),
        mailbox: a.mailbox.clone(),
        role: a.role.clone(),
        after: a.after.clone(),
        before: a.before.clone(),
        unread: a.unread.then_some(true),
        flagged: a.flagged.then_some(true),
        has_attachments: a.has_attachment.then_some(true),
        per_message: Some(a.per_message),
        sort: Some(a.sort.clone()),
        limit: Some(a.limit),
        offset: Some(a.offset),
        ..SearchParams::default()
    }
    .into_request()?)
}

fn search(home: Option<PathBuf>, a: &SearchArgs) -> Result<(), Failure> {
    let request = search_request(a)?;
    let steward = open(home)?;
    let page = steward.search(&request)?;
    if a.json {
        json_line(&page);
        return Ok(());
    }
    if a.compact {
        let c = page.compact();
        for line in &c.lines {
            out!("{line}");
        }
        out!("ids: {}", serde_json::to_string(&c.ids).unwrap_or_else(|_| "[]".to_owned()));
        if let Some(next) = c.next_offset {
            out!("more: --offset {next}");
        }
        return Ok(());
    }
    if page.messages.is_empty() {
        out!("no messages");
    }
    for m in &page.messages {
        let from = m.from.as_ref().map_or("", |f| f.name.as_deref().unwrap_or(&f.address));
        out!(
            "{:>8}  {}  {:24.24}  {}{}",
            m.id,
            m.date.as_deref().map_or("----------", |d| d.get(..10).unwrap_or(d)),
            from,
            if m.unread { "* " } else { "" },
            if m.subject.is_empty() { "(no subject)" } else { &m.subject }
        );
        out!("          {}", m.snippet);
    }
    if let Some(next) = page.page.next_offset {
        out!("more: --offset {next}");
    }
    Ok(())
}

fn read(
    home: Option<PathBuf>,
    id: i64,
    offset: usize,
    chars: usize,
    json: bool,
) -> Result<(), Failure> {
    let steward = open(home)?;
    let m = steward.read_message(id, BodyWindow { offset, max_chars: chars })?;
    if json {
        json_line(&m);
        return Ok(());
    }
    let list = |v: &[steward_core::mirror::Address]| {
        v.iter()
            .map(|a| match &a.name {
                Some(n) => format!("{n} <{}>", a.addr),
                None => a.addr.clone(),
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    out!("Subject: {}", m.subject);
    out!("From:    {}", list(&m.from));
    out!("To:      {}", list(&m.to));
    if !m.cc.is_empty() {
        out!("Cc:      {}", list(&m.cc));
    }
    out!("Date:    {}", m.date.as_deref().unwrap_or("(none)"));
    out!("In:      {} / {} (thread {})", m.account, m.mailbox, m.thread_id);
    for a in &m.attachments {
        out!(
            "Attached: {} ({}, {} bytes)",
            a.name.as_deref().unwrap_or("(unnamed)"),
            a.mime_type,
            a.size
        );
    }
    out!();
    out!("{}", m.body.text);
    if let Some(next) = m.body.next_offset {
        out!("\n[{} of {} characters; continue with --offset {next}]", next, m.body.total_chars);
    }
    Ok(())
}

fn thread(
    home: Option<PathBuf>,
    id: i64,
    offset: usize,
    limit: usize,
    json: bool,
) -> Result<(), Failure> {
    let steward = open(home)?;
    let page = steward.read_thread(id, offset, limit)?;
    if json {
        json_line(&page);
        return Ok(());
    }
    out!("thread {} \"{}\" ({} messages)", page.thread_id, page.subject, page.message_count);
    for e in &page.messages {
        out!(
            "{:>8}  {}  {:30}  {}{}",
            e.id,
            e.date.as_deref().unwrap_or("                    "),
            e.from.as_ref().map_or("", |a| a.name.as_deref().unwrap_or(&a.addr)),
            if e.unread { "* " } else { "" },
            e.snippet
        );
    }
    if let Some(next) = page.next_offset {
        out!("more: --offset {next}");
    }
    Ok(())
}

fn rebuild(home: Option<PathBuf>, json: bool) -> Result<(), Failure> {
    let steward = open(home)?;
    let report = steward.rebuild_indexes()?;
    if json {
        json_line(&report);
    } else {
        out!(
            "text index (BM25 + substring): {} messages in {:.2} s",
            report.lexical_documents,
            report.seconds
        );
        match (&report.memory_notes, &report.memory_error) {
            (Some(n), _) => out!("memory index: {n} notes"),
            (None, Some(e)) => out!("memory index: not rebuilt: {e}"),
            (None, None) => {}
        }
    }
    Ok(())
}
