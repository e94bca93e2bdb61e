//! Subject normalization for the thread fallback: reply and forward prefixes in English, Italian
//! and German (`Re:`, `Fwd:`, `R:`, `I:`, `Rif:`, `AW:`, `WG:`, `Re[2]:`), list tags in brackets,
//! case and whitespace.

/// Strips reply/forward prefixes and list tags; lowercases and collapses whitespace.
pub fn normalize_subject(subject: &str) -> String {
    let mut s = subject.trim();
    loop {
        let before = s.len();
        // List tags: "[project-x] ..."
        if let Some(rest) = s.strip_prefix('[')
            && let Some(end) = rest.find(']')
        {
            s = rest[end + 1..].trim_start();
        }
        s = strip_reply_prefix(s).trim_start();
        if s.len() == before {
            break;
        }
    }
    let mut out = String::with_capacity(s.len());
    for word in s.split_whitespace() {
        if !out.is_empty() {
            out.push(' ');
        }
        out.extend(word.chars().flat_map(char::to_lowercase));
    }
    out
}

const PREFIXES: [&str; 13] =
    ["re", "fwd", "fw", "r", "i", "rif", "aw", "wg", "sv", "vs", "tr", "antw", "inoltra"];

fn strip_reply_prefix(s: &str) -> &str {
    // prefix letters, optional "[n]" or "(n)" counter, optional space, then ':'
    let letters = s.bytes().take_while(u8::is_ascii_alphabetic).count();
    if letters == 0 {
        return s;
    }
    let word = &s[..letters];
    if !PREFIXES.iter().any(|p| p.eq_ignore_ascii_case(word)) {
        return s;
    }
    let mut rest = &s[letters..];
    if let Some(r) = rest.strip_prefix('[').or_else(|| rest.strip_prefix('(')) {
        let digits = r.bytes().take_while(u8::is_ascii_digit).count();
        if digits > 0 && matches!(r.as_bytes().get(digits), Some(b']' | b')')) {
            rest = &r[digits + 1..];
        }
    }
    let rest = rest.trim_start_matches(' ');
    match rest.strip_prefix(':').or_else(|| rest.strip_prefix('：')) {
        Some(r) => r,
        None => s,
    }
}

#[cfg(test)]
mod tests {
    use super::normalize_subject as n;

    #[test]
    fn strips_prefixes_tags_and_case() {
        assert_eq!(n("Re: Fwd: Hello  World"), "hello world");
        assert_eq!(n("R: I: Preventivo"), "preventivo");
        assert_eq!(n("Rif: preventivo"), "preventivo");
        assert_eq!(n("AW: WG: Termin"), "termin");
        assert_eq!(n("Re[2]: status"), "status");
        assert_eq!(n("[dev-list] Re: [dev-list] patch"), "patch");
        assert_eq!(n("RE : spaced"), "spaced");
        assert_eq!(n("Invoice: March"), "invoice: march");
        assert_eq!(n("Rendering"), "rendering");
        assert_eq!(n("   "), "");
        assert_eq!(n("Ré: accents stay"), "ré: accents stay");
    }

    proptest::proptest! {
        #[test]
        fn idempotent(s in ".{0,80}") {
            let once = n(&s);
            proptest::prop_assert_eq!(n(&once), once);
        }
    }
}
