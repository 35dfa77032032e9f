//! `events` (`fleetctl query events`): every event detection found over a range —
//! speeding, long stops, signal losses, geofence entries and exits, ignition on and
//! off — filtered by kind, vehicle and geofence, page by page.

use super::{Db, MAX_ROWS, Page, ReportSpec};
use crate::error::Result;
use crate::model::EventKind;
use crate::store::read;
use serde::{Deserialize, Serialize};

/// The kinds of event (the `kind` filter).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum EventKindName {
    /// Above the speed limit.
    Speeding,
    /// A long stop.
    LongStop,
    /// A signal loss.
    SignalLoss,
    /// Into a geofence.
    GeofenceEnter,
    /// Out of a geofence.
    GeofenceExit,
    /// Ignition switched on.
    IgnitionOn,
    /// Ignition switched off.
    IgnitionOff,
}

impl EventKindName {
    fn kind(self) -> EventKind {
        match self {
            EventKindName::Speeding => EventKind::Speeding,
            EventKindName::LongStop => EventKind::LongStop,
            EventKindName::SignalLoss => EventKind::SignalLoss,
            EventKindName::GeofenceEnter => EventKind::GeofenceEnter,
            EventKindName::GeofenceExit => EventKind::GeofenceExit,
            EventKindName::IgnitionOn => EventKind::IgnitionOn,
            EventKindName::IgnitionOff => EventKind::IgnitionOff,
        }
    }
}

/// Range, filters and page.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EventsRequest {
    /// First local date: YYYY-MM-DD, today or yesterday (default: 6 days before to)
    #[schemars(extend("x-kind" = "date"))]
    pub from: Option<String>,
    /// Last local date (default today)
    #[schemars(extend("x-kind" = "date"))]
    pub to: Option<String>,
    /// Only this kind of event
    pub kind: Option<EventKindName>,
    /// Only this vehicle (default: the whole fleet)
    #[schemars(extend("x-kind" = "plate"))]
    pub plate: Option<String>,
    /// Only entries into and exits from this geofence (name, matched forgivingly)
    #[schemars(extend("x-kind" = "text"))]
    pub geofence: Option<String>,
    /// The next_cursor of the previous page (default: the first page)
    #[schemars(extend("x-kind" = "text"))]
    pub cursor: Option<String>,
}

/// One event.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct EventsRow {
    /// Plate.
    pub plate: String,
    /// Event kind.
    pub kind: &'static str,
    /// When it began.
    #[schemars(extend("format" = "date-time"))]
    pub at: String,
    /// When it ended.
    #[schemars(extend("format" = "date-time"))]
    pub until: String,
    /// Where, for people.
    pub place: String,
    /// Kind-specific figures (max_speed_kmh and limit_kmh, duration_min, minutes_lost, geofence…).
    #[schemars(with = "serde_json::Map<String, serde_json::Value>")]
    pub detail: serde_json::Value,
}

/// The events of a range.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct EventsReport {
    /// First local date.
    pub from: String,
    /// Last local date.
    pub to: String,
    /// The data clock.
    pub data_now: String,
    /// The kind filter, if any.
    pub kind: Option<EventKindName>,
    /// The vehicle filter (resolved plate), if any.
    pub plate: Option<String>,
    /// The geofence filter (resolved name), if any.
    pub geofence: Option<String>,
    /// The events, by start time.
    pub events: Page<EventsRow>,
}

/// Runs the report.
pub fn run(db: &Db, req: &EventsRequest) -> Result<EventsReport> {
    let (from, to, vehicle, cursor) = db.resolve_scope(
        req.from.as_deref(),
        req.to.as_deref(),
        req.plate.as_deref(),
        req.cursor.as_deref(),
    )?;
    let geofence = req
        .geofence
        .as_deref()
        .map(|g| db.resolve_geofence(g))
        .transpose()?;
    let kinds: Vec<EventKind> = req.kind.map(EventKindName::kind).into_iter().collect();
    let query = read::EventQuery {
        vehicle_id: vehicle.map(|v| v.id),
        kinds: &kinds,
        geofence_id: geofence.map(|g| g.id),
        from_ts: db.day_bounds(from).0,
        to_ts: db.day_bounds(to).1,
    };
    let days = (from.to_string(), to.to_string());
    let rows = read::events_after(db.conn(), &query, cursor.after, MAX_ROWS + 1)?;
    let total = cursor.total_from(rows.len(), MAX_ROWS, || {
        read::events_count(db.conn(), &query, (&days.0, &days.1))
    })?;
    let page = Page::keyed(total, rows, |(key, _)| *key);
    Ok(EventsReport {
        from: from.to_string(),
        to: to.to_string(),
        data_now: db.time(db.now_ts),
        kind: req.kind,
        plate: vehicle.map(|v| v.plate.clone()),
        geofence: geofence.map(|g| g.name.clone()),
        events: page.try_map(|(_, e)| events_row(db, &e))?,
    })
}

/// One stored event as the report shows it (also what `fleetctl export events` writes).
pub fn events_row(db: &Db, e: &crate::model::Event) -> Result<EventsRow> {
    let row = super::trip_summary::event_row(db, e);
    Ok(EventsRow {
        plate: db.vehicle_of(e.vehicle_id)?.plate.clone(),
        kind: row.kind,
        at: row.at,
        until: row.until,
        place: row.place,
        detail: row.detail,
    })
}

/// The registry entry.
pub const SPEC: ReportSpec = ReportSpec {
    tool: "events",
    cli: "events",
    title: "Events over a date range",
    description: "Every event detected from the positions that began in an inclusive range of local dates (default: \
the last 7 days; at most 92), by time: speeding (with the limit and duration), long_stop, signal_loss, geofence_enter, \
geofence_exit, ignition_on, ignition_off, each with plate, time, place and its figures. Filter by kind, plate and \
geofence (its entries and exits). Lists over 200 come in pages: pass next_cursor as cursor; total is exact. Use it to \
list events one by one (every entry into a depot, every ignition off); use alerts for counts and the worst speeding, \
long stops and signal losses.",
    input: super::schema::derived_input::<EventsRequest>,
    rows: "events",
    columns: &[("events", &["plate", "kind", "at", "until", "place"])],
    run: |db, args| super::invoke(db, args, run),
    output_schema: super::schema::derived::<EventsReport>,
    draws: false,
};
