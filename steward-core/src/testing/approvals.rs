//! Real approved decisions for tests of code that runs only what a person approved.

use std::path::Path;

use crate::{
    Limits, WATCH_GRANTS_TOOL,
    approval::{Approvals, ApprovedInput, HumanAuthority, NewApproval, Resolution},
    policy::Level,
    watch::WatchDefinition,
};

/// Asks for `def` in `home`'s approval store as an agent would (`watch.create_agent`), has a
/// person approve it and returns the token the approval store hands out for it — the only way
/// to get one, so [`crate::watch::Watches::create_approved`] is tested through the real path.
pub fn approved_watch(home: &Path, def: &WatchDefinition, now: i64) -> ApprovedInput {
    let approvals = Approvals::open(home, &Limits::default()).unwrap();
    let request = NewApproval {
        chat: None,
        requested_by: "agent:test".into(),
        tool: WATCH_GRANTS_TOOL.into(),
        input: serde_json::to_value(def).unwrap(),
        summary: format!("Watch {} {}", def.source, def.resource_ref),
        level: Level::Confirm,
        timeout_secs: None,
        taint: None,
    };
    let card = approvals.request(&request, None, now).unwrap();
    let person = HumanAuthority::new("tester").unwrap();
    approvals.resolve(card.id, &Resolution::Approve, None, &person, None, None, now).unwrap();
    approvals.authorize_approved(card.id).unwrap()
}
