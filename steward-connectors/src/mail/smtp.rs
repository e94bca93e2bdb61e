//! SMTP submission with [lettre]: implicit TLS, STARTTLS, or plain text only to a loopback
//! server; AUTH when credentials are configured.
//!
//! lettre builds the RFC 5322 message (MIME, encodings, our Message-ID, In-Reply-To/References,
//! attachments, Bcc kept out of the headers). The mail transaction is driven step by step over
//! lettre's `SmtpConnection`, not its one-shot transport, because the step at which a failure
//! happens decides what it means: anything before the message data is sent cannot have been
//! accepted (`failed`); a timeout or a broken connection after DATA may have been (`unknown`,
//! settled only by evidence, never by resending).

use std::{
    net::{IpAddr, ToSocketAddrs},
    path::Path,
    time::{Duration, UNIX_EPOCH},
};

use lettre::{
    Address, Message,
    message::{Attachment, Mailbox, MultiPart, SinglePart, header::ContentType},
    transport::smtp::{
        authentication::{Credentials, DEFAULT_MECHANISMS},
        client::{Certificate, SmtpConnection, TlsParameters},
        commands::{Data, Mail, Rcpt},
        extension::{ClientId, Extension, MailBodyParameter, MailParameter},
    },
};
use serde::Deserialize;
use steward_core::{
    ErrorKind, StewardError,
    outbox::{
        MailTransport, OutgoingMail, Receipt, Sender, SubmitClass, SubmitError, read_attachment,
    },
};

/// Seconds a connection, a command or the message transfer may take.
/// Default of `[mail] smtp_timeout_secs`.
pub const DEFAULT_SMTP_TIMEOUT_SECS: u64 = 30;
/// The configuration file in the Steward home.
pub const CONFIG_FILE: &str = "config.toml";

/// How the connection is protected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Security {
    /// TLS from the first byte (port 465).
    Tls,
    /// Plain text upgraded with STARTTLS, which must succeed (port 587).
    StartTls,
    /// No encryption: refused unless the server is on this machine (a local relay, tests).
    Plain,
}

impl Security {
    fn parse(s: &str) -> Option<Self> {
        match s.to_ascii_lowercase().as_str() {
            "tls" | "implicit" | "smtps" => Some(Self::Tls),
            "starttls" => Some(Self::StartTls),
            "plain" | "none" => Some(Self::Plain),
            _ => None,
        }
    }

    fn default_port(self) -> u16 {
        match self {
            Self::Tls => 465,
            Self::StartTls => 587,
            Self::Plain => 25,
        }
    }
}

/// Where and how to submit, and as whom.
#[derive(Clone)]
pub struct SmtpConfig {
    /// The submission server.
    pub host: String,
    /// Its port.
    pub port: u16,
    /// Connection protection.
    pub security: Security,
    /// AUTH user name.
    pub username: Option<String>,
    /// AUTH password (from the environment or a file; never journaled, logged or audited).
    password: Option<String>,
    /// Timeout of each step.
    pub timeout: Duration,
    /// A PEM file of extra trusted certificate authorities (a self-hosted server's own CA),
    /// trusted in addition to the public roots.
    pub ca_file: Option<std::path::PathBuf>,
    /// The account and address mail is sent from.
    pub sender: Sender,
}

impl std::fmt::Debug for SmtpConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SmtpConfig")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("security", &self.security)
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| "<set>"))
            .field("sender", &self.sender)
            .finish_non_exhaustive()
    }
}

/// A configuration that cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("mail configuration: {0}")]
pub struct ConfigError(pub String);

impl StewardError for ConfigError {
    fn code(&self) -> &'static str {
        "MAIL_CONFIG"
    }

    fn kind(&self) -> ErrorKind {
        ErrorKind::InvalidInput
    }
}

/// The `[mail]` table of `config.toml`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct MailSection {
    account: Option<String>,
    from: Option<String>,
    from_name: Option<String>,
    smtp_host: Option<String>,
    smtp_port: Option<u16>,
    smtp_security: Option<String>,
    smtp_username: Option<String>,
    /// A file holding the password (one line), readable only by its owner.
    smtp_password_file: Option<std::path::PathBuf>,
    /// An OS keyring entry holding the password: this service, the SMTP user name as the
    /// account (macOS Keychain, Windows Credential Manager, the Linux kernel keyring).
    smtp_password_keyring: Option<String>,
    smtp_timeout_secs: Option<u64>,
    /// Extra trusted CA certificates (PEM).
    smtp_ca_file: Option<std::path::PathBuf>,
    /// `[[mail.sources]]`: read by [`crate::home`], not here.
    #[allow(dead_code)]
    sources: Option<toml::Value>,
}

#[derive(Debug, Default, Deserialize)]
struct ConfigFile {
    #[serde(default)]
    mail: MailSection,
}

fn is_loopback(host: &str, port: u16) -> bool {
    if host.eq_ignore_ascii_case("localhost") {
        return true;
    }
    match host.trim_matches(['[', ']']).parse::<IpAddr>() {
        Ok(ip) => ip.is_loopback(),
        Err(_) => (host, port)
            .to_socket_addrs()
            .map(|mut a| {
                let all: Vec<_> = a.by_ref().collect();
                !all.is_empty() && all.iter().all(|x| x.ip().is_loopback())
            })
            .unwrap_or(false),
    }
}

impl SmtpConfig {
    /// A configuration; `validate` it before use.
    pub fn new(host: &str, port: u16, security: Security, sender: Sender) -> Self {
        Self {
            host: host.to_owned(),
            port,
            security,
            username: None,
            password: None,
            timeout: Duration::from_secs(DEFAULT_SMTP_TIMEOUT_SECS),
            ca_file: None,
            sender,
        }
    }

    /// With AUTH credentials.
    #[must_use]
    pub fn with_credentials(mut self, username: &str, password: &str) -> Self {
        self.username = Some(username.to_owned());
        self.password = Some(password.to_owned());
        self
    }

    /// Reads `<home>/config.toml` (`[mail]`), then the environment, which wins:
    /// `STEWARD_MAIL_ACCOUNT`, `STEWARD_MAIL_FROM`, `STEWARD_MAIL_FROM_NAME`,
    /// `STEWARD_SMTP_HOST`, `STEWARD_SMTP_PORT`, `STEWARD_SMTP_SECURITY` (tls, starttls,
    /// plain), `STEWARD_SMTP_CA_FILE`, `STEWARD_SMTP_USERNAME`, `STEWARD_SMTP_PASSWORD`, `STEWARD_SMTP_KEYRING` (a
    /// keyring service). The password comes from the environment, else `smtp_password_file`,
    /// else the keyring entry; never from the journal or the audit trail.
    pub fn load(home: &Path) -> Result<Self, ConfigError> {
        Self::load_with(home, &|k| std::env::var(k).ok())
    }

    /// [`SmtpConfig::load`] with the environment given as a lookup (tests, embedders).
    pub fn load_with(
        home: &Path,
        vars: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigError> {
        let path = home.join(CONFIG_FILE);
        let file: ConfigFile = match std::fs::read_to_string(&path) {
            Ok(text) => toml::from_str(&text)
                .map_err(|e| ConfigError(format!("{}: {e}", path.display())))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => ConfigFile::default(),
            Err(e) => return Err(ConfigError(format!("{}: {e}", path.display()))),
        };
        let env = |k: &str| vars(k).filter(|v| !v.trim().is_empty());
        let m = file.mail;
        let need = |v: Option<String>, key: &str, var: &str| {
            v.ok_or_else(|| {
                ConfigError(format!("no {key}: set it under [mail] in {} or {var}", path.display()))
            })
        };
        let host =
            need(env("STEWARD_SMTP_HOST").or(m.smtp_host), "smtp_host", "STEWARD_SMTP_HOST")?;
        let security = match env("STEWARD_SMTP_SECURITY").or(m.smtp_security) {
            Some(s) => Security::parse(&s).ok_or_else(|| {
                ConfigError(format!("smtp security {s:?}: use tls, starttls or plain"))
            })?,
            None => Security::Tls,
        };
        let port = match env("STEWARD_SMTP_PORT") {
            Some(p) => p.parse().map_err(|_| ConfigError(format!("smtp port {p:?}")))?,
            None => m.smtp_port.unwrap_or_else(|| security.default_port()),
        };
        let from = need(env("STEWARD_MAIL_FROM").or(m.from), "from", "STEWARD_MAIL_FROM")?;
        let account =
            need(env("STEWARD_MAIL_ACCOUNT").or(m.account), "account", "STEWARD_MAIL_ACCOUNT")?;
        let username = env("STEWARD_SMTP_USERNAME").or(m.smtp_username);
        let password = match (env("STEWARD_SMTP_PASSWORD"), &m.smtp_password_file) {
            (Some(p), _) => Some(p),
            (None, Some(f)) => Some(read_password_file(f)?),
            (None, None) => {
                match (env("STEWARD_SMTP_KEYRING").or(m.smtp_password_keyring), &username) {
                    (Some(service), Some(user)) => Some(read_keyring(&service, user)?),
                    (Some(_), None) => {
                        return Err(ConfigError(
                            "a keyring entry is looked up by the SMTP user name: set smtp_username"
                                .into(),
                        ));
                    }
                    (None, _) => None,
                }
            }
        };
        let mut cfg = Self::new(
            &host,
            port,
            security,
            Sender { account, from, from_name: env("STEWARD_MAIL_FROM_NAME").or(m.from_name) },
        );
        cfg.username = username;
        cfg.password = password;
        cfg.ca_file = env("STEWARD_SMTP_CA_FILE").map(Into::into).or(m.smtp_ca_file);
        if let Some(t) = m.smtp_timeout_secs {
            cfg.timeout = Duration::from_secs(t.clamp(1, 600));
        }
        cfg.validate()?;
        Ok(cfg)
    }

    /// Refuses what is unsafe or unusable: plain text to another machine, credentials without
    /// a user name, an empty host.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.host.trim().is_empty() {
            return Err(ConfigError("the SMTP host is empty".into()));
        }
        if self.security == Security::Plain && !is_loopback(&self.host, self.port) {
            return Err(ConfigError(format!(
                "plain-text SMTP is allowed only to this machine; {} is not a loopback address (use tls or starttls)",
                self.host
            )));
        }
        if self.password.is_some() != self.username.is_some() {
            return Err(ConfigError(
                "set both the SMTP user name and its password, or neither".into(),
            ));
        }
        Ok(())
    }
}

/// The password stored in the OS keyring under `service` for `user`.
pub fn read_keyring(service: &str, user: &str) -> Result<String, ConfigError> {
    keyring::Entry::new(service, user)
        .and_then(|e| e.get_password())
        .map_err(|e| ConfigError(format!("keyring entry {service:?} for {user:?}: {e}")))
}

fn read_password_file(path: &Path) -> Result<String, ConfigError> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let meta =
            std::fs::metadata(path).map_err(|e| ConfigError(format!("{}: {e}", path.display())))?;
        if meta.permissions().mode() & 0o077 != 0 {
            return Err(ConfigError(format!(
                "{} is readable by others; chmod 600 it",
                path.display()
            )));
        }
    }
    let text = std::fs::read_to_string(path)
        .map_err(|e| ConfigError(format!("{}: {e}", path.display())))?;
    Ok(text.trim_end_matches(['\r', '\n']).to_owned())
}

fn build_err(message: impl Into<String>) -> SubmitError {
    SubmitError { class: SubmitClass::Build, message: message.into() }
}

fn address(a: &str) -> Result<Address, SubmitError> {
    a.trim().parse::<Address>().map_err(|e| build_err(format!("address {a:?}: {e}")))
}

/// The RFC 5322 message for `mail`, with its envelope (Bcc recipients in the envelope only).
pub fn build_message(mail: &OutgoingMail) -> Result<Message, SubmitError> {
    let from = Mailbox::new(mail.from_name.clone(), address(&mail.from)?);
    let date = UNIX_EPOCH + Duration::from_secs(mail.date.max(0).unsigned_abs());
    let mut b = Message::builder()
        .from(from)
        .subject(mail.subject.clone())
        .date(date)
        .message_id(Some(format!("<{}>", mail.message_id)))
        .user_agent("Steward".to_owned());
    for a in &mail.to {
        b = b.to(Mailbox::new(None, address(a)?));
    }
    for a in &mail.cc {
        b = b.cc(Mailbox::new(None, address(a)?));
    }
    for a in &mail.bcc {
        b = b.bcc(Mailbox::new(None, address(a)?));
    }
    if let Some(parent) = &mail.in_reply_to {
        b = b.in_reply_to(format!("<{parent}>"));
    }
    if !mail.references.is_empty() {
        let refs: Vec<String> = mail.references.iter().map(|r| format!("<{r}>")).collect();
        b = b.references(refs.join(" "));
    }
    let text = SinglePart::plain(mail.body.clone());
    // An invitation: the body and its iTIP object as alternatives (RFC 6047 §2.4), so a
    // calendar app offers to accept or decline it.
    let body = match &mail.calendar {
        Some(itip) => {
            let ct = ContentType::parse("text/calendar; charset=utf-8; method=REQUEST")
                .map_err(|e| build_err(e.to_string()))?;
            Some(
                MultiPart::alternative()
                    .singlepart(text.clone())
                    .singlepart(SinglePart::builder().header(ct).body(itip.clone())),
            )
        }
        None => None,
    };
    let built = if mail.attachments.is_empty() {
        match body {
            Some(alt) => b.multipart(alt),
            None => b.singlepart(text),
        }
    } else {
        let mixed = MultiPart::mixed();
        let mut parts = match body {
            Some(alt) => mixed.multipart(alt),
            None => mixed.singlepart(text),
        };
        for a in &mail.attachments {
            let bytes = read_attachment(a)?;
            let ct = ContentType::parse(&a.mime_type)
                .or_else(|_| ContentType::parse("application/octet-stream"))
                .map_err(|e| build_err(format!("{}: {e}", a.mime_type)))?;
            parts = parts.singlepart(Attachment::new(a.name.clone()).body(bytes, ct));
        }
        b.multipart(parts)
    };
    built.map_err(|e| build_err(e.to_string()))
}

/// Submits over SMTP, one attempt per call.
#[derive(Debug, Clone)]
pub struct SmtpSender {
    config: SmtpConfig,
}

/// Which step of the session a failure happened in.
#[derive(Clone, Copy)]
enum Step {
    Connect,
    Auth,
    Envelope { recipient: bool },
    Message,
}

/// Whether `e` is a TLS failure: lettre reports a rustls handshake or certificate failure on
/// the implicit-TLS socket as an I/O error of kind `InvalidData` (how rustls surfaces them).
fn is_tls(e: &lettre::transport::smtp::Error) -> bool {
    e.is_tls() || io_kind(e) == Some(std::io::ErrorKind::InvalidData)
}

/// A socket timeout: lettre's own flag, or the read/write timeout the socket reports
/// (`WouldBlock` on Unix, `TimedOut` elsewhere).
fn is_timeout(e: &lettre::transport::smtp::Error) -> bool {
    e.is_timeout()
        || matches!(io_kind(e), Some(std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut))
}

/// The kind of the first I/O error in `e`'s source chain.
fn io_kind(e: &lettre::transport::smtp::Error) -> Option<std::io::ErrorKind> {
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        if let Some(io) = s.downcast_ref::<std::io::Error>() {
            return Some(io.kind());
        }
        source = s.source();
    }
    None
}

fn classify(step: Step, e: &lettre::transport::smtp::Error) -> SubmitError {
    let message = e.to_string();
    let negative = e.is_permanent() || e.is_transient();
    let class = match step {
        _ if is_tls(e) => SubmitClass::Tls,
        Step::Connect => SubmitClass::Connect,
        Step::Auth if negative => SubmitClass::Auth,
        Step::Auth => SubmitClass::Interrupted,
        Step::Envelope { recipient: true } if negative => SubmitClass::RecipientRefused,
        Step::Envelope { .. } if negative => SubmitClass::Rejected,
        Step::Envelope { .. } => SubmitClass::Interrupted,
        // The data was (at least partly) sent: a "no" is a no, anything else may be a yes.
        Step::Message if negative => SubmitClass::Rejected,
        Step::Message if is_timeout(e) => SubmitClass::Timeout,
        Step::Message => SubmitClass::ConnectionReset,
    };
    SubmitError { class, message }
}

impl SmtpSender {
    /// A sender for `config` (validated here).
    pub fn new(config: SmtpConfig) -> Result<Self, ConfigError> {
        config.validate()?;
        Ok(Self { config })
    }

    /// The account and address mail goes out from.
    pub fn sender(&self) -> &Sender {
        &self.config.sender
    }

    fn connect(&self) -> Result<SmtpConnection, SubmitError> {
        let c = &self.config;
        let hello = ClientId::default();
        let tls = || {
            let tls_err = |message: String| SubmitError { class: SubmitClass::Tls, message };
            let mut b = TlsParameters::builder(c.host.clone());
            if let Some(path) = &c.ca_file {
                let pem = std::fs::read(path).map_err(|e| SubmitError {
                    class: SubmitClass::Config,
                    message: format!("{}: {e}", path.display()),
                })?;
                let cert = Certificate::from_pem(&pem)
                    .map_err(|e| tls_err(format!("{}: {e}", path.display())))?;
                b = b.add_root_certificate(cert);
            }
            b.build().map_err(|e| tls_err(e.to_string()))
        };
        let addr = (c.host.as_str(), c.port);
        let timeout = Some(c.timeout);
        let mut conn = match c.security {
            Security::Tls => {
                let params = tls()?;
                SmtpConnection::connect(addr, timeout, &hello, Some(&params), None)
                    .map_err(|e| classify(Step::Connect, &e))?
            }
            Security::StartTls => {
                let params = tls()?;
                let mut conn = SmtpConnection::connect(addr, timeout, &hello, None, None)
                    .map_err(|e| classify(Step::Connect, &e))?;
                if !conn.can_starttls() {
                    conn.abort();
                    return Err(SubmitError {
                        class: SubmitClass::Tls,
                        message: format!("{} does not offer STARTTLS", c.host),
                    });
                }
                conn.starttls(&params, &hello)
                    .map_err(|e| SubmitError { class: SubmitClass::Tls, message: e.to_string() })?;
                conn
            }
            Security::Plain => {
                if !is_loopback(&c.host, c.port) {
                    return Err(SubmitError {
                        class: SubmitClass::Config,
                        message: "plain-text SMTP is allowed only to this machine".into(),
                    });
                }
                SmtpConnection::connect(addr, timeout, &hello, None, None)
                    .map_err(|e| classify(Step::Connect, &e))?
            }
        };
        if let (Some(user), Some(pass)) = (&c.username, &c.password) {
            let creds = Credentials::new(user.clone(), pass.clone());
            if let Err(e) = conn.auth(DEFAULT_MECHANISMS, &creds) {
                conn.abort();
                return Err(classify(Step::Auth, &e));
            }
        }
        Ok(conn)
    }
}

impl MailTransport for SmtpSender {
    fn submit(&self, mail: &OutgoingMail) -> Result<Receipt, SubmitError> {
        let message = build_message(mail)?;
        let envelope = message.envelope().clone();
        let bytes = message.formatted();
        let mut conn = self.connect()?;
        let mut options = Vec::new();
        if !bytes.is_ascii() {
            if !conn.server_info().supports_feature(Extension::EightBitMime) {
                conn.abort();
                return Err(build_err("the server does not accept 8-bit content"));
            }
            options.push(MailParameter::Body(MailBodyParameter::EightBitMime));
        }
        let envelope_step = |conn: &mut SmtpConnection| -> Result<(), SubmitError> {
            conn.command(Mail::new(envelope.from().cloned(), options))
                .map_err(|e| classify(Step::Envelope { recipient: false }, &e))?;
            for to in envelope.to() {
                conn.command(Rcpt::new(to.clone(), vec![]))
                    .map_err(|e| classify(Step::Envelope { recipient: true }, &e))?;
            }
            conn.command(Data).map_err(|e| classify(Step::Envelope { recipient: false }, &e))?;
            Ok(())
        };
        if let Err(e) = envelope_step(&mut conn) {
            conn.abort();
            return Err(e);
        }
        match conn.message(&bytes) {
            Ok(response) => {
                let _ = conn.quit();
                let text: Vec<&str> = response.message().collect();
                Ok(Receipt { response: format!("{} {}", response.code(), text.join(" ")) })
            }
            Err(e) => {
                conn.abort();
                Err(classify(Step::Message, &e))
            }
        }
    }
}
