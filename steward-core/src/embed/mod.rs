//! Embeddings: the OpenAI-compatible client ([`OpenAiEmbedder`]), its configuration
//! ([`EmbedConfig`]) and the mail embedding queue ([`drain`], `Steward::embed_mail`).
//!
//! # The queue
//! The source of a message is its subject, a blank line and its body, cut at
//! [`MAX_SOURCE_CHARS`] characters before any request. Its SHA-256 is kept per message in
//! `vectors.db` (`embed_state`: model, dimension, hash, time, attempts, last error); a drain
//! looks at messages in id order, [`SCAN_PAGE`] at a time, and embeds those whose state is
//! missing, of another model, or of another hash, in batches of [`EmbedConfig::batch_size`]
//! (default [`EMBED_BATCH`]). Vectors and state are written in one transaction per batch, so a
//! crash loses at most the batch in flight and never leaves a vector without its state.
//!
//! # What a drain looks at
//! Work is proportional to what changed. A drain that completes (nothing left, the endpoint
//! answering) records a watermark in `vectors.db`: its model and dimension, and how far the
//! mirror's sync runs were when it started — the last run up to which every run had finished,
//! and the newest run with its start time (to recognize the mirror). Every message a sync run
//! writes (new, changed, soft-deleted, restored) gets `updated_at` = that run's start, and only
//! sync runs write messages; so the next drain reads the runs after the watermark (by primary
//! key) and looks only at the messages written at or after the earliest of their starts, plus
//! the failures still to retry (an index of failed states). A soft-deleted message among them
//! loses its state and vectors. When there is nothing to look at, a drain reads no message,
//! hashes nothing, asks the endpoint nothing — unless its last probe is older than
//! [`REPROBE_AFTER`], which is how a new dimension under the same model name is noticed — and
//! reports up-to-date and given-up messages from counts kept in `vectors.db`.
//!
//! A drain reads and hashes every live message instead (and drops the state of messages gone
//! from the mirror) when there is no watermark, when the model or the configured dimension is
//! not the watermark's, when the probe answers in another dimension, when the mirror is not
//! the one the watermark was taken on (its newest run missing or another), and after
//! [`VectorStore::forget_embed_watermark`](crate::index::VectorStore::forget_embed_watermark).
//! A drain stopped early (cancelled, bounded, the endpoint failing) leaves the watermark where
//! it was, so the next one looks at the same messages again.
//!
//! Failures never lose work and never block healthy items:
//! - a drain starts with a probe (one short text): it learns the dimension the endpoint
//!   returns, and an endpoint that is down ends the drain at once, without charging anything
//!   to any message;
//! - a member of a successful batch that comes back missing, non-finite, all zeros or of the
//!   wrong dimension is retried alone;
//! - a batch the endpoint refuses or fails is probed again: probe failing → the endpoint is
//!   unavailable, stop (back off); probe working → the batch's members are retried one by one,
//!   and only the ones that fail alone are charged to their message (so one malformed input
//!   cannot hold back the other 31, and a lone bad input at the end of the queue is not
//!   mistaken for an outage, which "every single failed" would do);
//! - a message charged [`MAX_ITEM_ATTEMPTS`] times for the same source and model is given up
//!   until its text or the model changes (reported, never retried in a loop);
//! - 429 stops the drain with the server's `Retry-After`.
//!
//! Vector spaces never mix: the store keeps one space per (model, dimension), and a drain that
//! finds the endpoint answering in another model or dimension drops the incompatible spaces and
//! their state ([`VectorStore::reset_incompatible`]) before writing. Lexical search never
//! waits on any of this: a search whose embedder fails is lexical and says so.
//!
//! # Scheduling
//! [`EmbedSchedule`] says when to drain next: a backlog drains with short delays
//! ([`BACKLOG_DELAY`]), an idle queue waits [`IDLE_DELAY`], an unavailable endpoint backs off
//! from [`UNAVAILABLE_FIRST_DELAY`] doubling to [`UNAVAILABLE_MAX_DELAY`] (or the server's
//! `Retry-After`, whichever is longer).

mod client;
mod queue;

use std::{path::Path, time::Duration};

use serde::Deserialize;

pub use client::{DEFAULT_RETRY_AFTER_SECS, MAX_RETRY_AFTER_SECS, OpenAiEmbedder, USAGE_SERVICE};
pub(crate) use queue::EmbedWatermark;
pub use queue::{
    EmbedOptions, EmbedProgress, EmbedReport, EmbedRunError, EmbedSchedule, drain,
    drain_until_done, source_text,
};

use crate::{
    error::{ErrorKind, StewardError},
    index::{DEFAULT_MAX_VECTOR_DISTANCE, Embedder, MAX_DIMENSION},
};

/// The configuration file in a Steward home; embedding reads its `[embed]` table.
pub const CONFIG_FILE: &str = "config.toml";
/// Characters of a message's source text sent to the embedder.
/// Fixed (not a setting).
pub const MAX_SOURCE_CHARS: usize = 2_000;
/// Messages per embedding request, by default.
/// Default of `[embed] batch_size`.
pub const EMBED_BATCH: usize = 32;
/// The largest batch size accepted in configuration: the upper end of `[embed] batch_size`.
pub const MAX_EMBED_BATCH: usize = 256;
/// Messages read from the mirror per step of a drain.
/// Fixed (not a setting).
pub const SCAN_PAGE: usize = 512;
/// Failures charged to a message (same source, same model) before it is given up.
/// Fixed (not a setting).
pub const MAX_ITEM_ATTEMPTS: u32 = 3;
/// The request timeout, by default: a CPU-only local model takes ~20 s for a batch of 32
/// messages of 2,000 characters on two cores.
/// Default of `[embed] timeout_secs`.
pub const DEFAULT_TIMEOUT_SECS: u64 = 120;
/// The longest request timeout accepted.
/// The upper end of `[embed] timeout_secs`.
pub const MAX_TIMEOUT_SECS: u64 = 600;
/// The largest answer read from an endpoint.
/// Fixed (not a setting).
pub const MAX_RESPONSE_BYTES: u64 = 64 * 1024 * 1024;
/// The text a drain embeds first, to learn the dimension and whether the endpoint is up.
pub const PROBE_TEXT: &str = "steward embedding probe";
/// Delay between drains while a backlog remains.
/// Fixed (not a setting).
pub const BACKLOG_DELAY: Duration = Duration::from_secs(1);
/// Delay between drains when nothing was pending.
/// Fixed (not a setting).
pub const IDLE_DELAY: Duration = Duration::from_secs(60);
/// A drain with nothing to look at asks the endpoint nothing unless its last answer is older
/// than this (then one probe: a changed dimension starts a full pass).
/// Fixed (not a setting).
pub const REPROBE_AFTER: Duration = Duration::from_secs(3_600);
/// First delay after the endpoint was unavailable; it doubles with each failed drain.
/// Fixed (not a setting).
pub const UNAVAILABLE_FIRST_DELAY: Duration = Duration::from_secs(15);
/// Longest delay after the endpoint was unavailable.
/// Fixed (not a setting).
pub const UNAVAILABLE_MAX_DELAY: Duration = Duration::from_secs(600);

/// A configuration that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("embedding configuration: {0}")]
pub struct EmbedConfigError(pub String);

impl StewardError for EmbedConfigError {
    fn code(&self) -> &'static str {
        "EMBED_CONFIG_INVALID"
    }

    fn kind(&self) -> ErrorKind {
        ErrorKind::InvalidInput
    }
}

/// Where and how to embed.
#[derive(Clone, PartialEq)]
pub struct EmbedConfig {
    /// Base URL of the OpenAI-compatible API (`http://127.0.0.1:8000/v1`), or the full
    /// `…/embeddings` URL.
    pub endpoint: String,
    /// The model asked for; with the dimension it names the vector space.
    pub model: String,
    /// Bearer key, if the endpoint wants one (never printed).
    pub api_key: Option<String>,
    /// The dimension expected; answers of another length are refused. `None`: learned from
    /// the endpoint.
    pub dimension: Option<usize>,
    /// Per request.
    pub timeout: Duration,
    /// Send `input_type` (`passage` for messages, `query` for searches).
    pub input_type: bool,
    /// Messages per request (1..=[`MAX_EMBED_BATCH`]).
    pub batch_size: usize,
    /// The farthest cosine distance that still counts as a semantic match for this model.
    pub max_distance: f32,
}

impl std::fmt::Debug for EmbedConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmbedConfig")
            .field("endpoint", &self.endpoint)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("dimension", &self.dimension)
            .field("timeout", &self.timeout)
            .field("input_type", &self.input_type)
            .field("batch_size", &self.batch_size)
            .field("max_distance", &self.max_distance)
            .finish()
    }
}

#[derive(Debug, Default, Deserialize)]
struct ConfigFile {
    #[serde(default)]
    embed: Section,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Section {
    endpoint: Option<String>,
    model: Option<String>,
    api_key: Option<String>,
    dimension: Option<usize>,
    timeout_secs: Option<u64>,
    input_type: Option<bool>,
    batch_size: Option<usize>,
    max_distance: Option<f32>,
}

impl EmbedConfig {
    /// A configuration with the defaults for `endpoint` and `model`.
    pub fn new(endpoint: &str, model: &str) -> Self {
        Self {
            endpoint: endpoint.to_owned(),
            model: model.to_owned(),
            api_key: None,
            dimension: None,
            timeout: Duration::from_secs(DEFAULT_TIMEOUT_SECS),
            input_type: false,
            batch_size: EMBED_BATCH,
            max_distance: DEFAULT_MAX_VECTOR_DISTANCE,
        }
    }

    /// Reads `<home>/config.toml` (`[embed]`: `endpoint`, `model`, `api_key`, `dimension`,
    /// `timeout_secs`, `input_type`, `batch_size`, `max_distance`), then the environment, which
    /// wins: `STEWARD_EMBED_ENDPOINT` (or `off`), `STEWARD_EMBED_MODEL`,
    /// `STEWARD_EMBED_API_KEY`, `STEWARD_EMBED_DIMENSION`, `STEWARD_EMBED_TIMEOUT_SECS`,
    /// `STEWARD_EMBED_INPUT_TYPE` (`true`/`false`). `None` when no endpoint is set or it is
    /// `off`: search is then lexical.
    pub fn load(home: &Path) -> Result<Option<Self>, EmbedConfigError> {
        Self::load_with(home, &|k| std::env::var(k).ok())
    }

    /// [`EmbedConfig::load`] with the environment given as a lookup (tests, embedders).
    pub fn load_with(
        home: &Path,
        vars: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Option<Self>, EmbedConfigError> {
        let path = home.join(CONFIG_FILE);
        let file: ConfigFile = match std::fs::read_to_string(&path) {
            Ok(text) => toml::from_str(&text)
                .map_err(|e| EmbedConfigError(format!("{}: {e}", path.display())))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => ConfigFile::default(),
            Err(e) => return Err(EmbedConfigError(format!("{}: {e}", path.display()))),
        };
        let env = |k: &str| vars(k).map(|v| v.trim().to_owned()).filter(|v| !v.is_empty());
        let s = file.embed;
        let Some(endpoint) = env("STEWARD_EMBED_ENDPOINT").or(s.endpoint) else {
            return Ok(None);
        };
        if endpoint.eq_ignore_ascii_case("off") {
            return Ok(None);
        }
        let model = env("STEWARD_EMBED_MODEL").or(s.model).ok_or_else(|| {
            EmbedConfigError(format!(
                "an endpoint is set but no model: set STEWARD_EMBED_MODEL or [embed] model in {}",
                path.display()
            ))
        })?;
        let number = |var: &str| -> Result<Option<u64>, EmbedConfigError> {
            env(var)
                .map(|v| v.parse::<u64>().map_err(|_| EmbedConfigError(format!("{var}={v:?}"))))
                .transpose()
        };
        let mut c = Self::new(&endpoint, &model);
        c.api_key = env("STEWARD_EMBED_API_KEY").or(s.api_key);
        c.dimension = number("STEWARD_EMBED_DIMENSION")?
            .map(|d| usize::try_from(d).unwrap_or(usize::MAX))
            .or(s.dimension);
        if let Some(t) = number("STEWARD_EMBED_TIMEOUT_SECS")?.or(s.timeout_secs) {
            c.timeout = Duration::from_secs(t);
        }
        c.input_type = match env("STEWARD_EMBED_INPUT_TYPE") {
            Some(v) => match v.to_ascii_lowercase().as_str() {
                "true" | "1" | "yes" => true,
                "false" | "0" | "no" => false,
                _ => return Err(EmbedConfigError(format!("STEWARD_EMBED_INPUT_TYPE={v:?}"))),
            },
            None => s.input_type.unwrap_or(false),
        };
        if let Some(b) = s.batch_size {
            c.batch_size = b;
        }
        if let Some(d) = s.max_distance {
            c.max_distance = d;
        }
        c.validate()?;
        Ok(Some(c))
    }

    /// Refuses what cannot work or is unsafe: a non-HTTP endpoint, a key sent in clear text to
    /// another machine, bounds out of range.
    pub fn validate(&self) -> Result<(), EmbedConfigError> {
        let err = |m: String| Err(EmbedConfigError(m));
        let lower = self.endpoint.to_ascii_lowercase();
        let rest = if let Some(r) = lower.strip_prefix("https://") {
            r
        } else if let Some(r) = lower.strip_prefix("http://") {
            if self.api_key.is_some() && !is_loopback_authority(r) {
                return err(format!(
                    "{} is plain HTTP to another machine: the API key would travel in clear text (use https)",
                    self.endpoint
                ));
            }
            r
        } else {
            return err(format!("endpoint {:?}: use an http:// or https:// URL", self.endpoint));
        };
        if rest.is_empty() || rest.starts_with('/') {
            return err(format!("endpoint {:?} has no host", self.endpoint));
        }
        if self.model.trim().is_empty() {
            return err("the model name is empty".into());
        }
        if let Some(d) = self.dimension
            && (d == 0 || !d.is_multiple_of(8) || d > MAX_DIMENSION)
        {
            return err(format!("dimension {d}: a multiple of 8, at most {MAX_DIMENSION}"));
        }
        if self.timeout.is_zero() || self.timeout > Duration::from_secs(MAX_TIMEOUT_SECS) {
            return err(format!("timeout: 1 to {MAX_TIMEOUT_SECS} seconds"));
        }
        if !(1..=MAX_EMBED_BATCH).contains(&self.batch_size) {
            return err(format!("batch_size {}: 1 to {MAX_EMBED_BATCH}", self.batch_size));
        }
        if !(self.max_distance > 0.0 && self.max_distance <= 2.0) {
            return err(format!("max_distance {}: above 0, at most 2", self.max_distance));
        }
        Ok(())
    }
}

/// Whether a URL's remainder after `scheme://` starts with a loopback host.
fn is_loopback_authority(rest: &str) -> bool {
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host = authority.rsplit('@').next().unwrap_or("");
    let host = if let Some(v6) = host.strip_prefix('[') {
        v6.split(']').next().unwrap_or("")
    } else {
        host.split(':').next().unwrap_or("")
    };
    host == "localhost" || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// The embedder configured for `home` ([`EmbedConfig::load`]), recording its requests in
/// `ledger`, or `None` when embedding is off (what `StewardBuilder::embedder_from_config`
/// uses). Nothing is opened or connected until the first request.
pub fn configured(
    home: &Path,
    ledger: std::sync::Arc<crate::llm::SharedLedger>,
) -> Result<Option<std::sync::Arc<dyn Embedder>>, EmbedConfigError> {
    match EmbedConfig::load(home)? {
        Some(c) => Ok(Some(std::sync::Arc::new(OpenAiEmbedder::new(c)?.with_ledger(ledger)))),
        None => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(toml: &str, vars: &[(&str, &str)]) -> Result<Option<EmbedConfig>, EmbedConfigError> {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(CONFIG_FILE), toml).unwrap();
        let vars: Vec<(String, String)> =
            vars.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
        EmbedConfig::load_with(dir.path(), &|k| {
            vars.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone())
        })
    }

    #[test]
    fn off_unless_an_endpoint_is_set() {
        assert_eq!(load("", &[]).unwrap(), None);
        assert_eq!(load("[mail]\nfrom = \"a@b\"\n", &[]).unwrap(), None);
        let on = "[embed]\nendpoint = \"http://127.0.0.1:9/v1\"\nmodel = \"m\"\n";
        assert!(load(on, &[]).unwrap().is_some());
        assert_eq!(load(on, &[("STEWARD_EMBED_ENDPOINT", "off")]).unwrap(), None);
    }

    #[test]
    fn the_environment_wins_and_bounds_are_checked() {
        let file =
            "[embed]\nendpoint = \"http://127.0.0.1:9/v1\"\nmodel = \"m\"\ndimension = 384\n";
        let c = load(file, &[("STEWARD_EMBED_MODEL", "e5"), ("STEWARD_EMBED_INPUT_TYPE", "true")])
            .unwrap()
            .unwrap();
        assert_eq!((c.model.as_str(), c.dimension, c.input_type), ("e5", Some(384), true));
        for (var, val) in [
            ("STEWARD_EMBED_DIMENSION", "100"),
            ("STEWARD_EMBED_TIMEOUT_SECS", "0"),
            ("STEWARD_EMBED_TIMEOUT_SECS", "ten"),
            ("STEWARD_EMBED_INPUT_TYPE", "maybe"),
            ("STEWARD_EMBED_ENDPOINT", "ftp://host/v1"),
        ] {
            let e = load(file, &[(var, val)]).unwrap_err();
            assert_eq!(e.code(), "EMBED_CONFIG_INVALID", "{var}={val}");
        }
        assert!(load("[embed]\nendpoint = \"http://127.0.0.1:9\"\n", &[]).is_err(), "no model");
        assert!(load("[embed]\nendpont = \"x\"\n", &[]).is_err(), "a misspelt key is an error");
    }

    #[test]
    fn a_key_never_travels_in_clear_text_to_another_machine() {
        let mut c = EmbedConfig::new("http://models.example.com/v1", "m");
        assert!(c.validate().is_ok(), "no key: plain HTTP is the operator's choice");
        c.api_key = Some("sk-secret".into());
        assert!(c.validate().is_err());
        for ok in [
            "https://models.example.com/v1",
            "http://127.0.0.1:8000/v1",
            "http://[::1]:8/v1",
            "http://localhost/v1",
        ] {
            c.endpoint = ok.into();
            assert!(c.validate().is_ok(), "{ok}");
        }
        assert!(!format!("{c:?}").contains("sk-secret"), "Debug never prints the key");
    }
}
