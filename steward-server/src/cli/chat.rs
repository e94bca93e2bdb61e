//! `steward chat` and `steward chats`: a turn from the terminal (streamed text, tool lines,
//! approval prompts answered inline) or as JSON lines, and the chats themselves.

use std::{
    io::{BufRead as _, IsTerminal as _, Write as _},
    path::PathBuf,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicU32, Ordering},
    },
    time::Duration,
};

use clap::{Args as ClapArgs, Subcommand};
use serde_json::json;
use steward_core::{
    Steward,
    agent::{Agent, EndReason, RunFollower, TurnEvent},
    approval::{DecisionInput, DecisionKind},
};

use super::{Failure, json_line, open, usage};

/// `steward chat [--chat ID | --new] [--json] [TEXT]`.
#[derive(Debug, ClapArgs)]
#[command(group(clap::ArgGroup::new("which").multiple(false)))]
pub(super) struct ChatArgs {
    /// Continue this chat.
    #[arg(long, group = "which")]
    chat: Option<String>,
    /// Start a new chat (the default without --chat).
    #[arg(long, group = "which")]
    new: bool,
    /// One event per line (JSON), then the turn's result; approvals are left to
    /// `steward approvals` (or any other frontend).
    #[arg(long)]
    json: bool,
    /// Who decides approvals asked for inline (default: $USER).
    #[arg(long)]
    person: Option<String>,
    /// The message; without it, a prompt on the terminal.
    text: Option<String>,
}

#[derive(Debug, Subcommand)]
pub(super) enum ChatsCmd {
    /// Chats, most recently active first.
    List {
        /// Skip this many.
        #[arg(long, default_value_t = 0)]
        offset: usize,
        /// At most this many (1..=100).
        #[arg(long, default_value_t = 20)]
        limit: usize,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// A chat's messages and tool calls.
    Show {
        /// The chat.
        id: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Set a chat's title.
    Rename {
        /// The chat.
        id: String,
        /// The title.
        title: String,
    },
    /// Delete a chat (its content is purged).
    Delete {
        /// The chat.
        id: String,
    },
}

fn agent(home: Option<PathBuf>) -> Result<(Arc<Steward>, Agent), Failure> {
    let steward = Arc::new(open(home)?);
    let agent = steward_connectors::home::agent(Arc::clone(&steward))?;
    Ok((steward, agent))
}

pub(super) fn chats(home: Option<PathBuf>, cmd: ChatsCmd) -> Result<(), Failure> {
    let (_, agent) = agent(home)?;
    match cmd {
        ChatsCmd::List { offset, limit, json } => {
            let list = agent.list_chats(offset, limit)?;
            if json {
                json_line(&list);
            } else {
                for c in list {
                    out!("{}  {}", c.id, if c.title.is_empty() { "(untitled)" } else { &c.title });
                }
            }
        }
        ChatsCmd::Show { id, json } => {
            let chat = agent.chat(&id)?;
            let messages = agent.messages(&id, 0, steward_core::agent::MAX_MESSAGE_PAGE)?;
            let calls = agent.tool_calls(&id)?;
            if json {
                json_line(&json!({"chat": chat, "messages": messages, "tool_calls": calls}));
                return Ok(());
            }
            for m in messages {
                match m.role.as_str() {
                    "tool" => out!(
                        "  [{}] {}",
                        m.tool_call_id.unwrap_or_default(),
                        m.content.unwrap_or_default()
                    ),
                    role => {
                        if let Some(c) = m.content {
                            out!("{role}: {c}");
                        }
                        for c in m.tool_calls {
                            out!("  · {}({}) [{}]", c.name, c.arguments, c.id);
                        }
                    }
                }
            }
        }
        ChatsCmd::Rename { id, title } => {
            agent.rename_chat(&id, &title)?;
        }
        ChatsCmd::Delete { id } => agent.delete_chat(&id)?,
    }
    Ok(())
}

/// What following a run ended with.
struct Followed {
    /// The run followed last (a run that ended with a message still queued hands over to
    /// the one that takes it).
    run: String,
    reason: EndReason,
    approvals: Vec<i64>,
}

/// What Ctrl-C interrupts now.
#[derive(Debug, Clone)]
enum Current {
    /// Between turns: Ctrl-C leaves.
    Idle,
    /// A run of a chat: Ctrl-C cancels it (or the run it hands over to).
    Run { chat: String, run: String },
    /// An approved action runs: Ctrl-C waits for it (a second one leaves).
    Acting,
}

/// What Ctrl-C interrupts, and how many Ctrl-Cs it had (a second one leaves).
static CURRENT: Mutex<Current> = Mutex::new(Current::Idle);
static INTERRUPTS: AtomicU32 = AtomicU32::new(0);
/// Ctrl-C came while a run handed over to the next one (nothing running could be cancelled):
/// the follower cancels the next run as soon as it follows it.
static CANCEL_NEXT: AtomicBool = AtomicBool::new(false);

fn set_current(now: Current) {
    *CURRENT.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = now;
    INTERRUPTS.store(0, Ordering::SeqCst);
}

/// Ctrl-C (SIGINT) while a turn runs cancels it — the turn ends `cancelled`, its result is
/// printed as usual — and says so on stderr; while an approved action runs it waits for it;
/// between turns, or a second time, it leaves.
fn install_ctrl_c(agent: &Agent) {
    let agent = agent.clone();
    let handler = move || {
        let now = CURRENT.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
        if INTERRUPTS.fetch_add(1, Ordering::SeqCst) > 0 {
            std::process::exit(130);
        }
        match now {
            Current::Idle => std::process::exit(130),
            Current::Acting => {
                eprintln!(
                    "\nsteward: an approved action is running; it finishes first (Ctrl-C again leaves)"
                );
            }
            Current::Run { chat, run } => {
                // The run may have just ended and handed its queued message to the next one.
                let target = if agent.cancel(&run) {
                    Some(run)
                } else {
                    let named = agent.turn(&run).ok().and_then(|t| t.next_run);
                    let latest = agent.latest_run(&chat).ok().flatten();
                    named.into_iter().chain(latest).find(|r| *r != run && agent.cancel(r))
                };
                match target {
                    Some(r) => eprintln!("\nsteward: cancelling run {r} (Ctrl-C again leaves)"),
                    None => {
                        CANCEL_NEXT.store(true, Ordering::SeqCst);
                        eprintln!(
                            "\nsteward: cancelling (the turn is handing over; Ctrl-C again leaves)"
                        );
                    }
                }
            }
        }
    };
    if let Err(e) = ctrlc::set_handler(handler) {
        tracing::warn!(error = %e, "Ctrl-C cannot cancel turns here");
    }
}

/// Prints a run's events until it (and any run it hands over to) ends; Ctrl-C cancels it.
fn follow(agent: &Agent, mut f: RunFollower, json: bool) -> Result<Followed, Failure> {
    let mut approvals = Vec::new();
    let running =
        |f: &RunFollower| Current::Run { chat: f.chat_id().to_owned(), run: f.run_id().to_owned() };
    set_current(running(&f));
    CANCEL_NEXT.store(false, Ordering::SeqCst);
    let result = loop {
        // A Ctrl-C that came while the run handed over cancels the run followed now, once it
        // can be (its flag exists from the moment its id was reserved).
        if CANCEL_NEXT.load(Ordering::SeqCst) && agent.cancel(f.run_id()) {
            CANCEL_NEXT.store(false, Ordering::SeqCst);
            eprintln!("\nsteward: cancelling run {} (Ctrl-C again leaves)", f.run_id());
        }
        let Some(e) = f.next(Duration::from_secs(1))? else { continue };
        if json {
            json_line(&e);
        }
        match &e.event {
            TurnEvent::TextDelta { text } if !json => {
                print!("{text}");
                let _ = std::io::stdout().flush();
            }
            TurnEvent::ToolProposed { tool, input, .. } if !json => out!("\n· {tool} {input}"),
            TurnEvent::ToolFinished { status, sources, .. } if !json => {
                out!("  → {status} ({} source(s))", sources.len());
            }
            TurnEvent::ContextCompacted { dropped, summarized, .. } if !json => {
                let how = if *summarized { "summarized" } else { "left out" };
                out!("\n(older context {how}: {dropped} item(s))");
            }
            TurnEvent::ApprovalRequired { approval_id, summary, .. } => {
                approvals.push(*approval_id);
                if !json {
                    out!("\n⏸ approval #{approval_id}: {summary}");
                }
            }
            TurnEvent::TurnEnded { reason, error, .. } => {
                if !json {
                    let error = error.as_ref().map(|e| format!(": {e}")).unwrap_or_default();
                    out!("\n({}{error})", reason.as_str());
                }
                if f.done() {
                    break Followed { run: f.run_id().to_owned(), reason: *reason, approvals };
                }
                set_current(running(&f));
            }
            _ => {}
        }
    };
    set_current(Current::Idle);
    Ok(result)
}

fn ask(prompt: &str) -> Option<String> {
    print!("{prompt}");
    let _ = std::io::stdout().flush();
    let mut line = String::new();
    match std::io::stdin().lock().read_line(&mut line) {
        Ok(0) | Err(_) => None,
        Ok(_) => Some(line.trim().to_owned()),
    }
}

pub(super) fn chat(home: Option<PathBuf>, a: ChatArgs) -> Result<(), Failure> {
    let (steward, agent) = agent(home)?;
    // Made by the first message (one that cannot run leaves no empty chat behind).
    let mut chat = match &a.chat {
        Some(id) => Some(agent.chat(id)?.id),
        None => None,
    };
    let interactive = !a.json && std::io::stdin().is_terminal();
    install_ctrl_c(&agent);
    let person =
        a.person.clone().or_else(|| std::env::var("USER").ok()).unwrap_or_else(|| "person".into());
    let mut next = match a.text.clone() {
        Some(t) => Some(t),
        None if interactive => ask("you: ").filter(|t| !t.is_empty()),
        None => return Err(usage("a message is needed (or run on a terminal)".into())),
    };
    while let Some(text) = next.take() {
        let sent = agent.send(chat.as_deref(), &text)?;
        if !a.json && chat.is_none() {
            out!("chat {}", sent.chat_id);
        }
        let chat_id = sent.chat_id.clone();
        chat = Some(sent.chat_id.clone());
        let mut f = follow(&agent, agent.follow(&sent.run_id, &sent.chat_id, sent.cursor), a.json)?;
        // Approvals asked for inline: the person at this terminal decides, the chat resumes.
        while interactive && f.reason == EndReason::AwaitingApproval {
            for id in std::mem::take(&mut f.approvals) {
                let detail = steward.approval_detail(id)?;
                out!(
                    "  {} {}",
                    detail.approval.tool,
                    steward_core::approval::canonical_json(detail.approval.input_to_run())
                );
                let answer = ask("approve? [y/N] ").unwrap_or_default();
                let kind = if answer.eq_ignore_ascii_case("y") {
                    DecisionKind::Approve
                } else {
                    DecisionKind::Deny
                };
                let who = steward.human(&person)?;
                steward.decide_approval(id, kind, &DecisionInput::default(), &who)?;
            }
            // The approved action runs here: Ctrl-C lets it finish.
            set_current(Current::Acting);
            let resolved = agent.resolve_decided();
            set_current(Current::Idle);
            resolved?;
            // The decision resumed the chat in a run of its own.
            let Some(resumed) = agent.latest_run(&chat_id)?.filter(|r| *r != f.run) else {
                break;
            };
            f = follow(&agent, agent.follow_run(&resumed)?, false)?;
        }
        if a.json {
            // The turn ended (its TurnEnded event was read): its result is recorded.
            json_line(&agent.result(&f.run)?);
        }
        if f.reason == EndReason::Error {
            let t = agent.turn(&f.run)?;
            return Err(Failure {
                code: "TURN_FAILED".into(),
                kind: steward_core::ErrorKind::Unavailable,
                message: t.error.unwrap_or_else(|| "the turn failed".into()),
            });
        }
        if interactive && a.text.is_none() {
            next = ask("you: ").filter(|t| !t.is_empty());
        }
    }
    Ok(())
}
