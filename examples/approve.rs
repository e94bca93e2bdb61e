//! The authority path of one tool call, through the public API only: a program adds its own
//! tool (a spec the policy decides over, and an executor), the agent proposes a call, the
//! policy gates it, a person approves an edited version, and the executor receives exactly
//! what was approved — while an agent identity cannot get a person's authority. Then the
//! audit trail.
//!
//! ```sh
//! cargo run --example approve
//! ```

use std::sync::{Arc, Mutex};

use serde_json::json;
use steward_core::{
    Steward, StewardError, ToolCall,
    approval::{DecisionInput, DecisionKind},
    audit::AuditQuery,
    policy::{DecisionContext, Effect, Level, ToolSpec},
    tools::{ToolOutcome, ToolOutput, Toolbox, Typed},
};

/// The input of `reminders.create`: its schema is generated from this type, and a call whose
/// input does not parse as it never reaches the policy.
#[derive(Debug, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct Reminder {
    /// What to remind the person of.
    text: String,
    /// When, as `HH:MM`.
    at: String,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let home = std::env::temp_dir().join(format!("steward-approve-{}", std::process::id()));
    let spec = ToolSpec::new::<Reminder>(
        "reminders.create",
        "Sets a reminder for the person.",
        Effect::Write { reversible: true },
        Level::Confirm,
    )?;
    let steward = Arc::new(Steward::builder().home(&home).tool(spec).open()?);

    // The executor: what runs once the policy (or a person) lets it. It records what it got.
    let created = Arc::new(Mutex::new(Vec::<String>::new()));
    let log = Arc::clone(&created);
    let executor = Typed::new(
        |r: &Reminder| format!("Remind at {}: {}", r.at, r.text),
        move |_, r: Reminder| {
            let line = format!("{} {}", r.at, r.text);
            log.lock().map_err(|_| steward_core::tools::ExecError::invalid("poisoned"))?.push(line);
            Ok(ToolOutput::text(format!("reminder set for {}", r.at)))
        },
    );
    let mut toolbox = Toolbox::new(Arc::clone(&steward));
    toolbox.register("reminders.create", Arc::new(executor))?;

    // 1. The agent proposes a call; deterministic code decides: a write waits for a person.
    let input = json!({"text": "call the dentist", "at": "09:00"});
    let call = ToolCall {
        actor: "agent:assistant",
        chat: Some("demo"),
        tool: "reminders.create",
        input: &input,
    };
    let ToolOutcome::AwaitingApproval { approval } =
        toolbox.call(&call, &DecisionContext::default())?
    else {
        return Err("reminders.create should need a person".into());
    };
    println!("card #{} at {:?}: {}", approval.id, approval.level, approval.summary);
    assert!(created.lock().is_ok_and(|c| c.is_empty()), "nothing ran before a decision");

    // 2. Agent code cannot hold a person's authority: the constructor refuses the identity.
    let refused = steward.human("agent:assistant").unwrap_err();
    println!("an agent asks for a person's authority: {} ({refused})", refused.code());

    // 3. A person (this program acting as the frontend) approves an edited version.
    let me = steward.human("emma")?;
    let edit = json!({"text": "call the dentist about Thursday", "at": "09:30"});
    let decided = steward.decide_approval(
        approval.id,
        DecisionKind::Approve,
        &DecisionInput { edit: Some(edit), ..DecisionInput::default() },
        &me,
    )?;
    println!(
        "{:?} by {}; sha256 {}",
        decided.status,
        me.person(),
        decided.effective_sha256.clone().unwrap_or_default()
    );

    // 4. The executor gets the approved input (checked by its hash), and nothing else.
    let result = toolbox.run_approved(approval.id, "agent:assistant")?;
    println!("ran: {}", result.text);
    println!("the executor received: {:?}", created.lock().map(|c| c.clone()).unwrap_or_default());

    // 5. What the audit trail holds (redacted).
    let page =
        steward.audit_page(&AuditQuery { chat: Some("demo".into()), ..Default::default() })?;
    for e in page.events {
        println!("audit {} {} {} {}", e.id, e.risk, e.event_type, e.actor);
    }
    std::fs::remove_dir_all(&home)?;
    Ok(())
}
