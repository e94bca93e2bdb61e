//! `steward embed`: drain the mail embedding queue (the core's `Steward::embed_mail`).

use std::time::Duration;

use clap::Args as ClapArgs;
use steward_core::{
    Steward,
    embed::{EmbedOptions, EmbedProgress, EmbedReport},
};

use super::{Failure, json_line, progress_bar};

/// The longest `--wait` by default.
pub(super) const DEFAULT_WAIT_SECS: u64 = 3_600;

#[derive(Debug, ClapArgs)]
pub(super) struct EmbedArgs {
    /// Keep draining until nothing is left, backing off while the endpoint is unavailable.
    #[arg(long)]
    wait: bool,
    /// With --wait: give up after this many seconds.
    #[arg(long, value_name = "SECS", default_value_t = DEFAULT_WAIT_SECS)]
    timeout: u64,
    /// Messages sent to the embedder at most in one drain.
    #[arg(long, value_name = "N")]
    max_items: Option<usize>,
    /// Print the report as one JSON object.
    #[arg(long)]
    json: bool,
}

pub(super) fn embed(steward: &Steward, a: &EmbedArgs) -> Result<(), Failure> {
    let opts =
        EmbedOptions { max_items: a.max_items.unwrap_or(usize::MAX), ..EmbedOptions::default() };
    let report =
        drain_with_progress(steward, &opts, a.wait.then(|| Duration::from_secs(a.timeout)))?;
    finish(&report, a.json)
}

/// One drain (or, `within` a time, drains until done) with a progress bar on a terminal.
pub(super) fn drain_with_progress(
    steward: &Steward,
    opts: &EmbedOptions<'_>,
    within: Option<Duration>,
) -> Result<EmbedReport, Failure> {
    let pb = progress_bar();
    pb.set_message("embedding");
    let mut show = |p: EmbedProgress| {
        pb.set_length(p.messages);
        pb.set_position(p.checked);
    };
    let report = match within {
        Some(w) => steward.embed_mail_until_done(opts, w, &mut show),
        None => steward.embed_mail(opts, &mut show),
    };
    pb.finish_and_clear();
    Ok(report?)
}

/// Prints the report; an endpoint that stopped the drain ends the command with its error.
pub(super) fn finish(report: &EmbedReport, json: bool) -> Result<(), Failure> {
    print_report(report, json);
    report.endpoint_error().map_or(Ok(()), |e| Err(e.into()))
}

fn print_report(r: &EmbedReport, json: bool) {
    if json {
        json_line(r);
        return;
    }
    let dim = r.dimension.map_or_else(|| "?".to_owned(), |d| d.to_string());
    out!("embeddings with {} ({dim}-d):", r.model);
    out!("  embedded       {}", r.embedded);
    out!("  up to date     {}", r.up_to_date);
    out!("  failed         {} (retried by the next drain)", r.failed);
    out!("  given up       {} (failed too often; retried when their text changes)", r.given_up);
    out!("  remaining      {}", r.remaining);
    if r.reset > 0 {
        out!("  reset          {} (the model or dimension changed)", r.reset);
    }
    if r.removed > 0 {
        out!("  removed        {} (messages no longer in the mirror)", r.removed);
    }
    if let Some(why) = &r.unavailable {
        out!("  unavailable    {why}");
    }
}
