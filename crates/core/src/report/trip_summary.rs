//! `trip_summary` (`fleetctl query trip PLATE --date D`): one vehicle's day — km,
//! departure and return, stops, speeds, signal losses and the day's events.

use super::{Db, List, ReportSpec, round1, round2};
use crate::error::Result;
use crate::model::{Event, EventDetail, EventKind};
use crate::store::read;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Which vehicle and day.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TripSummaryRequest {
    /// Plate, e.g. P-123BCD
    #[schemars(extend("x-kind" = "plate", "x-positional" = true))]
    pub plate: String,
    /// Local date: YYYY-MM-DD, today or yesterday (default today)
    #[schemars(extend("x-kind" = "date"))]
    pub date: Option<String>,
}

/// One stop of the day.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct StopRow {
    /// When it began.
    pub start: String,
    /// When movement began again (or the last fix, if still stopped).
    pub end: String,
    /// Minutes.
    pub minutes: f64,
    /// Engine running for most of it.
    pub engine_on: bool,
    /// Where, for people.
    pub place: String,
    /// Still stopped at the vehicle's last fix.
    pub ongoing: bool,
}

/// One event of the day.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct EventRow {
    /// Event kind.
    pub kind: &'static str,
    /// When it began.
    pub at: String,
    /// When it ended.
    pub until: String,
    /// Where, for people.
    pub place: String,
    /// Kind-specific figures (max_speed_kmh, duration_min, minutes_lost, geofence…).
    #[schemars(with = "serde_json::Map<String, Value>")]
    pub detail: Value,
}

/// A signal loss of the day.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct SignalLossRow {
    /// The last fix before the gap.
    pub lost_at: String,
    /// The first fix after it.
    pub resumed_at: String,
    /// Minutes without fixes.
    pub minutes_lost: f64,
    /// Where the signal was lost.
    pub place: String,
}

/// The day, summed up.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct TripSummaryReport {
    /// Plate.
    pub plate: String,
    /// Driver.
    pub driver: String,
    /// The local date reported (resolved from `today`/`yesterday`).
    pub date: String,
    /// The data clock ("now").
    pub data_now: String,
    /// False when the vehicle has no fix that day (every figure is then zero).
    pub has_data: bool,
    /// Why there is no data, when there is none (out of service, or the days that have data).
    pub note: Option<String>,
    /// Kilometres driven (from `distance_source`).
    pub distance_km: f64,
    /// `odometer` when the data has one, else `gps`.
    pub distance_source: super::DistanceSource,
    /// Kilometres from the fixes (jitter filtered).
    pub gps_distance_km: f64,
    /// Straight-line kilometres across signal losses while moving: the vehicle went
    /// there unseen, so they are not in gps_distance_km.
    pub gap_km: f64,
    /// Kilometres from the odometer, when present.
    pub odometer_distance_km: Option<f64>,
    /// Why the odometer's readings were not used: `decreasing` or `implausible`.
    pub odometer_rejected: Option<String>,
    /// Start of the first trip.
    pub departure_at: Option<String>,
    /// End of the last trip.
    pub return_at: Option<String>,
    /// Minutes from departure to return.
    pub duration_min: Option<f64>,
    /// First fix of the day.
    pub first_fix_at: Option<String>,
    /// Last fix of the day.
    pub last_fix_at: Option<String>,
    /// Minutes driving: the day's trips' (as `daily_summary`'s `driving_h`).
    pub driving_min: f64,
    /// Minutes not driving with the ignition reported on: the day's trips' and stops' idle_min.
    pub idle_min: f64,
    /// Minutes stopped with the ignition off or unreported: the day's stops' minutes less their idling.
    pub parked_min: f64,
    /// Trips (movements of at least 500 m between stops).
    pub trips: i64,
    /// Highest speed, km/h.
    pub max_speed_kmh: f64,
    /// Average speed while driving: GPS distance over driving minutes, km/h.
    pub avg_driving_speed_kmh: f64,
    /// Stops that began this day.
    pub stops_count: usize,
    /// Their total minutes.
    pub stops_total_min: f64,
    /// The stops, in the day's order.
    pub stops: List<StopRow>,
    /// Signal losses, in time order.
    pub signal_losses: List<SignalLossRow>,
    /// Speeding, long stops, signal losses and geofence entries/exits, in time order.
    pub events: List<EventRow>,
    /// Ignition switched on / off this day.
    pub ignition_on_count: usize,
    /// Ignition switched off this day.
    pub ignition_off_count: usize,
}

/// An event as a row, its place taken from what detection recorded.
pub fn event_row(db: &Db, e: &Event) -> EventRow {
    // The row shows the figures; the place has its own column.
    let mut detail = serde_json::to_value(&e.detail).unwrap_or_default();
    if let Some(d) = detail.as_object_mut() {
        d.remove("place");
    }
    let place = e
        .detail
        .place()
        .map_or_else(|| db.place(e.lat, e.lon), str::to_owned);
    EventRow {
        kind: e.kind.as_str(),
        at: db.time(e.start_ts),
        until: db.time(e.end_ts),
        place,
        detail,
    }
}

/// Runs the report.
pub fn run(db: &Db, req: &TripSummaryRequest) -> Result<TripSummaryReport> {
    let v = db.resolve_plate(&req.plate)?;
    let date = db.resolve_date(req.date.as_deref())?;
    let (from, to) = db.day_bounds(date);
    let read::VehicleDay {
        rollup: day,
        trips,
        mut stops,
        events,
    } = read::vehicle_day(db.conn(), v.id, &date.to_string(), (from, to))?;

    let stops_total_min = round1(stops.iter().map(|s| s.duration_s()).sum::<i64>() as f64 / 60.0);
    stops.sort_by_key(|s| s.start_ts);
    let stop_rows = stops
        .iter()
        .map(|s| StopRow {
            start: db.time(s.start_ts),
            end: db.time(s.end_ts),
            minutes: round1(s.duration_s() as f64 / 60.0),
            engine_on: s.engine_on(),
            place: s.place.clone(),
            ongoing: s.ongoing,
        })
        .collect();
    let losses = events
        .iter()
        .filter(|e| e.kind == EventKind::SignalLoss)
        .map(|e| {
            let row = event_row(db, e);
            SignalLossRow {
                lost_at: row.at,
                resumed_at: row.until,
                minutes_lost: match &e.detail {
                    EventDetail::SignalLoss(d) => d.minutes_lost,
                    _ => 0.0,
                },
                place: row.place,
            }
        })
        .collect();
    let count = |k: EventKind| events.iter().filter(|e| e.kind == k).count();
    let event_rows = events
        .iter()
        .filter(|e| !matches!(e.kind, EventKind::IgnitionOn | EventKind::IgnitionOff))
        .map(|e| event_row(db, e))
        .collect();
    let (departure, ret) = (
        trips.first().map(|t| t.start_ts),
        trips.last().map(|t| t.end_ts),
    );
    let distance = day.as_ref().map(|d| d.distance()).unwrap_or_default();
    let (gps_km, odo_km) = (distance.gps_km, distance.odometer_km);
    Ok(TripSummaryReport {
        plate: v.plate.clone(),
        driver: v.driver.clone(),
        date: date.to_string(),
        data_now: db.time(db.now_ts),
        has_data: day.is_some(),
        note: db.no_data_note(v, day.is_none(), &date.to_string())?,
        distance_km: round2(distance.km()),
        distance_source: super::DistanceSource::of(&distance),
        odometer_rejected: super::odometer_rejected(&distance),
        gps_distance_km: round2(gps_km),
        gap_km: round2(day.as_ref().map_or(0.0, |d| d.gap_km)),
        odometer_distance_km: odo_km.map(round2),
        departure_at: departure.map(|t| db.time(t)),
        return_at: ret.map(|t| db.time(t)),
        duration_min: departure
            .zip(ret)
            .map(|(a, b)| round1((b - a) as f64 / 60.0)),
        first_fix_at: day.as_ref().map(|d| db.time(d.first_ts)),
        last_fix_at: day.as_ref().map(|d| db.time(d.last_ts)),
        driving_min: day.as_ref().map_or(0.0, |d| round1(d.driving_min)),
        idle_min: day.as_ref().map_or(0.0, |d| round1(d.idle_min)),
        parked_min: day.as_ref().map_or(0.0, |d| round1(d.parked_min)),
        trips: trips.len() as i64,
        max_speed_kmh: day.as_ref().map_or(0.0, |d| round1(d.max_speed_kmh)),
        avg_driving_speed_kmh: day
            .as_ref()
            .map_or(0.0, |d| round1(d.avg_driving_speed_kmh)),
        stops_count: stops.len(),
        stops_total_min,
        stops: List::capped(stop_rows),
        signal_losses: List::capped(losses),
        events: List::capped(event_rows),
        ignition_on_count: count(EventKind::IgnitionOn),
        ignition_off_count: count(EventKind::IgnitionOff),
    })
}

/// The registry entry.
pub const SPEC: ReportSpec = ReportSpec {
    tool: "trip_summary",
    cli: "trip",
    title: "A vehicle's day",
    description: "One vehicle's local day computed from its GPS fixes: distance_km (the odometer when its \
readings never go down and agree with the GPS track, else GPS with jitter filtered; distance_source says which and \
odometer_rejected why an odometer was not believed), departure and return times, minutes driving / idle / \
parked (the same driving as daily_summary's and trips'), number of trips, max and average driving speed (km/h), every stop (start, end, minutes, place, engine on/off; \
in the day's order), signal losses (minutes without fixes), and that day's speeding, long-stop, signal-loss and geofence \
events. Use it for any question about how much a vehicle drove or what it did on a day; it is the source for numbers. \
date accepts YYYY-MM-DD, today or yesterday (resolved on the data clock and echoed back). A day without data \
returns has_data=false, not an error.",
    input: super::schema::derived_input::<TripSummaryRequest>,
    rows: "stops",
    columns: &[
        ("stops", &["start", "end", "minutes", "engine_on", "place"]),
        ("events", &["kind", "at", "until", "place"]),
    ],
    run: |db, args| super::invoke(db, args, run),
    output_schema: super::schema::derived::<TripSummaryReport>,
    draws: false,
};
