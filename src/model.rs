//! Plain domain types shared by the store, the generator, detection and reports.
//!
//! They carry no behaviour beyond construction: the meaning of each field (units,
//! zones) is in its name, as DOMAIN.md asks.

use serde::Serialize;

/// A vehicle of the fleet.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Vehicle {
    /// Store id.
    pub id: i64,
    /// Plate, `P-123BCD`.
    pub plate: String,
    /// `truck`, `van`, `pickup` or `minibus`.
    pub kind: String,
    /// The driver's name.
    pub driver: String,
    /// False for a vehicle out of service (it has no positions).
    pub active: bool,
}

/// One GPS fix.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Fix {
    /// The vehicle's store id.
    pub vehicle_id: i64,
    /// UTC epoch seconds.
    pub ts: i64,
    /// Latitude, degrees.
    pub lat: f64,
    /// Longitude, degrees.
    pub lon: f64,
    /// Ground speed, km/h.
    pub speed_kmh: f64,
    /// Heading, degrees clockwise from north.
    pub heading_deg: f64,
    /// Ignition on.
    pub ignition: bool,
    /// Odometer reading, km, if the device has one.
    pub odometer_km: Option<f64>,
}

/// A named area: depot, distribution centre, zone.
#[derive(Debug, Clone, PartialEq)]
pub struct Geofence {
    /// Unique name, e.g. `Bodega Mixco`.
    pub name: String,
    /// `depot`, `distribution_center`, `zone` or `customer_zone`.
    pub kind: String,
    /// WKT in lon lat order (`POLYGON` or, for a circle, `POINT`).
    pub wkt: String,
    /// The circle's radius in metres; `None` for a polygon.
    pub radius_m: Option<f64>,
}

/// The kinds of anomaly the generator plants, as stored in `injected_events.kind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PlantedKind {
    /// Driving above the limit.
    Speeding,
    /// A stop of 45 minutes or more.
    LongStop,
    /// Minutes without fixes while on shift.
    SignalLoss,
    /// Stopped, engine on, at the data clock's "now".
    StoppedNow,
}

impl PlantedKind {
    /// All kinds, in the order summaries list them.
    pub const ALL: [PlantedKind; 4] = [
        PlantedKind::Speeding,
        PlantedKind::LongStop,
        PlantedKind::SignalLoss,
        PlantedKind::StoppedNow,
    ];

    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            PlantedKind::Speeding => "speeding",
            PlantedKind::LongStop => "long_stop",
            PlantedKind::SignalLoss => "signal_loss",
            PlantedKind::StoppedNow => "stopped_now",
        }
    }
}

/// One planted anomaly: the generator's ground truth.
#[derive(Debug, Clone, PartialEq)]
pub struct InjectedEvent {
    /// The vehicle's store id.
    pub vehicle_id: i64,
    /// What was planted.
    pub kind: PlantedKind,
    /// When it began, UTC epoch seconds.
    pub start_ts: i64,
    /// When it ended (for `stopped_now`: the data clock), UTC epoch seconds.
    pub end_ts: i64,
    /// Parameters, as a JSON object.
    pub detail: serde_json::Value,
}
