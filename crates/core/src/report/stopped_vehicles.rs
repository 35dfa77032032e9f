//! `stopped_vehicles` (`fleetctl query stopped`): who is stopped now, since when,
//! engine on or off, and where — longest first.

use super::{Db, List, ReportSpec, round1};
use crate::error::Result;
use crate::store::read;
use serde::{Deserialize, Serialize};

/// How long a stop must have lasted to be listed.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StoppedVehiclesRequest {
    /// Only stops of at least this many minutes (default 30)
    #[schemars(range(min = 0, max = 10080))]
    pub min_minutes: Option<i64>,
}

/// One stopped vehicle.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct StoppedVehicle {
    /// Plate.
    pub plate: String,
    /// Driver.
    pub driver: String,
    /// When the stop began.
    pub since: String,
    /// Minutes stopped up to the data clock (for an offline vehicle: assuming it has
    /// not moved since its last fix).
    pub minutes: f64,
    /// Minutes the fixes show it stopped (up to its last fix), as trip_summary and
    /// alerts count the stop.
    pub observed_min: f64,
    /// Engine running at the last fix; null when the tracker does not report ignition.
    pub engine_on: Option<bool>,
    /// Where, for people.
    pub place: String,
    /// Latitude of the stop.
    pub lat: f64,
    /// Longitude of the stop.
    pub lon: f64,
    /// No fix for over 10 minutes while the engine was on (a tracker that should be
    /// reporting and is not); a vehicle parked with its engine off is offline only
    /// when silent for over 72 hours.
    pub offline: bool,
    /// Time of the last fix.
    pub last_fix_at: String,
    /// Seconds from the last fix to the data clock.
    pub last_fix_age_s: i64,
}

/// Vehicles stopped now.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct StoppedVehiclesReport {
    /// The data clock ("now").
    pub data_now: String,
    /// The threshold applied, minutes.
    pub min_minutes: i64,
    /// How long a vehicle must stand (within the stop radius) before it is in a
    /// stop at all, minutes: the fleet's stop minimum.
    pub stop_min_minutes: f64,
    /// Vehicles standing at their last fix for less than that (a traffic light, a
    /// delivery just begun): not listed here; `fleet_map` and `nearest_vehicles`
    /// show them idle or parked.
    pub standing_briefly: usize,
    /// Stopped vehicles, longest first.
    pub vehicles: List<StoppedVehicle>,
}

/// Runs the report.
pub fn run(db: &Db, req: &StoppedVehiclesRequest) -> Result<StoppedVehiclesReport> {
    let min_minutes = req.min_minutes.unwrap_or(30);
    let mut rows = Vec::new();
    // Two small reads for the whole fleet: the newest fixes and the ongoing stops.
    let stops = read::ongoing_stops(db.conn())?;
    let mut standing_briefly = 0;
    for fix in read::last_fixes(db.conn())? {
        let v = db.vehicle_of(fix.vehicle_id)?;
        let Some(stop) = stops.get(&v.id).filter(|s| s.end_ts == fix.ts) else {
            let (_, at_fix) = super::vehicle_position::state_of(db, &fix, false);
            standing_briefly += usize::from(at_fix != super::vehicle_position::MotionState::Moving);
            continue;
        };
        let minutes = (db.now_ts - stop.start_ts) as f64 / 60.0;
        if minutes < min_minutes as f64 {
            continue;
        }
        rows.push(StoppedVehicle {
            plate: v.plate.clone(),
            driver: v.driver.clone(),
            since: db.time(stop.start_ts),
            minutes: round1(minutes),
            observed_min: round1(stop.duration_s() as f64 / 60.0),
            engine_on: fix.ignition,
            place: stop.place.clone(),
            lat: stop.lat,
            lon: stop.lon,
            offline: super::vehicle_position::state_of(db, &fix, true).0
                == super::vehicle_position::LiveState::Offline,
            last_fix_at: db.time(fix.ts),
            last_fix_age_s: db.now_ts - fix.ts,
        });
    }
    rows.sort_by(|a, b| {
        b.minutes
            .total_cmp(&a.minutes)
            .then_with(|| a.plate.cmp(&b.plate))
    });
    Ok(StoppedVehiclesReport {
        data_now: db.time(db.now_ts),
        min_minutes,
        stop_min_minutes: round1(db.thresholds.stop_min_s as f64 / 60.0),
        standing_briefly,
        vehicles: List::capped(rows),
    })
}

/// The registry entry.
pub const SPEC: ReportSpec = ReportSpec {
    tool: "stopped_vehicles",
    cli: "stopped",
    title: "Vehicles stopped now",
    description: "Vehicles whose current stop (staying within 200 m; a stop counts from stop_min_minutes, 3 by \
default) has lasted at least min_minutes up to the data clock: plate, driver, since (RFC 3339), minutes (to the data clock), observed_min (to the last fix, as \
trip_summary and alerts count it), engine on/off, place, and an offline flag for a tracker silent for over 10 minutes while its engine was on \
(a vehicle parked with the engine off is not offline unless silent for over 72 hours; minutes assume it has not moved since its last fix). \
Longest first. standing_briefly counts the vehicles standing for less than a stop's minimum, not listed (fleet_map \
and nearest_vehicles show them idle or parked). Use it for 'who is stopped?' or 'which trucks have been idle for over an hour?'.",
    input: super::schema::derived_input::<StoppedVehiclesRequest>,
    rows: "vehicles",
    columns: &[(
        "vehicles",
        &[
            "plate",
            "driver",
            "since",
            "minutes",
            "engine_on",
            "offline",
            "place",
        ],
    )],
    run: |db, args| super::invoke(db, args, run),
    output_schema: super::schema::derived::<StoppedVehiclesReport>,
    draws: false,
};
