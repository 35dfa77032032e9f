//! `geofence_report` (`fleetctl query geofence-report NAME`): one geofence across
//! vehicles and days — who entered, when, for how long — with each vehicle's visits
//! and dwell minutes summed.

use super::{Db, List, MAX_ROWS, Page, ReportSpec, round1};
use crate::error::Result;
use crate::store::read;
use serde::{Deserialize, Serialize};

/// Geofence, range, vehicle and page.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GeofenceReportRequest {
    /// Geofence name, matched forgivingly (e.g. "bodega mixco")
    #[schemars(extend("x-kind" = "text", "x-positional" = true))]
    pub geofence: String,
    /// First local date: YYYY-MM-DD, today or yesterday (default: 6 days before to)
    #[schemars(extend("x-kind" = "date"))]
    pub from: Option<String>,
    /// Last local date (default today)
    #[schemars(extend("x-kind" = "date"))]
    pub to: Option<String>,
    /// Only this vehicle (default: every vehicle)
    #[schemars(extend("x-kind" = "plate"))]
    pub plate: Option<String>,
    /// The next_cursor of the previous page (default: the first page)
    #[schemars(extend("x-kind" = "text"))]
    pub cursor: Option<String>,
}

/// One visit.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct GeofenceVisitRow {
    /// Plate.
    pub plate: String,
    /// The first fix inside (or the first fix of the data).
    pub entered_at: String,
    /// The first fix outside again; null while still inside.
    pub exited_at: Option<String>,
    /// Minutes inside within the range (to the data clock while still inside).
    pub dwell_min: f64,
    /// Still inside at the vehicle's last fix.
    pub inside_now: bool,
}

/// One vehicle's visits, summed.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct GeofenceVehicleRow {
    /// Plate.
    pub plate: String,
    /// Visits in the range.
    pub visits: usize,
    /// Minutes inside, in all.
    pub dwell_min: f64,
}

/// A geofence over a range.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct GeofenceReport {
    /// The geofence (resolved name).
    pub geofence: String,
    /// Its kind.
    pub kind: String,
    /// First local date.
    pub from: String,
    /// Last local date.
    pub to: String,
    /// The data clock.
    pub data_now: String,
    /// The vehicle filter (resolved plate), if any.
    pub plate: Option<String>,
    /// Vehicles that were inside, most minutes first (over every visit, not one page).
    pub by_vehicle: List<GeofenceVehicleRow>,
    /// The visits, by entry time.
    pub visits: Page<GeofenceVisitRow>,
}

/// Runs the report.
pub fn run(db: &Db, req: &GeofenceReportRequest) -> Result<GeofenceReport> {
    let geofence = db.resolve_geofence(&req.geofence)?;
    let (from, to, vehicle, cursor) = db.resolve_scope(
        req.from.as_deref(),
        req.to.as_deref(),
        req.plate.as_deref(),
        req.cursor.as_deref(),
    )?;
    let range = (db.day_bounds(from).0, db.day_bounds(to).1);
    let end = range.1.min(db.now_ts);
    // Minutes inside, clipped to the range (and the data clock).
    let dwell_min = |v: &crate::model::Visit| {
        let out = v.exit_ts.unwrap_or(end).min(end);
        (out - v.enter_ts.max(range.0)).max(0) as f64 / 60.0
    };
    let plate = |id: i64| db.vehicle_of(id).map(|v| v.plate.clone());
    let query = read::VisitQuery {
        geofence_id: geofence.id,
        vehicle_id: vehicle.map(|v| v.id),
        from_ts: range.0,
        to_ts: range.1,
    };
    // The per-vehicle sums cover every visit, not one page: summed in SQL.
    let sums = read::visit_sums(db.conn(), &query, end)?;
    let total = sums.iter().map(|&(_, visits, _)| visits).sum();
    let mut by_vehicle: Vec<GeofenceVehicleRow> = sums
        .into_iter()
        .map(|(id, visits, seconds)| {
            Ok(GeofenceVehicleRow {
                plate: plate(id)?,
                visits,
                dwell_min: round1(seconds as f64 / 60.0),
            })
        })
        .collect::<Result<_>>()?;
    by_vehicle.sort_by(|a, b| {
        b.dwell_min
            .total_cmp(&a.dwell_min)
            .then_with(|| a.plate.cmp(&b.plate))
    });
    let page = Page::keyed(
        total,
        read::visits_after(db.conn(), &query, cursor.pair(), MAX_ROWS + 1)?,
        |v| [v.enter_ts, v.vehicle_id, 0],
    );
    Ok(GeofenceReport {
        geofence: geofence.name.clone(),
        kind: geofence.kind.clone(),
        from: from.to_string(),
        to: to.to_string(),
        data_now: db.time(db.now_ts),
        plate: vehicle.map(|v| v.plate.clone()),
        by_vehicle: List::capped(by_vehicle),
        visits: page.try_map(|v| {
            Ok(GeofenceVisitRow {
                plate: plate(v.vehicle_id)?,
                entered_at: db.time(v.enter_ts),
                exited_at: v.exit_ts.map(|t| db.time(t)),
                dwell_min: round1(dwell_min(&v)),
                inside_now: v.exit_ts.is_none(),
            })
        })?,
    })
}

/// The registry entry.
pub const SPEC: ReportSpec = ReportSpec {
    tool: "geofence_report",
    cli: "geofence-report",
    title: "One geofence across vehicles and days",
    description: "Who was inside one geofence (name matched forgivingly) in an inclusive range of local dates \
(default: the last 7 days; at most 92), every vehicle or one (plate): each visit's entry and exit time and dwell \
minutes within the range (to the data clock while still inside), by entry time, and per vehicle the visits and \
minutes in all, most first. Visits over 200 come in pages: pass next_cursor as cursor; total is exact. Use it for \
'who went to Bodega Mixco this week and how long did they stay'; use geofence_visits for one vehicle on one day.",
    input: super::schema::derived_input::<GeofenceReportRequest>,
    rows: "visits",
    columns: &[],
    run: |db, args| super::invoke(db, args, run),
    output_schema: super::schema::derived::<GeofenceReport>,
    draws: false,
};
