//! The OpenAI-compatible `/v1/embeddings` client.
//!
//! One POST per batch: `{"model", "input": [..], "encoding_format": "float"}`, plus
//! `"input_type": "passage" | "query"` when configured (servers of query/passage models such as
//! e5 read it; OpenAI itself does not want it). The answer's `data[i].index` places each
//! vector; a member missing from the answer comes back empty, so the queue retries it alone.
//! Attribution rides in `x-usage-service` / `x-usage-action` headers.
//!
//! Failures are classified for the queue: a transport error, a timeout, a 5xx, a 401/403 or an
//! unreadable answer → [`EmbedError::Unavailable`]; 429 → [`EmbedError::Throttled`] with its
//! `Retry-After`; any other 4xx → [`EmbedError::Rejected`] (this input was refused).

use std::{io::Read as _, time::Duration};

use serde::Deserialize;

use super::{EmbedConfig, MAX_RESPONSE_BYTES};
use crate::index::{EmbedError, Embedder};
use crate::net::{error_message, transport_error};

/// `Retry-After` assumed when a 429 gives none.
/// Fixed (not a setting).
pub const DEFAULT_RETRY_AFTER_SECS: u64 = 30;
/// The longest `Retry-After` honoured; a longer one is cut to this.
/// Fixed (not a setting).
pub const MAX_RETRY_AFTER_SECS: u64 = 3_600;
/// The service name sent in `x-usage-service`.
pub const USAGE_SERVICE: &str = "steward";

/// What a batch is for: documents to store, or a search query.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Purpose {
    Documents,
    Query,
    /// The calibration probes of a vector space (`index::calibration`), embedded as queries
    /// once per process.
    Probes,
}

impl Purpose {
    fn input_type(self) -> &'static str {
        match self {
            Self::Documents => "passage",
            Self::Query | Self::Probes => "query",
        }
    }

    fn action(self) -> &'static str {
        match self {
            Self::Documents => "embed.mail",
            Self::Query => "search.query",
            Self::Probes => "search.calibration",
        }
    }
}

#[derive(Deserialize)]
struct Answer {
    data: Vec<Item>,
    #[serde(default)]
    usage: Option<AnswerUsage>,
}

#[derive(Deserialize)]
struct AnswerUsage {
    #[serde(default)]
    prompt_tokens: u64,
}

#[derive(Deserialize)]
struct Item {
    index: usize,
    embedding: Vec<f32>,
}

/// An [`Embedder`] over an OpenAI-compatible HTTP endpoint. Its calls block (the queue and
/// search run on blocking threads); it keeps connections alive between calls.
pub struct OpenAiEmbedder {
    config: EmbedConfig,
    url: String,
    http: crate::net::LazyClient<reqwest::blocking::Client>,
    ledger: Option<std::sync::Arc<crate::llm::SharedLedger>>,
}

impl std::fmt::Debug for OpenAiEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiEmbedder").field("config", &self.config).finish_non_exhaustive()
    }
}

impl OpenAiEmbedder {
    /// A client for `config` (checked by [`EmbedConfig::validate`]).
    pub fn new(config: EmbedConfig) -> Result<Self, super::EmbedConfigError> {
        config.validate()?;
        let (timeout, connect) =
            (config.timeout, Duration::from_secs(config.timeout.as_secs().clamp(1, 10)));
        let http = crate::net::LazyClient::new(move || {
            reqwest::blocking::Client::builder().timeout(timeout).connect_timeout(connect).build()
        });
        let base = config.endpoint.trim_end_matches('/');
        let url = if base.ends_with("/embeddings") {
            base.to_owned()
        } else {
            format!("{base}/embeddings")
        };
        Ok(Self { config, url, http, ledger: None })
    }

    /// Records every request in `ledger` (capability `local-embed`, service `steward`, action
    /// `embed.mail` or `search.query`, prompt tokens when the endpoint reports them).
    #[must_use]
    pub fn with_ledger(mut self, ledger: std::sync::Arc<crate::llm::SharedLedger>) -> Self {
        self.ledger = Some(ledger);
        self
    }

    fn call(&self, texts: &[&str], purpose: Purpose) -> Result<Vec<Vec<f32>>, EmbedError> {
        let at = crate::time::now_secs();
        let started = std::time::Instant::now();
        let result = self.request(texts, purpose);
        if let Some(ledger) = &self.ledger {
            let latency_ms = i64::try_from(started.elapsed().as_millis()).unwrap_or(i64::MAX);
            let (outcome, tokens, status, error) = match &result {
                Ok((_, tokens)) => ("ok", *tokens, Some(200), None),
                Err(e) => ("failed", 0, None, Some(e.to_string())),
            };
            let record = crate::llm::RequestRecord {
                at,
                service: Some(USAGE_SERVICE.to_owned()),
                action: Some(purpose.action().to_owned()),
                capability: crate::llm::Capability::LocalEmbed.as_str().to_owned(),
                target: Some("embed".to_owned()),
                model: Some(self.config.model.clone()),
                outcome,
                streamed: false,
                usage: crate::llm::TokenUsage { input: tokens, ..Default::default() },
                cost_micros: 0,
                priced: false,
                latency_ms,
                error: error.clone(),
            };
            let attempt = crate::llm::AttemptRecord {
                target: "embed".to_owned(),
                model: self.config.model.clone(),
                status,
                outcome,
                latency_ms,
                error,
                stream_mode: crate::llm::STREAM_NONE,
                headers_ms: None,
            };
            if let Err(e) = ledger.get().and_then(|l| l.record(&record, &[attempt])) {
                tracing::warn!(error = %e, "the usage ledger could not record an embedding request");
            }
        }
        result.map(|(v, _)| v)
    }

    /// The configuration.
    pub fn config(&self) -> &EmbedConfig {
        &self.config
    }

    /// One request: the vectors and the prompt tokens the endpoint reported.
    fn request(
        &self,
        texts: &[&str],
        purpose: Purpose,
    ) -> Result<(Vec<Vec<f32>>, u64), EmbedError> {
        let mut body = serde_json::json!({
            "model": self.config.model,
            "input": texts,
            "encoding_format": "float",
        });
        if self.config.input_type {
            body["input_type"] = purpose.input_type().into();
        }
        let mut req = self
            .http
            .get()
            .map_err(EmbedError::Unavailable)?
            .post(&self.url)
            .header("x-usage-service", USAGE_SERVICE)
            .header("x-usage-action", purpose.action())
            .json(&body);
        if let Some(key) = &self.config.api_key {
            req = req.bearer_auth(key);
        }
        let resp = req.send().map_err(|e| EmbedError::Unavailable(transport_error(e)))?;
        let status = resp.status();
        if status.as_u16() == 429 {
            let retry_after_secs = resp
                .headers()
                .get(reqwest::header::RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse::<u64>().ok())
                .unwrap_or(DEFAULT_RETRY_AFTER_SECS)
                .min(MAX_RETRY_AFTER_SECS);
            return Err(EmbedError::Throttled { retry_after_secs });
        }
        let mut raw = Vec::new();
        resp.take(MAX_RESPONSE_BYTES + 1)
            .read_to_end(&mut raw)
            .map_err(|e| EmbedError::Unavailable(format!("reading the answer: {e}")))?;
        if raw.len() as u64 > MAX_RESPONSE_BYTES {
            return Err(EmbedError::Unavailable(format!(
                "the answer is larger than {MAX_RESPONSE_BYTES} bytes"
            )));
        }
        if !status.is_success() {
            let detail = error_message(&raw);
            let msg = format!("HTTP {}: {detail}", status.as_u16());
            return Err(match status.as_u16() {
                401 | 403 => EmbedError::Unavailable(format!(
                    "{msg} (check STEWARD_EMBED_API_KEY / [embed] api_key)"
                )),
                400..=499 => EmbedError::Rejected(msg),
                _ => EmbedError::Unavailable(msg),
            });
        }
        let answer: Answer = serde_json::from_slice(&raw)
            .map_err(|e| EmbedError::Unavailable(format!("malformed answer: {e}")))?;
        let mut out = vec![Vec::new(); texts.len()];
        for item in answer.data {
            if let Some(slot) = out.get_mut(item.index) {
                *slot = item.embedding;
            }
        }
        Ok((out, answer.usage.map_or(0, |u| u.prompt_tokens)))
    }
}

impl Embedder for OpenAiEmbedder {
    fn model(&self) -> &str {
        &self.config.model
    }

    fn dimension(&self) -> Option<usize> {
        self.config.dimension
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.call(texts, Purpose::Documents)
    }

    fn embed_query(&self, text: &str) -> Result<Vec<f32>, EmbedError> {
        let capped: String = text.chars().take(super::MAX_SOURCE_CHARS).collect();
        let mut v = self.call(&[&capped], Purpose::Query)?;
        match v.pop() {
            Some(q) if !q.is_empty() => Ok(q),
            _ => Err(EmbedError::Unavailable("the answer had no vector for the query".into())),
        }
    }

    fn embed_probes(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let v = self.call(texts, Purpose::Probes)?;
        if v.len() != texts.len() || v.iter().any(Vec::is_empty) {
            return Err(EmbedError::Unavailable(
                "the answer had no vector for every probe query".into(),
            ));
        }
        Ok(v)
    }

    fn max_distance(&self) -> f32 {
        self.config.max_distance
    }

    fn batch_size(&self) -> usize {
        self.config.batch_size
    }
}
