//! `trips` (`fleetctl query trips`): every trip over a range, one vehicle's or the
//! fleet's, with its km, times, places, driving and idle minutes and the events
//! inside it — a week in one call instead of seven `trip_summary` calls.

use super::{Db, DistanceSource, MAX_ROWS, Page, ReportSpec, round1, round2};
use crate::error::Result;
use crate::store::read::{self, RangeQuery};
use serde::{Deserialize, Serialize};

/// Range, vehicle and page.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TripsRequest {
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

/// An event inside a trip.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct TripEvent {
    /// Event kind.
    pub kind: &'static str,
    /// When it began.
    pub at: String,
}

/// One trip.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct TripRow {
    /// Plate.
    pub plate: String,
    /// When movement began.
    #[schemars(extend("format" = "date-time"))]
    pub start: String,
    /// When the next stop began (or the data ended).
    #[schemars(extend("format" = "date-time"))]
    pub end: String,
    /// Where it began, for people.
    pub start_place: String,
    /// Where it ended, for people.
    pub end_place: String,
    /// Kilometres driven.
    pub distance_km: f64,
    /// Where distance_km comes from: the odometer when its readings over the trip earned their use, else the GPS track.
    pub distance_source: DistanceSource,
    /// Straight-line kilometres across signal losses inside the trip: not in a GPS distance_km (an odometer's counts what was driven unseen too).
    pub gap_km: f64,
    /// Minutes from start to end.
    pub duration_min: f64,
    /// Minutes moving (5 km/h or faster).
    pub driving_min: f64,
    /// Minutes slower with the engine reported on (traffic, lights).
    pub idle_min: f64,
    /// Highest speed, km/h.
    pub max_speed_kmh: f64,
    /// The GPS km over driving time, km/h.
    pub avg_speed_kmh: f64,
    /// Events that began during the trip, in time order.
    pub events: Vec<TripEvent>,
}

/// The trips of a range.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct TripsReport {
    /// First local date.
    pub from: String,
    /// Last local date.
    pub to: String,
    /// The data clock.
    pub data_now: String,
    /// The vehicle filter (resolved plate), if any.
    pub plate: Option<String>,
    /// Kilometres of the trips on this page.
    pub page_distance_km: f64,
    /// The trips, by start time.
    pub trips: Page<TripRow>,
}

/// Runs the report.
pub fn run(db: &Db, req: &TripsRequest) -> Result<TripsReport> {
    let (from, to, vehicle, cursor) = db.resolve_scope(
        req.from.as_deref(),
        req.to.as_deref(),
        req.plate.as_deref(),
        req.cursor.as_deref(),
    )?;
    let query = RangeQuery {
        vehicle_id: vehicle.map(|v| v.id),
        from_ts: db.day_bounds(from).0,
        to_ts: db.day_bounds(to).1,
        min_s: 0,
        bbox: None,
    };
    let days = (from.to_string(), to.to_string());
    let rows = read::trips_after(db.conn(), &query, cursor.pair(), MAX_ROWS + 1)?;
    let total = cursor.total_from(rows.len(), MAX_ROWS, || {
        read::trips_count(db.conn(), &query, (&days.0, &days.1))
    })?;
    let trips = Page::keyed(total, rows, |t| [t.start_ts, t.vehicle_id, 0]);
    // The page's events in one read (over its span), shared out to its trips.
    let span = trips
        .items
        .iter()
        .map(|t| (t.start_ts, t.end_ts))
        .reduce(|a, b| (a.0.min(b.0), a.1.max(b.1)));
    let events = match span {
        Some((from, to)) => {
            read::events_between(db.conn(), vehicle.map(|v| v.id), &[], from, to + 1)?
        }
        None => Vec::new(),
    };
    Ok(TripsReport {
        from: from.to_string(),
        to: to.to_string(),
        data_now: db.time(db.now_ts),
        plate: vehicle.map(|v| v.plate.clone()),
        page_distance_km: round2(trips.items.iter().map(|t| t.distance_km).sum()),
        trips: trips.try_map(|t| trip_row(db, &t, &events))?,
    })
}

/// One stored trip as the report shows it (also what `fleetctl export trips`
/// writes), with the events among `events` (in start order) that are its vehicle's
/// and began during it.
pub fn trip_row(
    db: &Db,
    t: &crate::model::Trip,
    events: &[crate::model::Event],
) -> Result<TripRow> {
    let first = events.partition_point(|e| e.start_ts < t.start_ts);
    let events = events[first..]
        .iter()
        .take_while(|e| e.start_ts <= t.end_ts)
        .filter(|e| e.vehicle_id == t.vehicle_id && (t.start_ts..=t.end_ts).contains(&e.start_ts))
        .map(|e| TripEvent {
            kind: e.kind.as_str(),
            at: db.time(e.start_ts),
        })
        .collect();
    let driving_h = t.driving_s as f64 / 3600.0;
    Ok(TripRow {
        plate: db.vehicle_of(t.vehicle_id)?.plate.clone(),
        start: db.time(t.start_ts),
        end: db.time(t.end_ts),
        start_place: db.place(t.start_lat, t.start_lon),
        end_place: db.place(t.end_lat, t.end_lon),
        distance_km: round2(t.distance().km()),
        distance_source: DistanceSource::of(&t.distance()),
        gap_km: round2(t.gap_km),
        duration_min: round1((t.end_ts - t.start_ts) as f64 / 60.0),
        driving_min: round1(t.driving_s as f64 / 60.0),
        idle_min: round1(t.idle_s as f64 / 60.0),
        max_speed_kmh: round1(t.max_speed_kmh),
        avg_speed_kmh: if driving_h > 0.0 {
            round1(t.distance_km / driving_h)
        } else {
            0.0
        },
        events,
    })
}

/// The registry entry.
pub const SPEC: ReportSpec = ReportSpec {
    tool: "trips",
    cli: "trips",
    title: "Trips over a date range",
    description: "Every trip (movement of at least 500 m between two stops) that began in an inclusive range of local \
dates (default: the last 7 days; at most 92), for one vehicle (plate) or the whole fleet, by start time: start and end \
time and place, distance_km (the odometer where its readings agree with the GPS track, else the GPS track, jitter \
filtered; distance_source says which; gap_km apart for signal losses), duration, driving and idle \
minutes, max and average speed, and the events inside it. Lists over 200 trips come in pages: pass next_cursor as \
cursor for the next; total is exact. Use it for 'last week's trips of P-123BCD' instead of one trip_summary call per \
day; use trip_summary for one vehicle's whole day (stops, signal losses) and mileage_ranking for km totals.",
    input: super::schema::derived_input::<TripsRequest>,
    rows: "trips",
    columns: &[(
        "trips",
        &[
            "plate",
            "start",
            "end",
            "start_place",
            "end_place",
            "distance_km",
            "max_speed_kmh",
        ],
    )],
    run: |db, args| super::invoke(db, args, run),
    output_schema: super::schema::derived::<TripsReport>,
    draws: false,
};
