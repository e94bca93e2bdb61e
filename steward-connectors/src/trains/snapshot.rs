//! `andamentoTreno` (a run's status) → one [`TrainSnapshot`] for the requested segment, and the
//! semantic events between two snapshots. The contract: `steward-design.txt`, "Train Snapshot
//! Normalization" and the train event table. Missing values are omitted, never invented.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use steward_core::watch::DomainEvent;

/// One stop of the run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Stop {
    /// Station id.
    pub id: String,
    /// Station name.
    pub name: String,
    /// Position in the run (0 = origin).
    pub index: usize,
    /// `index - destination index`: 0 at the requested destination, -1 the stop before.
    pub position_relative_to_destination: i64,
    /// Unix ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scheduled_arrival_ms: Option<i64>,
    /// Unix ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scheduled_departure_ms: Option<i64>,
    /// Unix ms, once detected.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub actual_arrival_ms: Option<i64>,
    /// Unix ms, once detected.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub actual_departure_ms: Option<i64>,
    /// Suppressed at this stop.
    pub cancelled: bool,
}

/// The state of one train for one requested segment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TrainSnapshot {
    /// The train number.
    pub number: i64,
    /// Origin station id.
    pub origin_id: String,
    /// Italian-local midnight of the service day, Unix ms.
    pub service_day_ms: i64,
    /// The requested departure stop.
    pub from: Stop,
    /// The requested destination stop.
    pub to: Stop,
    /// Unix ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scheduled_departure_ms: Option<i64>,
    /// Actual, else scheduled plus delay. Unix ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub estimated_departure_ms: Option<i64>,
    /// Unix ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scheduled_arrival_ms: Option<i64>,
    /// Actual, else scheduled plus delay. Unix ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub estimated_arrival_ms: Option<i64>,
    /// `estimated_arrival_ms` in Europe/Rome, RFC 3339.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub estimated_arrival: Option<String>,
    /// Minutes (negative = early).
    pub delay_minutes: i64,
    /// The effective departure platform, else the programmed one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub platform: Option<String>,
    /// As programmed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub platform_programmed: Option<String>,
    /// As assigned on the day.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub platform_effective: Option<String>,
    /// `confirmed` (effective), `scheduled` (programmed only) or `unknown`.
    pub platform_status: String,
    /// Cancelled (the train, or the requested departure stop).
    pub cancelled: bool,
    /// Left the requested departure stop.
    pub departed: bool,
    /// Reached the requested destination.
    pub arrived: bool,
    /// Reached the run's final stop.
    pub run_arrived: bool,
    /// Every stop of the run.
    pub stops: Vec<Stop>,
    /// When Steward normalized this, Unix ms.
    pub last_updated: i64,
    /// `ViaggiaTreno`.
    pub source: String,
}

/// Why a run cannot be normalized for the segment.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SnapshotError {
    /// Not an `andamentoTreno` object.
    #[error("not a train run: {0}")]
    Shape(String),
    /// A requested station is not a stop of the run, or the destination does not follow it.
    #[error("the train does not run from {from} to {to}")]
    NotOnRoute {
        /// Departure station id.
        from: String,
        /// Destination station id.
        to: String,
    },
}

fn ms(v: &Value) -> Option<i64> {
    v.as_i64().filter(|&x| x > 0).or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()))
}

/// Platform strings come padded (`"2              "`) or empty.
fn platform(v: &Value) -> Option<String> {
    v.as_str().map(str::trim).filter(|s| !s.is_empty()).map(str::to_owned)
}

/// Europe/Rome's offset at a UTC instant: CEST (+2 h) from the last Sunday of March 01:00 UTC
/// to the last Sunday of October 01:00 UTC, else CET (+1 h).
pub fn rome_offset_secs(unix: i64) -> i64 {
    let year = steward_core::time::CivilTime::from_unix(unix).year;
    let last_sunday_1am = |month: u32| -> i64 {
        // The 31st of March/October, stepped back to a Sunday (1970-01-01 was a Thursday).
        let day31 =
            steward_core::time::parse_date(&format!("{year:04}-{month:02}-31")).unwrap_or(0);
        let weekday = (day31.div_euclid(86_400) + 4).rem_euclid(7); // 0 = Sunday
        day31 - weekday * 86_400 + 3_600
    };
    if unix >= last_sunday_1am(3) && unix < last_sunday_1am(10) { 7_200 } else { 3_600 }
}

/// Unix ms as RFC 3339 in Europe/Rome.
pub fn rome_rfc3339(unix_ms: i64) -> String {
    let secs = unix_ms.div_euclid(1_000);
    let off = rome_offset_secs(secs);
    let local = steward_core::time::CivilTime::from_unix(secs + off).rfc3339();
    format!("{}+{:02}:00", local.trim_end_matches('Z'), off / 3_600)
}

/// Normalizes an `andamentoTreno` response for the segment `from_id` → `to_id` at `now_ms`.
pub fn normalize_run(
    run: &Value,
    from_id: &str,
    to_id: &str,
    now_ms: i64,
) -> Result<TrainSnapshot, SnapshotError> {
    let number =
        run["numeroTreno"].as_i64().ok_or_else(|| SnapshotError::Shape("numeroTreno".into()))?;
    let fermate =
        run["fermate"].as_array().ok_or_else(|| SnapshotError::Shape("fermate".into()))?;
    let provvedimento = run["provvedimento"].as_i64().unwrap_or(0);
    let position = |id: &str| fermate.iter().position(|f| f["id"].as_str() == Some(id));
    let (Some(fi), Some(ti)) = (position(from_id), position(to_id)) else {
        return Err(SnapshotError::NotOnRoute { from: from_id.into(), to: to_id.into() });
    };
    if ti <= fi {
        return Err(SnapshotError::NotOnRoute { from: from_id.into(), to: to_id.into() });
    }
    let stops: Vec<Stop> = fermate
        .iter()
        .enumerate()
        .map(|(i, f)| Stop {
            id: f["id"].as_str().unwrap_or_default().to_owned(),
            name: f["stazione"].as_str().unwrap_or_default().trim().to_owned(),
            index: i,
            position_relative_to_destination: i as i64 - ti as i64,
            scheduled_arrival_ms: ms(&f["arrivo_teorico"]),
            scheduled_departure_ms: ms(&f["partenza_teorica"]),
            actual_arrival_ms: ms(&f["arrivoReale"]),
            actual_departure_ms: ms(&f["partenzaReale"]),
            cancelled: f["actualFermataType"].as_i64() == Some(3),
        })
        .collect();
    let (from_raw, to_raw) = (&fermate[fi], &fermate[ti]);
    // Delay: the departure stop's, the stop's, the run's; zero when none says.
    let delay_minutes = [&from_raw["ritardoPartenza"], &from_raw["ritardo"], &run["ritardo"]]
        .iter()
        .find_map(|v| v.as_i64().filter(|d| *d != 0))
        .unwrap_or(0);
    let from = stops[fi].clone();
    let to = stops[ti].clone();
    let scheduled_departure_ms =
        from.scheduled_departure_ms.or_else(|| ms(&from_raw["programmata"]));
    let scheduled_arrival_ms = to.scheduled_arrival_ms.or_else(|| ms(&to_raw["programmata"]));
    let estimate = |actual: Option<i64>, scheduled: Option<i64>| {
        actual.or_else(|| scheduled.map(|s| s + delay_minutes * 60_000))
    };
    let estimated_departure_ms = estimate(from.actual_departure_ms, scheduled_departure_ms);
    let estimated_arrival_ms = estimate(to.actual_arrival_ms, scheduled_arrival_ms);
    let platform_effective = platform(&from_raw["binarioEffettivoPartenzaDescrizione"]);
    let platform_programmed = platform(&from_raw["binarioProgrammatoPartenzaDescrizione"]);
    let platform_status = match (&platform_effective, &platform_programmed) {
        (Some(_), _) => "confirmed",
        (None, Some(_)) => "scheduled",
        (None, None) => "unknown",
    };
    let last_detected = run["stazioneUltimoRilevamento"].as_str().unwrap_or("").trim();
    let detected_after_from = stops
        .iter()
        .skip(fi + 1)
        .any(|s| !last_detected.is_empty() && s.name.eq_ignore_ascii_case(last_detected));
    let last = stops.len() - 1;
    let run_arrived = stops[last].actual_arrival_ms.is_some()
        || (run["arrivato"].as_bool() == Some(true) && ti == last);
    Ok(TrainSnapshot {
        number,
        origin_id: run["idOrigine"]
            .as_str()
            .or_else(|| run["codOrigine"].as_str())
            .unwrap_or(&stops[0].id)
            .to_owned(),
        service_day_ms: ms(&run["dataPartenzaTreno"]).unwrap_or(0),
        cancelled: provvedimento == 1 || from.cancelled,
        departed: from.actual_departure_ms.is_some() || detected_after_from,
        arrived: to.actual_arrival_ms.is_some() || (ti == last && run_arrived),
        run_arrived,
        estimated_arrival: estimated_arrival_ms.map(rome_rfc3339),
        platform: platform_effective.clone().or_else(|| platform_programmed.clone()),
        platform_status: platform_status.to_owned(),
        platform_effective,
        platform_programmed,
        scheduled_departure_ms,
        estimated_departure_ms,
        scheduled_arrival_ms,
        estimated_arrival_ms,
        delay_minutes,
        from,
        to,
        stops,
        last_updated: now_ms,
        source: "ViaggiaTreno".to_owned(),
    })
}

/// The train events from `prev` to `cur` (both normalized for the same segment).
pub fn train_events(prev: &TrainSnapshot, cur: &TrainSnapshot, now: i64) -> Vec<DomainEvent> {
    let mut out = Vec::new();
    let train = format!("{} {}", cur.number, cur.from.name);
    let mut push = |key: String, kind: &str, data: Value, text: String| {
        out.push(DomainEvent {
            key,
            kind: kind.to_owned(),
            at: now,
            data,
            previous: None,
            current: None,
            fallback_text: text,
        });
    };
    let p = |s: &TrainSnapshot| {
        json!({"platform": s.platform, "programmed": s.platform_programmed,
        "effective": s.platform_effective, "status": s.platform_status})
    };
    match (&prev.platform, &cur.platform) {
        (None, Some(new)) => push(
            format!("platform_announced:{new}"),
            "train.platform_announced",
            p(cur),
            format!("Train {train}: platform {new} ({}).", cur.platform_status),
        ),
        (Some(old), Some(new)) if old != new => push(
            format!("platform_changed:{old}:{new}"),
            "train.platform_changed",
            json!({"previous": old, "platform": new, "status": cur.platform_status}),
            format!("Train {train}: platform changed from {old} to {new}."),
        ),
        _ => {}
    }
    if prev.platform_effective.is_none()
        && let Some(eff) = &cur.platform_effective
    {
        push(
            format!("platform_confirmed:{eff}"),
            "train.platform_confirmed",
            p(cur),
            format!("Train {train}: platform {eff} confirmed."),
        );
    }
    for (was, is, kind, word) in [
        (prev.departed, cur.departed, "train.departed", "departed"),
        (prev.arrived, cur.arrived, "train.arrived", "arrived"),
        (prev.cancelled, cur.cancelled, "train.cancelled", "is cancelled"),
    ] {
        if is && !was {
            push(
                kind.trim_start_matches("train.").to_owned(),
                kind,
                json!({"delayMinutes": cur.delay_minutes, "platform": cur.platform}),
                format!("Train {train} {word}."),
            );
        }
    }
    if prev.delay_minutes != cur.delay_minutes {
        push(
            format!("delay:{}", cur.delay_minutes),
            "train.delay_changed",
            json!({"previous": prev.delay_minutes, "delayMinutes": cur.delay_minutes}),
            format!("Train {train}: delay now {} min.", cur.delay_minutes),
        );
    }
    if prev.estimated_arrival_ms != cur.estimated_arrival_ms
        && let Some(eta) = cur.estimated_arrival_ms
    {
        push(
            format!("eta:{eta}"),
            "train.eta_changed",
            json!({"previous": prev.estimated_arrival_ms, "estimatedArrivalMs": eta,
                   "estimatedArrival": cur.estimated_arrival}),
            format!("Train {train}: now expected at {}.", rome_rfc3339(eta)),
        );
    }
    for (a, b) in prev.stops.iter().zip(&cur.stops) {
        let stop = |s: &Stop| {
            json!({"station": s.name, "stationId": s.id, "index": s.index,
            "positionRelativeToDestination": s.position_relative_to_destination})
        };
        if a.actual_arrival_ms.is_none()
            && let Some(t) = b.actual_arrival_ms
        {
            push(
                format!("stop_arrived:{}:{t}", b.id),
                "train.stop_arrived",
                stop(b),
                format!("Train {train} reached {}.", b.name),
            );
        }
        if a.actual_departure_ms.is_none()
            && let Some(t) = b.actual_departure_ms
        {
            push(
                format!("stop_departed:{}:{t}", b.id),
                "train.stop_departed",
                stop(b),
                format!("Train {train} left {}.", b.name),
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rome_time_follows_dst() {
        // 2026-03-29 is the last Sunday of March: 00:59 UTC is CET, 01:00 UTC is CEST.
        let before = steward_core::time::parse_date("2026-03-29T00:59:00Z").unwrap();
        assert_eq!(rome_offset_secs(before), 3_600);
        assert_eq!(rome_offset_secs(before + 60), 7_200);
        // 2026-10-25 is the last Sunday of October.
        let back = steward_core::time::parse_date("2026-10-25T01:00:00Z").unwrap();
        assert_eq!(rome_offset_secs(back - 1), 7_200);
        assert_eq!(rome_offset_secs(back), 3_600);
        assert_eq!(rome_rfc3339(1_767_513_300_000), "2026-01-04T08:55:00+01:00");
    }
}
