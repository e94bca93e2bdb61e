//! Prints the text Steward reads from a document, as the `docs.read` tool would see it before
//! windowing: `cargo run -p steward-connectors --example extract -- FILE...`
//! (PDF, DOCX, PPTX, XLSX, ODT/ODS/ODP, HTML, Markdown, RTF, text in any encoding, EML).

use std::sync::Arc;

use steward_connectors::docs::Readers;
use steward_core::docs::{ExtractLimits, Extractor, extract_bounded, normalize::normalize};

fn main() {
    let reader: Arc<dyn Extractor> = Arc::new(Readers);
    let limits = ExtractLimits::default();
    let mut failed = false;
    for arg in std::env::args().skip(1) {
        let path = std::path::PathBuf::from(&arg);
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) => {
                eprintln!("{arg}: {e}");
                failed = true;
                continue;
            }
        };
        match extract_bounded(&reader, &path, Arc::from(bytes), &limits) {
            Ok(doc) => {
                let doc = normalize(doc);
                println!(
                    "== {arg}: {} ({} units{})",
                    doc.kind.as_str(),
                    doc.units.len(),
                    doc.title.as_deref().map(|t| format!(", title {t:?}")).unwrap_or_default()
                );
                for (i, u) in doc.units.iter().enumerate() {
                    if doc.units.len() > 1 {
                        println!(
                            "[{} {}{}]",
                            doc.kind.unit().as_str(),
                            i + 1,
                            u.name.as_deref().map(|n| format!(" \"{n}\"")).unwrap_or_default()
                        );
                    }
                    println!("{}", u.text);
                }
            }
            Err(e) => {
                eprintln!("{arg}: {e}");
                failed = true;
            }
        }
    }
    std::process::exit(i32::from(failed));
}
