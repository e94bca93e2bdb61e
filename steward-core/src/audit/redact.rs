//! Redaction before an audit row is written (never after): structure-aware for JSON payloads,
//! pattern-based for text.
//!
//! Values under secret-like keys are replaced; body-like keys (`body`, `bodytext`, `html`,
//! `htmlbody`, `content`, `markdown`) become 120-character snippets; other strings are cut at
//! 600 characters; Bearer and `sk-` tokens, URL credentials, sensitive query parameters, inline
//! `password=` assignments and PEM private keys are masked before any cut, then every rule of
//! the vendored gitleaks rule set (`data/gitleaks/gitleaks.toml`, MIT) whose keywords occur in
//! the text. Arrays, objects and nesting are capped.

use std::sync::OnceLock;

use aho_corasick::{AhoCorasick, AhoCorasickBuilder};
use regex::{Regex, RegexBuilder};
use serde_json::{Map, Value};

/// Characters kept of a body-like value.
/// Fixed (not a setting).
pub const BODY_SNIPPET_CHARS: usize = 120;
/// Characters kept of any other string.
/// Fixed (not a setting).
pub const MAX_STRING_CHARS: usize = 600;
/// Items kept of an array.
/// Fixed (not a setting).
pub const MAX_ARRAY_ITEMS: usize = 32;
/// Keys kept of an object.
/// Fixed (not a setting).
pub const MAX_OBJECT_KEYS: usize = 64;
/// Nesting kept.
/// Fixed (not a setting).
pub const MAX_DEPTH: usize = 8;
/// What replaces a secret.
pub const MASK: &str = "[REDACTED]";
/// Compiled size allowed for one rule (three gitleaks rules exceed the regex crate's 10 MiB).
/// Characters scanned past a cut: longer than any secret the rules match (PEM blocks aside).
/// Fixed (not a setting).
pub const MASK_MARGIN_CHARS: usize = 512;
/// Fixed (not a setting).
const RULE_SIZE_LIMIT: usize = 64 * 1024 * 1024;

const BODY_KEYS: [&str; 6] = ["body", "bodytext", "html", "htmlbody", "content", "markdown"];

/// A vendored rule, compiled the first time a text contains one of its keywords: most rules
/// never fire in a process, and compiling all of them up front cost every command that audits
/// about a second.
struct Rule {
    source: String,
    regex: OnceLock<Option<Regex>>,
    group: Option<usize>,
}

impl Rule {
    fn regex(&self) -> Option<&Regex> {
        self.regex.get_or_init(|| re(&self.source)).as_ref()
    }
}

/// The compiled redaction rules (built once per process).
pub struct Redactor {
    builtin: Vec<(Regex, &'static str)>,
    /// All built-in patterns in one automaton: one pass says which (if any) need replacing.
    builtin_set: Option<regex::RegexSet>,
    secret_key: Option<Regex>,
    rules: Vec<Rule>,
    /// Keyword automaton; pattern i belongs to rule `keyword_rule[i]`.
    keywords: Option<AhoCorasick>,
    keyword_rule: Vec<usize>,
    /// Rules with no keyword: always run.
    unkeyed: Vec<usize>,
}

impl std::fmt::Debug for Redactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Redactor").field("rules", &self.rules.len()).finish_non_exhaustive()
    }
}

#[derive(serde::Deserialize)]
struct GitleaksFile {
    rules: Vec<GitleaksRule>,
}

#[derive(serde::Deserialize)]
struct GitleaksRule {
    regex: Option<String>,
    #[serde(default)]
    keywords: Vec<String>,
    #[serde(rename = "secretGroup")]
    secret_group: Option<usize>,
}

fn re(pattern: &str) -> Option<Regex> {
    match RegexBuilder::new(pattern)
        .size_limit(RULE_SIZE_LIMIT)
        .dfa_size_limit(RULE_SIZE_LIMIT)
        .build()
    {
        Ok(r) => Some(r),
        Err(e) => {
            tracing::error!(error = %e, "a redaction pattern does not compile; it is skipped");
            None
        }
    }
}

impl Redactor {
    fn build() -> Self {
        let builtin_src: [(&str, &'static str); 6] = [
            (
                r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----[\s\S]*?(-----END[A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----|$)",
                "[REDACTED PRIVATE KEY]",
            ),
            (r"(?i)\b(bearer|basic|token)(\s+)[A-Za-z0-9._~+/=-]{8,}", "$1$2[REDACTED]"),
            (r"\bsk-[A-Za-z0-9_-]{12,}", "[REDACTED]"),
            (r"(?i)\b([a-z][a-z0-9+.-]*://)[^\s/@:]+:[^\s/@]+@", "$1[REDACTED]@"),
            (
                r"(?i)([?&](?:access_token|refresh_token|id_token|token|api_?key|key|password|passwd|pwd|secret|client_secret|sig|signature|auth|code)=)[^&#\s]+",
                "$1[REDACTED]",
            ),
            (
                r#"(?i)\b(password|passwd|pwd|passphrase|secret|api[_-]?key|apikey|access[_-]?key|client[_-]?secret|auth[_-]?token|token)(\s*[:=]\s*)("[^"]*"|'[^']*'|[^\s,;&]+)"#,
                "$1$2[REDACTED]",
            ),
        ];
        let builtin: Vec<(Regex, &'static str)> =
            builtin_src.iter().filter_map(|(p, r)| re(p).map(|x| (x, *r))).collect();
        let builtin_set = regex::RegexSetBuilder::new(builtin.iter().map(|(r, _)| r.as_str()))
            .size_limit(RULE_SIZE_LIMIT)
            .build()
            .ok();
        let secret_key = re(
            r"(?i)(pass(word|wd|phrase)?$|^pwd$|secret|token|api[_-]?key|apikey|^auth|authorization|credential|private[_-]?key|cookie|session[_-]?id|access[_-]?key|signature)",
        );
        let file: GitleaksFile =
            toml::from_str(include_str!("../../data/gitleaks/gitleaks.toml")).unwrap_or_else(|e| {
                tracing::error!(error = %e, "the gitleaks rule set does not parse; only built-in rules apply");
                GitleaksFile { rules: Vec::new() }
            });
        let mut rules = Vec::new();
        let mut words = Vec::new();
        let mut keyword_rule = Vec::new();
        let mut unkeyed = Vec::new();
        for r in file.rules {
            let Some(source) = r.regex else { continue };
            let i = rules.len();
            rules.push(Rule { source, regex: OnceLock::new(), group: r.secret_group });
            if r.keywords.is_empty() {
                unkeyed.push(i);
            }
            for k in r.keywords {
                words.push(k.to_lowercase());
                keyword_rule.push(i);
            }
        }
        let keywords = AhoCorasickBuilder::new().ascii_case_insensitive(true).build(&words).ok();
        Self { builtin, builtin_set, secret_key, rules, keywords, keyword_rule, unkeyed }
    }

    /// Masks secrets in free text (no length cut).
    pub fn mask_text(&self, text: &str) -> String {
        let mut s = text.to_owned();
        let due_builtin: Vec<usize> = match &self.builtin_set {
            Some(set) => set.matches(&s).into_iter().collect(),
            None => (0..self.builtin.len()).collect(),
        };
        for i in due_builtin {
            let (r, with) = &self.builtin[i];
            if r.is_match(&s) {
                s = r.replace_all(&s, *with).into_owned();
            }
        }
        let mut due: Vec<usize> = self.unkeyed.clone();
        match &self.keywords {
            Some(ac) => {
                for m in ac.find_overlapping_iter(&s) {
                    due.push(self.keyword_rule[m.pattern().as_usize()]);
                }
            }
            // Without the automaton every rule runs: slower, never weaker.
            None => due.extend(0..self.rules.len()),
        }
        due.sort_unstable();
        due.dedup();
        for i in due {
            let rule = &self.rules[i];
            let Some(regex) = rule.regex() else { continue };
            if !regex.is_match(&s) {
                continue;
            }
            let mut out = String::with_capacity(s.len());
            let mut last = 0;
            for caps in regex.captures_iter(&s) {
                let span = rule.group.and_then(|g| caps.get(g)).or_else(|| {
                    // Without a declared group, the first capture is the secret (gitleaks'
                    // default); without captures, the whole match.
                    caps.get(1).or_else(|| caps.get(0))
                });
                if let Some(m) = span
                    && m.start() >= last
                {
                    out.push_str(&s[last..m.start()]);
                    out.push_str(MASK);
                    last = m.end();
                }
            }
            out.push_str(&s[last..]);
            s = out;
        }
        s
    }

    /// Masks, then cuts to `max` characters.
    fn text(&self, text: &str, max: usize) -> Value {
        // Only the first `max` characters survive the cut, so only they (plus a margin wider
        // than any secret the rules know, so one straddling the cut is still recognised whole)
        // are scanned. A PEM block longer than the margin still matches: its pattern accepts
        // the end of the text in place of the END line.
        let window = match text.char_indices().nth(max + MASK_MARGIN_CHARS) {
            Some((byte, _)) => &text[..byte],
            None => text,
        };
        let masked = self.mask_text(window);
        if masked.chars().count() <= max {
            return Value::String(masked);
        }
        let mut cut: String = masked.chars().take(max.saturating_sub(1)).collect();
        cut.push('…');
        Value::String(cut)
    }

    /// The redacted copy of a JSON payload.
    pub fn redact(&self, v: &Value) -> Value {
        self.value(v, 0)
    }

    fn value(&self, v: &Value, depth: usize) -> Value {
        if depth > MAX_DEPTH {
            return Value::String("[depth limit]".into());
        }
        match v {
            Value::String(s) => self.text(s, MAX_STRING_CHARS),
            Value::Array(a) => {
                let mut out: Vec<Value> =
                    a.iter().take(MAX_ARRAY_ITEMS).map(|x| self.value(x, depth + 1)).collect();
                if a.len() > MAX_ARRAY_ITEMS {
                    out.push(Value::String(format!("[+{} more]", a.len() - MAX_ARRAY_ITEMS)));
                }
                Value::Array(out)
            }
            Value::Object(m) => {
                let mut out = Map::new();
                for (k, x) in m.iter().take(MAX_OBJECT_KEYS) {
                    let key = self.mask_text(k);
                    let lower = k.to_ascii_lowercase();
                    let secret = self.secret_key.as_ref().is_none_or(|r| r.is_match(&lower));
                    let red = if !x.is_null() && secret {
                        Value::String(MASK.into())
                    } else if BODY_KEYS.contains(&lower.as_str()) {
                        match x {
                            Value::String(s) => self.text(s, BODY_SNIPPET_CHARS),
                            other => self.value(other, depth + 1),
                        }
                    } else {
                        self.value(x, depth + 1)
                    };
                    out.insert(key, red);
                }
                if m.len() > MAX_OBJECT_KEYS {
                    out.insert(
                        "…".into(),
                        Value::String(format!("+{} keys", m.len() - MAX_OBJECT_KEYS)),
                    );
                }
                Value::Object(out)
            }
            other => other.clone(),
        }
    }
}

/// The process's redactor (compiled on first use).
pub fn redactor() -> &'static Redactor {
    static R: OnceLock<Redactor> = OnceLock::new();
    R.get_or_init(Redactor::build)
}

#[cfg(test)]
mod tests {
    /// Rules compile lazily, so a rule that cannot compile would only show up when its keyword
    /// first appears in a payload: compile every one here instead.
    #[test]
    fn every_vendored_rule_compiles() {
        let r = super::redactor();
        assert!(r.rules.len() > 100, "{} rules", r.rules.len());
        let broken: Vec<&str> =
            r.rules.iter().filter(|x| x.regex().is_none()).map(|x| x.source.as_str()).collect();
        assert!(broken.is_empty(), "{broken:?}");
    }
}
