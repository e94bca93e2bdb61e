//! Search: the labeled evaluation set (recall@8 and MRR per kind, printed with --nocapture) and
//! the contract of the request, the page and the degraded modes.
//!
//! The archive: 600 generated demo messages as distractors, the CPython email corpus, and
//! labeled messages written here. Vectors come from a concept embedder (a fixed lexicon of
//! concepts plus hashed word noise), so paraphrases share no words with their targets but do
//! share concepts — what a real embedding model gives, with outcomes a test can state.

use std::{
    collections::{HashMap, HashSet},
    path::Path,
    sync::Arc,
};

use steward_connectors::mail::{
    MaildirSource,
    demo::{DemoOptions, generate_maildir},
};
use steward_core::{
    Steward, StewardError,
    index::{EmbedError, Embedder},
    mirror::SyncOptions,
    search::{MailboxScope, SearchPage, SearchRequest, Semantic, Sort},
    time::parse_date,
};

use super::fixtures::{Mail, corpora, write};

const DIM: usize = 256;

/// Concepts and the words (English and Italian) that evoke them.
const CONCEPTS: &[&[&str]] = &[
    &["tax", "taxes", "redditi", "730", "f24", "fiscale", "imposte", "irpef", "paperwork"],
    &["accountant", "commercialista", "ragioniere", "bookkeeper"],
    &["veterinarian", "vet", "veterinario", "dog", "cane", "fido", "vaccino", "puppy"],
    &["roof", "leak", "leaking", "tetto", "infiltrazione", "lattoniere", "grondaia", "gutter"],
    &["repair", "fix", "riparare", "riparazione", "aggiustare"],
    &["appointment", "visita", "booking", "appuntamento"],
];

/// A deterministic embedder: one axis per concept, plus hashed noise for every word.
struct ConceptEmbedder {
    dim: usize,
    fail: bool,
}

fn word_hash(w: &str) -> u64 {
    w.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x1b3))
}

impl Embedder for ConceptEmbedder {
    fn model(&self) -> &str {
        "concept-test"
    }

    fn dimension(&self) -> Option<usize> {
        Some(DIM)
    }
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        if self.fail {
            return Err(EmbedError::Unavailable("connection refused".into()));
        }
        Ok(texts
            .iter()
            .map(|t| {
                let mut v = vec![0.0f32; self.dim];
                for w in t.to_lowercase().split(|c: char| !c.is_alphanumeric()) {
                    if w.is_empty() {
                        continue;
                    }
                    // Three signed axes per word, so two words rarely look alike by accident.
                    let mut h = word_hash(w);
                    for _ in 0..3 {
                        let axis = CONCEPTS.len() + (h as usize % (self.dim - CONCEPTS.len()));
                        v[axis] += if (h >> 40) & 1 == 0 { 0.05 } else { -0.05 };
                        h = h.rotate_left(17).wrapping_mul(0x9e37_79b9_7f4a_7c15);
                    }
                    for (i, words) in CONCEPTS.iter().enumerate() {
                        if words.contains(&w) {
                            v[i] += 1.0;
                        }
                    }
                }
                v[self.dim - 1] += 0.01; // never all zeros
                v
            })
            .collect())
    }
}

/// The labeled messages (Message-ID → file).
fn labeled(md: &Path) {
    let unread = |name: &str| md.join("cur").join(format!("{name}:2,"));
    let read = |name: &str| md.join("cur").join(format!("{name}:2,S"));
    let put = |path: std::path::PathBuf, m: Mail<'_>| write(&path, &m.bytes(), 1_700_000_000);
    let mut m = Mail::new("rare1@eval", "Pezzi di ricambio", "Mon, 3 Mar 2025 10:00:00 +0000");
    m.body = "Serve una zephyrine valve per la caldaia, il modello vecchio non si trova più.";
    put(read("rare1"), m);
    let mut m = Mail::new("rare2@eval", "Pratica comunale", "Tue, 4 Mar 2025 10:00:00 +0000");
    m.body = "La pratica n. 88412-B è stata protocollata ieri.";
    put(read("rare2"), m);
    let mut m = Mail::new("name1@eval", "Rogito", "Wed, 5 Mar 2025 10:00:00 +0000");
    m.from = "Ottavia Brambilla <o.brambilla@notai-milano.it>";
    m.body = "Le confermo la data dell'atto.";
    put(read("name1"), m);
    let mut m = Mail::new("name2@eval", "Documenti per l'atto", "Thu, 6 Mar 2025 10:00:00 +0000");
    m.from = "Segreteria Studio <segreteria@notai-milano.it>";
    m.body = "In allegato l'elenco dei documenti.";
    put(read("name2"), m);
    let mut m = Mail::new(
        "subj1@eval",
        "Verbale assemblea straordinaria condominiale",
        "Fri, 7 Mar 2025 10:00:00 +0000",
    );
    m.body = "Si allega il verbale.";
    put(read("subj1"), m);
    let mut m = Mail::new("body1@eval", "Coordinate", "Sat, 8 Mar 2025 10:00:00 +0000");
    m.body = "Il conto è IBAN IT60X0542811101000000123456, intestato a me.";
    put(read("body1"), m);
    let mut m = Mail::new("body2@eval", "Scadenza", "Sun, 9 Mar 2025 10:00:00 +0000");
    m.body = "Ricordati del PAGAMENTO\n   entro Venerdì, altrimenti scatta la mora.";
    put(read("body2"), m);
    let mut m = Mail::new("diac1@eval", "Sopralluogo", "Mon, 10 Mar 2025 10:00:00 +0000");
    m.body = "Il sopralluogo a Città di Castello è confermato per giovedì.";
    put(read("diac1"), m);
    let mut m = Mail::new("diac2@eval", "Preventivo", "Tue, 11 Mar 2025 10:00:00 +0000");
    m.body = "Perche il preventivo del falegname e cosi alto?";
    put(read("diac2"), m);
    let mut m = Mail::new("old1@eval", "Preventivo vecchio", "Wed, 10 Jan 2024 10:00:00 +0000");
    m.body = "Il preventivo del falegname dell'anno scorso.";
    put(read("old1"), m);
    let mut m = Mail::new("unread1@eval", "Ricevuta", "Wed, 12 Mar 2025 10:00:00 +0000");
    m.body = "Ecco la ricevuta di cortesia numero 77.";
    put(unread("unread1"), m);
    let mut m = Mail::new("read1@eval", "Ricevuta", "Thu, 13 Mar 2025 10:00:00 +0000");
    m.from = "Negozio <negozio@example.it>";
    m.body = "Ecco la ricevuta di cortesia numero 78.";
    put(read("read1"), m);
    for (i, d) in ["Fri, 14 Mar 2025", "Sat, 15 Mar 2025", "Sun, 16 Mar 2025"].iter().enumerate() {
        let id = format!("thread{i}@eval");
        let parent = (i > 0).then(|| format!("thread{}@eval", i - 1));
        let date = format!("{d} 10:00:00 +0000");
        let mut m = Mail::new(&id, "Potatura del glicine", &date);
        m.in_reply_to = parent.as_deref();
        m.body = "Quando facciamo la potatura del glicine in giardino?";
        put(read(&format!("thread{i}")), m);
    }
    let mut m = Mail::new("newest@eval", "Promemoria futuro", "Mon, 6 Jan 2031 10:00:00 +0000");
    m.body = "Questo è il messaggio più recente.";
    put(unread("newest"), m);
    let mut m = Mail::new("para1@eval", "Modello 730", "Mon, 17 Mar 2025 10:00:00 +0000");
    m.from = "Studio Commercialista Neri <neri@studioneri.it>";
    m.body = "Le invio la dichiarazione dei redditi 730 e il modello F24 da pagare.";
    put(read("para1"), m);
    let mut m = Mail::new("para2@eval", "Fido", "Tue, 18 Mar 2025 10:00:00 +0000");
    m.body = "Visita dal veterinario per Fido giovedì, con il vaccino antirabbico.";
    put(read("para2"), m);
    let mut m = Mail::new("para3@eval", "Casa", "Wed, 19 Mar 2025 10:00:00 +0000");
    m.body = "C'è una infiltrazione dal tetto: serve il lattoniere per la grondaia.";
    put(read("para3"), m);
}

/// Builds the archive and opens it with `embedder`; embeds every message.
fn archive(dir: &Path, embedder: Option<Arc<dyn Embedder>>) -> Steward {
    let md = dir.join("maildir");
    let mut demo = DemoOptions::new(600);
    demo.malformed = false;
    generate_maildir(&md, &demo).unwrap();
    labeled(&md);
    if let Some(c) = corpora() {
        for f in std::fs::read_dir(c.join("cpython-email/data")).unwrap() {
            let f = f.unwrap().path();
            let name = format!("cpython-{}:2,S", f.file_name().unwrap().to_string_lossy());
            std::fs::copy(&f, md.join("cur").join(name)).unwrap();
        }
    }
    let mut b = Steward::builder().home(dir.join("home"));
    if let Some(e) = &embedder {
        b = b.embedder(Arc::clone(e));
    }
    let s = b.open().unwrap();
    let opts = SyncOptions { account: Some("eval".into()), cancel: None };
    s.sync_mail(&MaildirSource::new(&md), &opts, &mut |_| {}).unwrap();
    if let Some(e) = embedder {
        embed_all(&s, e.as_ref());
    }
    s
}

fn embed_all(s: &Steward, e: &dyn Embedder) {
    let mut docs: Vec<(i64, String)> = Vec::new();
    s.mirror()
        .for_each_indexable(&mut |d| {
            docs.push((d.id, format!("{} {}", d.subject, d.body)));
            Ok(())
        })
        .unwrap();
    for chunk in docs.chunks(256) {
        let texts: Vec<&str> = chunk.iter().map(|(_, t)| t.as_str()).collect();
        let vectors = e.embed(&texts).unwrap();
        let batch: Vec<(i64, Vec<f32>)> = chunk.iter().map(|(id, _)| *id).zip(vectors).collect();
        s.vectors().unwrap().upsert(e.model(), DIM, &batch).unwrap();
    }
}

/// One labeled query: each group is one relevant unit (a message, or a thread whose messages
/// are interchangeable); `forbidden` Message-IDs must not appear.
struct Case {
    kind: &'static str,
    request: SearchRequest,
    groups: Vec<Vec<String>>,
    forbidden: Vec<&'static str>,
}

fn ids(v: &[&str]) -> Vec<Vec<String>> {
    v.iter().map(|i| vec![(*i).to_owned()]).collect()
}

fn req(f: impl FnOnce(&mut SearchRequest)) -> SearchRequest {
    let mut r = SearchRequest::default();
    f(&mut r);
    r
}

fn cases() -> Vec<Case> {
    let text = |t: &str| SearchRequest::text(t);
    let thread: Vec<String> = (0..3).map(|i| format!("thread{i}@eval")).collect();
    #[allow(clippy::redundant_clone)]
    let mut out = vec![
        Case {
            kind: "rare token",
            request: text("zephyrine"),
            groups: ids(&["rare1@eval"]),
            forbidden: vec![],
        },
        Case {
            kind: "rare token",
            request: text("88412"),
            groups: ids(&["rare2@eval"]),
            forbidden: vec![],
        },
        Case {
            kind: "name",
            request: text("Ottavia Brambilla"),
            groups: ids(&["name1@eval"]),
            forbidden: vec![],
        },
        Case {
            kind: "sender substring",
            request: req(|r| r.from = Some("brambil".into())),
            groups: ids(&["name1@eval"]),
            forbidden: vec!["name2@eval"],
        },
        Case {
            kind: "sender substring",
            request: req(|r| r.from = Some("@notai-milano".into())),
            groups: ids(&["name1@eval", "name2@eval"]),
            forbidden: vec![],
        },
        Case {
            kind: "subject substring",
            request: req(|r| r.subject_contains = Some("ASSEMBLEA STRAORD".into())),
            groups: ids(&["subj1@eval"]),
            forbidden: vec![],
        },
        Case {
            kind: "body substring",
            request: req(|r| r.body_contains = Some("IT60X05428111".into())),
            groups: ids(&["body1@eval"]),
            forbidden: vec![],
        },
        Case {
            kind: "body substring",
            request: req(|r| r.body_contains = Some("pagamento entro venerdi".into())),
            groups: ids(&["body2@eval"]),
            forbidden: vec![],
        },
        Case {
            kind: "diacritics",
            request: text("citta di castello sopralluogo"),
            groups: ids(&["diac1@eval"]),
            forbidden: vec![],
        },
        Case {
            kind: "diacritics",
            request: text("perché falegname"),
            groups: ids(&["diac2@eval"]),
            forbidden: vec![],
        },
        Case {
            kind: "diacritics",
            request: req(|r| r.body_contains = Some("città di castello".into())),
            groups: ids(&["diac1@eval"]),
            forbidden: vec![],
        },
        Case {
            kind: "filtered",
            request: req(|r| {
                r.text = Some("preventivo falegname".into());
                r.after = Some(parse_date("2025-01-01").unwrap());
            }),
            groups: ids(&["diac2@eval"]),
            forbidden: vec!["old1@eval"],
        },
        Case {
            kind: "filtered",
            request: req(|r| {
                r.text = Some("ricevuta cortesia".into());
                r.unread = Some(true);
            }),
            groups: ids(&["unread1@eval"]),
            forbidden: vec!["read1@eval"],
        },
        Case {
            kind: "filtered",
            request: req(|r| {
                r.from = Some("negozio".into());
                r.after = Some(parse_date("2025-03-13").unwrap());
                r.before = Some(parse_date("2025-03-14").unwrap());
            }),
            groups: ids(&["read1@eval"]),
            forbidden: vec!["unread1@eval"],
        },
        Case {
            kind: "thread collapse",
            request: text("potatura glicine"),
            groups: vec![thread],
            forbidden: vec![],
        },
        Case {
            kind: "unread",
            request: req(|r| {
                r.unread = Some(true);
                r.sort = Sort::DateDesc;
            }),
            groups: ids(&["newest@eval"]),
            forbidden: vec!["read1@eval"],
        },
        Case {
            kind: "paraphrase (vectors)",
            request: text("tax paperwork from my accountant"),
            groups: ids(&["para1@eval"]),
            forbidden: vec![],
        },
        Case {
            kind: "paraphrase (vectors)",
            request: text("vet appointment for the dog"),
            groups: ids(&["para2@eval"]),
            forbidden: vec![],
        },
        Case {
            kind: "paraphrase (vectors)",
            request: text("roof leaking, gutter repair"),
            groups: ids(&["para3@eval"]),
            forbidden: vec![],
        },
    ];
    for absent in [
        text("xylophonist quokka"),
        req(|r| r.body_contains = Some("nonexistent-string-42".into())),
        req(|r| r.from = Some("zzzqqq".into())),
        req(|r| {
            r.text = Some("zephyrine".into());
            r.before = Some(parse_date("2020-01-01").unwrap());
        }),
    ] {
        out.push(Case { kind: "absent", request: absent, groups: vec![], forbidden: vec![] });
    }
    if corpora().is_some() {
        // Corpus mail nobody here wrote: relevance comes from the files' own Subject lines.
        out.push(Case {
            kind: "corpus",
            request: text("mboned"),
            groups: vec![corpus_subject("mboned")],
            forbidden: vec![],
        });
        out.push(Case {
            kind: "corpus",
            request: req(|r| {
                r.subject_contains = Some("dingus".into());
                r.per_message = true;
            }),
            groups: corpus_subject("dingus fish").into_iter().map(|i| vec![i]).collect(),
            forbidden: vec![],
        });
        out.push(Case {
            kind: "corpus",
            request: text("Limiting Perl CPU Utilization"),
            groups: vec![corpus_subject("Limiting Perl CPU")],
            forbidden: vec![],
        });
    }
    out
}

/// Keys (`file:<name>`) of the CPython corpus messages whose Subject contains `needle`.
fn corpus_subject(needle: &str) -> Vec<String> {
    let dir = corpora().unwrap().join("cpython-email/data");
    let mut out = Vec::new();
    for f in std::fs::read_dir(dir).unwrap() {
        let path = f.unwrap().path();
        let text = String::from_utf8_lossy(&std::fs::read(&path).unwrap()).into_owned();
        let head = text.split("\n\n").next().unwrap_or("");
        if head.lines().any(|l| l.starts_with("Subject:") && l.contains(needle)) {
            out.push(format!("file:cpython-{}", path.file_name().unwrap().to_string_lossy()));
        }
    }
    assert!(!out.is_empty(), "no corpus message has {needle:?}");
    out
}

/// The mirror ids a key names: a Message-ID, or `file:<name>` for files without one.
fn resolve(db: &rusqlite::Connection, key: &str) -> Vec<i64> {
    let (sql, arg) = match key.strip_prefix("file:") {
        Some(name) => (
            "SELECT p.message_id FROM message_paths p JOIN source_files f ON f.id = p.file_id
             WHERE f.path LIKE ?1",
            format!("%/{name}%"),
        ),
        None => ("SELECT id FROM messages WHERE rfc_message_id = ?1", key.to_owned()),
    };
    let mut st = db.prepare(sql).unwrap();
    let ids: Vec<i64> = st.query_map([arg], |r| r.get(0)).unwrap().map(Result::unwrap).collect();
    assert!(!ids.is_empty(), "{key} names no message");
    ids
}

fn message_ids(page: &SearchPage) -> Vec<String> {
    page.messages.iter().map(|m| m.message_id.clone().unwrap_or_default()).collect()
}

#[test]
fn labeled_evaluation_recall_and_mrr() {
    let dir = tempfile::tempdir().unwrap();
    let embedder: Arc<dyn Embedder> = Arc::new(ConceptEmbedder { dim: DIM, fail: false });
    let s = archive(dir.path(), Some(embedder));
    let db = rusqlite::Connection::open(dir.path().join("home/mirror.db")).unwrap();
    let mut per_kind: HashMap<&str, (usize, f64, f64)> = HashMap::new();
    let mut kinds: Vec<&str> = Vec::new();
    for case in cases() {
        let page = s.search(&case.request).unwrap();
        let got: Vec<i64> = page.messages.iter().map(|m| m.id).collect();
        let top: Vec<&i64> = got.iter().take(8).collect();
        for f in &case.forbidden {
            let f = resolve(&db, f)[0];
            assert!(!got.contains(&f), "{}: {f} must not appear in {got:?}", case.kind);
        }
        let groups: Vec<Vec<i64>> =
            case.groups.iter().map(|g| g.iter().flat_map(|k| resolve(&db, k)).collect()).collect();
        let (recall, rr) = if case.groups.is_empty() {
            assert!(
                got.is_empty(),
                "{}: {:?} must find nothing, got {got:?}",
                case.kind,
                case.request
            );
            assert_eq!(page.page.next_offset, None);
            (1.0, 1.0)
        } else {
            let found = groups.iter().filter(|g| top.iter().any(|t| g.contains(t))).count();
            let first = got.iter().position(|t| groups.iter().any(|g| g.contains(t)));
            #[allow(clippy::cast_precision_loss)]
            let recall = found as f64 / case.groups.len() as f64;
            #[allow(clippy::cast_precision_loss)]
            let rr = first.map_or(0.0, |p| 1.0 / (p + 1) as f64);
            (recall, rr)
        };
        if !kinds.contains(&case.kind) {
            kinds.push(case.kind);
        }
        let e = per_kind.entry(case.kind).or_default();
        e.0 += 1;
        e.1 += recall;
        e.2 += rr;
        if case.kind.starts_with("paraphrase") {
            assert_eq!(page.semantic, Semantic::Used);
        }
        if case.kind == "thread collapse" {
            let threads: HashSet<i64> = page.messages.iter().map(|m| m.thread_id).collect();
            assert_eq!(threads.len(), page.messages.len(), "one result per thread");
            let hits = got.iter().filter(|g| groups[0].contains(g)).count();
            assert_eq!(hits, 1, "the thread appears once: {got:?}");
            let mut per = case.request.clone();
            per.per_message = true;
            let all: Vec<i64> = s.search(&per).unwrap().messages.iter().map(|m| m.id).collect();
            assert_eq!(all.iter().filter(|g| groups[0].contains(g)).count(), 3);
        }
    }
    eprintln!("{:<22} {:>7} {:>9} {:>6}", "kind", "queries", "recall@8", "MRR");
    for k in &kinds {
        let (n, r, m) = per_kind[k];
        #[allow(clippy::cast_precision_loss)]
        let (r, m) = (r / n as f64, m / n as f64);
        eprintln!("{k:<22} {n:>7} {r:>9.3} {m:>6.3}");
        assert!((r - 1.0).abs() < 1e-9, "{k}: recall@8 {r}");
        // A paraphrase shares no word with its target, so its best lexical rank is none and RRF
        // ties it with the best stop-word match: rank 1 or 2 is what fusion of ranks can give.
        let floor = if k.starts_with("paraphrase") { 0.5 } else { 0.9 };
        assert!(m >= floor, "{k}: MRR {m}");
    }
}

#[test]
fn paraphrases_need_vectors_and_a_failing_embedder_degrades_to_lexical() {
    let dir = tempfile::tempdir().unwrap();
    let s = archive(dir.path(), None);
    let q = SearchRequest::text("vet appointment for the dog");
    let page = s.search(&q).unwrap();
    assert_eq!(page.semantic, Semantic::Disabled);
    assert!(!message_ids(&page).contains(&"para2@eval".to_owned()), "no shared words");
    assert!(page.messages.iter().all(|m| m.provenance.vector.is_none()));
    drop(s);
    // The same home with an embedder that is down: lexical results, marked unavailable.
    let down: Arc<dyn Embedder> = Arc::new(ConceptEmbedder { dim: DIM, fail: true });
    let s = Steward::builder().home(dir.path().join("home")).embedder(down).open().unwrap();
    let page = s.search(&SearchRequest::text("zephyrine")).unwrap();
    assert_eq!(page.semantic, Semantic::Unavailable);
    assert_eq!(message_ids(&page), vec!["rare1@eval"]);
    assert_eq!(page.messages[0].provenance.lexical, Some(1));
    drop(s);
    // An embedder whose model has no vectors yet is unavailable too, not an error.
    let other: Arc<dyn Embedder> = Arc::new(ConceptEmbedder { dim: DIM, fail: false });
    let s = Steward::builder().home(dir.path().join("home")).embedder(other).open().unwrap();
    assert_eq!(
        s.search(&SearchRequest::text("zephyrine")).unwrap().semantic,
        Semantic::Unavailable
    );
}

#[test]
fn pages_explain_themselves_and_bad_requests_are_typed_errors() {
    let dir = tempfile::tempdir().unwrap();
    let embedder: Arc<dyn Embedder> = Arc::new(ConceptEmbedder { dim: DIM, fail: false });
    let s = archive(dir.path(), Some(embedder));
    // Provenance: a hybrid hit found by both signals carries both ranks and the fused score.
    let page = s.search(&SearchRequest::text("veterinario Fido vaccino")).unwrap();
    let top = &page.messages[0];
    assert_eq!(top.message_id.as_deref(), Some("para2@eval"));
    assert_eq!(top.provenance.lexical, Some(1));
    assert!(top.provenance.vector.is_some());
    let fused = top.provenance.fused.unwrap();
    let expect = 1.0 / 61.0 + 1.0 / (60.0 + f64::from(top.provenance.vector.unwrap()));
    assert!((fused - expect).abs() < 1e-12, "{fused} vs {expect}");
    // Snippets: ≤ 200 characters for the first three, ≤ 120 after; never the whole body.
    let browse = SearchRequest { limit: 20, ..SearchRequest::default() };
    let page = s.search(&browse).unwrap();
    assert_eq!(page.messages.len(), 20);
    for (i, m) in page.messages.iter().enumerate() {
        let n = m.snippet.chars().count();
        assert!(n <= if i < 3 { 200 } else { 120 }, "snippet {i} has {n} characters");
    }
    // Paging: following next_offset walks the whole window without repeats.
    let mut seen = HashSet::new();
    let mut r = SearchRequest::text("invoice");
    r.limit = 7;
    let mut pages = 0;
    loop {
        let p = s.search(&r).unwrap();
        for m in &p.messages {
            assert!(seen.insert(m.id), "{} repeated", m.id);
        }
        pages += 1;
        match p.page.next_offset {
            Some(n) => r.offset = n,
            None => break,
        }
    }
    assert!(pages > 1 && !seen.is_empty());
    // Compact rendering: one line per hit and the ids in the same order.
    let page = s.search(&SearchRequest::text("zephyrine")).unwrap();
    let c = page.compact();
    let ids: Vec<i64> = page.messages.iter().map(|m| m.id).collect();
    assert_eq!(c.ids, ids);
    assert_eq!(c.lines.len(), ids.len());
    assert!(c.lines[0].starts_with(&format!("1. #{} 2025-03-03 ", c.ids[0])), "{}", c.lines[0]);
    assert!(c.lines[0].contains("zephyrine"));
    // Query syntax is just text.
    for t in ["\"from:marco\" AND (invoice*) -x", "*", "::", "NOT", "))(("] {
        s.search(&SearchRequest::text(t)).unwrap();
    }
    // Typed errors, nothing searched.
    let code = |r: SearchRequest| s.search(&r).unwrap_err().code();
    assert_eq!(code(req(|r| r.limit = 0)), "LIMIT_OUT_OF_RANGE");
    assert_eq!(code(req(|r| r.limit = 101)), "LIMIT_OUT_OF_RANGE");
    assert_eq!(code(req(|r| r.offset = 499)), "LIMIT_OUT_OF_RANGE");
    assert_eq!(
        s.search_for_model(&req(|r| r.limit = 13)).unwrap_err().code(),
        "LIMIT_OUT_OF_RANGE"
    );
    assert_eq!(code(req(|r| r.from = Some("ab".into()))), "SUBSTRING_TOO_SHORT");
    assert_eq!(code(req(|r| r.account = Some("nobody".into()))), "ACCOUNT_NOT_FOUND");
    assert_eq!(code(req(|r| r.mailbox = MailboxScope::Name("Nope".into()))), "MAILBOX_NOT_FOUND");
    assert_eq!(
        code(req(|r| {
            r.after = Some(10);
            r.before = Some(5);
        })),
        "EMPTY_RANGE"
    );
    assert_eq!(code(req(|r| r.text = Some("x".repeat(1001)))), "QUERY_TOO_LONG");
    assert_eq!(MailboxScope::role("spam-ish").unwrap_err().code(), "INVALID_ROLE");
    assert_eq!(Sort::parse("relevance").unwrap_err().code(), "INVALID_SORT");
    // Scope: role and name both work.
    let inbox = s.search(&req(|r| r.mailbox = MailboxScope::role("inbox").unwrap())).unwrap();
    assert!(!inbox.messages.is_empty());
    let page = s
        .search(&req(|r| {
            r.sort = Sort::SizeDesc;
            r.limit = 20;
        }))
        .unwrap();
    let db = rusqlite::Connection::open(dir.path().join("home/mirror.db")).unwrap();
    let size = |id: i64| -> i64 {
        db.query_row("SELECT size FROM messages WHERE id = ?1", [id], |r| r.get(0)).unwrap()
    };
    let sizes: Vec<i64> = page.messages.iter().map(|m| size(m.id)).collect();
    assert!(sizes.windows(2).all(|w| w[0] >= w[1]), "largest first: {sizes:?}");
    let max: i64 = db
        .query_row("SELECT max(size) FROM messages WHERE deleted_at IS NULL", [], |r| r.get(0))
        .unwrap();
    assert_eq!(sizes[0], max);
}

#[test]
fn deleted_mail_disappears_and_a_second_handle_sees_new_mail() {
    let dir = tempfile::tempdir().unwrap();
    let md = dir.path().join("md");
    let mut m = Mail::new("a@x", "Alpha", "Mon, 3 Mar 2025 10:00:00 +0000");
    m.body = "quetzalcoatl feathers";
    write(&md.join("cur/a:2,S"), &m.bytes(), 1_700_000_000);
    std::fs::create_dir_all(md.join("new")).unwrap();
    std::fs::create_dir_all(md.join("tmp")).unwrap();
    let opts = SyncOptions { account: Some("a".into()), cancel: None };
    let writer = Steward::builder().home(dir.path().join("home")).open().unwrap();
    let reader = Steward::builder().home(dir.path().join("home")).open().unwrap();
    writer.sync_mail(&MaildirSource::new(&md), &opts, &mut |_| {}).unwrap();
    let q = SearchRequest::text("quetzalcoatl");
    assert_eq!(reader.search(&q).unwrap().messages.len(), 1, "the other handle sees the commit");
    let sub = req(|r| r.body_contains = Some("quetzalcoatl fea".into()));
    assert_eq!(reader.search(&sub).unwrap().messages.len(), 1);
    std::fs::remove_file(md.join("cur/a:2,S")).unwrap();
    writer.sync_mail(&MaildirSource::new(&md), &opts, &mut |_| {}).unwrap();
    assert!(reader.search(&q).unwrap().messages.is_empty(), "soft-deleted mail is not found");
    assert!(reader.search(&sub).unwrap().messages.is_empty());
    assert!(reader.search(&SearchRequest::default()).unwrap().messages.is_empty());
}

#[test]
fn concurrent_first_searches_wait_for_the_index_instead_of_answering_empty() {
    let dir = tempfile::tempdir().unwrap();
    let md = dir.path().join("maildir");
    let mut demo = DemoOptions::new(300);
    demo.malformed = false;
    generate_maildir(&md, &demo).unwrap();
    let s = Steward::builder().home(dir.path().join("home")).open().unwrap();
    // Mirrored by the mirror alone (another process's sync, say): the text index is built by
    // the first searches, eight of them at once.
    let opts = SyncOptions { account: Some("race".into()), cancel: None };
    s.mirror().sync(&MaildirSource::new(&md), &opts, &mut |_| {}).unwrap();
    let mut request = SearchRequest::text("re");
    request.limit = 50;
    let counts: Vec<usize> = std::thread::scope(|scope| {
        let handles: Vec<_> =
            (0..8).map(|_| scope.spawn(|| s.search(&request).map(|p| p.messages.len()))).collect();
        handles.into_iter().map(|h| h.join().unwrap().unwrap()).collect()
    });
    let expected = s.search(&request).unwrap().messages.len();
    assert!(expected > 10, "the query matches the demo mailbox: {expected}");
    assert!(counts.iter().all(|n| *n == expected), "{counts:?} (expected {expected} each)");
}
