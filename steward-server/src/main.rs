//! The `steward` command: argument parsing and output only; every behaviour is a core call.

mod cli;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    #[cfg(feature = "failpoints")]
    let _failpoints = fail::FailScenario::setup();
    let args = cli::Args::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("STEWARD_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("error")),
        )
        .with_writer(std::io::stderr)
        .init();
    cli::run(args)
}
