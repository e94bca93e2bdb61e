//! Snippets: a short window of a body around the first query term, whitespace collapsed.

use tantivy::tokenizer::TokenStream;

/// How far before the first match a snippet starts, as a fraction of its length.
/// Fixed (not a setting).
const LEAD_DIVISOR: usize = 4;

/// At most `max_chars` characters of `body` around the first token whose analyzed form is in
/// `terms` (or the start of the body), whitespace runs collapsed, `…` marking cuts.
pub(crate) fn snippet(body: &str, terms: &[String], max_chars: usize) -> String {
    let mut at_byte = 0;
    if !terms.is_empty() {
        let mut analyzer = crate::index::analyzer();
        let mut stream = analyzer.token_stream(body);
        while stream.advance() {
            let t = stream.token();
            if terms.contains(&t.text) {
                at_byte = t.offset_from;
                break;
            }
        }
    }
    let at_char = body.get(..at_byte).map_or(0, |s| s.chars().count());
    let start = at_char.saturating_sub(max_chars / LEAD_DIVISOR);
    let mut out = String::with_capacity(max_chars + 8);
    let mut count = 0;
    let mut space = true;
    if start > 0 {
        out.push('…');
        count += 1;
    }
    let mut rest = body.chars().skip(start).peekable();
    while let Some(c) = rest.next() {
        if count >= max_chars.saturating_sub(1) {
            // Room for one more character: the text itself if it is the last, else a cut mark.
            if rest.peek().is_some() {
                out.push('…');
            } else if !(c.is_whitespace() || c.is_control()) {
                out.push(c);
            }
            break;
        }
        if c.is_whitespace() || c.is_control() {
            if !space {
                out.push(' ');
                count += 1;
                space = true;
            }
        } else {
            out.push(c);
            count += 1;
            space = false;
        }
    }
    let trimmed = out.trim_end();
    trimmed.to_owned()
}

#[cfg(test)]
mod tests {
    use super::snippet;

    #[test]
    fn snippets_are_bounded_centered_and_collapsed() {
        let body = format!(
            "{} la certificazione è pronta\n\n  grazie {}",
            "x ".repeat(300),
            "y ".repeat(300)
        );
        let s = snippet(&body, &["certificazione".to_owned()], 120);
        assert!(s.chars().count() <= 120, "{}", s.chars().count());
        assert!(s.contains("certificazione è pronta grazie"), "{s}");
        assert!(s.starts_with('…') && s.ends_with('…'));
        let s = snippet("Short  body\r\nhere.", &[], 120);
        assert_eq!(s, "Short body here.");
        let s = snippet(&"abc ".repeat(100), &["nothing".to_owned()], 20);
        assert!(s.starts_with("abc abc") && s.ends_with('…') && s.chars().count() <= 20);
        assert_eq!(snippet("", &[], 10), "");
        // Diacritics fold like the index: "perche" finds "perché".
        let s = snippet(&format!("{}perché no", "z ".repeat(100)), &["perche".to_owned()], 40);
        assert!(s.contains("perché no"), "{s}");
    }
}
