//! `steward trains …`: the next direct train between two dictated stations, and a train's
//! fresh status. Read-only lookups against ViaggiaTreno (`VIAGGIATRENO_BASE_URL` overrides).

use clap::Subcommand;
use steward_connectors::trains::{NextTrain, TrainError, TrainStatus, ViaggiaTreno};
use steward_core::time::{now_secs, parse_instant};

use super::{Failure, json_line, usage};

#[derive(Debug, Subcommand)]
pub(super) enum TrainsCmd {
    /// The next direct train from one station to another (names as dictated).
    Next {
        /// Departure station.
        from: String,
        /// Destination station.
        to: String,
        /// Depart at or after this instant (RFC 3339 with an offset; default now).
        #[arg(long)]
        after: Option<String>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// A train's fresh status from the `trainRef` a search returned.
    Status {
        /// The `vt1_…` reference.
        train_ref: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

fn client() -> Result<ViaggiaTreno, Failure> {
    ViaggiaTreno::from_env().map_err(|e| Failure::from(TrainError::Unavailable(e)))
}

pub(super) fn trains(cmd: TrainsCmd) -> Result<(), Failure> {
    match cmd {
        TrainsCmd::Next { from, to, after, json } => {
            let after = match after {
                Some(a) => parse_instant(&a).map_err(|e| usage(e.to_string()))?,
                None => now_secs(),
            };
            let found = client()?.find_next_train(&from, &to, after)?;
            if json {
                json_line(&found);
                return Ok(());
            }
            match found {
                NextTrain::Found { train_ref, snapshot, from, to } => {
                    out!(
                        "train {} {} → {}: departs {} platform {} ({}), delay {} min",
                        snapshot.number,
                        from.name,
                        to.name,
                        snapshot
                            .scheduled_departure_ms
                            .map(steward_connectors::trains::rome_rfc3339)
                            .unwrap_or_else(|| "?".to_owned()),
                        snapshot.platform.as_deref().unwrap_or("?"),
                        snapshot.platform_status,
                        snapshot.delay_minutes
                    );
                    out!("trainRef {train_ref}");
                }
                NextTrain::NoDirectTrain { from, to, checked } => {
                    out!(
                        "no direct train from {} to {} among the next {checked}",
                        from.name,
                        to.name
                    );
                }
                NextTrain::AmbiguousStation { which, query, candidates } => {
                    out!("{which} {query:?} is ambiguous:");
                    for (s, score) in candidates {
                        out!("  {} ({}) {score:.2}", s.name, s.id);
                    }
                }
                NextTrain::StationNotFound { which, query } => {
                    out!("{which}: no station like {query:?}");
                }
            }
        }
        TrainsCmd::Status { train_ref, json } => {
            let status = client()?.train_status(&train_ref, now_secs())?;
            if json {
                json_line(&status);
                return Ok(());
            }
            match status {
                TrainStatus::Live { snapshot } => out!(
                    "train {} to {}: delay {} min, platform {} ({}), {}",
                    snapshot.number,
                    snapshot.to.name,
                    snapshot.delay_minutes,
                    snapshot.platform.as_deref().unwrap_or("?"),
                    snapshot.platform_status,
                    if snapshot.arrived {
                        "arrived"
                    } else if snapshot.departed {
                        "departed"
                    } else {
                        "not departed"
                    }
                ),
                TrainStatus::NoLiveData => out!("no live data for this train now"),
            }
        }
    }
    Ok(())
}
