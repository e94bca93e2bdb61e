//! CardDAV against a real Radicale on loopback, through the runner's source: address books
//! found and read, an unchanged book not downloaded again (its listing's version is kept with
//! its cards), a changed one read whole, a deleted card gone, a failed run losing nothing.

use std::sync::Arc;

use steward_connectors::{
    dav::{DavAccount, SecretSource},
    pim::{BookSourceConfig, PimPlace},
    testing::radicale::{Collection, Radicale},
};
use steward_core::{Steward, runner::PimSource as _};

const VCF: &str = "text/vcard; charset=utf-8";

fn card(uid: &str, body: &str) -> String {
    format!("BEGIN:VCARD\r\nVERSION:3.0\r\nUID:{uid}\r\n{body}END:VCARD\r\n")
}

fn names(s: &Steward) -> Vec<String> {
    s.contacts().unwrap().into_iter().map(|c| c.name).collect()
}

#[test]
fn carddav_books_are_mirrored_and_an_unchanged_book_is_not_downloaded_again() {
    let dir = tempfile::tempdir().unwrap();
    let server = Radicale::start(dir.path(), "giulia", "s3cret");
    server.collection("famiglia", Collection::AddressBook, "Famiglia", None);
    server.collection("lavoro", Collection::AddressBook, "Lavoro", None);
    server.seed(
        "famiglia",
        "anna.vcf",
        &card("anna", "FN:Anna Ricci\r\nN:Ricci;Anna;;;\r\nEMAIL:Anna.Ricci@Example.it\r\nTEL:06 1234 5678\r\n"),
    );
    server.seed(
        "famiglia",
        "luca.vcf",
        &card("luca", "FN:Luca Bianchi\r\nN:Bianchi;Luca;;;\r\nEMAIL:luca@example.it\r\n"),
    );
    server.seed("lavoro", "marco.vcf", &card("marco", "FN:Marco Rossi\r\nN:Rossi;Marco;;;\r\nORG:Studio Rossi\r\nEMAIL:marco@studio-rossi.it\r\n"));

    // The password from a file only its owner can read, as configured.
    let secret = server.password_file(&dir.path().join("dav-password"));
    let account = DavAccount {
        url: server.url.clone(),
        username: Some("giulia".into()),
        secret: Some(SecretSource::File(secret.clone())),
    };
    let source = Arc::new(BookSourceConfig {
        name: "radicale".into(),
        account: "dav".into(),
        kind: PimPlace::Dav(account),
        region: steward_connectors::contacts::phone::region("IT"),
    });
    let s = Steward::builder().home(dir.path().join("home")).open().unwrap();

    let first = source.sync(&s).unwrap();
    assert_eq!(first.changed, 3, "{}", first.detail);
    assert_eq!(first.errors, 0, "{}", first.detail);
    assert_eq!(names(&s), ["Anna Ricci", "Luca Bianchi", "Marco Rossi"]);
    let anna = s.contacts().unwrap().into_iter().find(|c| c.name == "Anna Ricci").unwrap();
    assert_eq!(anna.emails, ["anna.ricci@example.it"]);
    assert_eq!(anna.phones, ["+390612345678"], "E.164 with the configured region");
    assert_eq!(anna.sources[0].source, "dav/famiglia");
    let versions = s.contact_book_versions("dav").unwrap();
    assert_eq!(versions.keys().collect::<Vec<_>>(), ["famiglia", "lavoro"]);

    // Unchanged: both books listed, neither downloaded, nothing changed.
    let again = source.sync(&s).unwrap();
    assert_eq!(again.changed, 0, "{}", again.detail);
    assert_eq!(again.detail["unchanged"], serde_json::json!(["famiglia", "lavoro"]));
    assert_eq!(s.contact_book_versions("dav").unwrap(), versions);

    // One card changed and one deleted in "famiglia": that book is read whole again.
    assert_eq!(
        server.put(
            "famiglia",
            "anna.vcf",
            VCF,
            &card(
                "anna",
                "FN:Anna Ricci\r\nN:Ricci;Anna;;;\r\nEMAIL:anna.ricci@scuola.example.it\r\n"
            )
        ),
        204
    );
    assert!(matches!(server.delete("famiglia", "luca.vcf"), 200 | 204));
    let changed = source.sync(&s).unwrap();
    assert_eq!(changed.changed, 2, "one changed, one removed: {}", changed.detail);
    assert_eq!(names(&s), ["Anna Ricci", "Marco Rossi"]);
    assert_eq!(changed.detail["unchanged"], serde_json::json!(["lavoro"]), "only famiglia is read");
    let after = s.contact_book_versions("dav").unwrap();
    assert_ne!(after["famiglia"], versions["famiglia"]);
    assert_eq!(after["lavoro"], versions["lavoro"], "the other book kept its version");
    let resolved = s.resolve_recipient("Anna").unwrap();
    assert_eq!(resolved.candidates[0].email, "anna.ricci@scuola.example.it");

    // A password file others can read is refused before anything is sent; the wrong
    // password is refused by the server. Neither loses a card.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o644)).unwrap();
        let (code, message) = source.sync(&s).unwrap_err();
        assert_eq!(code, "DAV_SECRET_UNREADABLE", "{message}");
        assert!(message.contains("chmod 600"), "{message}");
        std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    std::fs::write(&secret, "wrong\n").unwrap();
    let (code, _) = source.sync(&s).unwrap_err();
    assert_eq!(code, "DAV_UNAUTHORIZED");
    assert_eq!(names(&s), ["Anna Ricci", "Marco Rossi"], "nothing lost to a refused run");
}
