//! Offline replay for evaluation: recorded tool calls run through the policy in force, with
//! nothing executed, nothing approved and nothing written (not even the audit trail — a replay
//! is not a decision anyone acted on). Notebooks use it to see what a policy change would do to
//! a log of real calls before making it.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{
    Steward,
    error::{ErrorKind, StewardError},
    jsonl::{LineError, parse_lines},
    policy::{Decision, DecisionContext, Level, PolicyError, decide},
};

/// Records one replay accepts at most.
/// Fixed (not a setting).
pub const MAX_REPLAY_RECORDS: usize = 10_000;

/// One recorded tool call (a line of a JSONL log).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplayRecord {
    /// The tool (`mail.send`).
    pub tool: String,
    /// Its input.
    pub input: Value,
    /// What the decision should be: `allow`, `gate` or `deny`, optionally with a level
    /// (`gate:secure`, `allow:logged`). Absent: no comparison.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected: Option<String>,
    /// Replay as a background (watch) turn holding only these grants.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headless_grants: Option<Vec<String>>,
}

/// The decision for one record.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReplayOutcome {
    /// The record's position (0-based).
    pub index: usize,
    /// The tool.
    pub tool: String,
    /// `allow`, `gate` or `deny`.
    pub decision: &'static str,
    /// The level of an allow or a gate.
    pub level: Option<&'static str>,
    /// The full decision, with a denial's reason.
    pub detail: Decision,
    /// The record's expectation.
    pub expected: Option<String>,
    /// Whether the decision meets the expectation (absent without one).
    pub matches: Option<bool>,
}

/// A whole replay.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PolicyReplay {
    /// The policy version the records were decided under.
    pub policy_version: u64,
    /// Records replayed.
    pub total: usize,
    /// Records with an expectation.
    pub compared: usize,
    /// Of those, the ones that matched.
    pub matched: usize,
    /// Indexes of the records whose decision differs from the expectation.
    pub differences: Vec<usize>,
    /// One outcome per record, in order.
    pub outcomes: Vec<ReplayOutcome>,
}

/// Errors of a replay.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReplayError {
    /// A line is not a record, or an expectation is not understood.
    #[error("record {line}: {message}")]
    BadRecord {
        /// 1-based line (or list position).
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// More than [`MAX_REPLAY_RECORDS`].
    #[error("{0} records; a replay takes at most {MAX_REPLAY_RECORDS}")]
    TooMany(usize),
    /// The policy could not be read.
    #[error(transparent)]
    Policy(#[from] PolicyError),
}

impl StewardError for ReplayError {
    fn code(&self) -> &'static str {
        match self {
            Self::BadRecord { .. } => "REPLAY_BAD_RECORD",
            Self::TooMany(_) => "REPLAY_TOO_MANY",
            Self::Policy(e) => e.code(),
        }
    }

    fn kind(&self) -> ErrorKind {
        match self {
            Self::BadRecord { .. } | Self::TooMany(_) => ErrorKind::InvalidInput,
            Self::Policy(e) => e.kind(),
        }
    }
}

/// Parses a JSONL log (blank lines skipped) into records.
pub fn parse_jsonl(text: &str) -> Result<Vec<ReplayRecord>, ReplayError> {
    parse_lines(text, MAX_REPLAY_RECORDS).map_err(|e| match e {
        LineError::Bad { line, message } => ReplayError::BadRecord { line, message },
        LineError::TooMany(n) => ReplayError::TooMany(n),
    })
}

fn words(d: &Decision) -> (&'static str, Option<&'static str>) {
    match d {
        Decision::Allow { level } => ("allow", Some(level.as_str())),
        Decision::Gate { level } => ("gate", Some(level.as_str())),
        Decision::Deny { .. } => ("deny", None),
    }
}

/// Checks an expectation's spelling: `allow|gate|deny[:level]`.
fn check_expected(e: &str) -> Result<(), String> {
    let (word, level) = match e.split_once(':') {
        Some((w, l)) => (w, Some(l)),
        None => (e, None),
    };
    if !matches!(word, "allow" | "gate" | "deny") {
        return Err(format!("expected {e:?}: use allow, gate or deny, optionally :level"));
    }
    if let Some(l) = level
        && (word == "deny" || Level::parse(l).is_err())
    {
        return Err(format!("expected {e:?}: unknown or misplaced level {l:?}"));
    }
    Ok(())
}

impl Steward {
    /// Decides every record under the policy in force; executes, approves and records nothing.
    pub fn replay_policy(&self, records: &[ReplayRecord]) -> Result<PolicyReplay, ReplayError> {
        if records.len() > MAX_REPLAY_RECORDS {
            return Err(ReplayError::TooMany(records.len()));
        }
        for (i, r) in records.iter().enumerate() {
            if let Some(e) = &r.expected {
                check_expected(e)
                    .map_err(|message| ReplayError::BadRecord { line: i + 1, message })?;
            }
        }
        let current = self.policy()?;
        let mut replay = PolicyReplay {
            policy_version: current.version,
            total: records.len(),
            compared: 0,
            matched: 0,
            differences: Vec::new(),
            outcomes: Vec::with_capacity(records.len()),
        };
        for (index, r) in records.iter().enumerate() {
            let grants: Option<BTreeSet<String>> =
                r.headless_grants.as_ref().map(|g| g.iter().cloned().collect());
            let ctx = DecisionContext { headless_grants: grants.as_ref(), actor: None };
            let detail = decide(self.tools(), &current.policy, &r.tool, &r.input, &ctx);
            let (decision, level) = words(&detail);
            let matches = r.expected.as_deref().map(|e| match e.split_once(':') {
                Some((w, l)) => w == decision && Level::parse(l).ok().map(Level::as_str) == level,
                None => e == decision,
            });
            if let Some(m) = matches {
                replay.compared += 1;
                if m {
                    replay.matched += 1;
                } else {
                    replay.differences.push(index);
                }
            }
            replay.outcomes.push(ReplayOutcome {
                index,
                tool: r.tool.clone(),
                decision,
                level,
                detail,
                expected: r.expected.clone(),
                matches,
            });
        }
        Ok(replay)
    }
}
