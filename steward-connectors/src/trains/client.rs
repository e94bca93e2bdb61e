//! The ViaggiaTreno HTTP client and the `train` watch source.
//!
//! Plain HTTP (the service has no verified HTTPS), a 10 s timeout, at most two attempts per
//! request (a second only after a transport error or a 5xx), 204 = no live data, pipe-separated
//! text for autocomplete and JSON elsewhere, bodies capped at [`MAX_RESPONSE_BYTES`] as they
//! are read; the base URL from `VIAGGIATRENO_BASE_URL`.

use std::time::Duration;

use base64::Engine as _;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use steward_core::watch::{DomainEvent, GrantFields, SourceError, WatchAdapter, WatchRule};

use super::{Station, StationSource, TrainSnapshot, normalize_run, train_events};

/// The public endpoint.
pub const DEFAULT_BASE_URL: &str = "http://www.viaggiatreno.it/infomobilita/resteasy/viaggiatreno/";
/// Per request.
/// Fixed (not a setting).
pub const REQUEST_TIMEOUT_SECS: u64 = 10;
/// Attempts per request.
/// Fixed (not a setting).
pub const MAX_ATTEMPTS: usize = 2;
/// Largest response body read: a longer one is refused ([`FetchError::TooLarge`]) as soon as
/// it passes this, whatever its `Content-Length` said (or without one, as a chunked body).
/// Fixed (not a setting).
pub const MAX_RESPONSE_BYTES: u64 = 4 * 1024 * 1024;
/// A train watch is kept this long after scheduled arrival (else departure).
/// Fixed (not a setting).
pub const EXPIRY_AFTER_SECS: i64 = 2 * 3_600;
/// Without any schedule, a train watch is kept this long from creation.
/// Fixed (not a setting).
pub const FALLBACK_EXPIRY_SECS: i64 = 8 * 3_600;

/// What a request found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fetched {
    /// 200 with this body.
    Body(String),
    /// 204: no live data (a train not running today, an unknown train at a valid station).
    NoData,
    /// 404: no such resource.
    NotFound,
}

/// Why a request failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FetchError {
    /// The body went over `limit` bytes ([`MAX_RESPONSE_BYTES`]): declared so, or read so (reading
    /// stopped there). Not retried.
    #[error("{path}: response over {limit} bytes")]
    TooLarge {
        /// The request path.
        path: String,
        /// The cap.
        limit: u64,
    },
    /// An HTTP status other than 200, 204 and 404 (a 5xx only after the last attempt).
    #[error("{path}: HTTP {status}")]
    Status {
        /// The request path.
        path: String,
        /// The status code.
        status: u16,
    },
    /// The connection, the request or the body read failed (a timeout included).
    #[error("{path}: {message}")]
    Transport {
        /// The request path.
        path: String,
        /// What failed.
        message: String,
    },
    /// The HTTP client or the request's runtime could not be made.
    #[error("{0}")]
    Setup(String),
}

/// The lookups above the client report failures in words.
impl From<FetchError> for String {
    fn from(e: FetchError) -> Self {
        e.to_string()
    }
}

/// The client. Its calls block (the watch engine's adapters are synchronous); each request
/// runs on a current-thread runtime made for it (see [`ViaggiaTreno::get`]), so the client
/// holds no runtime of its own and may be created, called or dropped on any thread. Its HTTP
/// client is built on the first request ([`steward_core::net::LazyClient`]), so registering the
/// source costs nothing; it keeps no idle connections, since a pooled connection would belong
/// to the runtime of the request that opened it, gone once that request returns.
#[derive(Debug, Clone)]
pub struct ViaggiaTreno {
    base: String,
    http: std::sync::Arc<steward_core::net::LazyClient<reqwest::Client>>,
}

impl ViaggiaTreno {
    /// A client for `base` (ending in `/`).
    pub fn new(base: &str) -> Result<Self, String> {
        let base = if base.ends_with('/') { base.to_owned() } else { format!("{base}/") };
        let http = steward_core::net::LazyClient::new(|| {
            reqwest::Client::builder()
                .timeout(Duration::from_secs(REQUEST_TIMEOUT_SECS))
                .pool_max_idle_per_host(0)
                .build()
        });
        Ok(Self { base, http: std::sync::Arc::new(http) })
    }

    /// `VIAGGIATRENO_BASE_URL`, else the public endpoint.
    pub fn from_env() -> Result<Self, String> {
        Self::new(
            &std::env::var("VIAGGIATRENO_BASE_URL").unwrap_or_else(|_| DEFAULT_BASE_URL.to_owned()),
        )
    }

    /// GET `path` (already escaped) with the retry rule. Blocks the calling thread until the
    /// answer, and works from any thread:
    ///
    /// - with no tokio runtime current (the CLI, a plain thread), the request's current-thread
    ///   runtime runs right here;
    /// - with one current (a `spawn_blocking` thread of `steward serve` or of the FFI's async
    ///   calls, or an async worker), the same runtime runs on a scoped thread of its own, joined
    ///   before returning. A worker thread may not start a runtime (tokio panics), and a blocking
    ///   pool thread cannot be told apart from one, so any current runtime means the hop. The
    ///   request then needs nothing from the caller's runtime (which may lack an I/O driver, or
    ///   be a current-thread runtime whose only thread is this one) and leaves nothing on it; the
    ///   hop costs one thread spawn, nothing next to a network round trip. A caller on an async
    ///   worker still holds that worker for the request (at most [`MAX_ATTEMPTS`] ×
    ///   [`REQUEST_TIMEOUT_SECS`]) and should use `spawn_blocking`, but it neither panics nor
    ///   deadlocks.
    pub fn get(&self, path: &str) -> Result<Fetched, FetchError> {
        if tokio::runtime::Handle::try_current().is_err() {
            return self.get_here(path);
        }
        std::thread::scope(|s| {
            s.spawn(|| self.get_here(path)).join().unwrap_or_else(|_| {
                Err(FetchError::Setup(format!("{path}: the request's thread panicked")))
            })
        })
    }

    /// [`ViaggiaTreno::get`] on this thread, which must have no runtime current.
    fn get_here(&self, path: &str) -> Result<Fetched, FetchError> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| FetchError::Setup(format!("cannot start an HTTP runtime: {e}")))?;
        runtime.block_on(self.fetch(path))
    }

    async fn fetch(&self, path: &str) -> Result<Fetched, FetchError> {
        let url = format!("{}{path}", self.base);
        let http = self.http.get().map_err(FetchError::Setup)?;
        let status = |r: &reqwest::Response| FetchError::Status {
            path: path.to_owned(),
            status: r.status().as_u16(),
        };
        let mut last = None;
        for _ in 0..MAX_ATTEMPTS {
            match http.get(&url).send().await {
                Ok(r) if r.status().as_u16() == 204 => return Ok(Fetched::NoData),
                Ok(r) if r.status().as_u16() == 404 => return Ok(Fetched::NotFound),
                Ok(r) if r.status().is_success() => {
                    return read_capped(r, path).await.map(Fetched::Body);
                }
                Ok(r) if r.status().is_server_error() => last = Some(status(&r)),
                Ok(r) => return Err(status(&r)),
                Err(e) => last = Some(transport(path, &e)),
            }
        }
        Err(last.unwrap_or_else(|| FetchError::Setup(format!("{path}: no attempt was made"))))
    }

    /// A run's status (`andamentoTreno`): `None` when there is no live data.
    pub fn run_status(
        &self,
        origin_id: &str,
        number: i64,
        day_ms: i64,
    ) -> Result<Option<Value>, String> {
        match self.get(&format!("andamentoTreno/{}/{number}/{day_ms}", escape(origin_id)))? {
            Fetched::Body(b) => {
                serde_json::from_str(&b).map(Some).map_err(|e| format!("andamentoTreno: {e}"))
            }
            Fetched::NoData | Fetched::NotFound => Ok(None),
        }
    }
}

fn transport(path: &str, e: &reqwest::Error) -> FetchError {
    FetchError::Transport { path: path.to_owned(), message: e.to_string() }
}

/// Reads a body of at most [`MAX_RESPONSE_BYTES`], chunk by chunk: a declared length over the
/// cap is refused before reading, an undeclared (chunked) or understated one as soon as the
/// bytes read pass it, so an oversized answer is never held whole. Invalid UTF-8 is replaced,
/// as `Response::text` does.
async fn read_capped(mut r: reqwest::Response, path: &str) -> Result<String, FetchError> {
    let too_large = || FetchError::TooLarge { path: path.to_owned(), limit: MAX_RESPONSE_BYTES };
    let declared = r.content_length();
    if declared.is_some_and(|n| n > MAX_RESPONSE_BYTES) {
        return Err(too_large());
    }
    let cap = usize::try_from(MAX_RESPONSE_BYTES).unwrap_or(usize::MAX);
    let mut body = Vec::with_capacity(declared.and_then(|n| usize::try_from(n).ok()).unwrap_or(0));
    while let Some(chunk) = r.chunk().await.map_err(|e| transport(path, &e))? {
        if body.len().saturating_add(chunk.len()) > cap {
            return Err(too_large());
        }
        body.extend_from_slice(&chunk);
    }
    Ok(String::from_utf8(body)
        .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()))
}

/// Percent-escapes a path segment.
fn escape(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

impl StationSource for ViaggiaTreno {
    /// `autocompletaStazione/{prefix}`: `NAME|Sddddd` lines.
    fn autocomplete(&self, prefix: &str) -> Result<Vec<Station>, String> {
        match self.get(&format!("autocompletaStazione/{}", escape(prefix.trim())))? {
            Fetched::Body(text) => Ok(text
                .lines()
                .filter_map(|l| l.split_once('|'))
                .map(|(name, id)| Station {
                    id: id.trim().to_owned(),
                    name: name.trim().to_owned(),
                    short_name: None,
                    label: None,
                })
                .filter(|s| !s.id.is_empty() && !s.name.is_empty())
                .collect()),
            Fetched::NoData | Fetched::NotFound => Ok(Vec::new()),
        }
    }
}

/// What a `trainRef` names: a train on a service day, and the requested segment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TrainRef {
    /// Format version (1).
    pub v: u32,
    /// Train number.
    pub number: i64,
    /// Origin station id.
    pub origin_id: String,
    /// Italian-local midnight of the service day, Unix ms.
    pub day_ms: i64,
    /// Requested departure station id.
    pub from_id: String,
    /// Requested destination station id.
    pub to_id: String,
}

impl TrainRef {
    /// `vt1_` + base64url of the JSON.
    pub fn encode(&self) -> String {
        let json = serde_json::to_vec(self).unwrap_or_default();
        format!("vt1_{}", base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(json))
    }

    /// Parses a reference made by [`TrainRef::encode`].
    pub fn decode(r: &str) -> Result<Self, String> {
        let bad = || format!("{r:?} is not a trainRef");
        let body = r.strip_prefix("vt1_").ok_or_else(bad)?;
        let bytes =
            base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(body).map_err(|_| bad())?;
        let t: Self = serde_json::from_slice(&bytes).map_err(|_| bad())?;
        if t.v != 1 {
            return Err(bad());
        }
        Ok(t)
    }
}

/// The `where` keys that select a stop; a stop rule needs one.
pub const STOP_SELECTORS: [&str; 3] = ["station", "stationId", "positionRelativeToDestination"];

/// The `train` watch source.
#[derive(Debug, Clone)]
pub struct TrainAdapter {
    client: ViaggiaTreno,
}

impl TrainAdapter {
    /// Over this client.
    pub fn new(client: ViaggiaTreno) -> Self {
        Self { client }
    }
}

fn snapshot_of(v: &Value) -> Option<TrainSnapshot> {
    serde_json::from_value(v.clone()).ok()
}

impl WatchAdapter for TrainAdapter {
    fn source(&self) -> &str {
        "train"
    }

    fn check_ref(&self, resource_ref: &str) -> Result<(), String> {
        TrainRef::decode(resource_ref).map(|_| ())
    }

    fn check_rule(&self, rule: &WatchRule) -> Result<(), String> {
        // A stop rule without a selector would fire at every stop.
        let stop_event =
            matches!(rule.event.as_deref(), Some("train.stop_arrived" | "train.stop_departed"));
        if stop_event && !STOP_SELECTORS.iter().any(|k| rule.filter.contains_key(*k)) {
            return Err(format!(
                "a stop rule needs a selector in where: one of {}",
                STOP_SELECTORS.join(", ")
            ));
        }
        Ok(())
    }

    fn grant_fields(&self) -> GrantFields {
        GrantFields::new(
            &[
                "state.number",
                "state.from.name",
                "state.to.name",
                "state.estimatedArrival",
                "state.delayMinutes",
                "state.platform",
                "event.station",
                "event.platform",
                "event.delayMinutes",
                "event.estimatedArrival",
            ],
            &[
                "state.scheduledDepartureMs",
                "state.estimatedDepartureMs",
                "state.scheduledArrivalMs",
                "state.estimatedArrivalMs",
            ],
        )
    }

    fn snapshot(&self, resource_ref: &str, now: i64) -> Result<Value, SourceError> {
        let r = TrainRef::decode(resource_ref).map_err(SourceError)?;
        let run = self
            .client
            .run_status(&r.origin_id, r.number, r.day_ms)
            .map_err(SourceError)?
            .ok_or_else(|| SourceError("no live data for this train now (204)".into()))?;
        let s = normalize_run(&run, &r.from_id, &r.to_id, now * 1_000)
            .map_err(|e| SourceError(e.to_string()))?;
        serde_json::to_value(s).map_err(|e| SourceError(e.to_string()))
    }

    fn events(&self, previous: &Value, current: &Value, now: i64) -> Vec<DomainEvent> {
        match (snapshot_of(previous), snapshot_of(current)) {
            (Some(p), Some(c)) => train_events(&p, &c, now),
            _ => Vec::new(),
        }
    }

    fn default_expiry(&self, snapshot: &Value, created_at: i64) -> i64 {
        let s = snapshot_of(snapshot);
        let anchor = s.as_ref().and_then(|s| s.scheduled_arrival_ms.or(s.scheduled_departure_ms));
        anchor.map_or(created_at + FALLBACK_EXPIRY_SECS, |ms| ms / 1_000 + EXPIRY_AFTER_SECS)
    }

    fn is_terminal(&self, snapshot: &Value) -> bool {
        snapshot_of(snapshot).is_some_and(|s| s.cancelled || s.run_arrived)
    }

    fn urgency(&self, snapshot: &Value) -> Option<u64> {
        // Close to the departure or the arrival, look more often.
        let s = snapshot_of(snapshot)?;
        let now_ms = steward_core::time::now_secs() * 1_000;
        let near = |t: Option<i64>| t.is_some_and(|t| (t - now_ms).abs() < 10 * 60_000);
        (near(s.estimated_departure_ms) || near(s.estimated_arrival_ms)).then_some(15)
    }
}
