//! Calendars and contacts: the agenda, free/busy, event search, contact search and recipient
//! resolution. Times are read in the person's zone (`[calendar] time_zone`).

use axum::{Json, extract::State, http::Method, routing::get};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use steward_core::{
    calendar::{
        DEFAULT_SLOT_MINUTES, FreeBusy, instant_in,
        store::{EventHit, EventQuery, StoredOccurrence},
    },
    contacts::{Contact, DEFAULT_SEARCH_LIMIT, Resolution},
};

use super::{ApiError, ApiQuery, AppState, Route, schema};

pub(super) fn routes() -> Vec<Route> {
    vec![
        Route::new(
            Method::GET,
            "/calendar/agenda",
            "The occurrences of every calendar in a window, by start",
            schema::<AgendaPage>,
            get(agenda),
        )
        .query(schema::<WindowQuery>),
        Route::new(
            Method::GET,
            "/calendar/free_busy",
            "Busy occurrences and free slots inside working hours in a window",
            schema::<FreeBusy>,
            get(free_busy),
        )
        .query(schema::<FreeQuery>),
        Route::new(
            Method::GET,
            "/calendar/search",
            "Events by words (every one must match), attendee and calendar, or a window's events",
            schema::<EventPage>,
            get(search_events),
        )
        .query(schema::<EventSearchQuery>),
        Route::new(
            Method::GET,
            "/contacts/search",
            "People of the address books by name, address, organization or phone digits",
            schema::<ContactPage>,
            get(search_contacts),
        )
        .query(schema::<ContactSearchQuery>),
        Route::new(
            Method::GET,
            "/contacts/resolve",
            "Who a text means: resolved, ambiguous or not_found, with ranked candidates and evidence",
            schema::<Resolution>,
            get(resolve),
        )
        .query(schema::<ResolveQuery>),
    ]
}

/// A window of time: dates (`YYYY-MM-DD`, midnight in the person's zone) or RFC 3339.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct WindowQuery {
    /// The window's start.
    #[schemars(length(min = 1))]
    from: String,
    /// The window's end, not included (at most 366 days after `from`).
    #[schemars(length(min = 1))]
    to: String,
}

/// A window and the shortest free slot wanted.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct FreeQuery {
    /// The window's start (`YYYY-MM-DD` or RFC 3339).
    #[schemars(length(min = 1))]
    from: String,
    /// The window's end, not included.
    #[schemars(length(min = 1))]
    to: String,
    /// The shortest free slot shown, minutes (5..=1440; absent: 30).
    #[schemars(range(min = 5, max = 1440))]
    min_minutes: Option<i64>,
}

/// An event search.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub(super) struct EventSearchQuery {
    /// Words, every one must match (summary, location, description, attendees); absent: the
    /// window's events by start.
    q: Option<String>,
    /// The window's start (absent: 30 days ago).
    from: Option<String>,
    /// The window's end, not included (absent: 90 days ahead).
    to: Option<String>,
    /// Only events with this attendee or organizer (an address or part of a name).
    attendee: Option<String>,
    /// Only this calendar (`account/collection`).
    calendar: Option<String>,
    /// Events to return (1..=50; absent: 20).
    #[schemars(range(min = 1, max = 50))]
    limit: Option<usize>,
}

/// A contact search.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct ContactSearchQuery {
    /// Words of a name, address or organization, or five or more digits of a phone.
    #[schemars(length(min = 1, max = 200))]
    q: String,
    /// People to return (1..=50; absent: 10).
    #[schemars(range(min = 1, max = 50))]
    limit: Option<usize>,
}

/// A recipient to resolve.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct ResolveQuery {
    /// What the person said (`Anna from Polimi`, an address).
    #[schemars(length(min = 1, max = 200))]
    q: String,
}

/// The occurrences of a window.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub(super) struct AgendaPage {
    /// By start.
    occurrences: Vec<StoredOccurrence>,
}

/// Events found.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub(super) struct EventPage {
    /// Best match first (by start for a browse).
    events: Vec<EventHit>,
}

/// People found.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub(super) struct ContactPage {
    /// Best match first.
    contacts: Vec<Contact>,
}

/// `text` as an instant in the person's zone.
fn instant(state: &AppState, text: &str) -> Result<DateTime<Utc>, ApiError> {
    Ok(instant_in(text, state.steward().calendar_settings().zone)?)
}

async fn agenda(
    State(state): State<AppState>,
    ApiQuery(q): ApiQuery<WindowQuery>,
) -> Result<Json<AgendaPage>, ApiError> {
    let (from, to) = (instant(&state, &q.from)?, instant(&state, &q.to)?);
    let occurrences = state.call(move |s| s.agenda(from, to)).await?;
    Ok(Json(AgendaPage { occurrences }))
}

async fn free_busy(
    State(state): State<AppState>,
    ApiQuery(q): ApiQuery<FreeQuery>,
) -> Result<Json<FreeBusy>, ApiError> {
    let (from, to) = (instant(&state, &q.from)?, instant(&state, &q.to)?);
    let min = q.min_minutes.unwrap_or(DEFAULT_SLOT_MINUTES);
    state.call(move |s| s.free_busy(from, to, min)).await.map(Json)
}

async fn search_events(
    State(state): State<AppState>,
    ApiQuery(q): ApiQuery<EventSearchQuery>,
) -> Result<Json<EventPage>, ApiError> {
    let at = |t: &Option<String>| t.as_deref().map(|t| instant(&state, t)).transpose();
    let query = EventQuery {
        text: q.q,
        from: at(&q.from)?,
        to: at(&q.to)?,
        calendars: q.calendar.into_iter().collect(),
        attendee: q.attendee,
        limit: q.limit.unwrap_or(EventQuery::default().limit),
    };
    let events = state.call(move |s| s.search_events(&query)).await?;
    Ok(Json(EventPage { events }))
}

async fn search_contacts(
    State(state): State<AppState>,
    ApiQuery(q): ApiQuery<ContactSearchQuery>,
) -> Result<Json<ContactPage>, ApiError> {
    let limit = q.limit.unwrap_or(DEFAULT_SEARCH_LIMIT);
    let contacts = state.call(move |s| s.search_contacts(&q.q, limit)).await?;
    Ok(Json(ContactPage { contacts }))
}

async fn resolve(
    State(state): State<AppState>,
    ApiQuery(q): ApiQuery<ResolveQuery>,
) -> Result<Json<Resolution>, ApiError> {
    state.call(move |s| s.resolve_recipient(&q.q)).await.map(Json)
}
