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
/// Default of `steward serve --port`.
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
    /// The certificate or key could not be loaded.
    #[error("cannot use the TLS certificate {cert} and key {key}: {source}")]
    Tls {
        /// The certificate file.
        cert: PathBuf,
        /// The key file.
        key: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The background runner could not be started.
    #[error(transparent)]
    Runner(#[from] steward_core::runner::RunnerError),
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
            Self::Tls { .. } => "SERVE_TLS_CONFIG",
            Self::Bind { .. } => "SERVE_BIND_FAILED",
            Self::Io(_) => "SERVE_IO",
            Self::Runner(e) => e.code(),
        }
    }

    fn kind(&self) -> ErrorKind {
        match self {
            Self::TlsRequired(_) => ErrorKind::Denied,
            Self::Tls { .. } => ErrorKind::InvalidInput,
            Self::Bind { .. } | Self::Io(_) => ErrorKind::Unavailable,
            Self::Runner(e) => e.kind(),
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
    if let Some((cert, key)) = &config.tls {
        return serve_tls(state, config.listen, cert, key, ready, shutdown).await;
    }
    if !config.listen.ip().is_loopback() {
        return Err(ServeError::TlsRequired(config.listen));
    }
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .map_err(|source| ServeError::Bind { addr: config.listen, source })?;
    let addr = listener.local_addr().map_err(ServeError::Io)?;
    ready(addr);
    let runner = super::background::start(&state)?;
    let router = app(state.clone());
    axum::serve(listener, router)
        .with_graceful_shutdown(async move {
            shutdown.await;
            // Live sessions, the feed pump and the poller end here; requests in flight finish.
            state.stop();
        })
        .await
        .map_err(ServeError::Io)?;
    super::background::stop(runner).await;
    Ok(())
}

/// How long a TLS listener waits for requests in flight after the shutdown signal.
/// Fixed (not a setting).
pub const TLS_DRAIN_SECS: u64 = 30;

async fn serve_tls(
    state: AppState,
    listen: SocketAddr,
    cert: &std::path::Path,
    key: &std::path::Path,
    ready: impl FnOnce(SocketAddr),
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    let tls = axum_server::tls_rustls::RustlsConfig::from_pem_file(cert, key)
        .await
        .map_err(|source| ServeError::Tls { cert: cert.to_owned(), key: key.to_owned(), source })?;
    state.tls.store(true, std::sync::atomic::Ordering::Relaxed);
    let handle = axum_server::Handle::new();
    let server = axum_server::bind_rustls(listen, tls).handle(handle.clone());
    let serving = tokio::spawn(server.serve(app(state.clone()).into_make_service()));
    let Some(addr) = handle.listening().await else {
        let source = match serving.await {
            Ok(Err(e)) => e,
            _ => std::io::Error::other("the TLS listener stopped before it started"),
        };
        return Err(ServeError::Bind { addr: listen, source });
    };
    ready(addr);
    let runner = super::background::start(&state)?;
    shutdown.await;
    state.stop();
    super::background::stop(runner).await;
    handle.graceful_shutdown(Some(std::time::Duration::from_secs(TLS_DRAIN_SECS)));
    match serving.await {
        Ok(r) => r.map_err(ServeError::Io),
        Err(e) => Err(ServeError::Io(std::io::Error::other(e))),
    }
}

/// A server running in the background ([`spawn`]).
#[derive(Debug)]
pub struct Running {
    /// The bound address.
    pub addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<Result<(), ServeError>>,
}

impl Running {
    /// Stops it gracefully and waits until it has stopped.
    pub async fn stop(mut self) -> Result<(), ServeError> {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        match (&mut self.task).await {
            Ok(r) => r,
            Err(e) => Err(ServeError::Io(std::io::Error::other(e))),
        }
    }
}

/// Serves `state` in a background task (for an app embedding the server, and for tests);
/// returns once it listens.
pub async fn spawn(state: AppState, config: ServeConfig) -> Result<Running, ServeError> {
    let (addr_tx, addr_rx) = tokio::sync::oneshot::channel();
    let (stop, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        let ready = |a| {
            let _ = addr_tx.send(a);
        };
        serve(state, &config, ready, async {
            let _ = stop_rx.await;
        })
        .await
    });
    match addr_rx.await {
        Ok(addr) => Ok(Running { addr, stop: Some(stop), task }),
        // It stopped before listening: its error says why.
        Err(_) => Err(match task.await {
            Ok(Err(e)) => e,
            Ok(Ok(())) => ServeError::Io(std::io::Error::other("the server stopped at once")),
            Err(e) => ServeError::Io(std::io::Error::other(e)),
        }),
    }
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
