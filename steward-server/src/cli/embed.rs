//! `steward embed`: drain the mail embedding queue (the core's `Steward::embed_mail`).

use std::time::{Duration, Instant};

use clap::Args as ClapArgs;
use steward_core::{
    ErrorKind, Steward,
    embed::{EmbedOptions, EmbedReport, EmbedSchedule},
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
    let deadline = Instant::now() + Duration::from_secs(a.timeout);
    let mut schedule = EmbedSchedule::default();
    loop {
        let report = drain_with_progress(steward, &opts)?;
        let done = report.unavailable.is_none() && report.remaining == 0;
        let delay = schedule.next_delay(&report);
        if !a.wait || done || Instant::now() + delay > deadline {
            print_report(&report, a.json);
            return match &report.unavailable {
                Some(why) => Err(Failure {
                    code: "EMBED_UNAVAILABLE".to_owned(),
                    kind: ErrorKind::Unavailable,
                    message: format!("{why}; {} messages left to embed", report.remaining),
                }),
                None => Ok(()),
            };
        }
        if let Some(why) = &report.unavailable {
            tracing::warn!(retry_in = ?delay, "embedding endpoint unavailable: {why}");
        }
        std::thread::sleep(delay);
    }
}

/// One drain with a progress bar on a terminal.
pub(super) fn drain_with_progress(
    steward: &Steward,
    opts: &EmbedOptions<'_>,
) -> Result<EmbedReport, Failure> {
    let pb = progress_bar();
    pb.set_message("embedding");
    let report = steward.embed_mail(opts, &mut |p| {
        pb.set_length(p.messages);
        pb.set_position(p.checked);
    });
    pb.finish_and_clear();
    Ok(report?)
}

pub(super) fn print_report(r: &EmbedReport, json: bool) {
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
