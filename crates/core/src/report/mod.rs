//! THE DOMAIN API: one file per report, each the same shape — a `…Request` in, a
//! `…Report` out, `pub fn run(&Db, &Request) -> Result<Report>`, and a `SPEC` that
//! describes it. What they share is beside them: `db.rs` (the open database with its
//! data clock), `page.rs` (lists capped at 200 rows, and pages), `registry.rs` (the
//! registry both front ends, the CLI's `query` and the MCP tools, are generated
//! from, and argument validation) and `call.rs` (running one); this file keeps the
//! limits and the small helpers every report uses.

mod call;
mod db;
mod page;
mod registry;

pub mod alerts;
pub mod daily_summary;
pub mod events;
pub mod fleet_map;
pub mod geofence_report;
pub mod geofence_visits;
pub mod list_geofences;
pub mod list_vehicles;
pub mod mileage_ranking;
pub mod nearest_vehicles;
pub mod resolve;
pub mod route_map;
pub mod schema;
pub mod speed_chart;
pub mod stopped_vehicles;
pub mod stops;
pub mod trip_summary;
pub mod trips;
pub mod vehicle_position;

pub use call::*;
pub use db::Db;
pub use page::{Cursor, List, Page};
pub use registry::*;

use serde::Serialize;

/// Lists in reports hold at most this many rows.
pub const MAX_ROWS: usize = 200;
/// Date ranges span at most this many days.
pub const MAX_RANGE_DAYS: i64 = 92;
/// No fix for longer than this at the data clock means offline, seconds.
pub const OFFLINE_AFTER_S: i64 = 10 * 60;
/// How long a tracker parked with its engine off may sleep and still be called
/// parked, seconds: a weekend and more. Trackers that sleep send a heartbeat at
/// least daily; one silent longer may be dead or unplugged, and where the vehicle
/// is now is no longer known, so it is offline.
pub const PARKED_ASLEEP_UP_TO_S: i64 = 72 * 3600;

/// Where a distance came from: the vehicle's odometer, or the GPS track (with
/// jitter filtered).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum DistanceSource {
    /// The odometer's readings.
    Odometer,
    /// The GPS track.
    Gps,
    /// A range whose days differ: the odometer on the days it earned its use, the
    /// GPS track on the others.
    Mixed,
}

impl DistanceSource {
    /// The source of a span's km: the odometer when it was used, else GPS.
    pub fn of(d: &crate::analyze::distance::SpanDistance) -> DistanceSource {
        if d.odometer_km.is_some() {
            DistanceSource::Odometer
        } else {
            DistanceSource::Gps
        }
    }
}

/// Why a span's odometer was not used, as answers say it.
pub fn odometer_rejected(d: &crate::analyze::distance::SpanDistance) -> Option<String> {
    d.odometer_rejected.map(|r| r.as_str().to_string())
}

/// Rounds to one decimal (km, minutes, km/h in answers); never answers `-0.0`.
pub fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0 + 0.0
}

/// Rounds to two decimals; never answers `-0.0`.
pub fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0 + 0.0
}

// ---- The registry ---------------------------------------------------------------

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_s_parameters_come_from_its_request_type() {
        let params = nearest_vehicles::SPEC.params();
        let names: Vec<&str> = params.iter().map(|p| p.name).collect();
        assert_eq!(names, ["place", "lat", "lon", "limit"]);
        let place = &params[0];
        assert!(place.positional && !place.required);
        assert_eq!(
            (place.kind, place.conflicts),
            (ParamKind::Text, Some("lat"))
        );
        assert!(place.help.starts_with("Place name"));
        assert_eq!(
            params[1].kind,
            ParamKind::Number {
                min: -90.0,
                max: 90.0
            }
        );
        assert_eq!(params[1].pair, Some("lon"));
        assert_eq!(params[3].kind, ParamKind::Integer { min: 1, max: 50 });
        let alerts = alerts::SPEC.params();
        assert_eq!(alerts[2].name, "type");
        assert_eq!(
            alerts[2].kind,
            ParamKind::Enum(&["speeding", "long_stop", "signal_loss"])
        );
        let trip = trip_summary::SPEC.params();
        assert!(trip[0].required && trip[0].positional && trip[0].kind == ParamKind::Plate);
        assert_eq!(trip[1].kind, ParamKind::Date);
        assert!(list_vehicles::SPEC.params().is_empty());
        let fleet = fleet_map::SPEC.params();
        assert_eq!((fleet[0].name, fleet[0].kind), ("at", ParamKind::DateTime));
        assert!(!fleet[0].required && !fleet[0].positional);
        let mut args = Args::new();
        args.insert("at".into(), "2026-11-24T10:30".into());
        assert!(validate(&fleet_map::SPEC, &args).is_ok());
        args.insert("at".into(), "10:30".into());
        assert!(validate(&fleet_map::SPEC, &args).is_ok());
        args.insert("at".into(), "half past ten".into());
        let e = validate(&fleet_map::SPEC, &args).unwrap_err();
        assert!(e.hint.unwrap().contains("YYYY-MM-DDTHH:MM"));
    }
}
