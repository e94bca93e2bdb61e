//! `find_next_train`: the next direct train between two dictated stations, and a train's
//! fresh status from its `trainRef`.
//!
//! Both stations are resolved first (an ambiguous or unknown name is an explicit answer, never
//! a guess). Then the departure board (`partenze`) after an instant: rows older than
//! [`STALE_DEPARTURE_SECS`] before it are dropped, the rest sorted, and the first
//! [`MAX_CANDIDATES`] runs fetched concurrently. A train is direct only when both station ids
//! are stops of its run and the destination comes after the departure; the earliest scheduled
//! departure wins. No match is an explicit result, not a route with changes.

use serde::Serialize;
use serde_json::Value;

use super::{
    Station, StationResolution, TrainRef, TrainSnapshot, ViaggiaTreno, normalize_run,
    resolve_station, rome_offset_secs,
};
use crate::trains::Fetched;

/// Why a train lookup failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TrainError {
    /// Not a `trainRef` this version made.
    #[error("{0}")]
    BadRef(String),
    /// ViaggiaTreno failed or answered something unreadable.
    #[error("ViaggiaTreno is unavailable: {0}")]
    Unavailable(String),
}

impl steward_core::StewardError for TrainError {
    fn code(&self) -> &'static str {
        match self {
            Self::BadRef(_) => "TRAIN_BAD_REF",
            Self::Unavailable(_) => "TRAIN_UNAVAILABLE",
        }
    }

    fn kind(&self) -> steward_core::ErrorKind {
        match self {
            Self::BadRef(_) => steward_core::ErrorKind::InvalidInput,
            Self::Unavailable(_) => steward_core::ErrorKind::Unavailable,
        }
    }
}

/// Departures checked per search.
/// Fixed (not a setting).
pub const MAX_CANDIDATES: usize = 10;
/// Departure rows this much older than the requested instant are dropped (seconds).
/// Fixed (not a setting).
pub const STALE_DEPARTURE_SECS: i64 = 120;

/// What a search found.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum NextTrain {
    /// The earliest direct train.
    Found {
        /// Opaque reference for status calls and watches.
        train_ref: String,
        /// Its state for the requested segment.
        snapshot: Box<TrainSnapshot>,
        /// The departure station.
        from: Station,
        /// The destination.
        to: Station,
    },
    /// No direct train among the checked departures.
    NoDirectTrain {
        /// The departure station.
        from: Station,
        /// The destination.
        to: Station,
        /// Departures checked.
        checked: usize,
    },
    /// A name matched several stations: ask which.
    AmbiguousStation {
        /// `from` or `to`.
        which: &'static str,
        /// What was dictated.
        query: String,
        /// Up to eight candidates with their scores.
        candidates: Vec<(Station, f64)>,
    },
    /// A name matched no station.
    StationNotFound {
        /// `from` or `to`.
        which: &'static str,
        /// What was dictated.
        query: String,
    },
}

/// A train's fresh status.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum TrainStatus {
    /// The normalized snapshot.
    Live {
        /// The state.
        snapshot: Box<TrainSnapshot>,
    },
    /// The service has no live data for it now (204: not running today, or not yet).
    NoLiveData,
}

const DAYS: [&str; 7] = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];
const MONTHS: [&str; 12] =
    ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];

/// The `dataOra` path segment `partenze` takes: a JavaScript `Date.toString()` in Europe/Rome
/// (`Sun Oct 04 2026 08:12:27 GMT+0200`), percent-escaped.
pub fn board_time(unix: i64) -> String {
    let off = rome_offset_secs(unix);
    let t = steward_core::time::CivilTime::from_unix(unix + off);
    let text = format!(
        "{} {} {:02} {:04} {:02}:{:02}:{:02} GMT+{:02}00",
        DAYS[t.weekday as usize % 7],
        MONTHS[(t.month as usize + 11) % 12],
        t.day,
        t.year,
        t.hour,
        t.minute,
        t.second,
        off / 3_600
    );
    text.replace(' ', "%20").replace(':', "%3A").replace('+', "%2B")
}

fn field_ms(row: &Value, key: &str) -> Option<i64> {
    row.get(key).and_then(|v| v.as_i64().or_else(|| v.as_str().and_then(|s| s.parse().ok())))
}

/// One departure row's run identity: (origin id, number, service day ms, scheduled ms).
fn identity(row: &Value) -> Option<(String, i64, i64, i64)> {
    let origin = row
        .get("codOrigine")
        .and_then(Value::as_str)
        .or_else(|| row.get("idOrigine").and_then(Value::as_str))?
        .to_owned();
    Some((
        origin,
        field_ms(row, "numeroTreno")?,
        field_ms(row, "dataPartenzaTreno")?,
        field_ms(row, "orarioPartenza")?,
    ))
}

impl ViaggiaTreno {
    /// The departure board of a station from an instant (`partenze`).
    pub fn departures(&self, station_id: &str, at: i64) -> Result<Vec<Value>, String> {
        match self.get(&format!("partenze/{}/{}", station_id, board_time(at)))? {
            Fetched::Body(b) => {
                let v: Value = serde_json::from_str(&b).map_err(|e| format!("partenze: {e}"))?;
                match v {
                    Value::Array(rows) => Ok(rows),
                    _ => Err("partenze: not a JSON array".to_owned()),
                }
            }
            Fetched::NoData | Fetched::NotFound => Ok(Vec::new()),
        }
    }

    /// The next direct train from `from` to `to` (dictated names) departing at or after
    /// `after` (Unix seconds; the caller passes now when the person gave no time).
    pub fn find_next_train(
        &self,
        from: &str,
        to: &str,
        after: i64,
    ) -> Result<NextTrain, TrainError> {
        self.next_train(from, to, after).map_err(TrainError::Unavailable)
    }

    fn next_train(&self, from: &str, to: &str, after: i64) -> Result<NextTrain, String> {
        let (a, b) = std::thread::scope(|s| {
            let a = s.spawn(|| resolve_station(self, from));
            let b = resolve_station(self, to);
            (a.join().unwrap_or_else(|_| Err("the resolver failed".to_owned())), b)
        });
        let from_station = match a? {
            StationResolution::Resolved { station, .. } => station,
            StationResolution::AmbiguousStation { candidates } => {
                return Ok(NextTrain::AmbiguousStation {
                    which: "from",
                    query: from.to_owned(),
                    candidates,
                });
            }
            StationResolution::NotFound => {
                return Ok(NextTrain::StationNotFound { which: "from", query: from.to_owned() });
            }
        };
        let to_station = match b? {
            StationResolution::Resolved { station, .. } => station,
            StationResolution::AmbiguousStation { candidates } => {
                return Ok(NextTrain::AmbiguousStation {
                    which: "to",
                    query: to.to_owned(),
                    candidates,
                });
            }
            StationResolution::NotFound => {
                return Ok(NextTrain::StationNotFound { which: "to", query: to.to_owned() });
            }
        };
        let mut rows: Vec<(String, i64, i64, i64)> = self
            .departures(&from_station.id, after)?
            .iter()
            .filter_map(identity)
            .filter(|r| r.3 >= (after - STALE_DEPARTURE_SECS) * 1_000)
            .collect();
        rows.sort_by_key(|r| r.3);
        rows.dedup();
        rows.truncate(MAX_CANDIDATES);
        let now_ms = after * 1_000;
        let results: Vec<Result<Option<TrainSnapshot>, String>> = std::thread::scope(|s| {
            let handles: Vec<_> = rows
                .iter()
                .map(|(origin, number, day, _)| {
                    let (fid, tid) = (&from_station.id, &to_station.id);
                    s.spawn(move || {
                        let Some(run) = self.run_status(origin, *number, *day)? else {
                            return Ok(None);
                        };
                        // Not on the route, or against its direction: not direct.
                        Ok(normalize_run(&run, fid, tid, now_ms).ok())
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|_| Err("a run fetch failed".to_owned())))
                .collect()
        });
        let errors = results.iter().filter(|r| r.is_err()).count();
        if !rows.is_empty() && errors == rows.len() {
            return Err(results.into_iter().find_map(Result::err).unwrap_or_default());
        }
        let best = rows
            .iter()
            .zip(results)
            .filter_map(|(row, r)| r.ok().flatten().map(|s| (row, s)))
            .min_by_key(|(row, s)| s.scheduled_departure_ms.unwrap_or(row.3));
        Ok(match best {
            Some(((origin, number, day, _), snapshot)) => NextTrain::Found {
                train_ref: TrainRef {
                    v: 1,
                    number: *number,
                    origin_id: origin.clone(),
                    day_ms: *day,
                    from_id: from_station.id.clone(),
                    to_id: to_station.id.clone(),
                }
                .encode(),
                snapshot: Box::new(snapshot),
                from: from_station,
                to: to_station,
            },
            None => {
                NextTrain::NoDirectTrain { from: from_station, to: to_station, checked: rows.len() }
            }
        })
    }

    /// A train's fresh status from its `trainRef`, normalized for the requested segment.
    pub fn train_status(&self, train_ref: &str, now: i64) -> Result<TrainStatus, TrainError> {
        let r = TrainRef::decode(train_ref).map_err(TrainError::BadRef)?;
        let Some(run) =
            self.run_status(&r.origin_id, r.number, r.day_ms).map_err(TrainError::Unavailable)?
        else {
            return Ok(TrainStatus::NoLiveData);
        };
        let snapshot = normalize_run(&run, &r.from_id, &r.to_id, now * 1_000)
            .map_err(|e| TrainError::Unavailable(e.to_string()))?;
        Ok(TrainStatus::Live { snapshot: Box::new(snapshot) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn board_time_is_a_javascript_date_in_rome() {
        // 2026-10-04 06:12:27 UTC is 08:12:27 CEST, a Sunday.
        let t = steward_core::time::parse_date("2026-10-04T06:12:27Z").unwrap();
        assert_eq!(board_time(t), "Sun%20Oct%2004%202026%2008%3A12%3A27%20GMT%2B0200");
        // Winter time after the changeover.
        let w = steward_core::time::parse_date("2026-10-25T01:30:00Z").unwrap();
        assert_eq!(board_time(w), "Sun%20Oct%2025%202026%2002%3A30%3A00%20GMT%2B0100");
    }
}
