//! `steward serve` (and the end of `steward demo`): read the listener's configuration from the
//! flags and the environment, then hand the core to the server.

use std::{net::IpAddr, path::PathBuf, sync::Arc};

use clap::Args as ClapArgs;
use steward_core::{
    Steward,
    access::{OriginPolicy, owner_token},
};
use steward_server::http::{
    AppState, DEFAULT_PORT, ServeConfig, serve as run_server, shutdown_signal,
};

use super::{Failure, authority::Person, usage};

/// Where to listen.
#[derive(Debug, ClapArgs)]
pub(super) struct ServeArgs {
    /// The port (0 picks a free one).
    #[arg(long, default_value_t = DEFAULT_PORT)]
    port: u16,
    /// The address to listen on; anything but loopback needs STEWARD_TLS_CERT and
    /// STEWARD_TLS_KEY.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1")]
    listen: IpAddr,
    #[command(flatten)]
    person: Person,
}

fn env_list(name: &str) -> Vec<String> {
    std::env::var(name)
        .map(|v| v.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_owned).collect())
        .unwrap_or_default()
}

pub(super) fn serve(steward: Steward, a: &ServeArgs) -> Result<(), Failure> {
    let configured = std::env::var("STEWARD_AUTH_TOKEN").ok();
    let token = owner_token(steward.home(), configured.as_deref())?;
    let origins = OriginPolicy::new(
        &env_list("STEWARD_ALLOWED_HOSTS"),
        &env_list("STEWARD_ALLOWED_ORIGINS"),
    )?;
    let tls = match (std::env::var_os("STEWARD_TLS_CERT"), std::env::var_os("STEWARD_TLS_KEY")) {
        (Some(c), Some(k)) => Some((PathBuf::from(c), PathBuf::from(k))),
        (None, None) => None,
        _ => {
            return Err(usage(
                "set both STEWARD_TLS_CERT and STEWARD_TLS_KEY, or neither".to_owned(),
            ));
        }
    };
    let config = ServeConfig { listen: std::net::SocketAddr::new(a.listen, a.port), tls };
    let token_source = if configured.is_some() {
        "STEWARD_AUTH_TOKEN".to_owned()
    } else {
        steward.home().join(steward_core::access::TOKEN_FILE).display().to_string()
    };
    let scheme = if config.tls.is_some() { "https" } else { "http" };
    // A pairing code is a convenience: when none can be made (too many unused ones from recent
    // starts), the server still starts and says why.
    let code = steward.new_pairing_code();
    let steward = Arc::new(steward);
    // The home's background runner, configured like every frontend's (`[jobs]`, the mail
    // sources, SMTP): a configuration it cannot use stops the start here.
    let runner = steward_connectors::home::runner(Arc::clone(&steward))?;
    // The home's agent: chats over the same tools, resumed when a person decides an approval.
    let agent = steward_connectors::home::agent(Arc::clone(&steward))?;
    if agent.runs_turns()
        && let Err(e) = agent.watch_approvals()
    {
        status(format_args!("the agent cannot watch approvals: {e}"));
    }
    let state = AppState::new(steward, token, origins, a.person.name())
        .with_runner(runner)
        .with_agent(agent);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| usage(format!("cannot start the runtime: {e}")))?;
    runtime.block_on(run_server(
        state,
        &config,
        |addr| {
            status(format_args!("listening on {scheme}://{addr}  (send Authorization: Bearer <the token in {token_source}>)"));
            match &code {
                Ok(c) => status(format_args!(
                    "open the app: {scheme}://{addr}/pair#{}  (pairs this browser, then opens it; one use, valid {} minutes)",
                    c.code,
                    steward_core::access::PAIRING_CODE_TTL_SECS / 60
                )),
                Err(e) => status(format_args!(
                    "no pairing link this time: {e} (POST /pairing-codes makes one)"
                )),
            }
        },
        shutdown_signal(),
    ))?;
    status(format_args!("stopped"));
    Ok(())
}

/// A status line of the serving process. Unlike a command's output (`out!`, which ends the
/// process quietly when its reader has gone, as `steward search | head` expects), a closed
/// stdout must not stop a server: a supervisor or a script that read the address and went
/// away leaves it serving, and the line is dropped.
fn status(line: std::fmt::Arguments<'_>) {
    use std::io::Write as _;
    let _ = writeln!(std::io::stdout().lock(), "{line}");
}
