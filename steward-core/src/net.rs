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
