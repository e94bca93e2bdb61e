//! The train tools an agent may call: `trains.next` (the next direct train between two
//! dictated stations) and `trains.status` (a train's fresh status from its `trainRef`). Both
//! are reads of a public timetable service, so their results are untrusted data.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use steward_core::{
    policy::{Effect, Level, PolicyError, ToolSpec},
    time::parse_instant,
    tools::{ExecError, SourceRef, ToolError, ToolOutput, ToolRun, Toolbox, Typed},
};

use super::{NextTrain, Station, TrainSnapshot, TrainStatus, ViaggiaTreno, rome_rfc3339};

/// Find the next direct train between two stations.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TrainsNextInput {
    /// The departure station, as the person said it ("Milano Centrale", "roma").
    pub from: String,
    /// The destination station.
    pub to: String,
    /// Depart at or after this instant (RFC 3339); now when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<String>,
}

/// A train's fresh status.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TrainsStatusInput {
    /// The `trainRef` a `trains.next` result gave.
    pub train_ref: String,
}

/// The specs of the train tools, for the handle's registry (the policy decides over them).
pub fn specs() -> Result<Vec<ToolSpec>, PolicyError> {
    Ok(vec![
        ToolSpec::new::<TrainsNextInput>(
            "trains.next",
            "Find the next direct train between two Italian stations (ViaggiaTreno).",
            Effect::Read,
            Level::Auto,
        )?,
        ToolSpec::new::<TrainsStatusInput>(
            "trains.status",
            "A train's live status: delay, platform, departed or arrived.",
            Effect::Read,
            Level::Auto,
        )?,
    ])
}

fn describe(s: &TrainSnapshot) -> String {
    let at = |ms: Option<i64>| ms.map_or_else(|| "?".to_owned(), rome_rfc3339);
    let state = if s.cancelled {
        "cancelled"
    } else if s.arrived {
        "arrived"
    } else if s.departed {
        "departed"
    } else {
        "not departed"
    };
    format!(
        "train {} {} → {}: departs {} (estimated {}), arrives {} (estimated {}), delay {} min, \
         platform {} ({}), {state}",
        s.number,
        s.from.name,
        s.to.name,
        at(s.scheduled_departure_ms),
        at(s.estimated_departure_ms),
        at(s.scheduled_arrival_ms),
        at(s.estimated_arrival_ms),
        s.delay_minutes,
        s.platform.as_deref().unwrap_or("?"),
        s.platform_status
    )
}

fn station(s: &Station) -> String {
    format!("{} ({})", s.name, s.id)
}

fn next(
    client: &ViaggiaTreno,
    run: &ToolRun<'_>,
    i: TrainsNextInput,
) -> Result<ToolOutput, ExecError> {
    let after = match &i.after {
        Some(t) => parse_instant(t).map_err(|e| ExecError::invalid(format!("after {t:?}: {e}")))?,
        None => run.now,
    };
    let found = client.find_next_train(&i.from, &i.to, after)?;
    let data = serde_json::to_value(&found).unwrap_or_default();
    let (text, sources) = match &found {
        NextTrain::Found { train_ref, snapshot, .. } => (
            format!("{}\ntrainRef {train_ref}", describe(snapshot)),
            vec![SourceRef::Train { train_ref: train_ref.clone() }],
        ),
        NextTrain::NoDirectTrain { from, to, checked } => (
            format!(
                "No direct train from {} to {} among the next {checked} departures.",
                station(from),
                station(to)
            ),
            Vec::new(),
        ),
        NextTrain::AmbiguousStation { which, query, candidates } => (
            format!(
                "The {which} station {query:?} is ambiguous; ask the person which: {}",
                candidates.iter().map(|(s, _)| station(s)).collect::<Vec<_>>().join("; ")
            ),
            Vec::new(),
        ),
        NextTrain::StationNotFound { which, query } => {
            (format!("No {which} station like {query:?}."), Vec::new())
        }
    };
    Ok(ToolOutput { text, data, sources, ..ToolOutput::default() })
}

fn status(
    client: &ViaggiaTreno,
    run: &ToolRun<'_>,
    i: TrainsStatusInput,
) -> Result<ToolOutput, ExecError> {
    let status = client.train_status(&i.train_ref, run.now)?;
    let text = match &status {
        TrainStatus::Live { snapshot } => describe(snapshot),
        TrainStatus::NoLiveData => {
            "No live data for this train now (not running yet, or not today).".to_owned()
        }
    };
    Ok(ToolOutput {
        text,
        data: serde_json::to_value(&status).unwrap_or_else(|_| json!({})),
        sources: vec![SourceRef::Train { train_ref: i.train_ref }],
        ..ToolOutput::default()
    })
}

/// Adds the train tools to `toolbox` over `client` (their specs must be registered: see
/// [`specs`] and [`crate::home::builder`]).
pub fn register(toolbox: &mut Toolbox, client: ViaggiaTreno) -> Result<(), ToolError> {
    let client = Arc::new(client);
    let c = Arc::clone(&client);
    toolbox.register(
        "trains.next",
        Arc::new(Typed::new(
            |i: &TrainsNextInput| format!("Next train from {} to {}", i.from, i.to),
            move |run, i| next(&c, run, i),
        )),
    )?;
    toolbox.register(
        "trains.status",
        Arc::new(Typed::new(
            |i: &TrainsStatusInput| format!("Status of train {}", i.train_ref),
            move |run, i| status(&client, run, i),
        )),
    )
}
