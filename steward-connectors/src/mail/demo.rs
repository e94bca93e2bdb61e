//! A deterministic, realistic demo mailbox: English and Italian mail, threads with quoted
//! replies (some linked only by subject), Gmail-style labels with "All Mail" copies and
//! `X-GM-THRID`, attachments (some identical under different names), HTML-only newsletters, an
//! unread backlog, and a few malformed files. The same seed always gives the same bytes and
//! mtimes. The benchmark uses it to build large Maildirs.

use std::{
    fs,
    io::Write,
    path::{Path, PathBuf},
    time::{Duration, UNIX_EPOCH},
};

/// What to generate.
#[derive(Debug, Clone)]
pub struct DemoOptions {
    /// Number of messages (before "All Mail" copies and malformed files).
    pub messages: usize,
    /// Seed for the deterministic generator.
    pub seed: u64,
    /// Add a handful of malformed files (empty, binary, header bomb).
    pub malformed: bool,
    /// The newest message date, Unix seconds; older ones go back from here.
    pub newest: i64,
    /// Write Gmail "All Mail" (and label) copies of messages that carry a Gmail thread id.
    pub gmail_copies: bool,
    /// Add the story's mails ([`STORY`]), dated in the hours before this time (Unix seconds):
    /// a few that say something worth remembering, which `steward demo` promotes to the memory
    /// inbox ([`promote_story`]). They are recent on purpose: promotion reads recent threads.
    pub story: Option<i64>,
}

impl DemoOptions {
    /// `messages` messages with the default seed, malformed files included.
    pub fn new(messages: usize) -> Self {
        Self {
            messages,
            seed: 0x5745_5741_5244,
            malformed: true,
            newest: 1_764_000_000, // 2025-11-24
            gmail_copies: true,
            story: None,
        }
    }
}

/// One mail of the demo's story and the fact it states.
#[derive(Debug, Clone, Copy)]
pub struct StoryMail {
    /// Its Message-ID (without angle brackets).
    pub message_id: &'static str,
    /// `Name <address>`.
    pub from: &'static str,
    /// The subject.
    pub subject: &'static str,
    /// The body (plain text).
    pub body: &'static str,
    /// The words of the body that state the fact.
    pub quote: &'static str,
    /// The fact, as a note would hold it.
    pub fact: &'static str,
    /// What kind of fact.
    pub kind: steward_core::memory::MemoryKind,
    /// Whom or what it is about.
    pub about: &'static str,
}

/// The demo's story: mails that state facts a person would want remembered.
pub const STORY: [StoryMail; 3] = [
    StoryMail {
        message_id: "story-anna-calls@example.org",
        from: "Anna Conti <anna.conti@example.org>",
        subject: "New job, new hours",
        body: "Ciao Giulia,\r\n\r\nthe new job started on Monday! I'm at the lab until late now, so please call me after 18:00 on weekdays; before that my phone is in a locker.\r\n\r\nA presto,\r\nAnna\r\n",
        quote: "please call me after 18:00 on weekdays",
        fact: "Anna Conti prefers calls after 18:00 on weekdays (she is at the lab until then).",
        kind: steward_core::memory::MemoryKind::Preference,
        about: "person:anna.conti@example.org",
    },
    StoryMail {
        message_id: "story-heating@condominio.example.it",
        from: "Amministrazione Condominio <amministrazione@condominio.example.it>",
        subject: "Heating service: every October from now on",
        body: "Dear residents,\r\n\r\nthe assembly approved the new contract: the building's heating is serviced every October by Termoidraulica Bassi, who will post the date in the hall two weeks ahead.\r\n\r\nThe administration\r\n",
        quote: "the building's heating is serviced every October by Termoidraulica Bassi",
        fact: "The building's heating is serviced every October by Termoidraulica Bassi; the date is posted in the hall two weeks ahead.",
        kind: steward_core::memory::MemoryKind::Place,
        about: "place:home",
    },
    StoryMail {
        message_id: "story-marco-vegetarian@studio-rossi.it",
        from: "Marco Rossi <marco.rossi@studio-rossi.it>",
        subject: "Re: Dinner on Friday",
        body: "Sounds great. One thing: I've been vegetarian since the summer, so no fish for me either. Anywhere near the station works.\r\n\r\nMarco\r\n",
        quote: "I've been vegetarian since the summer, so no fish for me either",
        fact: "Marco Rossi is vegetarian and eats no fish either.",
        kind: steward_core::memory::MemoryKind::Person,
        about: "person:marco.rossi@studio-rossi.it",
    },
];

/// The model name the story's stand-in answers as: it is not a model, and says so in the usage
/// ledger.
pub const STORY_MODEL: &str = "demo-story-scripted-not-a-model";

/// Runs a mail -> memory promotion pass over `home` the way the `memory-promote` job does —
/// prefilter, thread hashes, one triage call per thread, outcomes kept — answered by a scripted
/// stand-in for a model ([`StoryModel`], named [`STORY_MODEL`]) that knows only the demo's
/// [`STORY`]: for a thread holding one of its mails it returns that mail's fact with the exact
/// quote, for any other thread nothing durable. `steward demo` uses it when no model is
/// configured, so the memory inbox shows what promotion does without a key; the proposals
/// are only proposals, for the person to review.
///
/// # Errors
/// The store's errors; the stand-in's socket failing to bind.
pub fn promote_story(
    home: &Path,
) -> Result<steward_core::memory::PromotionReport, Box<dyn std::error::Error + Send + Sync>> {
    use steward_core::llm::{Capability, LlmConfig, Target};
    let model = StoryModel::start()?;
    let target = Target {
        base_url: model.base_url.clone(),
        model: STORY_MODEL.to_owned(),
        api_key: None,
        tools: false,
    };
    let llm = LlmConfig {
        targets: std::collections::BTreeMap::from([("demo-story".to_owned(), target)]),
        tiers: std::collections::BTreeMap::from([(
            Capability::Tier2,
            vec!["demo-story".to_owned()],
        )]),
        rates: std::collections::BTreeMap::new(),
        deadline: Duration::from_secs(10),
    };
    let steward = steward_core::Steward::builder().home(home).llm(llm).open()?;
    Ok(steward.promote_mail(None)?)
}

/// A scripted stand-in for a chat model on a loopback port (OpenAI chat completions, one
/// request per connection), answering promotion's triage from [`STORY`]. Stopped when dropped.
#[derive(Debug)]
pub struct StoryModel {
    /// `http://127.0.0.1:<port>/v1`.
    pub base_url: String,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    port: u16,
}

/// Largest request the stand-in reads (a triage request is bounded by the thread window).
/// Fixed (not a setting).
const STORY_MAX_REQUEST: usize = 1 << 20;

impl StoryModel {
    /// Starts it.
    ///
    /// # Errors
    /// Binding the loopback socket.
    pub fn start() -> std::io::Result<Self> {
        use std::sync::{Arc, atomic::AtomicBool};
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        let port = listener.local_addr()?.port();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if flag.load(std::sync::atomic::Ordering::SeqCst) {
                    break;
                }
                if let Ok(c) = conn {
                    let _ = answer(c);
                }
            }
        });
        Ok(Self { base_url: format!("http://127.0.0.1:{port}/v1"), stop, port })
    }
}

impl Drop for StoryModel {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        // Wake the accept loop so it sees the flag.
        let _ = std::net::TcpStream::connect(("127.0.0.1", self.port));
    }
}

/// Reads one request and answers it.
fn answer(mut c: std::net::TcpStream) -> std::io::Result<()> {
    use std::io::Read as _;
    c.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    let (head_end, length) = loop {
        let n = c.read(&mut chunk)?;
        if n == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..i]).to_ascii_lowercase();
            let length = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse::<usize>().ok())
                .unwrap_or(0);
            break (i + 4, length.min(STORY_MAX_REQUEST));
        }
        if buf.len() > STORY_MAX_REQUEST {
            return Ok(());
        }
    };
    while buf.len() < head_end + length {
        let n = c.read(&mut chunk)?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let body: serde_json::Value =
        serde_json::from_slice(buf.get(head_end..).unwrap_or_default()).unwrap_or_default();
    let prompt: String = body["messages"]
        .as_array()
        .map(|m| m.iter().filter_map(|m| m["content"].as_str()).collect::<Vec<_>>().join("\n"))
        .unwrap_or_default();
    let content = triage(&prompt).to_string();
    let reply = serde_json::json!({
        "id": "demo-story",
        "object": "chat.completion",
        "model": STORY_MODEL,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                     "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
    })
    .to_string();
    write!(
        c,
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{reply}",
        reply.len()
    )
}

/// The stand-in's triage: the facts of the story mails the thread holds, each naming the
/// numbered message (`[k]`) whose words say it.
fn triage(prompt: &str) -> serde_json::Value {
    let facts: Vec<serde_json::Value> = STORY
        .iter()
        .filter_map(|m| {
            let at = prompt.find(m.quote)?;
            // The message is the last "[k] From:" block that starts before the quote.
            let k = prompt[..at]
                .rmatch_indices("] From:")
                .next()
                .and_then(|(i, _)| prompt[..i].rsplit('[').next())
                .and_then(|n| n.parse::<u32>().ok())?;
            Some(serde_json::json!({
                "text": m.fact, "kind": m.kind.as_str(), "subject": m.about, "message": k,
                "quote": m.quote, "valid_from": null, "valid_to": null, "confidence": 0.9,
            }))
        })
        .collect();
    serde_json::json!({"durable": !facts.is_empty(), "facts": facts})
}

/// What was written.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct DemoReport {
    /// The Maildir root.
    pub root: PathBuf,
    /// Files written (message copies included).
    pub files: usize,
    /// Distinct messages.
    pub messages: usize,
    /// Malformed files among them.
    pub malformed: usize,
    /// Total bytes.
    pub bytes: u64,
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len())]
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

const ME: (&str, &str) = ("Giulia Bianchi", "giulia.bianchi@example.it");
const PEOPLE: [(&str, &str); 12] = [
    ("Marco Rossi", "marco.rossi@studio-rossi.it"),
    ("Elena Conti", "elena.conti@example.org"),
    ("Dott. Luca Ferrari", "luca.ferrari@commercialista.it"),
    ("Anna Müller", "anna.mueller@example.de"),
    ("James Carter", "james.carter@example.com"),
    ("Sofia Greco", "sofia.greco@universita.example.it"),
    ("Amministrazione Condominio", "amministrazione@condominio-viale.it"),
    ("Priya Shah", "priya.shah@example.co.uk"),
    ("Paolo Esposito", "paolo@esposito-arch.it"),
    ("Chiara Romano", "chiara.romano@example.it"),
    ("Tom Becker", "tom@becker.example.net"),
    ("Francesca Gallo", "f.gallo@example.it"),
];
const SUBJECTS_IT: [&str; 12] = [
    "Fattura di marzo",
    "Certificazione energetica dell'appartamento",
    "Riunione di condominio: verbale",
    "Preventivo lavori bagno",
    "Dichiarazione dei redditi 2025",
    "Appuntamento dal commercialista",
    "Biglietti del treno per Firenze",
    "Cena di sabato?",
    "Rinnovo contratto d'affitto",
    "Perché il bonifico non è arrivato?",
    "Documenti per la banca",
    "Già fatto: modulo F24",
];
const SUBJECTS_EN: [&str; 12] = [
    "Quarterly report draft",
    "Invoice #4821 from Carter Consulting",
    "Flight itinerary for the Berlin trip",
    "Project kickoff: agenda",
    "Can we move our call to Thursday?",
    "Tax paperwork from your accountant",
    "Photos from the weekend",
    "Lease renewal terms",
    "Conference talk accepted",
    "Your package has shipped",
    "Review: design document v2",
    "Dinner next week",
];
const SENTENCES_IT: [&str; 10] = [
    "Ti mando in allegato i documenti che mi avevi chiesto.",
    "Fammi sapere se va bene per te, così procediamo entro la settimana.",
    "Il tecnico passerà martedì mattina verso le dieci.",
    "Ho controllato con la banca e il bonifico risulta partito venerdì.",
    "Per la certificazione serve anche la planimetria catastale aggiornata.",
    "Possiamo vederci in studio giovedì pomeriggio?",
    "Grazie mille, è tutto chiaro e ti ringrazio per la pazienza.",
    "La scadenza per il pagamento è il 16 del mese prossimo.",
    "Ricordati di portare la carta d'identità e il codice fiscale.",
    "Ci sentiamo presto, un caro saluto a tutta la famiglia.",
];
const SENTENCES_EN: [&str; 10] = [
    "Please find the documents you asked for attached to this message.",
    "Let me know if this works for you so we can move forward this week.",
    "The technician will come by on Tuesday morning around ten.",
    "I checked with the bank and the transfer left on Friday.",
    "We still need the signed copy before the end of the quarter.",
    "Could we meet at the office on Thursday afternoon?",
    "Thanks a lot, everything is clear and I appreciate your patience.",
    "Payment is due on the 16th of next month.",
    "Remember to bring your passport and the booking reference.",
    "Talk soon, and say hello to everyone at home.",
];

struct Msg {
    id: String,
    subject: String,
    from: (&'static str, &'static str),
    to: Vec<(&'static str, &'static str)>,
    date: i64,
    italian: bool,
    body: String,
    in_reply_to: Option<String>,
    references: Vec<String>,
    gm_thrid: Option<String>,
}

fn rfc2822(ts: i64) -> String {
    const MONTHS: [&str; 12] =
        ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
    const DAYS: [&str; 7] = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];
    let t = steward_core::time::CivilTime::from_unix(ts);
    format!(
        "{}, {} {} {} {:02}:{:02}:{:02} +0000",
        DAYS[t.weekday as usize % 7],
        t.day,
        MONTHS[(t.month as usize + 11) % 12],
        t.year,
        t.hour,
        t.minute,
        t.second
    )
}

fn encode_word(s: &str) -> String {
    if s.is_ascii() {
        return s.to_owned();
    }
    let mut out = String::from("=?utf-8?q?");
    for b in s.bytes() {
        match b {
            b' ' => out.push('_'),
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'.' | b'-' => out.push(char::from(b)),
            _ => out.push_str(&format!("={b:02X}")),
        }
    }
    out.push_str("?=");
    out
}

fn addr((name, email): (&str, &str)) -> String {
    format!("\"{}\" <{email}>", encode_word(name))
}

fn base64(bytes: &[u8]) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len() * 4 / 3 + bytes.len() / 57 * 2 + 4);
    for (i, c) in bytes.chunks(3).enumerate() {
        if i > 0 && i % 19 == 0 {
            out.push_str("\r\n");
        }
        let n = (u32::from(c[0]) << 16)
            | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
            | u32::from(*c.get(2).unwrap_or(&0));
        out.push(char::from(T[(n >> 18) as usize & 63]));
        out.push(char::from(T[(n >> 12) as usize & 63]));
        out.push(if c.len() > 1 { char::from(T[(n >> 6) as usize & 63]) } else { '=' });
        out.push(if c.len() > 2 { char::from(T[n as usize & 63]) } else { '=' });
    }
    out
}

fn body_text(rng: &mut Rng, italian: bool, paragraphs: usize) -> String {
    let pool: &[&str] = if italian { &SENTENCES_IT } else { &SENTENCES_EN };
    let mut out = String::new();
    for _ in 0..paragraphs {
        for _ in 0..3 + rng.below(6) {
            let sentence: &str = pool[rng.below(pool.len())];
            out.push_str(sentence);
            out.push(' ');
        }
        out.push_str("\r\n\r\n");
    }
    // Business mail carries signatures and legal footers.
    if rng.chance(45) {
        out.push_str(if italian { FOOTER_IT } else { FOOTER_EN });
    }
    out
}

const FOOTER_IT: &str = "--\r\nStudio Bianchi - Consulenza fiscale e del lavoro\r\nVia Roma 12, 20121 Milano - Tel. 02 1234567\r\n\r\nAi sensi del D.Lgs. 196/2003 e del Regolamento UE 2016/679 (GDPR), le informazioni contenute in questo messaggio sono riservate e destinate esclusivamente al destinatario. Se avete ricevuto questo messaggio per errore, vi preghiamo di informarci immediatamente e di cancellarlo. Qualsiasi utilizzo non autorizzato e' vietato.\r\n";
const FOOTER_EN: &str = "--\r\nCarter Consulting Ltd - 221 Baker Street, London\r\n\r\nThis e-mail and any attachments are confidential and intended solely for the addressee. If you have received it in error, please notify the sender and delete it. Any views or opinions presented are solely those of the author and do not necessarily represent those of the company.\r\n";

fn render(
    m: &Msg,
    rng: &mut Rng,
    attachment: Option<(&str, &str, &[u8])>,
    html_only: bool,
) -> Vec<u8> {
    let mut h = String::new();
    h.push_str(&format!("From: {}\r\n", addr(m.from)));
    h.push_str(&format!(
        "To: {}\r\n",
        m.to.iter().map(|a| addr(*a)).collect::<Vec<_>>().join(", ")
    ));
    h.push_str(&format!("Subject: {}\r\n", encode_word(&m.subject)));
    h.push_str(&format!("Date: {}\r\n", rfc2822(m.date)));
    h.push_str(&format!("Message-ID: <{}>\r\n", m.id));
    if let Some(p) = &m.in_reply_to {
        h.push_str(&format!("In-Reply-To: <{p}>\r\n"));
    }
    if !m.references.is_empty() {
        let refs: Vec<String> = m.references.iter().map(|r| format!("<{r}>")).collect();
        h.push_str(&format!("References: {}\r\n", refs.join("\r\n ")));
    }
    if let Some(t) = &m.gm_thrid {
        h.push_str(&format!("X-GM-THRID: {t}\r\n"));
    }
    h.push_str("MIME-Version: 1.0\r\n");
    let charset_body = |text: &str| -> (String, String) {
        if m.italian && rng_like_latin1(text) {
            // Italian mail often still travels as ISO-8859-1 quoted-printable.
            ("iso-8859-1".to_owned(), qp_latin1(text))
        } else {
            ("utf-8".to_owned(), qp_utf8(text))
        }
    };
    if html_only {
        let html = format!(
            "<html><head><style>body{{font-family:sans-serif}}</style><script>track()</script></head><body><h1>{}</h1><p>{}</p></body></html>",
            m.subject,
            m.body.replace("\r\n\r\n", "</p><p>")
        );
        h.push_str("Content-Type: text/html; charset=utf-8\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n");
        h.push_str(&qp_utf8(&html));
        return h.into_bytes();
    }
    match attachment {
        None => {
            let (cs, qp) = charset_body(&m.body);
            h.push_str(&format!(
                "Content-Type: text/plain; charset={cs}\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n{qp}"
            ));
        }
        Some((name, ctype, bytes)) => {
            let boundary = format!("=_steward_{:016x}", rng.next());
            h.push_str(&format!("Content-Type: multipart/mixed; boundary=\"{boundary}\"\r\n\r\n"));
            let (cs, qp) = charset_body(&m.body);
            h.push_str(&format!(
                "--{boundary}\r\nContent-Type: text/plain; charset={cs}\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n{qp}\r\n"
            ));
            let disp = if name.is_ascii() {
                format!("attachment; filename=\"{name}\"")
            } else {
                let enc: String = name
                    .bytes()
                    .map(|b| {
                        if b.is_ascii_alphanumeric() || b == b'.' {
                            char::from(b).to_string()
                        } else {
                            format!("%{b:02X}")
                        }
                    })
                    .collect();
                format!("attachment; filename*=utf-8''{enc}")
            };
            h.push_str(&format!(
                "--{boundary}\r\nContent-Type: {ctype}\r\nContent-Disposition: {disp}\r\nContent-Transfer-Encoding: base64\r\n\r\n{}\r\n--{boundary}--\r\n",
                base64(bytes)
            ));
        }
    }
    h.into_bytes()
}

fn rng_like_latin1(text: &str) -> bool {
    text.chars().all(|c| (c as u32) < 256)
}

fn qp_bytes(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() + bytes.len() / 8);
    let mut col = 0;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'\r' && bytes.get(i + 1) == Some(&b'\n') {
            out.push_str("\r\n");
            col = 0;
            i += 2;
            continue;
        }
        let piece = if (b' '..=b'~').contains(&b) && b != b'=' {
            char::from(b).to_string()
        } else {
            format!("={b:02X}")
        };
        if col + piece.len() > 75 {
            out.push_str("=\r\n");
            col = 0;
        }
        col += piece.len();
        out.push_str(&piece);
        i += 1;
    }
    out
}

fn qp_utf8(text: &str) -> String {
    qp_bytes(text.as_bytes())
}

fn qp_latin1(text: &str) -> String {
    let bytes: Vec<u8> = text.chars().map(|c| u8::try_from(c as u32).unwrap_or(b'?')).collect();
    qp_bytes(&bytes)
}

fn quote(body: &str, who: &str, italian: bool) -> String {
    let intro = if italian { format!("{who} ha scritto:") } else { format!("{who} wrote:") };
    let quoted: Vec<String> = body.lines().map(|l| format!("> {l}")).collect();
    format!("{intro}\r\n{}\r\n", quoted.join("\r\n"))
}

/// Most messages a demo mailbox may have.
/// Fixed (not a setting).
pub const MAX_DEMO_MESSAGES: usize = 1_000_000;

/// Why a demo mailbox was not written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DemoError {
    /// The options ask for something out of range; nothing was written.
    #[error("{0}")]
    Invalid(String),
    /// Writing under the root failed (what was written stays).
    #[error("cannot write the demo mailbox at {}: {source}", root.display())]
    Write {
        /// The mailbox's root.
        root: std::path::PathBuf,
        /// What the file system said.
        #[source]
        source: std::io::Error,
    },
}

impl steward_core::StewardError for DemoError {
    fn code(&self) -> &'static str {
        match self {
            Self::Invalid(_) => "DEMO_INVALID",
            Self::Write { .. } => "DEMO_WRITE_FAILED",
        }
    }

    fn kind(&self) -> steward_core::ErrorKind {
        match self {
            Self::Invalid(_) => steward_core::ErrorKind::InvalidInput,
            Self::Write { .. } => steward_core::ErrorKind::Unavailable,
        }
    }
}

/// Writes a demo Maildir (with Maildir++ folders) under `root`. A message count of 0 or above
/// [`MAX_DEMO_MESSAGES`] is [`DemoError::Invalid`] and writes nothing.
pub fn generate_maildir(root: &Path, opts: &DemoOptions) -> Result<DemoReport, DemoError> {
    if opts.messages == 0 || opts.messages > MAX_DEMO_MESSAGES {
        return Err(DemoError::Invalid(format!(
            "{} messages is out of range (1..={MAX_DEMO_MESSAGES})",
            opts.messages
        )));
    }
    write_maildir(root, opts)
        .map_err(|source| DemoError::Write { root: root.to_path_buf(), source })
}

fn write_maildir(root: &Path, opts: &DemoOptions) -> std::io::Result<DemoReport> {
    let mut rng = Rng(opts.seed | 1);
    let folders = ["", ".Sent", ".Drafts", ".Archive", ".Lavoro", ".[Gmail].All Mail", ".Cestino"];
    for f in folders {
        for sub in ["cur", "new", "tmp"] {
            fs::create_dir_all(root.join(f).join(sub))?;
        }
    }
    let mut report = DemoReport { root: root.to_path_buf(), ..DemoReport::default() };
    let mut threads: Vec<Msg> = Vec::new(); // last message of each open thread
    let span = 400 * 86_400i64;
    let n = opts.messages.max(1);
    let pdf =
        b"%PDF-1.4\n1 0 obj <</Type /Catalog>> endobj\ntrailer <</Root 1 0 R>>\n%%EOF\n".to_vec();
    for i in 0..opts.messages {
        // Oldest first; dates spread over ~400 days with jitter.
        let date = opts.newest - span + (span * i as i64) / n as i64 + rng.below(3600) as i64;
        let italian = rng.chance(55);
        let reply_to = if !threads.is_empty() && rng.chance(45) {
            let k = threads.len() - 1 - rng.below(threads.len().min(30));
            Some(k)
        } else {
            None
        };
        let from_me = rng.chance(25);
        let other = *rng.pick(&PEOPLE);
        let (from, to) = if from_me { (ME, vec![other]) } else { (other, vec![ME]) };
        let paragraphs = 2 + rng.below(6);
        let mut body = body_text(&mut rng, italian, paragraphs);
        let (subject, in_reply_to, references, gm) = match reply_to {
            Some(k) => {
                let parent = &threads[k];
                body.push_str(&quote(&parent.body, parent.from.0, parent.italian));
                let prefix = if italian {
                    *rng.pick(&["R: ", "Re: ", "Rif: "])
                } else {
                    *rng.pick(&["Re: ", "RE: ", "Fwd: "])
                };
                let base = crate::mail::demo::strip_prefixes(&parent.subject);
                // Some clients drop the reply headers: those join by subject and participants.
                let keep_headers = rng.chance(85);
                let mut refs = parent.references.clone();
                refs.push(parent.id.clone());
                if refs.len() > 20 {
                    refs.drain(..refs.len() - 20);
                }
                (
                    format!("{prefix}{base}"),
                    keep_headers.then(|| parent.id.clone()),
                    if keep_headers { refs } else { Vec::new() },
                    parent.gm_thrid.clone(),
                )
            }
            None => {
                let s = if italian { *rng.pick(&SUBJECTS_IT) } else { *rng.pick(&SUBJECTS_EN) };
                let gm = rng.chance(60).then(|| {
                    format!("{}", 1_700_000_000_000_000_000u64 + rng.next() % 1_000_000_000_000)
                });
                (vary_subject(&mut rng, s, italian), None, Vec::new(), gm)
            }
        };
        let id = format!(
            "{:08x}.{i}@{}",
            rng.next() as u32,
            if from_me { "example.it" } else { from.1.split('@').nth(1).unwrap_or("example.org") }
        );
        let msg = Msg {
            id,
            subject,
            from,
            to,
            date,
            italian,
            body,
            in_reply_to,
            references,
            gm_thrid: gm,
        };
        let attachment: Option<(String, &str, Vec<u8>)> = if rng.chance(12) {
            match rng.below(4) {
                0 => Some(("fattura_marzo.pdf".to_owned(), "application/pdf", pdf.clone())),
                1 => Some(("invoice-4821.pdf".to_owned(), "application/pdf", pdf.clone())), // same bytes
                2 => {
                    let mut data = vec![0u8; 4_000 + rng.below(40_000)];
                    for b in &mut data {
                        *b = (rng.next() >> 56) as u8;
                    }
                    Some((format!("foto_{i}.jpg"), "image/jpeg", data))
                }
                _ => Some((
                    "planimetria catastale è.txt".to_owned(),
                    "text/plain",
                    b"Foglio 12, particella 345, sub 7\n".to_vec(),
                )),
            }
        } else {
            None
        };
        let html_only = attachment.is_none() && !from_me && rng.chance(8);
        let bytes = render(
            &msg,
            &mut rng,
            attachment.as_ref().map(|(n, t, b)| (n.as_str(), *t, b.as_slice())),
            html_only,
        );
        let age_days = (opts.newest - date) / 86_400;
        let unread = !from_me && age_days < 20 && rng.chance(70);
        let folder = if from_me {
            ".Sent"
        } else if age_days > 200 && rng.chance(40) {
            ".Archive"
        } else if rng.chance(4) {
            ".Cestino"
        } else {
            ""
        };
        let flags = if unread {
            None
        } else if rng.chance(10) {
            Some("FS")
        } else if msg.in_reply_to.is_some() && rng.chance(30) {
            Some("RS")
        } else {
            Some("S")
        };
        let unique = format!("{}.M{}P{}.demo", date, i, 4242);
        let write =
            |folder: &str, flags: Option<&str>, report: &mut DemoReport| -> std::io::Result<()> {
                let (sub, name) = match flags {
                    None => ("new", unique.clone()),
                    Some(f) => ("cur", format!("{unique}:2,{f}")),
                };
                let path = root.join(folder).join(sub).join(name);
                write_file(&path, &bytes, date)?;
                report.files += 1;
                report.bytes += bytes.len() as u64;
                Ok(())
            };
        write(folder, flags, &mut report)?;
        if opts.gmail_copies && msg.gm_thrid.is_some() {
            // Gmail exposes every message in All Mail too; labelled work mail also in "Lavoro".
            write(".[Gmail].All Mail", flags, &mut report)?;
            if !italian && rng.chance(20) {
                write(".Lavoro", flags, &mut report)?;
            }
        }
        report.messages += 1;
        if reply_to.is_some() {
            let k = reply_to.unwrap_or(0);
            threads[k] = msg;
        } else {
            threads.push(msg);
        }
        if threads.len() > 200 {
            threads.remove(0);
        }
    }
    if let Some(at) = opts.story {
        for (i, m) in STORY.iter().enumerate() {
            let date = at - 3_600 * (i as i64 + 2);
            let raw = format!(
                "From: {}\r\nTo: \"Giulia Bianchi\" <giulia.bianchi@example.it>\r\nSubject: {}\r\n\
                 Date: {}\r\nMessage-ID: <{}>\r\nMIME-Version: 1.0\r\n\
                 Content-Type: text/plain; charset=utf-8\r\n\r\n{}",
                m.from,
                m.subject,
                rfc2822(date),
                m.message_id,
                m.body
            );
            // Unread, in the inbox.
            write_file(
                &root.join("new").join(format!("{date}.story{i}.demo")),
                raw.as_bytes(),
                date,
            )?;
            report.files += 1;
            report.messages += 1;
            report.bytes += raw.len() as u64;
        }
    }
    if rng.chance(40) {
        // A draft, so the drafts role has something in it.
        let draft = b"From: \"Giulia Bianchi\" <giulia.bianchi@example.it>\r\nSubject: Bozza: risposta a Marco\r\nMessage-ID: <draft-1@example.it>\r\n\r\nCiao Marco, ti scrivo per\r\n".to_vec();
        write_file(&root.join(".Drafts/cur/draft-1.demo:2,DS"), &draft, opts.newest)?;
        report.files += 1;
        report.messages += 1;
    }
    if opts.malformed {
        let bad: [(&str, Vec<u8>); 3] = [
            ("broken-empty.demo", Vec::new()),
            (
                "broken-binary.demo",
                (0..4096u32).map(|x| (x.wrapping_mul(2_654_435_761) >> 24) as u8).collect(),
            ),
            ("broken-header-bomb.demo", {
                let mut b = b"From: bomb@example.com\r\n".to_vec();
                while b.len() < 1_200_000 {
                    b.extend_from_slice(b"X-Padding: AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\r\n");
                }
                b
            }),
        ];
        for (name, bytes) in bad {
            write_file(
                &root.join("cur").join(format!("{name}:2,S")),
                &bytes,
                opts.newest - 86_400,
            )?;
            report.files += 1;
            report.malformed += 1;
            report.bytes += bytes.len() as u64;
        }
    }
    Ok(report)
}

/// Real subjects repeat less than a fixed list: most new conversations get a detail.
fn vary_subject(rng: &mut Rng, base: &str, italian: bool) -> String {
    const MONTHS_IT: [&str; 12] = [
        "gennaio",
        "febbraio",
        "marzo",
        "aprile",
        "maggio",
        "giugno",
        "luglio",
        "agosto",
        "settembre",
        "ottobre",
        "novembre",
        "dicembre",
    ];
    const MONTHS_EN: [&str; 12] = [
        "January",
        "February",
        "March",
        "April",
        "May",
        "June",
        "July",
        "August",
        "September",
        "October",
        "November",
        "December",
    ];
    const PROJECTS: [&str; 8] =
        ["Aurora", "via Roma 12", "Q3", "Bianchi & Co", "Delta", "Milano office", "Orion", "2025"];
    match rng.below(10) {
        0..=2 => base.to_owned(),
        3..=5 => {
            let months: &[&str] = if italian { &MONTHS_IT } else { &MONTHS_EN };
            format!("{base} - {}", months[rng.below(12)])
        }
        6..=7 => format!("{base} ({})", PROJECTS[rng.below(PROJECTS.len())]),
        _ => format!("{base} #{}", 100 + rng.below(9_900)),
    }
}

/// Reply/forward prefix stripping for generated subjects (kept tiny and local on purpose).
fn strip_prefixes(s: &str) -> &str {
    let mut s = s;
    loop {
        let t = ["Re: ", "RE: ", "R: ", "Rif: ", "Fwd: "].iter().find_map(|p| s.strip_prefix(p));
        match t {
            Some(rest) => s = rest,
            None => return s,
        }
    }
}

fn write_file(path: &Path, bytes: &[u8], mtime: i64) -> std::io::Result<()> {
    let mut f = fs::File::create(path)?;
    f.write_all(bytes)?;
    let when = UNIX_EPOCH + Duration::from_secs(u64::try_from(mtime).unwrap_or(0));
    f.set_modified(when)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_render_as_rfc2822() {
        assert_eq!(rfc2822(0), "Thu, 1 Jan 1970 00:00:00 +0000");
        assert_eq!(rfc2822(1_751_364_000), "Tue, 1 Jul 2025 10:00:00 +0000");
    }

    #[test]
    fn same_seed_same_bytes() {
        let a = tempfile::tempdir().expect("tmp");
        let b = tempfile::tempdir().expect("tmp");
        let ra = generate_maildir(a.path(), &DemoOptions::new(60)).expect("gen");
        let rb = generate_maildir(b.path(), &DemoOptions::new(60)).expect("gen");
        assert_eq!((ra.files, ra.bytes, ra.messages), (rb.files, rb.bytes, rb.messages));
        assert_eq!(ra.malformed, 3);
    }

    #[test]
    fn bad_options_and_unwritable_roots_are_typed_errors() {
        use steward_core::{ErrorKind, StewardError};
        let dir = tempfile::tempdir().expect("tmp");
        let root = dir.path().join("md");
        for n in [0, MAX_DEMO_MESSAGES + 1] {
            let e = generate_maildir(&root, &DemoOptions::new(n)).expect_err("out of range");
            assert_eq!((e.code(), e.kind()), ("DEMO_INVALID", ErrorKind::InvalidInput));
            assert!(!root.exists(), "an invalid demo writes nothing");
        }
        // A root under a regular file cannot be created.
        let file = dir.path().join("file");
        std::fs::write(&file, b"x").expect("write");
        let e = generate_maildir(&file.join("md"), &DemoOptions::new(5)).expect_err("unwritable");
        assert_eq!((e.code(), e.kind()), ("DEMO_WRITE_FAILED", ErrorKind::Unavailable));
        assert!(e.to_string().contains("file/md"), "the error names the root: {e}");
    }
}
