//! Binding the router: loopback by default, a non-loopback address only with TLS configured,
//! and a graceful shutdown that lets in-flight requests finish.

use std::{
    future::Future,
    net::{IpAddr, Ipv4Addr, SocketAddr},
    path::PathBuf,
};

use steward_core::{ErrorKind, StewardError};

use super::{AppState, app};

/// The default port (the design's host port).
pub const DEFAULT_PORT: u16 = 4317;

/// Where and how to listen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServeConfig {
    /// The address; loopback unless TLS is configured.
    pub listen: SocketAddr,
    /// Certificate and key (PEM) for a non-loopback listener (`STEWARD_TLS_CERT`,
    /// `STEWARD_TLS_KEY`).
    pub tls: Option<(PathBuf, PathBuf)>,
}

impl Default for ServeConfig {
    fn default() -> Self {
        Self { listen: SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), DEFAULT_PORT), tls: None }
    }
}

/// Why the server could not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// A non-loopback address without TLS.
    #[error(
        "refusing to listen on {0} without TLS: set STEWARD_TLS_CERT and STEWARD_TLS_KEY, or listen on 127.0.0.1"
    )]
    TlsRequired(SocketAddr),
    /// TLS listeners are not built into this server yet.
    #[error(
        "TLS listeners are not available in this build yet; listen on loopback and put a TLS proxy (tailscale serve, caddy) in front"
    )]
    TlsUnavailable,
    /// The address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The server failed while running.
    #[error("the server stopped: {0}")]
    Io(#[source] std::io::Error),
}

impl StewardError for ServeError {
    fn code(&self) -> &'static str {
        match self {
            Self::TlsRequired(_) => "SERVE_TLS_REQUIRED",
            Self::TlsUnavailable => "SERVE_TLS_UNAVAILABLE",
            Self::Bind { .. } => "SERVE_BIND_FAILED",
            Self::Io(_) => "SERVE_IO",
        }
    }

    fn kind(&self) -> ErrorKind {
        match self {
            Self::TlsRequired(_) => ErrorKind::Denied,
            Self::TlsUnavailable => ErrorKind::InvalidInput,
            Self::Bind { .. } | Self::Io(_) => ErrorKind::Unavailable,
        }
    }
}

/// Serves `state` on `config.listen` until `shutdown` completes, then stops accepting and
/// waits for in-flight requests. `ready` is called with the bound address (port 0 picks one).
pub async fn serve(
    state: AppState,
    config: &ServeConfig,
    ready: impl FnOnce(SocketAddr),
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    if !config.listen.ip().is_loopback() {
        return Err(match config.tls {
            None => ServeError::TlsRequired(config.listen),
            Some(_) => ServeError::TlsUnavailable,
        });
    }
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .map_err(|source| ServeError::Bind { addr: config.listen, source })?;
    let addr = listener.local_addr().map_err(ServeError::Io)?;
    ready(addr);
    let router = app(state.clone());
    axum::serve(listener, router)
        .with_graceful_shutdown(async move {
            shutdown.await;
            // Live sessions and the feed pump end here; requests in flight finish.
            state.stop();
        })
        .await
        .map_err(ServeError::Io)
}

/// Completes on SIGINT or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = term => {},
    }
}
