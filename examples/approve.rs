//! The authority path of one tool call: the agent proposes `mail.send`, the policy gates it,
//! a person approves an edited version, and the executor receives exactly what was approved —
//! while the agent's attempt to approve its own request is refused. Then the audit trail.
//!
//! ```sh
//! cargo run --example approve
//! ```

use serde_json::json;
use steward_core::{
    Steward, StewardError, ToolCall,
    approval::{NewApproval, Resolution},
    audit::AuditQuery,
    policy::{Decision, DecisionContext},
};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let home = std::env::temp_dir().join(format!("steward-approve-{}", std::process::id()));
    let steward = Steward::builder().home(&home).open()?;
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_secs();
    let now = i64::try_from(now)?;

    // 1. The agent proposes a call; deterministic code decides.
    let input = json!({"to": ["sister@example.com"], "subject": "Arriving at 18:40", "body": "Platform 7."});
    let call =
        ToolCall { actor: "agent:assistant", chat: Some("demo"), tool: "mail.send", input: &input };
    let Decision::Gate { level } = steward.decide(&call, &DecisionContext::default())? else {
        return Err("mail.send should need a person".into());
    };
    let approvals = steward.approvals()?;
    let card = approvals.request(
        &NewApproval {
            chat: Some("demo".into()),
            requested_by: "agent:assistant".into(),
            tool: "mail.send".into(),
            input: input.clone(),
            summary: "Tell my sister when I arrive".into(),
            level,
            timeout_secs: None,
            taint: None,
        },
        None,
        now,
    )?;
    println!("card #{} at {:?}: {}", card.id, card.level, card.normalized_input);

    // 2. Agent code has no HumanAuthority; its attempt is refused and audited.
    let refused = approvals.refuse_agent_resolution(card.id, "agent:assistant", now);
    println!("agent tries to approve: {} ({})", refused.code(), refused);

    // 3. A person (this program acting as the frontend) approves an edited version.
    let me = steward.human("emma")?;
    let edited = json!({"to": ["sister@example.com"], "subject": "Arriving at 18:45", "body": "Platform 7, 5 min late."});
    let done = approvals.resolve(
        card.id,
        &Resolution::Edit(edited.clone()),
        None,
        &me,
        None,
        None,
        now,
    )?;
    println!(
        "{:?} by {}; sha256 {}",
        done.status,
        me.person(),
        done.effective_sha256.unwrap_or_default()
    );

    // 4. The executor gets the approved input, and nothing else.
    let runs = approvals.authorize_execution(card.id, &edited)?;
    println!("executor may run {}: {}", runs.tool(), runs.input());
    let drift = approvals.authorize_execution(card.id, &input).unwrap_err();
    println!("the original proposal now: {}", drift.code());

    // 5. What the audit trail holds (redacted).
    for e in
        steward.audit()?.query(&AuditQuery { chat: Some("demo".into()), ..Default::default() })?
    {
        println!("audit {} {} {} {}", e.id, e.risk, e.event_type, e.actor);
    }
    std::fs::remove_dir_all(&home)?;
    Ok(())
}
