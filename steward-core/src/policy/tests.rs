use std::collections::{BTreeSet, HashMap};

use proptest::prelude::*;
use schemars::JsonSchema;
use serde_json::{Value, json};

use super::*;

/// Send a mail.
#[derive(JsonSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct SendMail {
    /// Recipient addresses.
    #[schemars(length(max = 50))]
    to: Vec<String>,
    /// The subject line.
    subject: String,
    /// Optional: a message to reply to.
    in_reply_to: Option<i64>,
    /// Attachments by blob hash.
    #[schemars(length(max = 10))]
    attachments: Vec<Attachment>,
}

/// One attachment.
#[derive(JsonSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct Attachment {
    /// SHA-256 of the blob.
    sha256: String,
}

#[derive(JsonSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct Undescribed {
    /// Described.
    a: String,
    b: String,
}

/// Free-form.
#[derive(JsonSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct FreeForm {
    /// Anything at all.
    extra: HashMap<String, String>,
}

/// Any JSON.
#[derive(JsonSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct AnyValue {
    /// Anything at all.
    payload: Value,
}

/// Unbounded.
#[derive(JsonSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct Unbounded {
    /// No bound.
    ids: Vec<i64>,
}

/// Open.
#[derive(JsonSchema)]
#[allow(dead_code)]
struct OpenObject {
    /// Unknown keys are accepted by serde, so the schema allows them.
    a: String,
}

fn spec<I: JsonSchema>(name: &str, effect: Effect, level: Level) -> ToolSpec {
    ToolSpec::new::<I>(name, "a tool", effect, level).unwrap()
}

#[test]
fn schemas_the_model_cannot_fill_are_refused() {
    spec::<SendMail>("mail.send", Effect::Destructive, Level::Confirm);
    let err = |r: Result<ToolSpec, PolicyError>| match r.unwrap_err() {
        PolicyError::BadSchema { reason, .. } => reason,
        e => panic!("{e:?}"),
    };
    let r = err(ToolSpec::new::<Undescribed>("x.y", "d", Effect::Read, Level::Auto));
    assert!(r.contains("input.b: has no description"), "{r}");
    let r = err(ToolSpec::new::<FreeForm>("x.y", "d", Effect::Read, Level::Auto));
    assert!(r.contains("free-form"), "{r}");
    let r = err(ToolSpec::new::<AnyValue>("x.y", "d", Effect::Read, Level::Auto));
    assert!(r.contains("any value"), "{r}");
    let r = err(ToolSpec::new::<Unbounded>("x.y", "d", Effect::Read, Level::Auto));
    assert!(r.contains("unbounded array"), "{r}");
    let r = err(ToolSpec::new::<OpenObject>("x.y", "d", Effect::Read, Level::Auto));
    assert!(r.contains("free-form"), "{r}");
    let r = err(ToolSpec::new::<SendMail>("x.y", "  ", Effect::Read, Level::Auto));
    assert!(r.contains("no description"), "{r}");
    let r = err(ToolSpec::with_schema(
        "x.y",
        "d",
        Effect::Read,
        Level::Auto,
        json!({"type": "string"}),
    ));
    assert!(r.contains("must be an object"), "{r}");
    ToolSpec::new::<SendMail>("calendar.create_event", "d", Effect::Read, Level::Auto).unwrap();
    let obj = |props: Value| json!({"type": "object", "properties": props, "additionalProperties": false});
    let r = err(ToolSpec::with_schema(
        "x.y",
        "d",
        Effect::Read,
        Level::Auto,
        obj(json!({"any": true})),
    ));
    assert!(r.contains("input.any: has no description"), "{r}");
    let r = err(ToolSpec::with_schema(
        "x.y",
        "d",
        Effect::Read,
        Level::Auto,
        obj(json!({"any": {"description": "d", "anyOf": [true]}})),
    ));
    assert!(r.contains("accepts any value"), "{r}");
    let mut deep = json!({"type": "string", "description": "leaf"});
    for _ in 0..=MAX_SCHEMA_DEPTH {
        deep = obj(json!({"next": deep}));
        deep["description"] = json!("level");
    }
    let r = err(ToolSpec::with_schema("x.y", "d", Effect::Read, Level::Auto, deep));
    assert!(r.contains("nested too deeply"), "{r}");
    // A tagged union of objects is fillable; one with a bare string alternative is not.
    ToolSpec::new::<PolicyChange>("policy.set", "d", Effect::Read, Level::Auto).unwrap();
    let r = err(ToolSpec::with_schema(
        "x.y",
        "d",
        Effect::Read,
        Level::Auto,
        json!({"oneOf": [{"type": "object", "properties": {}, "additionalProperties": false},
                         {"type": "string"}]}),
    ));
    assert!(r.contains("must be an object"), "{r}");
    let r = err(ToolSpec::with_schema("x.y", "d", Effect::Read, Level::Auto, json!({"oneOf": []})));
    assert!(r.contains("must be an object"), "{r}");
    for bad in ["send", "Mail.send", "mail..send", "mail.send!", ".send", &"a.".repeat(40)] {
        let e = ToolSpec::new::<SendMail>(bad, "d", Effect::Read, Level::Auto).unwrap_err();
        assert_eq!(e.code(), "POLICY_BAD_TOOL_NAME", "{bad}");
    }
    let mut reg = ToolRegistry::new();
    reg.register(spec::<SendMail>("mail.send", Effect::Destructive, Level::Confirm)).unwrap();
    let e = reg.register(spec::<SendMail>("mail.send", Effect::Read, Level::Auto)).unwrap_err();
    assert_eq!(e.code(), "POLICY_DUPLICATE_TOOL");
}

fn registry() -> ToolRegistry {
    let mut r = ToolRegistry::new();
    for (name, effect, level) in [
        ("mail.search", Effect::Read, Level::Logged),
        ("mail.read", Effect::Read, Level::Auto),
        ("mail.draft", Effect::Write { reversible: true }, Level::Auto),
        ("mail.send", Effect::Destructive, Level::Confirm),
        ("mail.delete", Effect::Destructive, Level::Secure),
        ("shell.run", Effect::Destructive, Level::Secure),
        ("shellfish.eat", Effect::Write { reversible: false }, Level::Logged),
    ] {
        r.register(spec::<SendMail>(name, effect, level)).unwrap();
    }
    r
}

fn policy() -> Policy {
    let mut p = Policy::default();
    p.allow_reads.insert("mail.read".into());
    p.allow_reads.insert("mail.send".into()); // not a read: the allow-list cannot skip a gate
    p.deny_namespace("shell").unwrap();
    p
}

#[test]
fn decision_table() {
    let reg = registry();
    let obj = json!({});
    let none = DecisionContext::default();
    let allow = |level| Decision::Allow { level };
    let gate = |level| Decision::Gate { level };
    let d = |p: &Policy, tool: &str| decide(&reg, p, tool, &obj, &none);
    let base = policy();
    // Defaults, allow-list, floors, unknown tools, namespaces.
    assert_eq!(d(&base, "mail.read"), allow(Level::Auto));
    assert_eq!(d(&base, "mail.search"), allow(Level::Logged));
    assert_eq!(d(&base, "mail.draft"), allow(Level::Logged), "a write is at least logged");
    assert_eq!(d(&base, "mail.send"), gate(Level::Confirm), "allow-list only skips reads");
    assert_eq!(d(&base, "mail.delete"), gate(Level::Secure));
    assert_eq!(d(&base, "mail.unknown"), gate(Level::Confirm), "unknown is gated, never allowed");
    assert_eq!(
        d(&base, "shell.run"),
        Decision::Deny { reason: DenyReason::Namespace { prefix: "shell.".into() } }
    );
    assert_eq!(d(&base, "shellfish.eat"), allow(Level::Logged), "prefixes match namespaces");
    assert_eq!(
        decide(&reg, &base, "mail.read", &json!("text"), &none),
        Decision::Deny { reason: DenyReason::InputNotObject }
    );
    // Exact rules come first; floors still hold.
    let mut p = policy();
    p.rules.insert("mail.send".into(), Rule::Allow);
    p.rules.insert("mail.draft".into(), Rule::Gate { level: Level::Secure });
    p.rules.insert("mail.read".into(), Rule::Gate { level: Level::Confirm });
    p.rules.insert("mail.search".into(), Rule::Deny { reason: "not today".into() });
    p.rules.insert("mail.other".into(), Rule::Allow);
    p.rules.insert("shell.run".into(), Rule::Allow);
    assert_eq!(d(&p, "mail.send"), gate(Level::Confirm), "destructive never below L2");
    assert_eq!(d(&p, "mail.draft"), gate(Level::Secure));
    assert_eq!(d(&p, "mail.read"), gate(Level::Confirm), "an exact rule may gate a read");
    assert_eq!(
        d(&p, "mail.search"),
        Decision::Deny { reason: DenyReason::Rule { reason: "not today".into() } }
    );
    assert_eq!(
        d(&p, "mail.other"),
        gate(Level::Confirm),
        "an allow rule cannot free an unknown tool"
    );
    assert!(
        matches!(d(&p, "shell.run"), Decision::Deny { .. }),
        "an allow rule cannot lift a namespace deny"
    );
    // Overrides: floors for effects, a cap for reads.
    let mut p = policy();
    p.allow_reads.clear();
    p.overrides.insert("mail.send".into(), Level::Auto);
    p.overrides.insert("mail.delete".into(), Level::Logged);
    p.overrides.insert("mail.draft".into(), Level::Secure);
    p.overrides.insert("mail.search".into(), Level::Secure);
    p.overrides.insert("mail.read".into(), Level::Confirm);
    assert_eq!(d(&p, "mail.send"), gate(Level::Confirm));
    assert_eq!(d(&p, "mail.delete"), gate(Level::Confirm));
    assert_eq!(d(&p, "mail.draft"), gate(Level::Secure));
    assert_eq!(d(&p, "mail.search"), allow(Level::Logged), "reads are capped at L1 by overrides");
    assert_eq!(d(&p, "mail.read"), allow(Level::Logged));
    // Headless turns: grants only, logged; denies still win.
    let grants: BTreeSet<String> = ["mail.send".to_owned(), "shell.run".to_owned()].into();
    let bg = DecisionContext { headless_grants: Some(&grants), actor: None };
    let h = |p: &Policy, tool: &str| decide(&reg, p, tool, &obj, &bg);
    assert_eq!(h(&base, "mail.send"), allow(Level::Logged));
    assert_eq!(h(&base, "mail.read"), Decision::Deny { reason: DenyReason::NotGranted });
    assert!(matches!(
        h(&base, "shell.run"),
        Decision::Deny { reason: DenyReason::Namespace { .. } }
    ));
    let mut p = policy();
    p.rules.insert("mail.send".into(), Rule::Deny { reason: "no".into() });
    assert!(matches!(h(&p, "mail.send"), Decision::Deny { reason: DenyReason::Rule { .. } }));
    let ghost: BTreeSet<String> = ["mail.ghost".to_owned()].into();
    let bg = DecisionContext { headless_grants: Some(&ghost), actor: None };
    assert_eq!(
        decide(&reg, &base, "mail.ghost", &obj, &bg),
        Decision::Deny { reason: DenyReason::NotGranted },
        "a grant for an unregistered tool grants nothing"
    );
    // Levels parse from both spellings; prefixes must be namespaces.
    assert_eq!(Level::parse("L3").unwrap(), Level::Secure);
    assert_eq!(Level::parse("confirm").unwrap(), Level::Confirm);
    assert_eq!(Level::parse("L9").unwrap_err().code(), "POLICY_BAD_LEVEL");
    assert_eq!(
        Policy::default().deny_namespace("Bad Prefix").unwrap_err().code(),
        "POLICY_BAD_PREFIX"
    );
}

fn arb_level() -> impl Strategy<Value = Level> {
    prop_oneof![Just(Level::Auto), Just(Level::Logged), Just(Level::Confirm), Just(Level::Secure)]
}

fn arb_rule() -> impl Strategy<Value = Option<Rule>> {
    prop_oneof![
        Just(None),
        Just(Some(Rule::Allow)),
        arb_level().prop_map(|level| Some(Rule::Gate { level })),
        Just(Some(Rule::Deny { reason: "r".into() })),
    ]
}

proptest! {
    /// Whatever the policy, overrides, allow-list and input: a denied tool never runs, a
    /// destructive tool never runs without a person, an unknown tool never runs, and a
    /// background turn runs nothing it was not granted.
    #[test]
    fn no_policy_turns_a_deny_or_a_destructive_call_into_a_run(
        tool_i in 0usize..9,
        rule in arb_rule(),
        over in proptest::option::of(arb_level()),
        listed in any::<bool>(),
        headless in any::<bool>(),
        granted in any::<bool>(),
        deny_ns in any::<bool>(),
        input in prop_oneof![Just(json!({})), Just(json!({"to": ["a@b"]})), Just(json!(null)), Just(json!([1]))],
    ) {
        let reg = registry();
        let tools = ["mail.search", "mail.read", "mail.draft", "mail.send", "mail.delete", "shell.run", "shellfish.eat", "mail.unknown", "x.y"];
        let tool = tools[tool_i];
        let mut p = Policy::default();
        if let Some(r) = rule.clone() { p.rules.insert(tool.into(), r); }
        if let Some(l) = over { p.overrides.insert(tool.into(), l); }
        if listed { p.allow_reads.insert(tool.into()); }
        if deny_ns { p.deny_namespace("mail").unwrap(); }
        let grants: BTreeSet<String> = if granted { [tool.to_owned()].into() } else { BTreeSet::new() };
        let ctx = DecisionContext { headless_grants: headless.then_some(&grants), actor: None };
        let d = decide(&reg, &p, tool, &input, &ctx);
        let runs = matches!(d, Decision::Allow { .. });
        if matches!(rule, Some(Rule::Deny { .. })) || (deny_ns && tool.starts_with("mail.")) || !input.is_object() {
            prop_assert!(!runs, "{tool} ran: {d:?}");
        }
        let spec = reg.get(tool);
        if !headless && spec.as_ref().is_none_or(|s| s.effect == Effect::Destructive) {
            prop_assert!(!runs, "{tool} ran without a person: {d:?}");
        }
        if headless && (!granted || spec.is_none()) {
            prop_assert!(!runs, "{tool} ran ungranted in the background: {d:?}");
        }
        if let Decision::Gate { level } = d {
            prop_assert!(level >= Level::Confirm);
        }
        // Pure: the same arguments give the same decision.
        prop_assert_eq!(d, decide(&reg, &p, tool, &input, &ctx));
    }
}

#[test]
fn policy_changes_apply_check_names_and_refuse_no_ops() {
    let mut p = Policy::default();
    let changes = [
        PolicyChange::SetLevel { tool: "mail.send".into(), level: Level::Secure },
        PolicyChange::SetRule { tool: "mail.read".into(), rule: Rule::Allow },
        PolicyChange::DenyNamespace { prefix: "shell.".into() },
        PolicyChange::AllowRead { tool: "mail.search".into() },
    ];
    for c in &changes {
        p.apply(c).unwrap();
        assert_eq!(p.apply(c).unwrap_err().code(), "POLICY_NO_CHANGE");
    }
    assert!(p.deny_prefixes.contains("shell."));
    let undo = [
        PolicyChange::ClearLevel { tool: "mail.send".into() },
        PolicyChange::ClearRule { tool: "mail.read".into() },
        PolicyChange::UndenyNamespace { prefix: "shell".into() },
        PolicyChange::DisallowRead { tool: "mail.search".into() },
    ];
    for c in &undo {
        p.apply(c).unwrap();
    }
    assert_eq!(p, Policy::default());
    for bad in [
        PolicyChange::SetLevel { tool: "Mail".into(), level: Level::Auto },
        PolicyChange::SetRule { tool: "x".into(), rule: Rule::Allow },
        PolicyChange::AllowRead { tool: "a..b".into() },
        PolicyChange::DenyNamespace { prefix: "She ll".into() },
    ] {
        assert_eq!(p.apply(&bad).unwrap_err().kind(), ErrorKind::InvalidInput, "{bad:?}");
        assert_eq!(p, Policy::default());
    }
}

#[test]
fn the_policy_namespace_is_never_below_confirm_and_never_granted() {
    let mut r = registry();
    r.register(spec::<SendMail>("policy.peek", Effect::Read, Level::Auto)).unwrap();
    let mut p = Policy::default();
    p.rules.insert("policy.peek".into(), Rule::Allow);
    p.allow_reads.insert("policy.peek".into());
    let input = json!({});
    let none = DecisionContext::default();
    assert_eq!(
        decide(&r, &p, "policy.peek", &input, &none),
        Decision::Gate { level: Level::Confirm }
    );
    p.rules.clear();
    assert_eq!(
        decide(&r, &p, "policy.peek", &input, &none),
        Decision::Gate { level: Level::Confirm }
    );
    p.overrides.insert("policy.peek".into(), Level::Secure);
    assert_eq!(
        decide(&r, &p, "policy.peek", &input, &none),
        Decision::Gate { level: Level::Secure }
    );
    let grants: BTreeSet<String> = ["policy.peek".to_owned()].into();
    let headless = DecisionContext { headless_grants: Some(&grants), actor: None };
    assert_eq!(
        decide(&r, &p, "policy.peek", &input, &headless),
        Decision::Deny { reason: DenyReason::NotGranted }
    );
}

#[test]
fn a_setting_word_becomes_one_change() {
    let s = |w: &str, r: Option<&str>| PolicyChange::setting("mail.send", w, r);
    assert_eq!(
        s("L3", None).unwrap(),
        PolicyChange::SetLevel { tool: "mail.send".into(), level: Level::Secure }
    );
    assert_eq!(
        s("Allow", None).unwrap(),
        PolicyChange::SetRule { tool: "mail.send".into(), rule: Rule::Allow }
    );
    assert_eq!(
        s("deny", Some("never")).unwrap(),
        PolicyChange::SetRule {
            tool: "mail.send".into(),
            rule: Rule::Deny { reason: "never".into() }
        }
    );
    assert_eq!(s("default", None).unwrap(), PolicyChange::ClearLevel { tool: "mail.send".into() });
    assert_eq!(s("L9", None).unwrap_err().code(), "POLICY_BAD_LEVEL");
    assert_eq!(Effect::Write { reversible: true }.as_str(), "reversible write");
}
