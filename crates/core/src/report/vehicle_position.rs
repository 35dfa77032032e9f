//! `vehicle_position` (`fleetctl query position PLATE`): where a vehicle is — its
//! last fix, how long ago by the data clock, what it is doing, and where that is.

use super::{Db, OFFLINE_AFTER_S, PARKED_ASLEEP_UP_TO_S, ReportSpec, round1};
use crate::error::Result;
use crate::geo::compass_point;
use crate::model::Fix;
use crate::store::read;
use serde::{Deserialize, Serialize};

/// Which vehicle.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct VehiclePositionRequest {
    /// Plate, e.g. P-123BCD (case, spaces and dashes ignored)
    #[schemars(extend("x-kind" = "plate", "x-positional" = true))]
    pub plate: String,
}

/// The vehicle's last known position and state.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct VehiclePositionReport {
    /// Plate.
    pub plate: String,
    /// Driver.
    pub driver: String,
    /// Vehicle kind.
    pub kind: String,
    /// False: out of service, no positions.
    pub active: bool,
    /// The data clock ("now").
    pub data_now: String,
    /// `moving`, `idle`, `parked`, `offline`, `inactive` or `no_data`.
    pub state: PositionState,
    /// What it was doing at its last fix (`moving`, `idle`, `parked`), also when offline.
    pub state_at_last_fix: Option<MotionState>,
    /// Time of the last fix.
    pub last_fix_at: Option<String>,
    /// Minutes from the last fix to the data clock.
    pub minutes_since_fix: Option<f64>,
    /// Seconds from the last fix to the data clock: how old this answer's data is.
    pub last_fix_age_s: Option<i64>,
    /// Where, for people.
    pub place: Option<String>,
    /// Latitude.
    pub lat: Option<f64>,
    /// Longitude.
    pub lon: Option<f64>,
    /// Speed at the last fix, km/h.
    pub speed_kmh: Option<f64>,
    /// Heading, degrees clockwise from north.
    pub heading_deg: Option<f64>,
    /// Heading as a compass point.
    pub heading: Option<&'static str>,
    /// Ignition at the last fix.
    pub ignition_on: Option<bool>,
    /// Odometer, km.
    pub odometer_km: Option<f64>,
    /// When the current stop began, if stopped.
    pub stopped_since: Option<String>,
    /// Minutes stopped up to the data clock, if stopped (offline: up to the last fix).
    pub stopped_min: Option<f64>,
    /// Why fields are empty, when they are.
    pub note: Option<String>,
}

/// What a vehicle was doing at a fix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum MotionState {
    /// Driving.
    Moving,
    /// Stopped, engine on.
    Idle,
    /// Stopped, engine off.
    Parked,
}

/// What a vehicle is doing by the data clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum LiveState {
    /// Driving.
    Moving,
    /// Stopped, engine on.
    Idle,
    /// Stopped, engine off.
    Parked,
    /// Not parked at its last fix, which is over 10 minutes old; or parked and silent
    /// for over 72 hours.
    Offline,
}

/// A vehicle's state in `vehicle_position`: a live state, or why there is none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PositionState {
    /// Driving.
    Moving,
    /// Stopped, engine on.
    Idle,
    /// Stopped, engine off.
    Parked,
    /// Not parked at its last fix, which is over 10 minutes old; or parked and silent
    /// for over 72 hours.
    Offline,
    /// Out of service: no positions.
    Inactive,
    /// In service, but no positions in this database.
    NoData,
}

impl From<LiveState> for PositionState {
    fn from(s: LiveState) -> PositionState {
        match s {
            LiveState::Moving => PositionState::Moving,
            LiveState::Idle => PositionState::Idle,
            LiveState::Parked => PositionState::Parked,
            LiveState::Offline => PositionState::Offline,
        }
    }
}

/// The state by the data clock and at the last fix (`in_stop`: the fix ends the
/// vehicle's ongoing stop).
pub fn state_of(db: &Db, fix: &Fix, in_stop: bool) -> (LiveState, MotionState) {
    state_rule(fix, in_stop, db.now_ts)
}

/// The one state rule (vehicle_position, nearest_vehicles, stopped_vehicles and
/// fleet_map use it). At a fix, a vehicle is stopped when its positions hold it in
/// a stop (`in_stop`: whatever speed the fix reports, so that it is never moving
/// and stopped at once) or it reports under `MOVING_KMH` (standing, maybe for less
/// than a stop's minimum: a traffic light); else moving. Stopped is idle with the
/// ignition reported on, parked otherwise. At `at_ts`, a vehicle whose last fix is over 10 minutes
/// old is offline — a tracker that should be reporting and is not — unless it was
/// parked with its ignition reported off then: a vehicle left with its engine off
/// keeps its state for up to 72 hours, and its age shows in `minutes_since_fix`
/// (trackers sleep with the engine off). Silent longer than that, it is offline
/// too; so is one whose ignition was not reported (nothing says its tracker sleeps
/// rather than lost its signal or reports only while driving): it was last seen,
/// not parked for hours.
pub fn state_rule(fix: &Fix, in_stop: bool, at_ts: i64) -> (LiveState, MotionState) {
    let at_fix = if fix.speed_kmh >= crate::analyze::events::MOVING_KMH && !in_stop {
        MotionState::Moving
    } else if fix.ignition == Some(true) {
        MotionState::Idle
    } else {
        MotionState::Parked
    };
    let silent_s = at_ts - fix.ts;
    let silent = silent_s > OFFLINE_AFTER_S;
    let live = match at_fix {
        MotionState::Parked if silent_s > PARKED_ASLEEP_UP_TO_S => LiveState::Offline,
        MotionState::Parked if fix.ignition.is_none() && silent => LiveState::Offline,
        MotionState::Parked => LiveState::Parked,
        _ if silent => LiveState::Offline,
        MotionState::Moving => LiveState::Moving,
        MotionState::Idle => LiveState::Idle,
    };
    (live, at_fix)
}

/// Runs the report.
pub fn run(db: &Db, req: &VehiclePositionRequest) -> Result<VehiclePositionReport> {
    let v = db.resolve_plate(&req.plate)?;
    let mut report = VehiclePositionReport {
        plate: v.plate.clone(),
        driver: v.driver.clone(),
        kind: v.kind.clone(),
        active: v.active,
        data_now: db.time(db.now_ts),
        state: PositionState::NoData,
        state_at_last_fix: None,
        last_fix_at: None,
        minutes_since_fix: None,
        last_fix_age_s: None,
        place: None,
        lat: None,
        lon: None,
        speed_kmh: None,
        heading_deg: None,
        heading: None,
        ignition_on: None,
        odometer_km: None,
        stopped_since: None,
        stopped_min: None,
        note: None,
    };
    let Some((fix, ongoing)) = read::last_fix_and_ongoing_stop(db.conn(), v.id)? else {
        report.state = if v.active {
            PositionState::NoData
        } else {
            PositionState::Inactive
        };
        report.note = db.no_data_note(v, true, &db.today().to_string())?;
        return Ok(report);
    };
    let stop = ongoing.filter(|s| s.end_ts == fix.ts);
    let (state, at_fix) = state_of(db, &fix, stop.is_some());
    let since_s = db.now_ts - fix.ts;
    report.state = state.into();
    report.state_at_last_fix = Some(at_fix);
    report.last_fix_at = Some(db.time(fix.ts));
    report.minutes_since_fix = Some(round1(since_s as f64 / 60.0));
    report.last_fix_age_s = Some(since_s);
    // Standing still, the stop's centre is a better estimate than one noisy fix, and
    // it is the place every other report gives for this stop.
    report.place = Some(
        stop.as_ref()
            .map_or_else(|| db.place(fix.lat, fix.lon), |s| s.place.clone()),
    );
    report.lat = Some(fix.lat);
    report.lon = Some(fix.lon);
    report.speed_kmh = Some(round1(fix.speed_kmh));
    report.heading_deg = fix.heading_deg;
    report.heading = fix.heading_deg.map(compass_point);
    report.ignition_on = fix.ignition;
    report.odometer_km = fix.odometer_km;
    if let Some(s) = stop {
        // Offline, what is known is the stop up to the last fix, not to now.
        let until = if state == LiveState::Offline {
            fix.ts
        } else {
            db.now_ts
        };
        report.stopped_since = Some(db.time(s.start_ts));
        report.stopped_min = Some(round1((until - s.start_ts) as f64 / 60.0));
    } else if at_fix != MotionState::Moving {
        report.note = Some(format!(
            "standing at its last fix, for less than a stop's minimum ({} min): stopped_since counts from then",
            round1(db.thresholds.stop_min_s as f64 / 60.0)
        ));
    }
    if report.state == PositionState::Offline {
        report.note = Some(format!(
            "not reporting: last seen {} ({:.0} min before the data clock); the position is the last one known, and stopped_min counts up to then",
            db.zone.hhmm(fix.ts),
            since_s as f64 / 60.0
        ));
    }
    Ok(report)
}

/// The registry entry.
pub const SPEC: ReportSpec = ReportSpec {
    tool: "vehicle_position",
    cli: "position",
    title: "Where a vehicle is now",
    description: "Last known position of one vehicle: time of the last fix and minutes before the data clock, \
place name (inside a geofence or 'km and direction from' the nearest known place), lat/lon, speed_kmh, heading \
(degrees and compass point), state (moving, idle = stopped with engine on, parked = engine off, offline = no fix \
for over 10 min), how long it has been stopped, odometer and driver. Use it for 'where is P-123BCD?'. Plates are \
matched ignoring case, spaces and dashes; call list_vehicles first if unsure of the plate.",
    input: super::schema::derived_input::<VehiclePositionRequest>,
    rows: "",
    columns: &[],
    run: |db, args| super::invoke(db, args, run),
    output_schema: super::schema::derived::<VehiclePositionReport>,
    draws: false,
};

#[cfg(test)]
mod tests {
    use super::*;

    fn parked_at(ts: i64) -> Fix {
        Fix {
            vehicle_id: 1,
            ts,
            lat: 14.6,
            lon: -90.5,
            speed_kmh: 0.0,
            speed_derived: false,
            heading_deg: None,
            ignition: Some(false),
            odometer_km: None,
        }
    }

    #[test]
    fn a_parked_tracker_may_sleep_a_weekend_but_not_for_days() {
        let fix = parked_at(0);
        let hour = 3600;
        assert_eq!(
            state_rule(&fix, true, 61 * hour).0,
            LiveState::Parked,
            "Friday evening to Monday morning"
        );
        assert_eq!(
            state_rule(&fix, true, PARKED_ASLEEP_UP_TO_S).0,
            LiveState::Parked
        );
        let (live, at_fix) = state_rule(&fix, true, PARKED_ASLEEP_UP_TO_S + 1);
        assert_eq!(
            (live, at_fix),
            (LiveState::Offline, MotionState::Parked),
            "silent for days: no longer vouched for"
        );
        let mut idling = fix;
        idling.ignition = Some(true);
        assert_eq!(
            state_rule(&idling, true, OFFLINE_AFTER_S + 1).0,
            LiveState::Offline
        );
    }

    /// Regression (a real taxi fleet without ignition: a taxi last seen 5 hours ago
    /// was "parked", stopped 320 min): only a tracker that reports its ignition off
    /// is believed asleep; one that does not say is offline once silent.
    #[test]
    fn without_ignition_a_silent_vehicle_is_last_seen_not_parked() {
        let mut fix = parked_at(0);
        fix.ignition = None;
        assert_eq!(state_rule(&fix, true, OFFLINE_AFTER_S).0, LiveState::Parked);
        assert_eq!(
            state_rule(&fix, true, 5 * 3600),
            (LiveState::Offline, MotionState::Parked)
        );
        fix.ignition = Some(false);
        assert_eq!(state_rule(&fix, true, 5 * 3600).0, LiveState::Parked);
    }

    /// Regression (a real taxi: `state_at_last_fix: moving` beside `stopped_min
    /// 106`): a fix that ends a stop is stopped whatever speed it reports.
    #[test]
    fn a_vehicle_in_a_stop_is_never_moving() {
        let mut fix = parked_at(0);
        fix.speed_kmh = 31.0;
        assert_eq!(state_rule(&fix, false, 0).1, MotionState::Moving);
        assert_eq!(state_rule(&fix, true, 0).1, MotionState::Parked);
        fix.ignition = Some(true);
        assert_eq!(
            state_rule(&fix, true, 0),
            (LiveState::Idle, MotionState::Idle)
        );
    }
}
