//! What every extraction goes through before it is cached: compatibility normalization
//! (NFKC: the ligature `ﬁ` is `fi`, fullwidth digits are digits), control characters dropped,
//! spaces collapsed within a line and blank lines to one, and the lines a paginated document
//! repeats at the top or bottom of nearly every page (running headers, footers, page numbers)
//! dropped.

use unicode_normalization::UnicodeNormalization as _;

use super::{Extracted, UnitKind};

/// Pages a document needs before lines repeated on them count as headers or footers.
/// Fixed (not a setting).
pub const MIN_PAGES_FOR_RUNNING_LINES: usize = 3;
/// Lines looked at from the top and the bottom of each page for running headers and footers.
/// Fixed (not a setting).
pub const RUNNING_LINES_LOOKED_AT: usize = 2;

/// `e` normalized (see the module's notes).
pub fn normalize(mut e: Extracted) -> Extracted {
    let sheet = e.kind.unit() == UnitKind::Sheet;
    for u in &mut e.units {
        u.text = clean(&u.text, sheet);
        if let Some(n) = &mut u.name {
            *n = clean(n, false).replace('\n', " ").chars().take(super::MAX_NAME_CHARS).collect();
        }
    }
    if let Some(t) = &mut e.title {
        *t = clean(t, false).replace('\n', " ").chars().take(super::MAX_TITLE_CHARS).collect();
    }
    if e.title.as_deref().is_some_and(str::is_empty) {
        e.title = None;
    }
    if e.kind.unit() == UnitKind::Page {
        drop_running_lines(&mut e);
    }
    e
}

/// One text cleaned: NFKC, controls dropped (tabs kept between a sheet's cells), spaces
/// collapsed, lines trimmed, at most one blank line in a row, no blank start or end.
pub fn clean(text: &str, keep_tabs: bool) -> String {
    let mut out = String::with_capacity(text.len());
    let mut blank_run = 0usize;
    let mut line = String::new();
    let flush = |line: &mut String, out: &mut String, blank_run: &mut usize| {
        let t = line.trim_matches(|c: char| c == ' ' || c == '\t');
        if t.is_empty() {
            *blank_run += 1;
        } else {
            if !out.is_empty() {
                out.push('\n');
                if *blank_run > 0 {
                    out.push('\n');
                }
            }
            out.push_str(t);
            *blank_run = 0;
        }
        line.clear();
    };
    for c in text.nfkc() {
        match c {
            '\n' | '\u{0b}' | '\u{0c}' | '\u{2028}' | '\u{2029}' => {
                flush(&mut line, &mut out, &mut blank_run);
            }
            '\r' => {}
            '\t' if keep_tabs => line.push('\t'),
            // Soft hyphens are invisible break hints.
            '\u{ad}' => {}
            c if c.is_whitespace() => {
                if !line.ends_with(' ') && !line.ends_with('\t') {
                    line.push(' ');
                }
            }
            c if c.is_control() => {}
            // Zero-width characters and byte-order marks carry no text.
            '\u{200b}' | '\u{feff}' => {}
            c => line.push(c),
        }
    }
    flush(&mut line, &mut out, &mut blank_run);
    out
}

/// A line as compared across pages: digits stand for any number (page numbers).
fn shape(line: &str) -> String {
    line.chars().map(|c| if c.is_ascii_digit() { '#' } else { c }).collect()
}

/// Drops the lines seen among the first or last [`RUNNING_LINES_LOOKED_AT`] of at least
/// three quarters of the pages (with text), when there are [`MIN_PAGES_FOR_RUNNING_LINES`].
fn drop_running_lines(e: &mut Extracted) {
    let pages: Vec<Vec<&str>> = e
        .units
        .iter()
        .filter(|u| !u.text.is_empty())
        .map(|u| u.text.lines().filter(|l| !l.is_empty()).collect())
        .collect();
    if pages.len() < MIN_PAGES_FOR_RUNNING_LINES {
        return;
    }
    let mut counts: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for lines in &pages {
        let n = lines.len();
        let mut seen = std::collections::HashSet::new();
        let edges = lines
            .iter()
            .take(RUNNING_LINES_LOOKED_AT)
            .chain(lines.iter().skip(n.saturating_sub(RUNNING_LINES_LOOKED_AT)));
        for l in edges {
            let s = shape(l);
            if seen.insert(s.clone()) {
                *counts.entry(s).or_default() += 1;
            }
        }
    }
    let need = (pages.len() * 3).div_ceil(4);
    let running: std::collections::HashSet<String> =
        counts.into_iter().filter(|(_, n)| *n >= need).map(|(s, _)| s).collect();
    if running.is_empty() {
        return;
    }
    for u in &mut e.units {
        let lines: Vec<&str> = u.text.lines().collect();
        let n = lines.len();
        // Only at the edges: the same words inside a page are text.
        let non_empty: Vec<usize> = (0..n).filter(|&i| !lines[i].is_empty()).collect();
        let mut drop = std::collections::HashSet::new();
        for &i in non_empty.iter().take(RUNNING_LINES_LOOKED_AT) {
            if running.contains(&shape(lines[i])) {
                drop.insert(i);
            }
        }
        for &i in non_empty.iter().rev().take(RUNNING_LINES_LOOKED_AT) {
            if running.contains(&shape(lines[i])) {
                drop.insert(i);
            }
        }
        if !drop.is_empty() {
            let kept: String = lines
                .iter()
                .enumerate()
                .filter(|(i, _)| !drop.contains(i))
                .map(|(_, l)| *l)
                .collect::<Vec<_>>()
                .join("\n");
            u.text = clean(&kept, false);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::docs::{DocKind, Unit};

    fn pdf(pages: &[&str]) -> Extracted {
        Extracted {
            kind: DocKind::Pdf,
            title: None,
            units: pages.iter().map(|t| Unit { name: None, text: (*t).to_owned() }).collect(),
            truncated: false,
        }
    }

    #[test]
    fn ligatures_spaces_and_controls() {
        assert_eq!(
            clean("  e\u{fb03}cient\u{0}  \t work \r\n\n\n\nnext\u{ad}line ", false),
            "efficient work\n\nnextline"
        );
        assert_eq!(clean("a\tb\t\tc", true), "a\tb\t\tc");
    }

    #[test]
    fn running_headers_and_page_numbers_go_body_stays() {
        let e = normalize(pdf(&[
            "ACME Annual Report\nIntro text here\nPage 1 of 3",
            "ACME Annual Report\nMiddle: ACME Annual Report is cited\nPage 2 of 3",
            "ACME Annual Report\nThe end\nPage 3 of 3",
        ]));
        let texts: Vec<&str> = e.units.iter().map(|u| u.text.as_str()).collect();
        assert_eq!(texts, ["Intro text here", "Middle: ACME Annual Report is cited", "The end"]);
    }

    #[test]
    fn two_pages_keep_everything() {
        let e = normalize(pdf(&["Head\nA", "Head\nB"]));
        assert_eq!(e.units[0].text, "Head\nA");
    }
}
