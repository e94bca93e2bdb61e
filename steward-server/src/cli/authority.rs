//! `steward approvals …`, `steward policy …`, `steward audit …`: the command is a human
//! frontend, so it mints the person's authority explicitly (`--as`, default `$USER`).

use std::{io::IsTerminal, path::PathBuf};

use clap::{Args as ClapArgs, Subcommand};
use serde_json::Value;
use steward_core::{
    Steward, ToolRuleInput,
    approval::{Approval, ApprovalQuery, ApprovalStatus, DecisionInput, DecisionKind},
    audit::{AuditQuery, MAX_AUDIT_PAGE},
    policy::PolicyChange,
    time::parse_date,
};

use super::{Failure, json_line, open, usage};

/// The person acting (`--as`).
#[derive(Debug, ClapArgs)]
pub(crate) struct Person {
    /// Who is acting (default: $USER).
    #[arg(long = "as", value_name = "PERSON")]
    person: Option<String>,
}

impl Person {
    pub(super) fn name(&self) -> String {
        self.person
            .clone()
            .or_else(|| std::env::var("USER").ok().filter(|u| !u.is_empty()))
            .unwrap_or_else(|| "owner".to_owned())
    }
}

#[derive(Debug, Subcommand)]
pub(super) enum ApprovalsCmd {
    /// List requests, newest first (pending ones that ran out of time are expired first).
    List {
        /// Only requests waiting for a person.
        #[arg(long)]
        pending: bool,
        /// Only this chat.
        #[arg(long)]
        chat: Option<String>,
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
    /// Show one request: the exact tool and input that would run, and its events.
    Show {
        /// The request id.
        id: i64,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Approve a request (with `--edit FILE.json`, run that input instead).
    Approve(ResolveArgs),
    /// Deny a request.
    Deny(ResolveArgs),
    /// Send a request back to the agent with `--note` as the feedback.
    Revise(ResolveArgs),
    /// Set the PIN that secure (L3) approvals need; read from the terminal or stdin.
    SetPin(Person),
}

#[derive(Debug, ClapArgs)]
pub(super) struct ResolveArgs {
    /// The request id.
    id: i64,
    /// A note for the record (for `revise`: what the agent should change).
    #[arg(long)]
    note: Option<String>,
    /// Replacement input (JSON object in a file; `-` reads stdin). Approve only.
    #[arg(long, value_name = "FILE.json")]
    edit: Option<PathBuf>,
    /// Ask for the PIN (secure requests); read from the terminal or stdin.
    #[arg(long)]
    pin: bool,
    #[command(flatten)]
    person: Person,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Subcommand)]
pub(super) enum PolicyCmd {
    /// The policy in force (and, with --history, earlier versions).
    Show {
        /// Also list up to N earlier versions.
        #[arg(long, value_name = "N")]
        history: Option<usize>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Run TOOL at LEVEL (L0-L3 or auto, logged, confirm, secure; floors still apply), or
    /// `allow`, `deny`, `default` for an exact rule.
    Set {
        /// The tool, `namespace.verb`.
        tool: String,
        /// L0-L3, auto, logged, confirm, secure, allow, deny or default.
        level: String,
        /// The reason shown to the agent for `deny`.
        #[arg(long)]
        reason: Option<String>,
        /// Refuse if the policy is no longer at this version.
        #[arg(long, value_name = "N")]
        expect_version: Option<u64>,
        #[command(flatten)]
        person: Person,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Deny (or with --undo, stop denying) a whole namespace such as `shell`.
    DenyNamespace {
        /// The namespace.
        prefix: String,
        /// Remove the namespace from the denied ones.
        #[arg(long)]
        undo: bool,
        #[command(flatten)]
        person: Person,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Deny (or with --undo, stop denying) a tool to some agents only:
    /// `agent:mcp:*:mail.send` (every MCP client), `agent:mcp:cursor:mail.*`.
    DenyAgent {
        /// `<agent pattern>:<tool, namespace.* or *>`.
        rule: String,
        /// Remove the denial.
        #[arg(long)]
        undo: bool,
        #[command(flatten)]
        person: Person,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, ClapArgs)]
pub(super) struct AuditArgs {
    /// Only this actor.
    #[arg(long)]
    actor: Option<String>,
    /// Only this event type (`policy.decision`, `approval.approved`, …).
    #[arg(long = "type")]
    event_type: Option<String>,
    /// Only this risk: low, medium, high.
    #[arg(long)]
    risk: Option<String>,
    /// Only this chat.
    #[arg(long)]
    chat: Option<String>,
    /// Only this tool.
    #[arg(long)]
    tool: Option<String>,
    /// At or after this date (YYYY-MM-DD or RFC 3339).
    #[arg(long)]
    since: Option<String>,
    /// Before this date.
    #[arg(long)]
    until: Option<String>,
    /// The redacted payload contains this text.
    #[arg(long)]
    text: Option<String>,
    /// Skip this many.
    #[arg(long, default_value_t = 0)]
    offset: usize,
    /// At most this many (1..=200).
    #[arg(long, default_value_t = 50)]
    limit: usize,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

fn card(a: &Approval) {
    let input = a.input_to_run();
    out!(
        "#{} {:?} {} {} ({}) by {}{}",
        a.id,
        a.status,
        a.tool,
        a.level.as_str(),
        a.summary,
        a.requested_by,
        a.chat.as_ref().map(|c| format!(" in {c}")).unwrap_or_default()
    );
    out!("  input: {}", steward_core::approval::canonical_json(input));
    if let Some(by) = &a.decided_by {
        out!("  decided by {by}{}", a.note.as_ref().map(|n| format!(": {n}")).unwrap_or_default());
    }
}

pub(super) fn read_secret(prompt: &str) -> Result<String, Failure> {
    let line = if std::io::stdin().is_terminal() {
        rpassword::prompt_password(prompt).map_err(|e| usage(format!("cannot read: {e}")))?
    } else {
        let mut s = String::new();
        std::io::stdin().read_line(&mut s).map_err(|e| usage(format!("cannot read: {e}")))?;
        s
    };
    Ok(line.trim_end_matches(['\r', '\n']).to_owned())
}

fn read_edit(path: &PathBuf) -> Result<Value, Failure> {
    let text = if path.as_os_str() == "-" {
        std::io::read_to_string(std::io::stdin())
    } else {
        std::fs::read_to_string(path)
    }
    .map_err(|e| usage(format!("cannot read {}: {e}", path.display())))?;
    serde_json::from_str(&text).map_err(|e| usage(format!("{} is not JSON: {e}", path.display())))
}

pub(super) fn approvals(home: Option<PathBuf>, cmd: ApprovalsCmd) -> Result<(), Failure> {
    let steward = open(home)?;
    match cmd {
        ApprovalsCmd::List { pending, chat, offset, limit, json } => {
            let q = ApprovalQuery {
                status: pending.then(|| "pending".to_owned()),
                chat,
                offset,
                limit: Some(limit),
            };
            let page = steward.list_approvals(&q)?;
            if json {
                json_line(&page);
            } else if page.is_empty() {
                out!("no approvals");
            } else {
                page.iter().for_each(card);
            }
        }
        ApprovalsCmd::Show { id, json } => {
            let d = steward.approval_detail(id)?;
            if json {
                json_line(&d);
            } else {
                card(&d.approval);
                for e in d.events {
                    out!("  {} {} by {}", e.at, e.event, e.actor);
                }
            }
        }
        ApprovalsCmd::Approve(a) => resolve(&steward, a, DecisionKind::Approve)?,
        ApprovalsCmd::Deny(a) => resolve(&steward, a, DecisionKind::Deny)?,
        ApprovalsCmd::Revise(a) => resolve(&steward, a, DecisionKind::Revise)?,
        ApprovalsCmd::SetPin(p) => {
            let who = steward.human(&p.name())?;
            let pin = read_secret("New PIN: ")?;
            steward.set_pin(&who, &pin)?;
            out!("PIN set for {}", who.person());
        }
    }
    Ok(())
}

fn resolve(steward: &Steward, a: ResolveArgs, kind: DecisionKind) -> Result<(), Failure> {
    let who = steward.human(&a.person.name())?;
    let input = DecisionInput {
        note: a.note,
        edit: a.edit.as_ref().map(read_edit).transpose()?,
        pin: if a.pin { Some(read_secret("PIN: ")?) } else { None },
    };
    let done = steward.decide_approval(a.id, kind, &input, &who)?;
    if a.json {
        json_line(&done);
    } else {
        card(&done);
        if done.status.allows_execution() {
            out!("  sha256 of what runs: {}", done.effective_sha256.unwrap_or_default());
        } else if done.status == ApprovalStatus::RevisionRequested {
            out!("  sent back to {}", done.requested_by);
        }
    }
    Ok(())
}

fn print_version(v: &steward_core::policy::PolicyVersion, json: bool) {
    if json {
        json_line(v);
    } else {
        out!(
            "policy version {}{}",
            v.version,
            v.changed_by.as_ref().map(|b| format!(", changed by {b}")).unwrap_or_default()
        );
    }
}

pub(super) fn policy(home: Option<PathBuf>, cmd: PolicyCmd) -> Result<(), Failure> {
    let steward = open(home)?;
    match cmd {
        PolicyCmd::Show { history, json } => {
            let o = steward.policy_overview(history.unwrap_or(0))?;
            if json {
                json_line(&o);
            } else {
                print_version(&o.current, false);
                let p = &o.current.policy;
                for (tool, rule) in &p.rules {
                    out!("  rule {tool}: {}", serde_json::to_string(rule).unwrap_or_default());
                }
                for (tool, level) in &p.overrides {
                    out!("  level {tool}: {}", level.as_str());
                }
                for prefix in &p.deny_prefixes {
                    out!("  denied namespace {prefix}*");
                }
                for rule in &p.agent_denies {
                    out!("  denied to agents {rule}");
                }
                for tool in &p.allow_reads {
                    out!("  allowed read {tool}");
                }
                for t in &o.tools {
                    out!(
                        "  tool {} ({}, default {})",
                        t.name,
                        t.effect.as_str(),
                        t.default_level.as_str()
                    );
                }
                for v in &o.history {
                    out!(
                        "  was version {} by {}: {}",
                        v.version,
                        v.changed_by.as_deref().unwrap_or("-"),
                        serde_json::to_string(&v.change).unwrap_or_default()
                    );
                }
            }
        }
        PolicyCmd::Set { tool, level, reason, expect_version, person, json } => {
            let who = steward.human(&person.name())?;
            let input = ToolRuleInput { level, reason, expect_version };
            print_version(&steward.set_tool_rule(&who, &tool, &input)?, json);
        }
        PolicyCmd::DenyNamespace { prefix, undo, person, json } => {
            let change = if undo {
                PolicyChange::UndenyNamespace { prefix }
            } else {
                PolicyChange::DenyNamespace { prefix }
            };
            set(&steward, &person, &change, json)?;
        }
        PolicyCmd::DenyAgent { rule, undo, person, json } => {
            let change = if undo {
                PolicyChange::UndenyAgent { rule }
            } else {
                PolicyChange::DenyAgent { rule }
            };
            set(&steward, &person, &change, json)?;
        }
    }
    Ok(())
}

/// `person` applies `change` to the policy; prints the new version.
fn set(
    steward: &Steward,
    person: &Person,
    change: &PolicyChange,
    json: bool,
) -> Result<(), Failure> {
    let who = steward.human(&person.name())?;
    print_version(&steward.set_policy(&who, change, None)?, json);
    Ok(())
}

pub(super) fn audit(home: Option<PathBuf>, a: AuditArgs) -> Result<(), Failure> {
    if a.limit == 0 || a.limit > MAX_AUDIT_PAGE {
        return Err(usage(format!("--limit must be 1..={MAX_AUDIT_PAGE}")));
    }
    let date = |s: &Option<String>| -> Result<Option<i64>, Failure> {
        s.as_deref().map(|d| parse_date(d).map_err(Failure::from)).transpose()
    };
    let q = AuditQuery {
        actor: a.actor,
        event_type: a.event_type,
        risk: a.risk,
        chat: a.chat,
        tool: a.tool,
        after: date(&a.since)?,
        before: date(&a.until)?,
        text: a.text,
        offset: a.offset,
        limit: a.limit,
    };
    let steward = open(home)?;
    let page = steward.audit_page(&q)?;
    if a.json {
        json_line(&page);
    } else if page.events.is_empty() {
        out!("no audit events");
    } else {
        for r in page.events {
            out!(
                "{} {} {} {} {}{} {}",
                r.id,
                r.at,
                r.risk,
                r.event_type,
                r.actor,
                r.tool.map(|t| format!(" {t}")).unwrap_or_default(),
                r.payload
            );
        }
    }
    Ok(())
}
