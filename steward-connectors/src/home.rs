//! Opening a configured home: the one path the command, the server, the FFI and Python take,
//! so each frontend opens the same Steward (every watch source, the configured embedder and
//! chat models) and runs the same background runner over the same configured services.
//!
//! Mail sources for the runner's reconcile job are `[[mail.sources]]` in `config.toml`:
//!
//! ```toml
//! [[mail.sources]]
//! kind = "maildir"          # maildir, mbox or emlx
//! path = "~/Maildir"
//! account = "me@example.org" # optional: the source's default name otherwise
//! # name = "work"            # optional: how status and logs call it (default: the path)
//! # mbox_flavor = "mboxo"    # mbox only: mboxrd (default) or mboxo
//! ```

use std::{
    path::{Path, PathBuf},
    sync::Arc,
};

use serde::Deserialize;
use steward_core::{
    ErrorKind, OpenError, Steward, StewardBuilder, StewardError,
    agent::{
        Agent, AgentConfig, AgentError,
        notify::{ComposedDelivery, NotifyConfig},
    },
    calendar::{CalendarSettings, WorkingHours},
    mirror::MailSource,
    outbox::MailTransport,
    runner::{
        ConfiguredSource, FeedDelivery, PimSource, Runner, RunnerConfig, RunnerError, Services,
    },
    tools::{ToolError, Toolbox},
};

use crate::mail::{
    EmlxSource, MaildirSource, MboxFlavor, MboxSource,
    smtp::{ConfigError, SmtpConfig, SmtpSender},
};
use crate::pim::PimPlace;

/// The most mail sources one home may configure.
/// Fixed (not a setting).
pub const MAX_MAIL_SOURCES: usize = 32;

/// A builder for the home `home` (else the default) with everything configured: every watch
/// source, the document readers, the embedder (`[embed]`), the chat models (`[llm]`) and the limits (`[limits]`).
pub fn builder(home: Option<PathBuf>) -> StewardBuilder {
    let mut b = crate::watches::register(
        Steward::builder()
            .embedder_from_config()
            .llm_from_config()
            .limits_from_config()
            .extractor(std::sync::Arc::new(crate::docs::Readers)),
    );
    match crate::trains::tools::specs() {
        Ok(specs) => {
            for spec in specs {
                b = b.tool(spec);
            }
        }
        // The specs are constants checked by the toolbox test; never fail an open over them.
        Err(e) => tracing::warn!(error = %e, "the train tools are unavailable"),
    }
    let dir = home.clone().or_else(steward_core::default_home);
    match dir.as_deref().map(calendar_settings) {
        Some(Ok(settings)) => b = b.calendar_settings(settings),
        // The commands that answer calendar questions read the settings again and say why.
        Some(Err(e)) => tracing::warn!(error = %e, "calendar settings unusable: defaults used"),
        None => {}
    }
    match dir.as_deref().map(file_roots) {
        Some(Ok(roots)) => b = b.file_roots(roots),
        // No root is reachable until the config says which: the file commands say why.
        Some(Err(e)) => tracing::warn!(error = %e, "[files] roots unusable: no file is reachable"),
        None => {}
    }
    if let Some(h) = home {
        b = b.home(h);
    }
    b
}

/// The calendar settings of `<home>/config.toml`:
///
/// ```toml
/// [calendar]
/// time_zone = "Europe/Rome"          # default: TZ, else the system's zone
/// me = ["me@example.org"]            # your addresses: invitations you declined take no time
/// working_hours = "09:00-18:00"      # Monday to Friday (the default)
/// ```
pub fn calendar_settings(home: &Path) -> Result<CalendarSettings, ConfigError> {
    let path = home.join(crate::mail::smtp::CONFIG_FILE);
    let bad = |what: String| ConfigError(format!("{}: [calendar] {what}", path.display()));
    let mut out = CalendarSettings::default();
    let Some(section) = read_config(home)?.calendar else { return Ok(out) };
    if let Some(tz) = section.time_zone {
        out.zone = tz.parse().map_err(|_| bad(format!("time_zone {tz:?} is not an IANA zone")))?;
    }
    for m in section.me.iter().take(50) {
        out.me.push(
            steward_core::contacts::normalize_email(m)
                .ok_or_else(|| bad(format!("me: {m:?} is not an address")))?,
        );
    }
    if let Some(h) = section.working_hours {
        out.hours = WorkingHours::parse_span(&h).map_err(|e| bad(e.to_string()))?;
    }
    Ok(out)
}

/// Opens the home `home` (else the default) with everything configured.
pub fn open(home: Option<PathBuf>) -> Result<Steward, OpenError> {
    builder(home).open()
}

/// Why a configured runner cannot be made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HomeError {
    /// `[mail]` or `[[mail.sources]]` cannot be used.
    #[error(transparent)]
    Mail(#[from] ConfigError),
    /// `[jobs]` cannot be used.
    #[error(transparent)]
    Jobs(#[from] RunnerError),
    /// `[tools]` cannot be used.
    #[error(transparent)]
    Tools(#[from] ToolError),
    /// The agent cannot open.
    #[error(transparent)]
    Agent(#[from] AgentError),
}

impl StewardError for HomeError {
    fn code(&self) -> &'static str {
        match self {
            Self::Mail(e) => e.code(),
            Self::Jobs(e) => e.code(),
            Self::Tools(e) => e.code(),
            Self::Agent(e) => e.code(),
        }
    }

    fn kind(&self) -> ErrorKind {
        match self {
            Self::Mail(e) => e.kind(),
            Self::Jobs(e) => e.kind(),
            Self::Tools(e) => e.kind(),
            Self::Agent(e) => e.kind(),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SourceSection {
    kind: String,
    path: PathBuf,
    account: Option<String>,
    name: Option<String>,
    mbox_flavor: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct MailSection {
    #[serde(default)]
    sources: Vec<SourceSection>,
}

#[derive(Debug, Default, Deserialize)]
struct ConfigFile {
    #[serde(default)]
    mail: Option<toml::Value>,
    #[serde(default)]
    tools: Option<ToolsSection>,
    #[serde(default)]
    agent: Option<AgentSection>,
    #[serde(default)]
    mcp: Option<toml::Value>,
    #[serde(default)]
    calendar: Option<CalendarSection>,
    #[serde(default)]
    contacts: Option<ContactsSection>,
    #[serde(default)]
    files: Option<FilesSection>,
}

/// `[files]`: the folders Steward may read files under.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FilesSection {
    #[serde(default)]
    roots: Vec<PathBuf>,
}

/// The folders Steward may read files under: `STEWARD_FILES_ROOTS` (a `PATH`-style list) when
/// set, else `[files] roots` of `<home>/config.toml` (`~` expanded):
///
/// ```toml
/// [files]
/// roots = ["~/Documents", "~/Downloads"]
/// ```
///
/// Refused: more than [`steward_core::paths::MAX_FILE_ROOTS`], a relative path, a folder inside the
/// home.
pub fn file_roots(home: &Path) -> Result<Vec<PathBuf>, ConfigError> {
    let path = home.join(crate::mail::smtp::CONFIG_FILE);
    let bad = |what: String| ConfigError(format!("{}: [files] {what}", path.display()));
    let roots: Vec<PathBuf> = match std::env::var_os("STEWARD_FILES_ROOTS") {
        Some(v) => std::env::split_paths(&v).filter(|p| !p.as_os_str().is_empty()).collect(),
        None => read_config(home)?
            .files
            .map(|f| f.roots)
            .unwrap_or_default()
            .iter()
            .map(|p| expand(p))
            .collect(),
    };
    if roots.len() > steward_core::paths::MAX_FILE_ROOTS {
        return Err(bad(format!("at most {} roots", steward_core::paths::MAX_FILE_ROOTS)));
    }
    let home_c = home.canonicalize().unwrap_or_else(|_| home.to_path_buf());
    for r in &roots {
        if !r.is_absolute() {
            return Err(bad(format!("root {} is not an absolute path", r.display())));
        }
        if r.components().any(|c| c == std::path::Component::ParentDir) {
            return Err(bad(format!(
                "root {} goes up with ..: name the folder itself",
                r.display()
            )));
        }
        let c = r.canonicalize().unwrap_or_else(|_| r.clone());
        // A root holding the home is fine: the guard refuses what lies in the home. Inside
        // it, only the demo's shareable folder may be a root.
        if steward_core::paths::in_private_home(&c, &home_c) {
            return Err(bad(format!("root {} is inside the Steward home", r.display())));
        }
    }
    Ok(roots)
}

/// What [`share_demo_documents`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DemoShare {
    /// `[files] roots = ["<home>/demo-documents"]` was written into `config.toml`.
    Configured(PathBuf),
    /// The folder is shared already.
    AlreadyShared(PathBuf),
    /// Other folders are configured (`[files]` or `STEWARD_FILES_ROOTS`): nothing was changed.
    OtherRoots(PathBuf),
}

/// Shares `<home>/demo-documents` (what `steward demo` writes) when no folder is shared yet:
/// `[files] roots` is added to `<home>/config.toml` (created when missing). A config that
/// already has a `[files]` table, or `STEWARD_FILES_ROOTS`, is left as it is.
pub fn share_demo_documents(home: &Path) -> Result<DemoShare, ConfigError> {
    // The root written must be absolute (`--home ./h` is relative).
    let home = &home.canonicalize().map_err(|e| ConfigError(format!("{}: {e}", home.display())))?;
    let folder = home.join(steward_core::paths::DEMO_DOCUMENTS_DIR);
    let path = home.join(crate::mail::smtp::CONFIG_FILE);
    let canonical = |p: &Path| p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
    if file_roots(home)?.iter().any(|r| canonical(r) == canonical(&folder)) {
        return Ok(DemoShare::AlreadyShared(folder));
    }
    if std::env::var_os("STEWARD_FILES_ROOTS").is_some() || read_config(home)?.files.is_some() {
        return Ok(DemoShare::OtherRoots(folder));
    }
    let existing = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(ConfigError(format!("{}: {e}", path.display()))),
    };
    let root = toml::Value::String(folder.to_string_lossy().into_owned());
    let sep = if existing.is_empty() || existing.ends_with('\n') { "" } else { "\n" };
    let text = format!(
        "{existing}{sep}\n# Added by `steward demo`: the folder of sample documents.\n[files]\nroots = [{root}]\n"
    );
    // Checked before it is written: the result must still read as a config.
    toml::from_str::<ConfigFile>(&text).map_err(|e| {
        ConfigError(format!("{}: adding [files] would break it: {e}", path.display()))
    })?;
    // Replaced whole (a temporary file renamed over it), with the old file's permissions.
    let fail = |e: std::io::Error| ConfigError(format!("{}: {e}", path.display()));
    let tmp = home.join(".config.toml.demo-tmp");
    std::fs::write(&tmp, text).map_err(fail)?;
    if let Ok(meta) = std::fs::metadata(&path) {
        std::fs::set_permissions(&tmp, meta.permissions()).map_err(fail)?;
    }
    std::fs::rename(&tmp, &path).map_err(fail)?;
    Ok(DemoShare::Configured(folder))
}

/// One `[[calendar.sources]]` or `[[contacts.sources]]`: a `path` (vdir, ics, vcf) or a `url`
/// with its credentials (caldav, carddav).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PimSection {
    kind: String,
    path: Option<PathBuf>,
    url: Option<String>,
    username: Option<String>,
    password_file: Option<PathBuf>,
    token_file: Option<PathBuf>,
    keyring: Option<String>,
    account: Option<String>,
    name: Option<String>,
}

impl PimSection {
    /// Where it is, checked against its kind: one of `kinds` (a vdir root, one file, a DAV
    /// account).
    fn read(&self, section: &str, kinds: [&str; 3]) -> Result<PimPlace, String> {
        use crate::dav::{DavAccount, SecretSource};
        let k = &self.kind;
        let Some(i) = kinds.iter().position(|x| x == k) else {
            let [a, b, c] = kinds;
            return Err(format!("[[{section}]] kind {k:?}: use {a}, {b} or {c}"));
        };
        if i < 2 {
            let stray = self.url.is_some()
                || self.username.is_some()
                || self.password_file.is_some()
                || self.token_file.is_some()
                || self.keyring.is_some();
            return match (&self.path, stray) {
                (Some(p), false) if i == 0 => Ok(PimPlace::Vdir(expand(p))),
                (Some(p), false) => Ok(PimPlace::File(expand(p))),
                (None, _) => Err(format!("[[{section}]] kind {k:?} needs a path")),
                (Some(_), true) => Err(format!(
                    "[[{section}]] kind {k:?} reads a path: url and credentials are for DAV kinds"
                )),
            };
        }
        let url = match (&self.url, &self.path) {
            (Some(u), None) => u.clone(),
            _ => return Err(format!("[[{section}]] kind {k:?} needs a url (and no path)")),
        };
        let secret = match (&self.password_file, &self.token_file, &self.keyring) {
            (None, None, None) => None,
            (Some(f), None, None) if self.username.is_some() => Some(SecretSource::File(expand(f))),
            (None, Some(f), None) if self.username.is_none() => Some(SecretSource::File(expand(f))),
            (None, None, Some(k)) if self.username.is_some() => {
                Some(SecretSource::Keyring(k.clone()))
            }
            _ => {
                return Err(format!(
                    "[[{section}]] {url}: give username with password_file or keyring, or \
                     token_file alone"
                ));
            }
        };
        Ok(PimPlace::Dav(DavAccount { url, username: self.username.clone(), secret }))
    }

    /// How status calls it when it has no name.
    fn default_name(&self) -> String {
        self.url.clone().unwrap_or_else(|| {
            self.path.as_deref().map(|p| expand(p).display().to_string()).unwrap_or_default()
        })
    }
}

/// `[contacts]`: the region for phones and the address books the runner keeps current.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ContactsSection {
    region: Option<String>,
    #[serde(default)]
    sources: Vec<PimSection>,
}

/// `[calendar]`: the person's zone, addresses and working hours for calendar questions.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct CalendarSection {
    time_zone: Option<String>,
    #[serde(default)]
    me: Vec<String>,
    working_hours: Option<String>,
    #[serde(default)]
    sources: Vec<PimSection>,
}

/// `[agent]`: the chat turns' tier and bounds.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct AgentSection {
    tier: Option<String>,
    max_model_calls: Option<u32>,
    max_tool_calls: Option<u32>,
    deadline_secs: Option<u64>,
    max_turn_tokens: Option<u64>,
    max_concurrent_turns: Option<usize>,
    summary_tier: Option<String>,
    summary_chars: Option<usize>,
    context_chars: Option<usize>,
    notify_tier: Option<String>,
    notify_chars: Option<usize>,
    max_output_tokens: Option<u32>,
    max_turn_cost_usd: Option<f64>,
}

fn bad(what: &str, range: &str) -> ConfigError {
    ConfigError(format!("[agent] {what} must be {range}"))
}

/// `[agent] <what>` as a model tier (tier-1 … tier-6).
fn tier(what: &str, name: &str) -> Result<steward_core::llm::Capability, ConfigError> {
    steward_core::llm::Capability::parse(name)
        .filter(|c| *c != steward_core::llm::Capability::LocalEmbed)
        .ok_or_else(|| bad(what, "tier-1 … tier-6"))
}

/// `[agent] <what>` within `range`.
fn within<T: PartialOrd + std::fmt::Display + Copy>(
    what: &str,
    n: T,
    range: std::ops::RangeInclusive<T>,
) -> Result<T, ConfigError> {
    if range.contains(&n) {
        Ok(n)
    } else {
        Err(bad(what, &format!("{}..={}", range.start(), range.end())))
    }
}

impl AgentSection {
    fn apply_notify(&self, c: &mut NotifyConfig) -> Result<(), ConfigError> {
        if let Some(t) = self.notify_tier.as_deref() {
            c.capability = Some(tier("notify_tier", t)?);
        }
        if let Some(n) = self.notify_chars {
            c.max_chars = within("notify_chars", n, 80..=2_000)?;
        }
        Ok(())
    }

    fn apply(self, c: &mut AgentConfig) -> Result<(), ConfigError> {
        // The notification settings are checked here too, so a bad one fails either way.
        self.apply_notify(&mut NotifyConfig::default())?;
        if let Some(t) = self.tier.as_deref() {
            c.capability = Some(tier("tier", t)?);
        }
        if let Some(n) = self.max_model_calls {
            c.max_model_calls = within("max_model_calls", n, 1..=100)?;
        }
        if let Some(n) = self.max_tool_calls {
            c.max_tool_calls = within("max_tool_calls", n, 1..=200)?;
        }
        if let Some(n) = self.deadline_secs {
            c.deadline = std::time::Duration::from_secs(within("deadline_secs", n, 10..=3_600)?);
        }
        if let Some(n) = self.max_turn_tokens {
            c.max_turn_tokens = within("max_turn_tokens", n, 1_000..=10_000_000)?;
        }
        if let Some(t) = self.summary_tier.as_deref() {
            c.summary_capability = Some(tier("summary_tier", t)?);
        }
        if let Some(n) = self.context_chars {
            c.context_chars = within("context_chars", n, 10_000..=2_000_000)?;
        }
        if let Some(n) = self.summary_chars {
            c.summary_chars = within("summary_chars", n, 200..=50_000)?;
        }
        if let Some(usd) = self.max_turn_cost_usd {
            let usd = within("max_turn_cost_usd", usd, 0.01..=1_000.0)?;
            #[allow(clippy::cast_possible_truncation)]
            let micros = (usd * 1_000_000.0).round() as i64;
            c.max_turn_cost_micros = micros;
        }
        if let Some(n) = self.max_output_tokens {
            c.max_output_tokens = within("max_output_tokens", n, 256..=65_536)?;
        }
        if let Some(n) = self.max_concurrent_turns {
            c.max_concurrent_turns = within("max_concurrent_turns", n, 1..=64)?;
        }
        Ok(())
    }
}

/// `[tools]`: per-tool bounds.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ToolsSection {
    /// `[tools.result_chars]`: tool name → characters of result text.
    #[serde(default)]
    result_chars: std::collections::BTreeMap<String, usize>,
}

fn read_config(home: &Path) -> Result<ConfigFile, ConfigError> {
    let path = home.join(crate::mail::smtp::CONFIG_FILE);
    match std::fs::read_to_string(&path) {
        Ok(text) => {
            toml::from_str(&text).map_err(|e| ConfigError(format!("{}: {e}", path.display())))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(ConfigFile::default()),
        Err(e) => Err(ConfigError(format!("{}: {e}", path.display()))),
    }
}

fn expand(path: &Path) -> PathBuf {
    match path.strip_prefix("~") {
        Ok(rest) => std::env::var_os("HOME")
            .map_or_else(|| path.to_path_buf(), |h| PathBuf::from(h).join(rest)),
        Err(_) => path.to_path_buf(),
    }
}

/// The mail sources `<home>/config.toml` configures (`[[mail.sources]]`), in order. A source
/// whose path does not exist is kept: the reconcile job reports it each run.
pub fn mail_sources(home: &Path) -> Result<Vec<ConfiguredSource>, ConfigError> {
    let path = home.join(crate::mail::smtp::CONFIG_FILE);
    let bad = |what: String| ConfigError(format!("{}: {what}", path.display()));
    let file = read_config(home)?;
    let Some(mail) = file.mail else { return Ok(Vec::new()) };
    // Only the sources are read here; the rest of [mail] is the SMTP configuration's.
    let sources = match mail.get("sources") {
        None => return Ok(Vec::new()),
        Some(v) => MailSection {
            sources: v.clone().try_into().map_err(|e| bad(format!("[[mail.sources]]: {e}")))?,
        },
    };
    if sources.sources.len() > MAX_MAIL_SOURCES {
        return Err(bad(format!("at most {MAX_MAIL_SOURCES} [[mail.sources]]")));
    }
    sources
        .sources
        .into_iter()
        .map(|s| {
            let root = expand(&s.path);
            let source: Arc<dyn MailSource> = match s.kind.as_str() {
                "maildir" => Arc::new(MaildirSource::new(&root)),
                "emlx" => Arc::new(EmlxSource::new(&root)),
                "mbox" => {
                    let flavor = match s.mbox_flavor.as_deref().unwrap_or("mboxrd") {
                        "mboxrd" => MboxFlavor::Mboxrd,
                        "mboxo" => MboxFlavor::Mboxo,
                        other => {
                            return Err(bad(format!("mbox_flavor {other:?}: use mboxrd or mboxo")));
                        }
                    };
                    Arc::new(MboxSource::new(&root).flavor(flavor))
                }
                other => {
                    return Err(bad(format!(
                        "[[mail.sources]] kind {other:?}: use maildir, mbox or emlx"
                    )));
                }
            };
            if s.mbox_flavor.is_some() && s.kind != "mbox" {
                return Err(bad("mbox_flavor is for kind = \"mbox\" only".to_owned()));
            }
            Ok(ConfiguredSource {
                name: s.name.unwrap_or_else(|| root.display().to_string()),
                account: s.account,
                source,
            })
        })
        .collect()
}

/// The calendars and address books `pim-sync` keeps current (`[[calendar.sources]]`,
/// `[[contacts.sources]]`; see [`crate::pim`]). A source whose path does not exist is kept:
/// each run reports it.
pub fn pim_sources(home: &Path) -> Result<Vec<Arc<dyn PimSource>>, ConfigError> {
    let (calendars, books) = pim_config(home)?;
    let mut out: Vec<Arc<dyn PimSource>> = Vec::new();
    out.extend(calendars.into_iter().map(|c| Arc::new(c) as Arc<dyn PimSource>));
    out.extend(books.into_iter().map(|b| Arc::new(b) as Arc<dyn PimSource>));
    Ok(out)
}

/// The calendar sources of `<home>/config.toml` that take writes (vdir and CalDAV; an `.ics`
/// file does not), for `calendar.create_event` and `calendar.delete_event` and their
/// confirmation. A CalDAV source whose secret cannot be read now is left out (its sync says
/// why).
pub fn calendar_targets(
    home: &Path,
) -> Result<Vec<Arc<dyn steward_core::calendar::write::CalendarTarget>>, ConfigError> {
    use crate::calendar::write::{DavTarget, VdirTarget};
    let (calendars, _) = pim_config(home)?;
    let mut out: Vec<Arc<dyn steward_core::calendar::write::CalendarTarget>> = Vec::new();
    for c in calendars {
        match c.kind {
            PimPlace::Vdir(root) => out.push(Arc::new(VdirTarget::new(c.account, root))),
            PimPlace::Dav(dav) => match crate::dav::DavClient::new(&dav) {
                Ok(client) => out.push(Arc::new(DavTarget::new(c.account, client))),
                Err(e) => tracing::warn!(source = %c.name, error = %e, "calendar not writable"),
            },
            PimPlace::File(_) => {}
        }
    }
    Ok(out)
}

/// `[[calendar.sources]]` and `[[contacts.sources]]`, read and checked.
pub(crate) fn pim_config(
    home: &Path,
) -> Result<(Vec<crate::pim::CalendarSourceConfig>, Vec<crate::pim::BookSourceConfig>), ConfigError>
{
    let path = home.join(crate::mail::smtp::CONFIG_FILE);
    let bad = |what: String| ConfigError(format!("{}: {what}", path.display()));
    let file = read_config(home)?;
    let (mut cal_out, mut book_out) = (Vec::new(), Vec::new());
    let calendars = file.calendar.map(|c| c.sources).unwrap_or_default();
    let (region, books) = match file.contacts {
        Some(c) => (c.region, c.sources),
        None => (None, Vec::new()),
    };
    if calendars.len() > MAX_MAIL_SOURCES || books.len() > MAX_MAIL_SOURCES {
        return Err(bad(format!(
            "at most {MAX_MAIL_SOURCES} calendar and {MAX_MAIL_SOURCES} contacts sources"
        )));
    }
    let region = crate::contacts::phone::parse_region(region.as_deref())
        .map_err(|e| bad(format!("[contacts] region: {e}")))?;
    let account = |a: Option<String>| a.unwrap_or_else(|| "local".to_owned());
    for s in calendars {
        cal_out.push(crate::pim::CalendarSourceConfig {
            name: s.name.clone().unwrap_or_else(|| s.default_name()),
            kind: s.read("calendar.sources", ["vdir", "ics", "caldav"]).map_err(&bad)?,
            account: account(s.account),
        });
    }
    for s in books {
        book_out.push(crate::pim::BookSourceConfig {
            name: s.name.clone().unwrap_or_else(|| s.default_name()),
            kind: s.read("contacts.sources", ["vdir", "vcf", "carddav"]).map_err(&bad)?,
            account: account(s.account),
            region,
        });
    }
    // A source retires what its account holds that it no longer lists: two sources in one
    // account would take turns removing each other's calendars or books.
    let twice = |accounts: Vec<&String>, section: &str| {
        let mut seen = std::collections::BTreeSet::new();
        match accounts.into_iter().find(|a| !seen.insert(*a)) {
            Some(a) => Err(bad(format!(
                "two [[{section}]] share account {a:?}: give each its own account = \"…\""
            ))),
            None => Ok(()),
        }
    };
    twice(cal_out.iter().map(|c| &c.account).collect(), "calendar.sources")?;
    twice(book_out.iter().map(|b| &b.account).collect(), "contacts.sources")?;
    Ok((cal_out, book_out))
}

/// The services the runner acts on, from `<home>/config.toml` and the environment: the mail
/// sources, the SMTP transport (absent, with the reason, when `[mail]` configures none) and
/// delivery into the protocol feed.
pub fn services(home: &Path) -> Result<Services, HomeError> {
    let mail_sources = mail_sources(home)?;
    let (transport, sender) = match SmtpConfig::load(home).and_then(SmtpSender::new) {
        Ok(smtp) => {
            let sender = smtp.sender().clone();
            (Ok(Arc::new(smtp) as Arc<dyn MailTransport>), Some(sender))
        }
        Err(e) => (Err(e.to_string()), None),
    };
    let pim_sources = pim_sources(home)?;
    let calendar_targets = calendar_targets(home)?;
    Ok(Services {
        mail_sources,
        pim_sources,
        calendar_targets,
        transport,
        sender,
        delivery: Arc::new(FeedDelivery),
        // The shared folders, watched so files-index runs soon after a change.
        triggers: match file_roots(home) {
            Ok(roots) if !roots.is_empty() => {
                vec![Arc::new(crate::files::RootsTrigger { roots, home: home.to_path_buf() })
                    as Arc<dyn steward_core::runner::Trigger>]
            }
            _ => Vec::new(),
        },
    })
}

/// The runner of `steward`'s home with its configured jobs and services. With a model
/// configured, watch notifications are written by its cheapest tier (`[agent] notify_tier`,
/// `notify_chars`), checked by code, with the event's own text as the fallback.
pub fn runner(steward: Arc<Steward>) -> Result<Runner, HomeError> {
    let config = RunnerConfig::load(steward.home())?;
    let mut services = services(steward.home())?;
    if steward.llm().is_ok() {
        let mut notify = NotifyConfig::default();
        notify.person = services.sender.as_ref().map(person_of);
        if let Some(section) = read_config(steward.home())?.agent {
            section.apply_notify(&mut notify)?;
        }
        if let Some(llm) = steward.llm_config() {
            notify.check(llm)?;
        }
        services.delivery =
            Arc::new(ComposedDelivery::new(Arc::clone(&steward), services.delivery, notify));
    }
    Ok(Runner::new(steward, config, services))
}

/// "Name <address>", as the host tells models who the person is.
fn person_of(s: &steward_core::outbox::Sender) -> String {
    match &s.from_name {
        Some(name) => format!("{name} <{}>", s.from),
        None => s.from.clone(),
    }
}

/// The tools of `steward`'s home: the core's, the mail write tools when outgoing mail is
/// configured, the train tools, the outside MCP servers' ([`crate::mcp`]), with the result budgets of `[tools.result_chars]`:
///
/// ```toml
/// [tools.result_chars]
/// "mail.read" = 6000
/// ```
pub fn toolbox(steward: Arc<Steward>) -> Result<Toolbox, HomeError> {
    let home = steward.home().to_path_buf();
    let mut tb = Toolbox::new(steward);
    let s = services(&home)?;
    if let (Ok(transport), Some(sender)) = (s.transport, s.sender) {
        tb = tb.with_mail_sender(transport, sender);
    }
    if !s.calendar_targets.is_empty() {
        tb = tb.with_calendar_targets(s.calendar_targets);
    }
    match crate::trains::ViaggiaTreno::from_env() {
        Ok(client) => crate::trains::tools::register(&mut tb, client)?,
        Err(e) => {
            for name in ["trains.next", "trains.status"] {
                tb.mark_unavailable(name, &e);
            }
        }
    }
    let config = read_config(&home)?;
    let mcp = crate::mcp::settings(config.mcp)?;
    tb.set_client_wait(mcp.wait_secs)?;
    crate::mcp::register(&mut tb, &home, mcp.servers)?;
    if let Some(tools) = config.tools {
        for (name, chars) in tools.result_chars {
            tb.set_budget(&name, chars)?;
        }
    }
    Ok(tb)
}

/// The agent of `steward`'s home over [`toolbox`], knowing the person by their configured
/// mail identity, with the tier and bounds of `[agent]`:
///
/// ```toml
/// [agent]
/// tier = "tier-3"            # default: the first of tier-3, 4, 2, 5, 6, 1 that takes tools
/// max_model_calls = 12       # per turn, 1..=100
/// max_tool_calls = 24        # per turn, 1..=200
/// deadline_secs = 300        # per turn, 10..=3600
/// max_turn_tokens = 400000   # per turn
/// max_turn_cost_usd = 2.0    # per turn, priced by [llm.rates] (unpriced models cost 0)
/// max_concurrent_turns = 8   # across chats, 1..=64
/// context_chars = 200000    # the model's context, 10000..=2000000
/// summary_tier = "tier-2"    # summarizes old messages (default: the tier below the chat's)
/// summary_chars = 4000       # longest summary, 200..=50000
/// notify_tier = "tier-1"     # writes watch notifications (default: the cheapest with a model)
/// notify_chars = 400         # longest notification, 80..=2000
/// max_output_tokens = 2048   # asked per model call (and the summary's ceiling), 256..=65536
/// ```
pub fn agent(steward: Arc<Steward>) -> Result<Agent, HomeError> {
    let person = services(steward.home())?.sender.as_ref().map(person_of);
    let mut config = AgentConfig::default();
    if let Some(section) = read_config(steward.home())?.agent {
        section.apply(&mut config)?;
    }
    let tb = toolbox(steward)?;
    config.person = person;
    Ok(Agent::open(Arc::new(tb), config)?)
}
