//! `geofence_visits` (`fleetctl query geofence PLATE NAME --date D`): did a vehicle
//! enter a place on a day, and each visit's entry, exit and minutes inside.

use super::{Db, List, ReportSpec, round1};
use crate::error::Result;
use crate::store::read;
use serde::{Deserialize, Serialize};

/// Which vehicle, place and day.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GeofenceVisitsRequest {
    /// Plate, e.g. P-123BCD
    #[schemars(extend("x-kind" = "plate", "x-positional" = true))]
    pub plate: String,
    /// Geofence name, e.g. "Bodega Mixco" (forgiving match)
    #[schemars(extend("x-kind" = "text", "x-positional" = true))]
    pub geofence: String,
    /// Local date: YYYY-MM-DD, today or yesterday (default today)
    #[schemars(extend("x-kind" = "date"))]
    pub date: Option<String>,
}

/// One stay inside the geofence.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct VisitRow {
    /// First fix inside (the first fix of the data if it started inside).
    pub entered_at: String,
    /// First fix outside again; null while still inside.
    pub exited_at: Option<String>,
    /// Minutes inside during this day (up to the data clock while still inside).
    pub minutes_inside: f64,
    /// Still inside at the vehicle's last fix.
    pub still_inside: bool,
}

/// The visits of one day.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct GeofenceVisitsReport {
    /// Plate.
    pub plate: String,
    /// The geofence chosen for the name given.
    pub geofence: String,
    /// Its kind.
    pub geofence_kind: String,
    /// The local date reported.
    pub date: String,
    /// The data clock.
    pub data_now: String,
    /// Whether the vehicle was inside at any time that day.
    pub entered: bool,
    /// Why there can be no visit (out of service, or no fixes that day), if so.
    pub note: Option<String>,
    /// Minutes inside during this day, summed over the visits.
    pub minutes_inside_total: f64,
    /// Visits overlapping the day, in time order.
    pub visits: List<VisitRow>,
}

/// Runs the report.
pub fn run(db: &Db, req: &GeofenceVisitsRequest) -> Result<GeofenceVisitsReport> {
    let v = db.resolve_plate(&req.plate)?;
    let g = db.resolve_geofence(&req.geofence)?;
    let date = db.resolve_date(req.date.as_deref())?;
    let (from, to) = db.day_bounds(date);
    let visits = read::visits_overlapping(db.conn(), v.id, g.id, from, to)?;
    let rows: Vec<VisitRow> = visits
        .iter()
        .filter_map(|visit| {
            // Only the part of the visit inside this day, and before the data clock,
            // counts: a day after the data ends holds no visit.
            let end = visit
                .exit_ts
                .unwrap_or(db.now_ts)
                .min(db.now_ts.max(visit.enter_ts))
                .min(to);
            let start = visit.enter_ts.max(from);
            (end > start || (visit.enter_ts >= from && visit.enter_ts < to)).then(|| VisitRow {
                entered_at: db.time(visit.enter_ts),
                exited_at: visit.exit_ts.map(|t| db.time(t)),
                minutes_inside: round1((end - start).max(0) as f64 / 60.0),
                still_inside: visit.exit_ts.is_none(),
            })
        })
        .collect();
    Ok(GeofenceVisitsReport {
        plate: v.plate.clone(),
        geofence: g.name.clone(),
        geofence_kind: g.kind.clone(),
        date: date.to_string(),
        data_now: db.time(db.now_ts),
        entered: !rows.is_empty(),
        note: if rows.is_empty() {
            let day =
                read::daily_between(db.conn(), Some(v.id), &date.to_string(), &date.to_string())?;
            db.no_data_note(v, day.is_empty(), &date.to_string())?
        } else {
            None
        },
        minutes_inside_total: round1(rows.iter().map(|r| r.minutes_inside).sum()),
        visits: List::capped(rows),
    })
}

/// The registry entry.
pub const SPEC: ReportSpec = ReportSpec {
    tool: "geofence_visits",
    cli: "geofence",
    title: "A vehicle's visits to a geofence on a day",
    description: "Whether one vehicle was inside a named geofence (depot, distribution centre, customer zone, \
Centro Histórico) on a local day, and each visit: entry and exit times (RFC 3339), minutes inside, and whether it \
is still inside; minutes_inside counts only the part within that day. A visit needs 2 consecutive fixes inside, so a fix grazing the edge does not count. Names are \
matched forgivingly (case, accents, partial words); call list_geofences for the names. date accepts YYYY-MM-DD, \
today or yesterday.",
    input: super::schema::derived_input::<GeofenceVisitsRequest>,
    rows: "visits",
    columns: &[],
    run: |db, args| super::invoke(db, args, run),
    output_schema: super::schema::derived::<GeofenceVisitsReport>,
    draws: false,
};
