//! Steward's vCard reading against Python `vobject`'s on every card file of the corpora
//! (`oracles/vcf_python_vobject.jsonl`): per file, its cards' FN and addresses (normalized:
//! lowercase, trimmed) and how many phones each has. A file `vobject` refuses agrees when
//! Steward reads no card from it. Every disagreement is in `vcf-allowlist.txt` with its reason;
//! the test fails on one not listed and on a listed one that no longer disagrees.

use std::collections::BTreeSet;

use steward_connectors::{
    contacts::read_vcf,
    testing::{allow_list, check_allow_list, corpus},
};
use steward_core::contacts::normalize_email;

const ALLOWED: &str = include_str!("vcf-allowlist.txt");

/// A card as compared: FN, addresses, number of phones.
type Seen = (Option<String>, Vec<String>, usize);

#[test]
fn steward_reads_the_corpora_cards_like_python_vobject_or_says_why_not() {
    let Some(oracle) = corpus("oracles/vcf_python_vobject.jsonl") else { return };
    let root = oracle.parent().and_then(|p| p.parent()).unwrap().to_owned();
    let allowed = allow_list(ALLOWED);
    let verbose = std::env::var_os("STEWARD_DIFF_VERBOSE").is_some();
    let (mut files, mut cards, mut cards_agree) = (0, 0, 0);
    let mut disagree = BTreeSet::new();
    for line in std::fs::read_to_string(&oracle).unwrap().lines() {
        let rec: serde_json::Value = serde_json::from_str(line).unwrap();
        let file = rec["file"].as_str().unwrap().to_owned();
        files += 1;
        let bytes = std::fs::read(root.join(&file)).unwrap();
        let read = read_vcf(&String::from_utf8_lossy(&bytes), "corpus", None);
        let ours: Vec<Seen> = match &read {
            Ok(r) => r
                .contacts
                .iter()
                .map(|c| {
                    // Steward falls back to the structured name or an address; vobject's FN
                    // is what the card wrote.
                    let fn_ = Some(c.name.clone()).filter(|n| !c.emails.contains(n));
                    let mut e = c.emails.clone();
                    e.sort();
                    (fn_, e, c.phones.len())
                })
                .collect(),
            Err(_) => Vec::new(),
        };
        let theirs: Vec<Seen> = match rec["cards"].as_array() {
            Some(cs) if rec["ok"] == true => cs
                .iter()
                // A card with nothing to reach or name anyone by is not a contact.
                .filter(|c| {
                    ["fn", "email", "tel", "n"]
                        .iter()
                        .any(|k| c[k].as_array().is_some_and(|a| !a.is_empty()))
                })
                .map(|c| {
                    let list = |k: &str| -> Vec<String> {
                        c[k].as_array()
                            .unwrap()
                            .iter()
                            .filter_map(|v| v.as_str().map(str::to_owned))
                            .collect()
                    };
                    let fn_ = list("fn")
                        .first()
                        .map(|f| f.split_whitespace().collect::<Vec<_>>().join(" "));
                    let mut e: Vec<String> =
                        list("email").iter().filter_map(|e| normalize_email(e)).collect();
                    e.sort();
                    e.dedup();
                    (
                        fn_.filter(|f| !f.is_empty()),
                        e,
                        list("tel").iter().filter(|t| !t.trim().is_empty()).count(),
                    )
                })
                .collect(),
            _ => Vec::new(),
        };
        cards += theirs.len();
        cards_agree += theirs.iter().filter(|c| ours.contains(c)).count();
        if ours != theirs {
            if verbose {
                eprintln!(
                    "{file}:\n  vobject {theirs:?}\n  steward {ours:?}\n  errors {:?}",
                    read.as_ref().map(|r| &r.errors)
                );
            }
            disagree.insert(file);
        }
    }
    assert!(files >= 20, "the oracle covers the corpora's cards: {files}");
    eprintln!(
        "vCard: Steward agrees with Python vobject on {} of {files} files; {cards_agree} of {cards} cards",
        files - disagree.len()
    );
    check_allow_list("vcf-allowlist.txt", &allowed, &disagree);
}
