//! `daily_summary` (`fleetctl query daily`): one row per vehicle and local day over
//! a range — km, first departure, last return, driving, idle and engine hours,
//! stops, top speed, speeding and events — the sheet a fleet pays drivers from.

use super::{Db, Page, ReportSpec, round1, round2};
use crate::error::Result;
use crate::store::read;
use serde::{Deserialize, Serialize};

/// Range, vehicle and page.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DailySummaryRequest {
    /// First local date: YYYY-MM-DD, today or yesterday (default: 6 days before to)
    #[schemars(extend("x-kind" = "date"))]
    pub from: Option<String>,
    /// Last local date (default today)
    #[schemars(extend("x-kind" = "date"))]
    pub to: Option<String>,
    /// Only this vehicle (default: the whole fleet)
    #[schemars(extend("x-kind" = "plate"))]
    pub plate: Option<String>,
    /// The next_cursor of the previous page (default: the first page)
    #[schemars(extend("x-kind" = "text"))]
    pub cursor: Option<String>,
}

/// One vehicle's day.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct DayRow {
    /// Local date.
    pub date: String,
    /// Plate.
    pub plate: String,
    /// Driver.
    pub driver: String,
    /// Kilometres driven (the odometer when its readings earned their use, else GPS).
    pub distance_km: f64,
    /// Where distance_km comes from.
    pub distance_source: super::DistanceSource,
    /// Why the odometer's readings were not used: `decreasing` or `implausible`.
    pub odometer_rejected: Option<String>,
    /// Straight-line kilometres across signal losses: not in a GPS distance_km (an odometer's counts what was driven unseen too).
    pub gap_km: f64,
    /// Start of the day's first trip.
    #[schemars(extend("format" = "date-time"))]
    pub first_departure: Option<String>,
    /// End of the day's last trip.
    #[schemars(extend("format" = "date-time"))]
    pub last_return: Option<String>,
    /// Hours moving.
    pub driving_h: f64,
    /// Hours stopped, and slow in traffic, with the engine reported on.
    pub idle_h: f64,
    /// Hours with the ignition on (driving plus idle); null when the tracker does not report the ignition.
    pub engine_h: Option<f64>,
    /// Stops that began this day.
    pub stops: i64,
    /// Trips that began this day.
    pub trips: i64,
    /// Highest speed, km/h.
    pub max_speed_kmh: f64,
    /// Speeding episodes.
    pub speeding_count: i64,
    /// Their minutes (estimated, see the alerts' duration_s).
    pub speeding_min: f64,
    /// Signal losses.
    pub signal_losses: i64,
    /// Every event this day (speeding, stops, losses, geofences, ignition).
    pub events: i64,
}

/// Per vehicle and day over a range.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct DailySummaryReport {
    /// First local date.
    pub from: String,
    /// Last local date.
    pub to: String,
    /// The data clock.
    pub data_now: String,
    /// The vehicle filter (resolved plate), if any.
    pub plate: Option<String>,
    /// The days with data, by date then plate.
    pub days: Page<DayRow>,
}

/// Runs the report.
pub fn run(db: &Db, req: &DailySummaryRequest) -> Result<DailySummaryReport> {
    let (from, to, vehicle, offset) = db.resolve_scope(
        req.from.as_deref(),
        req.to.as_deref(),
        req.plate.as_deref(),
        req.cursor.as_deref(),
    )?;
    let mut days = read::daily_between(
        db.conn(),
        vehicle.map(|v| v.id),
        &from.to_string(),
        &to.to_string(),
    )?;
    let plate_of = |id: i64| db.vehicle(id).map_or("", |v| v.plate.as_str());
    days.sort_by(|a, b| {
        a.date
            .cmp(&b.date)
            .then_with(|| plate_of(a.vehicle_id).cmp(plate_of(b.vehicle_id)))
    });
    let page = Page::slice(days, offset);
    let ignition = ignition_reported(db)?;
    let rows = page
        .items
        .iter()
        .map(|d| day_row(db, d, ignition.contains(&d.vehicle_id)))
        .collect::<Result<Vec<_>>>()?;
    Ok(DailySummaryReport {
        from: from.to_string(),
        to: to.to_string(),
        data_now: db.time(db.now_ts),
        plate: vehicle.map(|v| v.plate.clone()),
        days: Page::new(page.total, offset, rows),
    })
}

/// The vehicles whose trackers report the ignition (their days have engine hours).
pub fn ignition_reported(db: &Db) -> Result<std::collections::HashSet<i64>> {
    Ok(read::last_fixes(db.conn())?
        .into_iter()
        .filter(|f| f.ignition.is_some())
        .map(|f| f.vehicle_id)
        .collect())
}

/// One stored daily rollup as the report shows it (also what `fleetctl export daily`
/// writes); `reports_ignition`: the vehicle's tracker reports the ignition, so engine
/// hours are known.
pub fn day_row(db: &Db, d: &crate::model::DailyRollup, reports_ignition: bool) -> Result<DayRow> {
    let date = crate::clock::Date::parse(&d.date)
        .ok_or_else(|| crate::error::Error::internal(format!("daily row dated {:?}", d.date)))?;
    let (start, end) = db.day_bounds(date);
    let span = read::trips_span(db.conn(), d.vehicle_id, start, end)?;
    let (events, speeding_count, speeding_s) =
        read::event_counts(db.conn(), d.vehicle_id, start, end)?;
    let trip_idle_s = span.map_or(0, |s| s.3);
    // The rollup's moving time is all the time outside stops; slow time with the
    // engine on inside trips is idle, not driving.
    let driving_h = (d.moving_min * 60.0 - trip_idle_s as f64).max(0.0) / 3600.0;
    let idle_h = (d.idle_min * 60.0 + trip_idle_s as f64) / 3600.0;
    let v = db.vehicle(d.vehicle_id);
    Ok(DayRow {
        date: d.date.clone(),
        plate: v.map_or_else(String::new, |v| v.plate.clone()),
        driver: v.map_or_else(String::new, |v| v.driver.clone()),
        distance_km: round2(d.distance().km()),
        distance_source: super::DistanceSource::of(&d.distance()),
        odometer_rejected: super::odometer_rejected(&d.distance()),
        gap_km: round2(d.gap_km),
        first_departure: span.map(|s| db.time(s.0)),
        last_return: span.map(|s| db.time(s.1)),
        driving_h: round2(driving_h),
        idle_h: round2(idle_h),
        engine_h: reports_ignition.then(|| round2(driving_h + idle_h)),
        stops: d.stops,
        trips: d.trips,
        max_speed_kmh: round1(d.max_speed_kmh),
        speeding_count,
        speeding_min: round1(speeding_s as f64 / 60.0),
        signal_losses: d.signal_losses,
        events,
    })
}

/// The registry entry.
pub const SPEC: ReportSpec = ReportSpec {
    tool: "daily_summary",
    cli: "daily",
    title: "Per vehicle and day over a date range",
    description: "One row per vehicle and local day with data in an inclusive range of local dates (default: the last \
7 days; at most 92), for one vehicle (plate) or the whole fleet, by date then plate: km (odometer or GPS, says which), \
first departure and last return, driving, idle and engine hours (engine hours only when the tracker reports the \
ignition), stops, trips, max speed, speeding count and minutes, signal losses and events. Lists over 200 rows come \
in pages: pass next_cursor as cursor; total is exact. Use it for a week's sheet per driver or the daily briefing; use \
trip_summary for one day's detail (each stop and event).",
    input: super::schema::derived_input::<DailySummaryRequest>,
    rows: "days",
    run: |db, args| super::invoke(db, args, run),
    output_schema: super::schema::derived::<DailySummaryReport>,
    draws: false,
};
