//! vCard reading, merging and resolution: never a panic; the file's bounds hold; every card
//! read has a name and normalized addresses; merging keeps every address.
#![no_main]

use libfuzzer_sys::fuzz_target;
use steward_connectors::contacts::{
    read_vcf,
    vcard::{MAX_FILE_CARDS, MAX_FILE_ERRORS},
};
use steward_core::contacts::{merge, normalize_email, resolve_recipient};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let Ok(read) = read_vcf(&text, "fuzz", steward_connectors::contacts::phone::region("IT")) else {
        return;
    };
    assert!(read.contacts.len() <= MAX_FILE_CARDS);
    assert!(read.errors.len() <= MAX_FILE_ERRORS);
    let mut addresses = std::collections::BTreeSet::new();
    for c in &read.contacts {
        assert!(!c.name.is_empty());
        for e in &c.emails {
            assert_eq!(normalize_email(e).as_deref(), Some(e.as_str()));
            addresses.insert(e.clone());
        }
    }
    let book = merge(read.contacts);
    let merged: std::collections::BTreeSet<String> =
        book.iter().flat_map(|c| c.emails.iter().cloned()).collect();
    assert_eq!(merged, addresses);
    if let Some(c) = book.first() {
        let _ = resolve_recipient(&c.name, &book, &[]);
    }
});
