//! What every HTTP client of the workspace shares.
//!
//! reqwest is built with `rustls-no-provider` (no aws-lc build, no OpenSSL): the process needs
//! a rustls crypto provider installed before any client is built, TLS or not, since cargo
//! unifies the feature across every crate that uses reqwest. Call
//! [`install_crypto_provider`] before building one.

/// Installs ring (what lettre's rustls uses too) as the process's rustls crypto provider.
/// Idempotent; keeps a provider another library installed first.
pub fn install_crypto_provider() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // Fails only when a provider is already installed, which is as good.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// A transport failure in words, without the URL (a misconfigured endpoint may carry a key in
/// its query string).
pub(crate) fn transport_error(e: reqwest::Error) -> String {
    if e.is_timeout() {
        "timed out".to_owned()
    } else if e.is_connect() {
        "cannot connect".to_owned()
    } else {
        e.without_url().to_string()
    }
}

/// The `error.message` of an OpenAI-style error body, else its first 200 characters.
pub(crate) fn error_message(raw: &[u8]) -> String {
    serde_json::from_slice::<serde_json::Value>(raw)
        .ok()
        .and_then(|v| v["error"]["message"].as_str().map(str::to_owned))
        .unwrap_or_else(|| String::from_utf8_lossy(raw).into_owned())
        .chars()
        .take(200)
        .collect()
}

/// An HTTP client built on its first request rather than with its owner. Building one loads
/// the system's root certificates (about 150 files here, ~7 ms), which every short-lived
/// command that merely configures an embedder or registers a watch source would otherwise pay
/// at start-up (measured with `strace -c` on `steward search` and `steward stats`).
pub struct LazyClient<C> {
    cell: std::sync::OnceLock<C>,
    build: Box<dyn Fn() -> reqwest::Result<C> + Send + Sync>,
}

impl<C> LazyClient<C> {
    /// A client that `build` makes on first use (after installing the TLS crypto provider).
    pub fn new(build: impl Fn() -> reqwest::Result<C> + Send + Sync + 'static) -> Self {
        Self { cell: std::sync::OnceLock::new(), build: Box::new(build) }
    }

    /// The client, built now if this is the first request; a client that cannot be built is
    /// that request's error.
    pub fn get(&self) -> Result<&C, String> {
        if let Some(c) = self.cell.get() {
            return Ok(c);
        }
        install_crypto_provider();
        let built = (self.build)().map_err(|e| format!("cannot build the HTTP client: {e}"))?;
        Ok(self.cell.get_or_init(|| built))
    }
}

impl<C> std::fmt::Debug for LazyClient<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LazyClient").field("built", &self.cell.get().is_some()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lazy_client_is_built_once_on_first_use_and_a_failure_is_the_requests_error() {
        use std::sync::{
            Arc,
            atomic::{AtomicUsize, Ordering},
        };
        let builds = Arc::new(AtomicUsize::new(0));
        let b = Arc::clone(&builds);
        let lazy = LazyClient::new(move || {
            b.fetch_add(1, Ordering::SeqCst);
            reqwest::blocking::Client::builder().build()
        });
        assert_eq!(builds.load(Ordering::SeqCst), 0, "nothing is built with the owner");
        assert_eq!(format!("{lazy:?}"), "LazyClient { built: false }");
        lazy.get().unwrap();
        lazy.get().unwrap();
        assert_eq!(builds.load(Ordering::SeqCst), 1);
        assert_eq!(format!("{lazy:?}"), "LazyClient { built: true }");
        // A client that cannot be built (a proxy URL it cannot parse) fails its first request.
        let broken: LazyClient<reqwest::blocking::Client> = LazyClient::new(|| {
            reqwest::blocking::Client::builder().proxy(reqwest::Proxy::all("http://[::1")?).build()
        });
        assert!(broken.get().unwrap_err().starts_with("cannot build the HTTP client"));
    }
}
