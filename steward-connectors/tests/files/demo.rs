//! The demo's documents, read back by the real readers: every file gives its text (the lease's
//! pages, the invoice's title, the budget's sheet, the recipe's Windows-1252 accents, the
//! letter's RTF escapes), the web page's script is never text, the repeated header of the
//! lease is dropped, and a search across the folder finds each document by what it says. The
//! folder may sit in the home (`<home>/demo-documents`, the one shareable place there) while
//! the rest of the home stays refused.

use steward_connectors::docs::demo::write_demo_documents;
use steward_core::{StewardError as _, docs::DocsIndexReport, paths::DEMO_DOCUMENTS_DIR};

#[test]
fn the_demo_documents_read_back_whole_and_are_found_by_what_they_say() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let root = home.join(DEMO_DOCUMENTS_DIR);
    let written = write_demo_documents(&root).unwrap();
    assert_eq!(written.files, 7);
    std::fs::write(
        home.join("config.toml"),
        format!("[files]\nroots = [{:?}]\n", root.to_string_lossy()),
    )
    .unwrap();
    let s = steward_connectors::home::open(Some(home)).unwrap();

    let report = s.index_shared_folders(None, &mut |_| {}).unwrap();
    assert_eq!(report.files.files, 7, "{report:?}");
    let d: DocsIndexReport = report.documents.unwrap();
    assert_eq!((d.documents, d.indexed, d.failed_total), (7, 7, 0), "{:?}", d.failed);

    let info = |rel: &str| s.doc_info(&root.join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"));
    let lease = info("Home/lease-via-roma-12-signed.pdf");
    assert_eq!((lease.kind.as_str(), lease.units, lease.has_text), ("pdf", 3, true));
    assert_eq!(lease.title.as_deref(), Some("Lease - Via Roma 12"));
    let invoice = info("Invoices/invoice-2026-118-studio-verdi.docx");
    assert_eq!(
        (invoice.kind.as_str(), invoice.title.as_deref()),
        ("docx", Some("Invoice 2026/118"))
    );
    let budget = info("Invoices/budget-2026.xlsx");
    assert_eq!(
        (budget.kind.as_str(), budget.names.as_slice()),
        ("xlsx", &["Budget 2026".to_owned()][..])
    );

    let whole = |rel: &str| {
        let w = s.read_doc(&root.join(rel), None, None, Some(12_000)).unwrap();
        assert!(w.next_cursor.is_none(), "{rel} fits one window");
        w.text
    };
    let text = whole("Home/lease-via-roma-12-signed.pdf");
    assert!(text.contains("six months' written notice"), "{text}");
    assert!(text.contains("[page 3]") && text.contains("Signed in Milano on 14 February 2025"));
    assert!(!text.contains("Lease - Via Roma 12, Milano"), "the header on every page is dropped");
    let text = whole("Invoices/budget-2026.xlsx");
    assert!(text.contains("Kitchen renovation") && text.contains("6400"), "{text}");
    let text = whole("Notes/tiramisu.txt");
    assert!(
        text.contains("Tiramisù") && text.contains("caffè") && text.contains("Perché"),
        "{text}"
    );
    let text = whole("Letters/lettera-amministratore.rtf");
    assert!(
        text.contains("la caldaia dell'appartamento di Via Roma 12 è guasta da lunedì"),
        "{text}"
    );
    let text = whole("Travel/rome-itinerary.html");
    assert!(
        text.contains("Frecciarossa 9525, Milano Centrale 08:10 → Roma Termini 11:20"),
        "{text}"
    );
    assert!(!text.contains("tracker") && !text.contains("font-family"), "{text}");
    let text = whole("Notes/parents-meeting-2026-11-28.md");
    assert!(text.contains("EUR 15 per child"), "{text}");

    // Each document is found by what it says, at the right page.
    let top = |q: &str| {
        let h = s.search_docs(q, Some(5)).unwrap_or_else(|e| panic!("{q}: {e}"));
        let first = h.hits.first().unwrap_or_else(|| panic!("nothing for {q:?}")).clone();
        (first.path.strip_prefix(root.canonicalize().unwrap()).unwrap().to_path_buf(), first.unit)
    };
    assert_eq!(top("notice registered letter"), ("Home/lease-via-roma-12-signed.pdf".into(), 2));
    assert_eq!(
        top("Studio Verdi invoice total").0,
        std::path::PathBuf::from("Invoices/invoice-2026-118-studio-verdi.docx")
    );
    assert_eq!(top("canteen insurance").0, std::path::PathBuf::from("Invoices/budget-2026.xlsx"));
    assert_eq!(
        top("caldaia guasta").0,
        std::path::PathBuf::from("Letters/lettera-amministratore.rtf")
    );
    assert_eq!(top("mascarpone savoiardi").0, std::path::PathBuf::from("Notes/tiramisu.txt"));
    assert_eq!(
        top("Frecciarossa Termini").0,
        std::path::PathBuf::from("Travel/rome-itinerary.html")
    );
    assert_eq!(
        top("museum trip").0,
        std::path::PathBuf::from("Notes/parents-meeting-2026-11-28.md")
    );
    assert!(s.search_docs("cookie", None).unwrap().hits.is_empty(), "the script is not text");

    // The rest of the home stays refused, even when named from inside the shared folder.
    let e = s.doc_info(&root.join("../mirror.db")).unwrap_err();
    assert!(matches!(e.code(), "PATH_SENSITIVE" | "PATH_OUTSIDE_ROOTS"), "{e}");
}

/// An embedder that fails every request, or answers hashed-word vectors when `works`.
struct Flaky {
    works: bool,
    calls: std::sync::atomic::AtomicUsize,
}

impl steward_core::index::Embedder for Flaky {
    fn model(&self) -> &str {
        "hashed-words"
    }
    fn dimension(&self) -> Option<usize> {
        Some(64)
    }
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, steward_core::index::EmbedError> {
        self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        if !self.works {
            return Err(steward_core::index::EmbedError::Unavailable("connection refused".into()));
        }
        Ok(texts
            .iter()
            .map(|t| {
                let mut v = vec![0.0_f32; 64];
                for w in t.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()) {
                    let h = w
                        .to_lowercase()
                        .bytes()
                        .fold(7_u64, |h, b| h.wrapping_mul(31).wrapping_add(u64::from(b)));
                    v[(h % 64) as usize] += 1.0;
                }
                v[0] += 0.001;
                v
            })
            .collect())
    }
    fn max_distance(&self) -> f32 {
        0.9
    }
}

#[test]
fn a_failing_embedder_leaves_words_search_whole_and_a_later_run_catches_up() {
    use std::sync::{Arc, atomic::Ordering::SeqCst};
    use steward_core::docs::SemanticStatus;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("Documents");
    write_demo_documents(&root).unwrap();
    let root = root.canonicalize().unwrap();
    let open = |works: bool| {
        let e = Arc::new(Flaky { works, calls: 0.into() });
        let s = steward_core::Steward::builder()
            .home(dir.path().join("home"))
            .file_roots(vec![root.clone()])
            .extractor(Arc::new(steward_connectors::docs::Readers))
            .embedder(e.clone())
            .open()
            .unwrap();
        (s, e)
    };
    let (s, e) = open(false);
    let d = s.index_shared_folders(None, &mut |_| {}).unwrap().documents.unwrap();
    let v = d.vectors.unwrap();
    assert_eq!((v.embedded, v.pending, v.failed), (0, d.chunks, true), "{d:?}");
    assert_eq!(e.calls.load(SeqCst), 1, "a failing embedder stops the pass at its first batch");
    // Words still answer, and the answer says meaning was unavailable.
    let h = s.search_docs("notice registered letter", None).unwrap();
    assert_eq!(h.semantic.status, SemanticStatus::Unavailable);
    assert!(h.hits[0].path.ends_with("Home/lease-via-roma-12-signed.pdf"), "{:?}", h.hits);
    assert_eq!((h.hits[0].lexical_rank, h.hits[0].vector_rank), (Some(1), None));
    let one =
        s.search_doc(&root.join("Home/lease-via-roma-12-signed.pdf"), "notice", None).unwrap();
    assert_eq!((one.semantic.status, one.hits[0].unit), (SemanticStatus::Unavailable, 2));
    drop(s);

    // The embedder answers again: the next run gives every passage its vector, once.
    let (s, e) = open(true);
    let d = s.index_shared_folders(None, &mut |_| {}).unwrap().documents.unwrap();
    let v = d.vectors.unwrap();
    assert_eq!((v.embedded, v.pending, v.failed), (d.chunks, 0, false), "{d:?}");
    let h = s.search_docs("notice registered letter", None).unwrap();
    assert_eq!(h.semantic.status, SemanticStatus::Full);
    assert!(h.hits[0].path.ends_with("Home/lease-via-roma-12-signed.pdf"), "{:?}", h.hits);
    assert_eq!(h.hits[0].lexical_rank, Some(1));
    let calls = e.calls.load(SeqCst);
    let again = s.index_shared_folders(None, &mut |_| {}).unwrap().documents.unwrap();
    assert_eq!(again.vectors.unwrap().embedded, 0);
    assert_eq!(e.calls.load(SeqCst), calls, "nothing embedded twice");
}
