//! Calls from an outside agent (an MCP client, through `steward mcp` or `/mcp`): the same
//! gate as the chat runner's, for an agent that cannot be paused. A gated call leaves an
//! approval request and answers "pending"; the same call again (same tool, same normalized
//! input, same agent) answers from that request: still pending, declined, or — once a person
//! approved it — run, exactly once. Nothing runs without the person, and the agent can never
//! decide: its identity is an `agent:` one.

use std::{
    sync::atomic::Ordering,
    time::{Duration, Instant},
};

use serde_json::{Value, json};

use super::{ToolError, ToolInfo, ToolResult, Toolbox};
use crate::{
    ToolCall,
    approval::{Approval, ApprovalStatus, canonical_json},
    policy::{Decision, DecisionContext, DenyReason, Level},
    time::now_secs,
};

/// Longest agent name an outside client may give (`agent:mcp:<name>`), characters.
/// Fixed (not a setting).
pub const MAX_CLIENT_NAME_CHARS: usize = 64;

/// Longest a client's gated call may wait for the person's decision, seconds.
/// The upper end of `[mcp] wait_secs`.
pub const MAX_CLIENT_WAIT_SECS: u64 = 600;
/// Calls that may wait for a decision at once (each holds a thread); more answer "pending" at
/// once. Fixed (not a setting).
pub const MAX_WAITING_CALLS: usize = 32;
/// How often a waiting call looks at its request.
/// Fixed (not a setting).
const WAIT_POLL: Duration = Duration::from_millis(200);
/// How often a waiting call tells its client it still waits.
/// Fixed (not a setting).
const WAIT_PROGRESS: Duration = Duration::from_secs(5);

/// What an outside agent's call came to.
#[derive(Debug)]
#[non_exhaustive]
pub enum ClientOutcome {
    /// It ran: allowed by the policy, or approved by a person (then `approval` names the
    /// request this call consumed).
    Ran {
        /// The level it ran at.
        level: Level,
        /// The result.
        result: Box<ToolResult>,
        /// The approval it ran under.
        approval: Option<i64>,
    },
    /// A person decides first: the request (new, or the one this same call already left).
    Pending {
        /// The request.
        approval: Box<Approval>,
    },
    /// A person declined this same call: it is not asked again.
    Declined {
        /// The request the person declined.
        approval: Box<Approval>,
    },
    /// The policy denies it.
    Denied {
        /// Why.
        reason: DenyReason,
    },
}

/// The URI of a mirrored message as a resource (`{id}`: its mirror id).
pub const MESSAGE_RESOURCE: &str = "steward://mail/message/{id}";
/// The URI of a thread as a resource.
pub const THREAD_RESOURCE: &str = "steward://mail/thread/{id}";
/// Messages listed as resources (the newest, through `mail.search`).
/// Fixed (not a setting): the most `mail.search` returns to a model.
pub const LISTED_RESOURCES: usize = 12;
/// Longest resource name, characters.
/// Fixed (not a setting).
pub const RESOURCE_NAME_CHARS: usize = 100;

/// A resource an outside client may read: its URI and a name to show.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientResource {
    /// `steward://mail/message/<id>`.
    pub uri: String,
    /// `#<id> <subject>`.
    pub name: String,
}

/// The identity of an outside client named `name` (by its `initialize`): `agent:mcp:<name>`,
/// the name cut to [`MAX_CLIENT_NAME_CHARS`] and kept to letters, digits, `.`, `-` and `_`.
pub fn client_actor(name: &str) -> String {
    let clean: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') { c } else { '-' })
        .take(MAX_CLIENT_NAME_CHARS)
        .collect();
    let clean = clean.trim_matches('-');
    format!("agent:mcp:{}", if clean.is_empty() { "unnamed" } else { clean })
}

impl Toolbox {
    /// The tools outside client `actor` may see: Steward's own that can run here and that
    /// the policy does not deny it outright (a gated tool is listed; a denied one is not).
    /// Outside servers' tools (`mcp.*`) are Steward's agent's only: Steward does not relay
    /// one outside party to another.
    pub fn list_for_client(&self, actor: &str) -> Result<Vec<ToolInfo>, ToolError> {
        let policy = self.steward.policy()?.policy;
        let ctx = DecisionContext { actor: Some(actor), ..DecisionContext::default() };
        let empty = json!({});
        Ok(self
            .infos(false)
            .into_iter()
            .filter(|t| {
                !matches!(
                    crate::policy::decide(self.steward.tools(), &policy, &t.name, &empty, &ctx),
                    Decision::Deny { .. }
                )
            })
            .collect())
    }

    /// The newest messages as resources, through `mail.search` under the client's identity
    /// (so the policy and the audit see it like any read), at most [`LISTED_RESOURCES`].
    pub fn client_resources(&self, actor: &str) -> Result<Vec<ClientResource>, ToolError> {
        let input = json!({"query": "", "limit": LISTED_RESOURCES});
        let call = ToolCall { actor, chat: None, tool: "mail.search", input: &input };
        let ClientOutcome::Ran { result, .. } = self.call_for_client(&call)? else {
            return Ok(Vec::new());
        };
        // Each line of the compact page: `N. #ID date sender | subject | snippet`.
        Ok(result
            .text
            .lines()
            .filter_map(|line| {
                let (_, rest) = line.split_once(". #")?;
                let (id, rest) = rest.split_once(' ')?;
                let id: i64 = id.parse().ok()?;
                let subject = rest.split(" | ").nth(1).unwrap_or("").trim();
                let name: String =
                    format!("#{id} {subject}").chars().take(RESOURCE_NAME_CHARS).collect();
                Some(ClientResource {
                    uri: MESSAGE_RESOURCE.replace("{id}", &id.to_string()),
                    name,
                })
            })
            .collect())
    }

    /// Reads resource `uri` (a message or a thread) through `mail.read` / `mail.thread` under
    /// the client's identity: the bounded text, mail fenced as data. A URI of another shape is
    /// invalid input; a read the policy denies is an error like any call's.
    pub fn read_client_resource(&self, actor: &str, uri: &str) -> Result<String, ToolError> {
        let invalid = |why: &str| ToolError::InvalidInput {
            tool: "resources/read".to_owned(),
            reason: format!("{uri}: {why}"),
        };
        let id_in = |template: &str| {
            let prefix = template.trim_end_matches("{id}");
            uri.strip_prefix(prefix).map(|id| id.parse::<i64>().map_err(|_| invalid("not an id")))
        };
        let (tool, input) = if let Some(id) = id_in(MESSAGE_RESOURCE) {
            ("mail.read", json!({"message_id": id?}))
        } else if let Some(id) = id_in(THREAD_RESOURCE) {
            ("mail.thread", json!({"thread_id": id?}))
        } else {
            return Err(invalid(
                "not a Steward resource (steward://mail/message/ID or …/thread/ID)",
            ));
        };
        let call = ToolCall { actor, chat: None, tool, input: &input };
        match self.call_for_client(&call)? {
            ClientOutcome::Ran { result, .. } => Ok(result_text(&result)),
            ClientOutcome::Denied { reason } => Err(invalid(&format!(
                "the policy denies {tool}: {}",
                serde_json::to_string(&reason).unwrap_or_default()
            ))),
            _ => Err(invalid(&format!("{tool} waits for a person's approval"))),
        }
    }

    /// Calls `call.tool` for an outside agent (`call.actor`, an `agent:` identity), through
    /// the gate (see the module documentation), and counts the call in the usage ledger under
    /// the agent.
    pub fn call_for_client(&self, call: &ToolCall<'_>) -> Result<ClientOutcome, ToolError> {
        let started = Instant::now();
        let outcome = self.client_call(call);
        let name = match &outcome {
            Ok(ClientOutcome::Ran { .. }) => "ran",
            Ok(ClientOutcome::Pending { .. }) => "pending",
            Ok(ClientOutcome::Declined { .. }) => "declined",
            Ok(ClientOutcome::Denied { .. }) => "denied",
            Err(_) => "failed",
        };
        let record = crate::llm::ClientCallRecord {
            at: now_secs(),
            agent: call.actor,
            tool: call.tool,
            outcome: name,
            latency_ms: i64::try_from(started.elapsed().as_millis()).unwrap_or(i64::MAX),
        };
        if let Err(e) = self.steward.usage().and_then(|u| u.record_client_call(&record)) {
            tracing::warn!(error = %e, "a client's call is not counted in usage");
        }
        outcome
    }

    /// [`Toolbox::call_for_client`], and when the call is gated, waiting for the person's
    /// decision up to the toolbox's client wait ([`Toolbox::set_client_wait`]; none by
    /// default), while `cancelled` says no and at most [`MAX_WAITING_CALLS`] wait at once:
    /// approved, it runs (once) and answers its result; declined, it answers so; still
    /// undecided, it answers "pending". `waiting` is told the request at once and then every
    /// few seconds, so the client can show it and keep the call open.
    pub fn call_for_client_waiting(
        &self,
        call: &ToolCall<'_>,
        cancelled: &dyn Fn() -> bool,
        waiting: &mut dyn FnMut(&Approval, Duration),
    ) -> Result<ClientOutcome, ToolError> {
        let outcome = self.call_for_client(call)?;
        let ClientOutcome::Pending { approval } = &outcome else { return Ok(outcome) };
        if self.client_wait.is_zero() {
            return Ok(outcome);
        }
        let Some(_slot) = WaitSlot::take(&self.waiting) else { return Ok(outcome) };
        let id = approval.id;
        let started = Instant::now();
        waiting(approval, Duration::ZERO);
        let mut told = started;
        let decided = loop {
            if started.elapsed() >= self.client_wait || cancelled() {
                break false;
            }
            std::thread::sleep(WAIT_POLL);
            let a = self.steward.approvals().and_then(|a| a.get(id))?;
            if a.status != ApprovalStatus::Requested {
                break true;
            }
            if told.elapsed() >= WAIT_PROGRESS {
                told = Instant::now();
                waiting(&a, started.elapsed());
            }
        };
        if decided { self.call_for_client(call) } else { Ok(outcome) }
    }

    fn client_call(&self, call: &ToolCall<'_>) -> Result<ClientOutcome, ToolError> {
        if call.tool.starts_with(crate::policy::EXTERNAL_NAMESPACE) {
            return Err(ToolError::Unknown { tool: call.tool.to_owned() });
        }
        let input = self.preflight(call.tool, call.input)?;
        let now = now_secs();
        let approvals = self.steward.approvals()?;
        let key = canonical_json(&input);
        let mut found = approvals.latest_for(call.actor, call.tool, &key)?;
        if found
            .as_ref()
            .is_some_and(|(a, _)| a.status == ApprovalStatus::Requested && a.expires_at <= now)
        {
            // Past its time: expired first. (Sweeping only then keeps a plain read free of
            // writes to the approvals.)
            approvals.expire_due(now)?;
            found = approvals.latest_for(call.actor, call.tool, &key)?;
        }
        if let Some((a, consumed)) = found {
            match a.status {
                ApprovalStatus::Requested => {
                    return Ok(ClientOutcome::Pending { approval: Box::new(a) });
                }
                ApprovalStatus::Denied => {
                    return Ok(ClientOutcome::Declined { approval: Box::new(a) });
                }
                // Claimed before it runs: two racing calls cannot both run it.
                ApprovalStatus::Approved | ApprovalStatus::Edited
                    if !consumed && approvals.consume(a.id, now)? =>
                {
                    let result = self.run_approved(a.id, call.actor)?;
                    return Ok(ClientOutcome::Ran {
                        level: a.level,
                        result: Box::new(result),
                        approval: Some(a.id),
                    });
                }
                // Run already, expired, cancelled or sent back: a new decision.
                _ => {}
            }
        }
        let decided = ToolCall { input: &input, ..*call };
        Ok(match self.call(&decided, &DecisionContext::default())? {
            super::ToolOutcome::Ran { level, result } => {
                ClientOutcome::Ran { level, result, approval: None }
            }
            super::ToolOutcome::AwaitingApproval { approval } => {
                ClientOutcome::Pending { approval }
            }
            super::ToolOutcome::Denied { reason } => ClientOutcome::Denied { reason },
        })
    }
}

/// One of the [`MAX_WAITING_CALLS`] places to wait, given back when dropped.
struct WaitSlot<'a>(&'a std::sync::atomic::AtomicUsize);

impl<'a> WaitSlot<'a> {
    fn take(count: &'a std::sync::atomic::AtomicUsize) -> Option<Self> {
        count
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < MAX_WAITING_CALLS).then_some(n + 1)
            })
            .ok()
            .map(|_| Self(count))
    }
}

impl Drop for WaitSlot<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The text a client's model reads for a result: untrusted text fenced and labelled as data,
/// as Steward's own agent reads it.
pub fn result_text(r: &ToolResult) -> String {
    crate::agent::for_model(r)
}

/// The structured answer to a pending call, for a client to show and act on.
pub fn pending_json(a: &Approval) -> Value {
    json!({
        "status": "pending_approval",
        "approval_id": a.id,
        "summary": a.summary,
        "level": a.level,
        "expires_at": a.expires_at,
        "message": format!(
            "pending approval #{}: a person must decide in Steward (steward approvals show {}); \
             call again with the same input after they approve",
            a.id, a.id
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::client_actor;

    #[test]
    fn a_client_name_becomes_a_bounded_agent_identity() {
        assert_eq!(client_actor("claude-ai"), "agent:mcp:claude-ai");
        assert_eq!(client_actor("My Client/1.0"), "agent:mcp:My-Client-1.0");
        assert_eq!(client_actor(""), "agent:mcp:unnamed");
        assert_eq!(client_actor(&"x".repeat(500)).len(), "agent:mcp:".len() + 64);
        assert!(client_actor("human:ada").starts_with("agent:"), "never a person");
    }
}
