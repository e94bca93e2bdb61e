//! Folding for substring matching, and the trigram tokenizer built on it.
//!
//! A substring constraint matches when the folded needle occurs in the folded field text.
//! Folding lowercases, maps diacritics to ASCII (the same folding as the BM25 analyzer, so
//! `perche` finds `perché` and `già` finds `gia`) and collapses every run of whitespace or
//! control characters into one space, so a phrase wrapped across lines still matches.
//! Punctuation is kept: `@acme.it` and `n. 12` are real substrings.
//!
//! The index stores each distinct trigram of the folded text once per document (no positions,
//! no frequencies). A document holding every trigram of the needle is a *candidate*; candidates
//! are confirmed against the folded text itself before anything is returned, so the index may
//! over-approximate but never decides a match alone.

use std::collections::HashSet;
use std::hash::{BuildHasherDefault, Hasher};

use tantivy::tokenizer::{
    AsciiFoldingFilter, LowerCaser, RawTokenizer, TextAnalyzer, Token, TokenStream, Tokenizer,
};

/// Shortest substring (in folded characters) an index lookup accepts.
/// Fixed (not a setting).
pub const MIN_SUBSTRING_CHARS: usize = 3;

/// Folds `text` into `out` (cleared first): lowercase, diacritics to ASCII, whitespace runs to
/// one space. ASCII is folded byte by byte; each other character goes through tantivy's
/// lowercaser and ASCII folding (the BM25 analyzer's filters), so both agree on every letter.
pub fn fold_into(text: &str, out: &mut String) {
    out.clear();
    out.reserve(text.len());
    let mut space = true;
    let mut analyzer: Option<TextAnalyzer> = None;
    let mut buf = [0u8; 4];
    for c in text.chars() {
        if c.is_ascii() {
            push_folded(c.to_ascii_lowercase(), out, &mut space);
            continue;
        }
        let a = analyzer.get_or_insert_with(|| {
            TextAnalyzer::builder(RawTokenizer::default())
                .filter(LowerCaser)
                .filter(AsciiFoldingFilter)
                .build()
        });
        let mut stream = a.token_stream(c.encode_utf8(&mut buf));
        while stream.advance() {
            for f in stream.token().text.chars() {
                push_folded(f, out, &mut space);
            }
        }
    }
}

fn push_folded(c: char, out: &mut String, space: &mut bool) {
    if c.is_whitespace() || c.is_control() {
        if !*space {
            out.push(' ');
            *space = true;
        }
    } else {
        out.push(c);
        *space = false;
    }
}

/// `text` folded.
pub fn fold(text: &str) -> String {
    let mut out = String::new();
    fold_into(text, &mut out);
    out
}

/// The distinct trigrams of a folded needle, in order of first appearance. Empty when the
/// needle is shorter than three characters.
pub(crate) fn trigrams(folded: &str) -> Vec<String> {
    let chars: Vec<char> = folded.chars().collect();
    let mut out: Vec<String> = Vec::new();
    for w in chars.windows(3) {
        let t: String = w.iter().collect();
        if !out.contains(&t) {
            out.push(t);
        }
    }
    out
}

/// Hashes a packed trigram key (already well mixed by the packing multiply).
#[derive(Default)]
struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

/// Bits of the ASCII trigram bitmap (three 7-bit characters).
/// Fixed (not a setting).
const ASCII_KEYS: usize = 1 << 21;

/// Which trigrams a document already emitted: a bitmap for ASCII trigrams (cleared through the
/// list of words it touched) and a hash set for the rest.
#[derive(Clone)]
struct Seen {
    bits: Vec<u64>,
    touched: Vec<u32>,
    other: HashSet<u64, BuildHasherDefault<KeyHasher>>,
}

impl Default for Seen {
    fn default() -> Self {
        Self { bits: vec![0; ASCII_KEYS / 64], touched: Vec::new(), other: HashSet::default() }
    }
}

impl Seen {
    fn clear(&mut self) {
        for w in self.touched.drain(..) {
            if let Some(word) = self.bits.get_mut(w as usize) {
                *word = 0;
            }
        }
        self.other.clear();
    }

    /// True when `w` was not seen before.
    fn insert(&mut self, w: &[char]) -> bool {
        let (a, b, c) = (u32::from(w[0]), u32::from(w[1]), u32::from(w[2]));
        if a < 128 && b < 128 && c < 128 {
            let key = (a << 14) | (b << 7) | c;
            let (word, bit) = ((key >> 6) as usize, 1u64 << (key & 63));
            let Some(slot) = self.bits.get_mut(word) else { return false };
            if *slot & bit != 0 {
                return false;
            }
            if *slot == 0 {
                self.touched.push(key >> 6);
            }
            *slot |= bit;
            return true;
        }
        self.other.insert((u64::from(a) << 42) | (u64::from(b) << 21) | u64::from(c))
    }
}

/// Emits each distinct trigram of the folded text once.
#[derive(Clone, Default)]
pub(crate) struct TrigramTokenizer {
    folded: String,
    chars: Vec<char>,
    seen: Seen,
    token: Token,
}

impl Tokenizer for TrigramTokenizer {
    type TokenStream<'a> = TrigramStream<'a>;

    fn token_stream<'a>(&'a mut self, text: &'a str) -> TrigramStream<'a> {
        fold_into(text, &mut self.folded);
        self.chars.clear();
        self.chars.extend(self.folded.chars());
        self.seen.clear();
        self.token = Token::default();
        TrigramStream { t: self, at: 0 }
    }
}

/// The stream of [`TrigramTokenizer`].
pub(crate) struct TrigramStream<'a> {
    t: &'a mut TrigramTokenizer,
    at: usize,
}

impl TokenStream for TrigramStream<'_> {
    fn advance(&mut self) -> bool {
        while self.at + 3 <= self.t.chars.len() {
            let w = &self.t.chars[self.at..self.at + 3];
            self.at += 1;
            if self.t.seen.insert(w) {
                let token = &mut self.t.token;
                token.text.clear();
                token.text.extend(w);
                token.position = self.at - 1;
                token.offset_from = 0;
                token.offset_to = 0;
                return true;
            }
        }
        false
    }

    fn token(&self) -> &Token {
        &self.t.token
    }

    fn token_mut(&mut self) -> &mut Token {
        &mut self.t.token
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(text: &str) -> Vec<String> {
        let mut t = TrigramTokenizer::default();
        let mut s = t.token_stream(text);
        let mut out = Vec::new();
        while s.advance() {
            out.push(s.token().text.clone());
        }
        out
    }

    #[test]
    fn folds_case_diacritics_and_whitespace() {
        assert_eq!(fold("Già  PERCHÉ\r\n\tok"), "gia perche ok");
        assert_eq!(fold("A\n\nB"), "a b");
        assert_eq!(fold("Marco <marco@Acme.IT>"), "marco <marco@acme.it>");
        assert_eq!(fold(""), "");
    }

    #[test]
    fn trigrams_are_distinct_and_need_three_chars() {
        assert_eq!(all("aaaa"), vec!["aaa"]);
        assert_eq!(all("Abcd"), vec!["abc", "bcd"]);
        assert!(all("ab").is_empty());
        assert_eq!(trigrams("abab"), vec!["aba", "bab"]);
        assert!(trigrams("ab").is_empty());
        // Every trigram of a needle is among the document's trigrams when the needle occurs.
        let doc: Vec<String> = all("La certificazione è pronta, già firmata.");
        for t in trigrams(&fold("CERTIFICAZIONE E")) {
            assert!(doc.contains(&t), "{t}");
        }
    }
}
