//! Differential test of the document readers on `corpora/documents` (133 files from Tika, POI,
//! pdf.js, calamine, python-docx/-pptx, odfpy and CPython, with expected text from independent
//! tools: see its MANIFEST). Agreement is the share of the oracle's words (NFKC, lowercase,
//! the oracle's own `=== sheet ===` style markers left out) that our text holds, counted with
//! multiplicity; every file with an oracle must reach [`MIN_AGREEMENT`] unless the allow-list
//! below names it with a reason and the floor it does reach. Files without an oracle, and the
//! 13 hostile ones, must end in text or a typed error within the bounds, without a panic.

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
    sync::Arc,
};

use steward_connectors::{docs::Readers, testing::corpus};
use steward_core::docs::{
    ExtractError, ExtractLimits, Extracted, Extractor, extract_bounded, normalize,
};

/// Share of an oracle's words every file must reach, unless allow-listed.
const MIN_AGREEMENT: f64 = 0.90;

/// Files that reach less, why, and the floor they do reach (a regression below it fails).
const ALLOWED: &[(&str, f64, &str)] = &[
    (
        "pdfjs/hostile/ContentStreamCycleType3insideType3.pdf",
        0.0,
        "a Type3 glyph that draws itself: ending without text (and without looping) is the point",
    ),
    (
        "pdfjs/pdf/ArabicCIDTrueType.pdf",
        0.0,
        "pdf-extract maps this CID TrueType font's glyphs to no Unicode",
    ),
    (
        "pdfjs/pdf/issue16176.pdf",
        0.0,
        "needs the Adobe-Japan1 predefined CMap, which pdf-extract does not carry",
    ),
    (
        "pdfjs/pdf/vertical.pdf",
        0.0,
        "needs the Adobe-Japan1 predefined CMap (Identity-V), which pdf-extract does not carry",
    ),
    (
        "pdfjs/pdf/secHandler.pdf",
        0.0,
        "AES-256 with an empty user password: lopdf opens it but the text comes out empty",
    ),
    (
        "pdfjs/pdf/simpletype3font.pdf",
        0.0,
        "a Type3 font without a ToUnicode map: pdf-extract writes its own glyph names",
    ),
    (
        "pdfjs/pdf/text_rise_eol_bug.pdf",
        0.75,
        "the superscript '2' of mc2 comes out apart: 'mc' and '2' are two words",
    ),
    (
        "tika/pdf/testOverlappingText.pdf",
        0.80,
        "poppler merges text drawn twice at the same place; pdf-extract keeps both copies",
    ),
    (
        "tika/pdf/testPDF_acroform3.pdf",
        0.40,
        "the oracle includes form-field values, which are not in the page's text layer",
    ),
    (
        "tika/html/testArabicMisleadingCharset.html",
        0.0,
        "its <meta> names a wrong charset on purpose; we follow the declaration, as browsers do",
    ),
    (
        "tika/text/english.cp500.txt",
        0.0,
        "EBCDIC (cp500): no detector guesses it and the WHATWG set has no such encoding",
    ),
];

/// Files that must end in a typed error, and which (by code).
const MUST_FAIL: &[(&str, &str)] = &[
    // lopdf does not rebuild a missing cross-reference table (poppler does).
    ("pdfjs/pdf/xref_command_missing.pdf", "DOCS_DAMAGED"),
    ("tika/pdf/testPDF_bad_page_303226.pdf", "DOCS_DAMAGED"),
    ("pdfjs/pdf/bug1020226.pdf", "DOCS_DAMAGED"),
    // Its user password is not empty.
    ("pdfjs/pdf/saslprep-r6.pdf", "DOCS_ENCRYPTED"),
    // pdf-extract panics on the predefined 90ms-RKSJ-H CMap: contained, typed.
    ("pdfjs/pdf/noembed-sjis.pdf", "DOCS_READER_FAILED"),
    // The hostile ones that must not give text.
    ("calamine/hostile/issue_594_dos.ods", "DOCS_HOSTILE"),
    ("poi/hostile/duplicate-filename.xlsx", "DOCS_HOSTILE"),
    ("poi/hostile/poc-xmlbomb.xlsx", "DOCS_DAMAGED"),
    ("tika/hostile/droste.zip", "DOCS_UNSUPPORTED"),
    ("tika/hostile/quine.gz", "DOCS_UNSUPPORTED"),
    ("tika/docx/testWORD_protected_passtika.docx", "DOCS_ENCRYPTED"),
    ("tika/xlsx/protectedFile.xlsx", "DOCS_ENCRYPTED"),
    ("tika/odf/testODTEncrypted.odt", "DOCS_ENCRYPTED"),
    ("tika/docx/testWORD_truncated.docx", "DOCS_DAMAGED"),
    ("tika/odf/testODTnotaZipFile.odt", "DOCS_DAMAGED"),
];

fn words(text: &str) -> HashMap<String, usize> {
    use unicode_normalization::UnicodeNormalization as _;
    let mut out = HashMap::new();
    for line in text.lines() {
        let t = line.trim();
        if (t.starts_with("=== ") && t.ends_with(" ===")) || t == "--- notes ---" {
            continue;
        }
        let norm: String = t.nfkc().collect::<String>().to_lowercase();
        for w in norm.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()) {
            *out.entry(w.to_owned()).or_default() += 1;
        }
    }
    out
}

fn agreement(expected: &str, ours: &str) -> Option<f64> {
    let want = words(expected);
    let total: usize = want.values().sum();
    if total == 0 {
        return None;
    }
    let have = words(ours);
    let found: usize = want.iter().map(|(w, n)| (*n).min(have.get(w).copied().unwrap_or(0))).sum();
    Some(found as f64 / total as f64)
}

fn files(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("read corpus dir").flatten() {
            let p = e.path();
            let rel = p.strip_prefix(root).expect("below root").to_string_lossy().into_owned();
            if p.is_dir() {
                if rel != "expected" {
                    stack.push(p);
                }
            } else if rel.contains('/')
                && !rel.contains("LICENSE")
                && !rel.contains("NOTICE")
                && !rel.ends_with("LICENSE.txt")
            {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

fn text_of(e: &Extracted) -> String {
    e.units.iter().map(|u| u.text.as_str()).collect::<Vec<_>>().join("\n")
}

#[test]
fn documents_corpus_agrees_with_the_oracles() {
    let Some(root) = corpus("documents") else { return };
    let reader: Arc<dyn Extractor> = Arc::new(Readers);
    let limits =
        ExtractLimits { timeout: std::time::Duration::from_secs(20), ..ExtractLimits::default() };
    let mut by_type: std::collections::BTreeMap<String, (usize, usize, f64)> = Default::default();
    let mut failures = Vec::new();
    let mut report = String::new();
    let all = files(&root);
    assert!(all.len() >= 130, "the corpus has 133 documents; found {}", all.len());
    for path in &all {
        let rel = path.strip_prefix(&root).expect("rel").to_string_lossy().into_owned();
        let bytes = std::fs::read(path).expect("read");
        let out =
            extract_bounded(&reader, path, Arc::from(bytes), &limits).map(normalize::normalize);
        let ty = rel.split('/').nth(1).unwrap_or("?").to_owned();
        let expected = root.join("expected").join(format!("{rel}.txt"));
        let allowed = ALLOWED.iter().find(|(p, _, _)| *p == rel);
        let must_fail = MUST_FAIL.iter().find(|(p, _)| *p == rel);
        match (&out, must_fail) {
            (Err(e), Some((_, code))) => {
                use steward_core::error::StewardError as _;
                if e.code() != *code {
                    failures
                        .push(format!("{rel}: failed with {} ({e}), expected {code}", e.code()));
                }
                report.push_str(&format!("{rel}\terror {}\n", e.code()));
                continue;
            }
            (Ok(_), Some((_, code))) => {
                failures.push(format!("{rel}: gave text, expected the error {code}"));
                continue;
            }
            (
                Err(
                    ExtractError::TimedOut { .. }
                    | ExtractError::Panicked { .. }
                    | ExtractError::Busy,
                ),
                None,
            ) => {
                failures.push(format!("{rel}: {:?}", out.as_ref().err()));
                continue;
            }
            _ => {}
        }
        let Ok(expected) = std::fs::read_to_string(&expected) else {
            report.push_str(&format!(
                "{rel}\tno oracle\t{}\n",
                match &out {
                    Ok(e) => format!("{} chars", e.chars()),
                    Err(e) => format!("error: {e}"),
                }
            ));
            continue;
        };
        let ours = match &out {
            Ok(e) => text_of(e),
            Err(e) => {
                report.push_str(&format!("{rel}\terror: {e}\n"));
                String::new()
            }
        };
        let Some(a) = agreement(&expected, &ours) else {
            report.push_str(&format!("{rel}\toracle has no words\n"));
            continue;
        };
        let entry = by_type.entry(ty).or_default();
        entry.0 += 1;
        entry.2 += a;
        let floor = allowed.map_or(MIN_AGREEMENT, |(_, f, _)| *f);
        if a + 1e-9 >= floor {
            entry.1 += 1;
        } else {
            failures.push(format!("{rel}: agreement {a:.3} < {floor:.2}"));
        }
        report.push_str(&format!("{rel}\t{a:.3}\n"));
    }
    eprintln!("{report}");
    for (ty, (n, ok, sum)) in &by_type {
        eprintln!("{ty}: {ok}/{n} files at their floor, mean agreement {:.3}", sum / *n as f64);
    }
    assert!(
        failures.is_empty(),
        "{} files below their floor:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// A ZIP package of `parts`.
fn package(parts: &[(&str, &str)]) -> Vec<u8> {
    use std::io::Write as _;
    let mut buf = std::io::Cursor::new(Vec::new());
    {
        let mut z = zip::ZipWriter::new(&mut buf);
        for (name, text) in parts {
            z.start_file(*name, zip::write::SimpleFileOptions::default()).unwrap();
            z.write_all(text.as_bytes()).unwrap();
        }
        z.finish().unwrap();
    }
    buf.into_inner()
}

fn extract(name: &str, bytes: &[u8]) -> Result<Extracted, ExtractError> {
    let reader: Arc<dyn Extractor> = Arc::new(Readers);
    extract_bounded(&reader, Path::new(name), Arc::from(bytes.to_vec()), &ExtractLimits::default())
        .map(normalize::normalize)
}

#[test]
fn a_pdf_form_that_draws_itself_is_refused_not_followed() {
    use lopdf::{Document, Object, Stream, dictionary};
    let mut doc = Document::with_version("1.5");
    let pages = doc.new_object_id();
    let form = doc.new_object_id();
    let bbox = || vec![0.into(), 0.into(), 100.into(), 100.into()];
    doc.objects.insert(
        form,
        Object::Stream(Stream::new(
            dictionary! {"Type" => "XObject", "Subtype" => "Form", "BBox" => bbox(),
            "Resources" => dictionary! {"XObject" => dictionary! {"X0" => form}}},
            b"/X0 Do".to_vec(),
        )),
    );
    let content = doc.add_object(Stream::new(dictionary! {}, b"/X0 Do".to_vec()));
    let page = doc.add_object(dictionary! {"Type" => "Page", "Parent" => pages, "Contents" => content,
        "MediaBox" => bbox(), "Resources" => dictionary! {"XObject" => dictionary! {"X0" => form}}});
    doc.objects.insert(
        pages,
        Object::Dictionary(
            dictionary! {"Type" => "Pages", "Kids" => vec![page.into()], "Count" => 1},
        ),
    );
    let catalog = doc.add_object(dictionary! {"Type" => "Catalog", "Pages" => pages});
    doc.trailer.set("Root", catalog);
    let mut bytes = Vec::new();
    doc.save_to(&mut bytes).unwrap();
    // Without the check pdf-extract recurses until the stack overflows, which ends the process.
    let e = extract("loop.pdf", &bytes).unwrap_err();
    assert!(matches!(e, ExtractError::Hostile(_)), "{e}");
}

#[test]
fn deleted_changes_stay_out_and_text_mentioning_pdf_is_text() {
    let content = r#"<?xml version="1.0"?><office:document-content xmlns:office="o" xmlns:text="t"><office:body><office:text>
<text:tracked-changes><text:changed-region><text:deletion><text:p>old<text:s/>SECRET-DELETED one</text:p></text:deletion></text:changed-region>
<text:changed-region><text:deletion><text:p>SECRET-DELETED two</text:p></text:deletion></text:changed-region></text:tracked-changes>
<text:p>Kept<text:s text:c="2"/>text</text:p></office:text></office:body></office:document-content>"#;
    let odt = package(&[
        ("mimetype", "application/vnd.oasis.opendocument.text"),
        ("content.xml", content),
    ]);
    let e = extract("changes.odt", &odt).unwrap();
    let text = &e.units[0].text;
    assert!(text.contains("Kept text"), "{text}");
    assert!(!text.contains("SECRET-DELETED"), "deleted text leaked: {text}");
    let md = extract("notes.md", b"# About %PDF-1.7\n\nA note on the PDF header.\n").unwrap();
    assert_eq!(md.kind, steward_core::docs::DocKind::Markdown);
}

#[test]
fn a_long_sheet_name_is_capped_and_every_window_moves_on() {
    let name = "N".repeat(300);
    let content = format!(
        r#"<?xml version="1.0"?><office:document-content xmlns:office="o" xmlns:table="t" xmlns:text="x"><office:body><office:spreadsheet>
<table:table table:name="{name}"><table:table-row><table:table-cell><text:p>{}</text:p></table:table-cell></table:table-row></table:table>
</office:spreadsheet></office:body></office:document-content>"#,
        "word ".repeat(200)
    );
    let ods = package(&[
        ("mimetype", "application/vnd.oasis.opendocument.spreadsheet"),
        ("content.xml", &content),
    ]);
    let e = extract("long.ods", &ods).unwrap();
    assert_eq!(e.units[0].name.as_deref().map(|n| n.chars().count()), Some(100));

    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("share");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::create_dir_all(dir.path().join("home")).unwrap();
    std::fs::write(root.join("long.ods"), &ods).unwrap();
    std::fs::write(
        dir.path().join("home/config.toml"),
        format!("[files]\nroots = [{:?}]\n", root.canonicalize().unwrap()),
    )
    .unwrap();
    let s = steward_connectors::home::open(Some(dir.path().join("home"))).unwrap();
    let mut cursor: Option<String> = None;
    for _ in 0..100 {
        let w = s.read_doc(&root.join("long.ods"), cursor.as_deref(), None, Some(200)).unwrap();
        assert_ne!(w.next_cursor, cursor, "a window that does not move on");
        match w.next_cursor {
            Some(c) => cursor = Some(c),
            None => return,
        }
    }
    panic!("the reader did not reach the end in 100 windows");
}
