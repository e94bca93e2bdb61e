//! Address books read and merged (a vdir of two books as khard keeps them and a many-card
//! `.vcf` export), people harvested from a mirrored Maildir's headers, and recipient
//! resolution over both: one address when the question fits one, the person's choice
//! otherwise.

use std::path::Path;

use steward_connectors::{
    contacts::{phone::region, read_vcf_file, read_vdir},
    mail::MaildirSource,
};
use steward_core::{
    Steward,
    contacts::{Evidence, Status, merge, resolve_recipient},
    mirror::SyncOptions,
};

fn card(uid: &str, body: &str) -> String {
    format!("BEGIN:VCARD\r\nVERSION:3.0\r\nUID:{uid}\r\n{body}END:VCARD\r\n")
}

fn write_books(root: &Path) {
    let family = root.join("family");
    let work = root.join("work");
    std::fs::create_dir_all(&family).unwrap();
    std::fs::create_dir_all(&work).unwrap();
    std::fs::write(family.join("displayname"), "Famiglia\n").unwrap();
    std::fs::write(
        family.join("anna.vcf"),
        card("anna-1", "FN:Anna Bianchi\r\nN:Bianchi;Anna;;;\r\nEMAIL;TYPE=home:Anna.Bianchi@Example.org\r\nTEL;TYPE=cell:333 123 4567\r\n"),
    )
    .unwrap();
    std::fs::write(
        family.join("beppe.vcf"),
        card("beppe", "FN:Giuseppe Verdi\r\nNICKNAME:Beppe,Peppino\r\nEMAIL:beppe@example.org\r\n"),
    )
    .unwrap();
    // A write in progress and a file that is not an item: neither is read.
    std::fs::write(family.join("half.vcf.tmp"), card("half", "FN:Half Written\r\n")).unwrap();
    std::fs::write(family.join("README"), "not a card").unwrap();
    std::fs::write(
        work.join("anna-work.vcf"),
        card(
            "anna-2",
            "FN:Anna Bianchi\r\nORG:Scuola Manzoni\r\nEMAIL;TYPE=work:anna.bianchi@example.org\r\nTEL:+39 02 1234 5678\r\n",
        ),
    )
    .unwrap();
    std::fs::write(
        work.join("rossi.vcf"),
        card(
            "rossi",
            "FN:Anna Rossi\r\nORG:Politecnico di Milano\r\nEMAIL:anna.rossi@polimi.it\r\n",
        ),
    )
    .unwrap();
    // No name, address or phone: a per-card error, the rest still read.
    std::fs::write(work.join("empty.vcf"), card("empty", "NOTE:nothing\r\n")).unwrap();
}

fn mail(id: &str, from: &str, to: &str, date: &str) -> Vec<u8> {
    format!(
        "Message-ID: <{id}>\r\nFrom: {from}\r\nTo: {to}\r\nSubject: s {id}\r\nDate: {date}\r\n\r\nbody\r\n"
    )
    .into_bytes()
}

fn mirrored(dir: &Path) -> Steward {
    let md = dir.join("Maildir");
    let me = "Me <me@example.net>";
    let files = [
        (
            "cur",
            "1",
            mail(
                "1@x",
                me,
                "Anna Bianchi <anna.bianchi@example.org>",
                "Mon, 3 Mar 2025 10:00:00 +0000",
            ),
        ),
        (
            "cur",
            "2",
            mail(
                "2@x",
                me,
                "anna.bianchi@example.org, Anna Verdi <anna.verdi@studio.example>",
                "Tue, 4 Mar 2025 10:00:00 +0000",
            ),
        ),
        (
            "cur",
            "3",
            mail(
                "3@x",
                "Anna Verdi <anna.verdi@studio.example>",
                me,
                "Wed, 5 Mar 2025 10:00:00 +0000",
            ),
        ),
        (
            "cur",
            "4",
            mail("4@x", "Newsletter <news@shop.example>", me, "Thu, 6 Mar 2025 10:00:00 +0000"),
        ),
    ];
    for (i, (sub, name, bytes)) in files.iter().enumerate() {
        // The first two in the Sent folder (Maildir++ `.Sent`), the rest in the inbox.
        let folder = if i < 2 { md.join(".Sent") } else { md.clone() };
        std::fs::create_dir_all(folder.join(sub)).unwrap();
        std::fs::create_dir_all(folder.join("new")).unwrap();
        std::fs::write(folder.join(sub).join(format!("{name}:2,S")), bytes).unwrap();
    }
    let s = Steward::builder().home(dir.join("home")).open().unwrap();
    let opts = SyncOptions { account: Some("t".into()), cancel: None };
    s.sync_mail(&MaildirSource::new(&md), &opts, &mut |_| {}).unwrap();
    s
}

#[test]
fn books_merge_email_first_and_the_mirror_says_who_you_write_to() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("contacts");
    write_books(&root);
    let read = read_vdir(&root, region("IT")).unwrap();
    assert_eq!(read.cards.len(), 4, "the .tmp and extensionless files are not items");
    let codes: Vec<&str> = read.errors.iter().map(|e| e.code).collect();
    assert_eq!(codes, ["VCF_NO_NAME"]);
    let book = merge(read.cards);
    let names: Vec<&str> = book.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["Anna Bianchi", "Anna Rossi", "Giuseppe Verdi"]);
    // The two Anna Bianchi cards share an address (case aside): one person, both books kept,
    // both phones in E.164 (the national one read in Italy).
    let anna = &book[0];
    assert_eq!(
        anna.sources.iter().map(|s| s.source.as_str()).collect::<Vec<_>>(),
        ["family", "work"]
    );
    assert_eq!(anna.phones, ["+393331234567", "+390212345678"]);
    assert_eq!(anna.org.as_deref(), Some("Scuola Manzoni"));
    assert_eq!(book[2].nicknames, ["Beppe", "Peppino"]);

    let s = mirrored(dir.path());
    let people = s.correspondents(100).unwrap();
    let summary: Vec<(&str, u32, u32)> =
        people.iter().map(|p| (p.email.as_str(), p.sent, p.received)).collect();
    // I wrote to Anna Bianchi twice and to Anna Verdi once; she and a newsletter wrote to me;
    // my own address is not a correspondent.
    assert_eq!(
        summary,
        [
            ("anna.bianchi@example.org", 2, 0),
            ("anna.verdi@studio.example", 1, 1),
            ("news@shop.example", 0, 1)
        ]
    );
    assert_eq!(people[1].name.as_deref(), Some("Anna Verdi"));
    assert_eq!(people[0].last_sent.as_deref(), Some("2025-03-04T10:00:00+00:00"));

    let r = resolve_recipient("Anna", &book, &people).unwrap();
    assert_eq!(r.status, Status::Ambiguous);
    let emails: Vec<&str> = r.candidates.iter().map(|c| c.email.as_str()).collect();
    // Ranked by how often I wrote to each, never picked by it.
    assert_eq!(
        emails,
        ["anna.bianchi@example.org", "anna.verdi@studio.example", "anna.rossi@polimi.it"]
    );
    let r = resolve_recipient("Anna Verdi", &book, &people).unwrap();
    assert_eq!(r.status, Status::Resolved);
    assert_eq!(r.candidates[0].email, "anna.verdi@studio.example");
    assert!(r.candidates[0].evidence.contains(&Evidence::NotInContacts));
    let r = resolve_recipient("Anna from Polimi", &book, &people).unwrap();
    assert_eq!(
        (r.status, r.candidates[0].email.as_str()),
        (Status::Resolved, "anna.rossi@polimi.it")
    );
}

#[test]
fn a_many_card_export_is_read_whole_and_a_file_without_cards_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let vcf = dir.path().join("export.vcf");
    let cards: String = (0..250)
        .map(|i| card(&format!("u{i}"), &format!("FN:Person {i}\r\nEMAIL:p{i}@example.org\r\n")))
        .collect();
    std::fs::write(&vcf, cards).unwrap();
    let read = read_vcf_file(&vcf, None);
    assert_eq!(read.cards.len(), 250);
    assert!(read.errors.is_empty(), "{:?}", read.errors);
    assert_eq!(merge(read.cards).len(), 250);
    let bad = dir.path().join("bad.vcf");
    std::fs::write(&bad, "this is not a card\n").unwrap();
    let read = read_vcf_file(&bad, None);
    assert!(read.cards.is_empty());
    assert_eq!(read.errors.iter().map(|e| e.code).collect::<Vec<_>>(), ["VCF_INVALID"]);
}

#[test]
fn the_agent_tools_resolve_only_what_fits_one_address_and_mark_contacts_as_untrusted_data() {
    use steward_core::{
        ToolCall,
        policy::DecisionContext,
        tools::{SourceRef, ToolOutcome, Toolbox},
    };
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("contacts");
    write_books(&root);
    let s = std::sync::Arc::new(mirrored(dir.path()));
    let read = read_vdir(&root, region("IT")).unwrap();
    let report = s.index_contacts("home", read.into_account_read().unwrap().0).unwrap();
    assert_eq!((report.added, report.contacts), (4, 3));
    let tb = Toolbox::new(std::sync::Arc::clone(&s));
    let run = |tool: &str, input: serde_json::Value| {
        let call = ToolCall { actor: "agent:test", chat: Some("c"), tool, input: &input };
        match tb.call(&call, &DecisionContext::default()).unwrap() {
            ToolOutcome::Ran { result, .. } => *result,
            other => panic!("{tool} did not run: {other:?}"),
        }
    };
    let r = run("contacts.resolve_recipient", serde_json::json!({ "text": "Anna" }));
    assert!(r.text.starts_with("Ambiguous:"), "{}", r.text);
    assert!(r.text.contains("do not choose yourself"));
    assert!(r.untrusted, "names from cards and mail headers are data, never orders");
    assert_eq!(r.sources.len(), 3);
    assert!(r.sources.contains(&SourceRef::Contact { id: "anna.verdi@studio.example".into() }));
    let r = run("contacts.resolve_recipient", serde_json::json!({ "text": "Beppe" }));
    assert_eq!(r.text, "Resolved: Giuseppe Verdi <beppe@example.org>.");
    let r = run("contacts.search", serde_json::json!({ "query": "manzoni" }));
    assert!(r.text.contains("Anna Bianchi (Scuola Manzoni): anna.bianchi@example.org tel +393331234567, +390212345678"), "{}", r.text);
    // Bad input changes nothing and says why.
    let bad = tb.call(
        &ToolCall {
            actor: "agent:test",
            chat: Some("c"),
            tool: "contacts.search",
            input: &serde_json::json!({ "query": "x", "limit": 99 }),
        },
        &DecisionContext::default(),
    );
    assert!(bad.is_err(), "{bad:?}");
}

#[test]
fn a_book_that_cannot_be_read_keeps_its_cards_and_only_a_vanished_book_loses_them() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("contacts");
    write_books(&root);
    let s = Steward::builder().home(dir.path().join("home")).open().unwrap();
    let index = |read: steward_connectors::contacts::BooksRead| {
        s.index_contacts("me", read.into_account_read().unwrap().0).unwrap()
    };
    let r = index(read_vdir(&root, None).unwrap());
    assert_eq!((r.added, r.contacts), (4, 3));
    // A file of the family book that is not a card: the book is not read whole, so its
    // stored cards stay (nothing is read as emptied).
    std::fs::write(root.join("family").join("broken.vcf"), "garbage").unwrap();
    let read = read_vdir(&root, None).unwrap();
    assert_eq!(read.books, ["work"]);
    let r = index(read);
    assert_eq!((r.removed, r.contacts), (0, 3), "{r:?}");
    // A single file indexed into the same account leaves the other books alone.
    let one = dir.path().join("extra.vcf");
    std::fs::write(&one, "BEGIN:VCARD\r\nVERSION:3.0\r\nUID:x\r\nFN:Extra Person\r\nEMAIL:extra@example.org\r\nEND:VCARD\r\n").unwrap();
    let r = index(read_vcf_file(&one, None));
    assert_eq!((r.added, r.removed, r.contacts), (1, 0, 4), "{r:?}");
    // The family book gone from the root: its cards go (the single file's book stays listed
    // out of the vdir, so it goes too: the vdir lists every book of the account).
    std::fs::remove_dir_all(root.join("family")).unwrap();
    let r = index(read_vdir(&root, None).unwrap());
    assert_eq!(r.removed, 3, "{r:?}");
    let names: Vec<String> = s.contacts().unwrap().into_iter().map(|c| c.name).collect();
    assert_eq!(names, ["Anna Bianchi", "Anna Rossi"]);
}
