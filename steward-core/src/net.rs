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
