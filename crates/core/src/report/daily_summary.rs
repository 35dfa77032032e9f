//! `daily_summary` (`fleetctl query daily`): one row per vehicle and local day over
//! a range — km, first departure, last return, driving, idle and engine hours,
//! stops, top speed, speeding and events — the sheet a fleet pays drivers from.

use super::{Cursor, Db, MAX_ROWS, Page, ReportSpec, round1, round2};
use crate::error::{Error, Result};
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
    /// Hours driving: the day's trips' driving_min added up (a trip across midnight shared by its time on each day).
    pub driving_h: f64,
    /// Hours not driving with the ignition reported on: the day's trips' and stops' idle_min added up.
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
    let (from, to, vehicle, cursor) = db.resolve_scope(
        req.from.as_deref(),
        req.to.as_deref(),
        req.plate.as_deref(),
        req.cursor.as_deref(),
    )?;
    let vehicle_id = vehicle.map(|v| v.id);
    let dates = (from.to_string(), to.to_string());
    let after = after_day(db, cursor)?;
    let days = read::daily_after(
        db.conn(),
        vehicle_id,
        (&dates.0, &dates.1),
        (&after.0, &after.1),
        MAX_ROWS + 1,
    )?;
    let total = cursor.total_from(days.len(), MAX_ROWS, || {
        read::daily_count(db.conn(), vehicle_id, &dates.0, &dates.1)
    })?;
    let page = Page::keyed(total, days, |d| {
        let yyyymmdd = d.date.replace('-', "").parse().unwrap_or(0);
        [yyyymmdd, d.vehicle_id, 0]
    });
    let rows = day_rows(db, &page.items)?;
    let mut rows = rows.into_iter();
    Ok(DailySummaryReport {
        from: dates.0,
        to: dates.1,
        data_now: db.time(db.now_ts),
        plate: vehicle.map(|v| v.plate.clone()),
        days: page.map(|_| rows.next().expect("a row per day")),
    })
}

/// The (date, plate) a daily cursor points after; empty strings for the first page.
fn after_day(db: &Db, cursor: Cursor) -> Result<(String, String)> {
    if cursor.total.is_none() {
        return Ok((String::new(), String::new()));
    }
    let [yyyymmdd, vehicle_id, _] = cursor.after;
    let date = format!(
        "{:04}-{:02}-{:02}",
        yyyymmdd / 10000,
        yyyymmdd / 100 % 100,
        yyyymmdd % 100
    );
    match (crate::clock::Date::parse(&date), db.vehicle(vehicle_id)) {
        (Some(_), Some(v)) => Ok((date, v.plate.clone())),
        _ => Err(Error::invalid(format!(
            "cursor {:?} is not one this report gave",
            cursor.to_text()
        ))
        .with_hint("leave cursor out for the first page, then pass each answer's next_cursor")),
    }
}

/// Stored daily rollups as the report shows them (also what `fleetctl export daily`
/// writes), in their order: the trips, speeding and ignition they show beside the
/// rollup are read in one query for all of them.
pub fn day_rows(db: &Db, days: &[crate::model::DailyRollup]) -> Result<Vec<DayRow>> {
    let mut dates = Vec::with_capacity(days.len());
    for d in days {
        dates.push(
            crate::clock::Date::parse(&d.date)
                .ok_or_else(|| Error::internal(format!("daily row dated {:?}", d.date)))?,
        );
    }
    let (Some(first), Some(last)) = (dates.iter().min(), dates.iter().max()) else {
        return Ok(Vec::new());
    };
    let mut vehicle_ids: Vec<i64> = days.iter().map(|d| d.vehicle_id).collect();
    vehicle_ids.sort_unstable();
    vehicle_ids.dedup();
    let span = (db.day_bounds(*first).0, db.day_bounds(*last).1);
    let extras = read::day_extras(db.conn(), &vehicle_ids, span, &|ts| db.zone.local_date(ts))?;
    days.iter()
        .zip(dates)
        .map(|(d, date)| {
            let extra = extras
                .days
                .get(&(d.vehicle_id, date))
                .copied()
                .unwrap_or_default();
            let reports_ignition = extras.ignition_reported.contains(&d.vehicle_id);
            day_row(db, d, reports_ignition, extra)
        })
        .collect()
}

/// One stored daily rollup as the report shows it, with its day's trips and speeding
/// summed (`extra`); `reports_ignition`: the vehicle's tracker reports the ignition,
/// so engine hours are known.
fn day_row(
    db: &Db,
    d: &crate::model::DailyRollup,
    reports_ignition: bool,
    extra: read::DayExtras,
) -> Result<DayRow> {
    // The day's driving and idling: its trips' and stops' (docs/definitions.md).
    let driving_h = d.driving_min / 60.0;
    let idle_h = d.idle_min / 60.0;
    let v = db.vehicle_of(d.vehicle_id)?;
    Ok(DayRow {
        date: d.date.clone(),
        plate: v.plate.clone(),
        driver: v.driver.clone(),
        distance_km: round2(d.distance().km()),
        distance_source: super::DistanceSource::of(&d.distance()),
        odometer_rejected: super::odometer_rejected(&d.distance()),
        gap_km: round2(d.gap_km),
        first_departure: extra.trips_span.map(|s| db.time(s.0)),
        last_return: extra.trips_span.map(|s| db.time(s.1)),
        driving_h: round2(driving_h),
        idle_h: round2(idle_h),
        engine_h: reports_ignition.then(|| round2(driving_h + idle_h)),
        stops: d.stops,
        trips: d.trips,
        max_speed_kmh: round1(d.max_speed_kmh),
        speeding_count: extra.speeding,
        speeding_min: round1(extra.speeding_s as f64 / 60.0),
        signal_losses: d.signal_losses,
        events: d.events,
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
    columns: &[(
        "days",
        &[
            "date",
            "plate",
            "distance_km",
            "first_departure",
            "last_return",
            "driving_h",
            "trips",
            "speeding_count",
        ],
    )],
    run: |db, args| super::invoke(db, args, run),
    output_schema: super::schema::derived::<DailySummaryReport>,
    draws: false,
};
