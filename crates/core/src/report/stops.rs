//! `stops` (`fleetctl query stops`): every stop over a range, one vehicle's or the
//! fleet's, with its place, times, minutes and engine state; filtered by length and
//! by geofence ("every stop over 20 minutes at a customer").

use super::{Db, MAX_ROWS, Page, ReportSpec, round1};
use crate::error::Result;
use crate::geo::LatLon;
use crate::model::EngineState;
use crate::store::read::{self, RangeQuery};
use serde::{Deserialize, Serialize};

/// Range, filters and page.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StopsRequest {
    /// First local date: YYYY-MM-DD, today or yesterday (default: 6 days before to)
    #[schemars(extend("x-kind" = "date"))]
    pub from: Option<String>,
    /// Last local date (default today)
    #[schemars(extend("x-kind" = "date"))]
    pub to: Option<String>,
    /// Only this vehicle (default: the whole fleet)
    #[schemars(extend("x-kind" = "plate"))]
    pub plate: Option<String>,
    /// Only stops lasting at least this many minutes (default 0: every stop)
    #[schemars(range(min = 0, max = 1440))]
    pub min_minutes: Option<i64>,
    /// Only stops inside this geofence (name, matched forgivingly)
    #[schemars(extend("x-kind" = "text"))]
    pub geofence: Option<String>,
    /// The next_cursor of the previous page (default: the first page)
    #[schemars(extend("x-kind" = "text"))]
    pub cursor: Option<String>,
}

/// One stop.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct StopsRow {
    /// Plate.
    pub plate: String,
    /// Where, for people.
    pub place: String,
    /// When it began (the first stationary fix).
    #[schemars(extend("format" = "date-time"))]
    pub start: String,
    /// When movement began again (or the last fix, if still stopped).
    #[schemars(extend("format" = "date-time"))]
    pub end: String,
    /// Minutes.
    pub minutes: f64,
    /// The engine for most of it: on (idle), off (parked), or unknown (not reported).
    pub engine: EngineState,
    /// Minutes with the engine reported on.
    pub idle_min: f64,
    /// Still stopped at the vehicle's last fix.
    pub ongoing: bool,
    /// Latitude of the stop, degrees.
    pub lat: f64,
    /// Longitude of the stop, degrees.
    pub lon: f64,
}

/// The stops of a range.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct StopsReport {
    /// First local date.
    pub from: String,
    /// Last local date.
    pub to: String,
    /// The data clock.
    pub data_now: String,
    /// The vehicle filter (resolved plate), if any.
    pub plate: Option<String>,
    /// The minimum length asked for, minutes.
    pub min_minutes: i64,
    /// The geofence filter (resolved name), if any.
    pub geofence: Option<String>,
    /// The stops, by start time.
    pub stops: Page<StopsRow>,
}

/// Runs the report.
pub fn run(db: &Db, req: &StopsRequest) -> Result<StopsReport> {
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
    let min_minutes = req.min_minutes.unwrap_or(0);
    let query = RangeQuery {
        vehicle_id: vehicle.map(|v| v.id),
        from_ts: db.day_bounds(from).0,
        to_ts: db.day_bounds(to).1,
        min_s: min_minutes * 60,
        bbox: geofence.map(|g| g.shape.bbox()),
    };
    // The box narrows the rows in SQL; the shape itself decides, here, so a geofence
    // filter counts and pages over the stops that are truly inside.
    let (total, stops) = match geofence {
        None => {
            let rows = read::stops_after(db.conn(), &query, cursor.pair(), MAX_ROWS + 1)?;
            let total = cursor.total_from(rows.len(), MAX_ROWS, || {
                let days = (from.to_string(), to.to_string());
                read::stops_count(db.conn(), &query, (&days.0, &days.1))
            })?;
            (total, rows)
        }
        Some(g) => {
            let inside = |lat: f64, lon: f64| g.shape.contains(LatLon::new(lat, lon));
            let total = cursor.total_or(|| {
                Ok(read::stop_points(db.conn(), &query)?
                    .into_iter()
                    .filter(|&(lat, lon)| inside(lat, lon))
                    .count())
            })?;
            // Read the box a page and a half at a time until a page and one more are in.
            let mut stops = Vec::new();
            let mut after = cursor.pair();
            loop {
                let chunk = read::stops_after(db.conn(), &query, after, MAX_ROWS * 3 / 2)?;
                let last = chunk.last().map(|s| [s.start_ts, s.vehicle_id]);
                let ended = chunk.len() < MAX_ROWS * 3 / 2;
                stops.extend(chunk.into_iter().filter(|s| inside(s.lat, s.lon)));
                match last {
                    Some(key) if !ended && stops.len() <= MAX_ROWS => after = key,
                    _ => break,
                }
            }
            (total, stops)
        }
    };
    let page = Page::keyed(total, stops, |s| [s.start_ts, s.vehicle_id, 0]);
    Ok(StopsReport {
        from: from.to_string(),
        to: to.to_string(),
        data_now: db.time(db.now_ts),
        plate: vehicle.map(|v| v.plate.clone()),
        min_minutes,
        geofence: geofence.map(|g| g.name.clone()),
        stops: page.try_map(|s| stop_row(db, &s))?,
    })
}

/// One stored stop as the report shows it (also what `fleetctl export stops` writes).
pub fn stop_row(db: &Db, s: &crate::model::Stop) -> Result<StopsRow> {
    Ok(StopsRow {
        plate: db.vehicle_of(s.vehicle_id)?.plate.clone(),
        place: s.place.clone(),
        start: db.time(s.start_ts),
        end: db.time(s.end_ts),
        minutes: round1(s.duration_s() as f64 / 60.0),
        engine: s.engine(),
        idle_min: round1(s.idle_s as f64 / 60.0),
        ongoing: s.ongoing,
        lat: s.lat,
        lon: s.lon,
    })
}

/// The registry entry.
pub const SPEC: ReportSpec = ReportSpec {
    tool: "stops",
    cli: "stops",
    title: "Stops over a date range",
    description: "Every stop (the vehicle stayed within the stop radius, 200 m by default, for at least 3 minutes) that \
began in an inclusive range of local dates (default: the last 7 days; at most 92), for one vehicle (plate) or the whole \
fleet, by start time: place, start, end, minutes, engine on (idle), off (parked) or unknown (the tracker does not report \
the ignition), whether it is still going on. Filter with min_minutes and geofence (stops inside it). Lists over 200 \
come in pages: pass next_cursor as cursor; total is exact. Use it for 'every stop over 20 minutes at Bodega Mixco last \
week'; use stopped_vehicles for who is stopped now.",
    input: super::schema::derived_input::<StopsRequest>,
    rows: "stops",
    columns: &[(
        "stops",
        &["plate", "start", "end", "minutes", "engine", "place"],
    )],
    run: |db, args| super::invoke(db, args, run),
    output_schema: super::schema::derived::<StopsReport>,
    draws: false,
};
