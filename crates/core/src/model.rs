//! Plain domain types shared by the store, the generator, detection and reports.
//!
//! They carry no behaviour beyond construction: the meaning of each field (units,
//! zones) is in its name, as docs/definitions.md describes.

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
    /// True when the source gave no speed and `speed_kmh` was derived from the
    /// distance to the fixes around this one.
    pub speed_derived: bool,
    /// Heading, degrees clockwise from north; None when the source does not say.
    pub heading_deg: Option<f64>,
    /// Ignition on (Some(true)), off (Some(false)), or not reported (None).
    pub ignition: Option<bool>,
    /// Odometer reading, km, if the device has one.
    pub odometer_km: Option<f64>,
}

/// Why an odometer was not used for a span.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OdometerRejected {
    /// A reading is lower than an earlier one by more than `analyze::distance::ODOMETER_STEP_BACK_KM`.
    Decreasing,
    /// The readings' distance disagrees with the GPS path beyond the margins.
    Implausible,
}

impl OdometerRejected {
    /// The name answers and the database use.
    pub fn as_str(self) -> &'static str {
        match self {
            OdometerRejected::Decreasing => "decreasing",
            OdometerRejected::Implausible => "implausible",
        }
    }

    /// Reads a stored name.
    pub fn parse(text: &str) -> Option<OdometerRejected> {
        match text {
            "decreasing" => Some(OdometerRejected::Decreasing),
            "implausible" => Some(OdometerRejected::Implausible),
            _ => None,
        }
    }
}

/// The distance over one span of a vehicle's fixes (`analyze::distance::span_distance`).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SpanDistance {
    /// Driven km from the fixes: jitter, teleports and standing in a stop left out.
    pub gps_km: f64,
    /// Straight-line km across signal losses: the vehicle went there unseen.
    pub gap_km: f64,
    /// The odometer's km, when every fix has a reading and they earn their use.
    pub odometer_km: Option<f64>,
    /// Why the odometer's readings were not used, when every fix had one.
    pub odometer_rejected: Option<OdometerRejected>,
}

impl SpanDistance {
    /// The span's km: the odometer's when it earned its use, else the GPS path.
    pub fn km(&self) -> f64 {
        self.odometer_km.unwrap_or(self.gps_km)
    }
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

/// A stop: the vehicle stayed within the stop radius for at least the minimum time.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Stop {
    /// The vehicle's store id.
    pub vehicle_id: i64,
    /// First stationary fix, UTC epoch seconds.
    pub start_ts: i64,
    /// Last stationary fix (movement began after it), UTC epoch seconds.
    pub end_ts: i64,
    /// Where (median of the stationary fixes).
    pub lat: f64,
    /// Where.
    pub lon: f64,
    /// Seconds of the stop with the engine on.
    pub idle_s: i64,
    /// Seconds of the stop with the engine off, or not reported.
    pub parked_s: i64,
    /// Of `parked_s`, the seconds whose ignition was not reported.
    pub unknown_s: i64,
    /// Still going at the vehicle's last fix.
    pub ongoing: bool,
    /// Where, for people.
    pub place: String,
}

impl Stop {
    /// Length of the stop, seconds.
    pub fn duration_s(&self) -> i64 {
        self.end_ts - self.start_ts
    }

    /// Whether the engine ran for most of the stop.
    pub fn engine_on(&self) -> bool {
        self.idle_s > self.parked_s
    }

    /// The engine for most of the stop: on, off, or unknown (not reported).
    pub fn engine(&self) -> EngineState {
        if self.engine_on() {
            EngineState::On
        } else if self.unknown_s * 2 > self.duration_s() {
            EngineState::Unknown
        } else {
            EngineState::Off
        }
    }
}

/// What the ignition said for most of a stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum EngineState {
    /// Running (idle).
    On,
    /// Off (parked).
    Off,
    /// The tracker did not report the ignition.
    Unknown,
}

/// A trip: the movement between two stops.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Trip {
    /// The vehicle's store id.
    pub vehicle_id: i64,
    /// When movement began, UTC epoch seconds.
    pub start_ts: i64,
    /// When the next stop began (or the data ended), UTC epoch seconds.
    pub end_ts: i64,
    /// Distance from the fixes, jitter and teleports filtered out, km.
    pub distance_km: f64,
    /// The odometer's km over the trip, when every fix has a reading and they earn
    /// their use (`analyze::distance::span_distance`).
    pub odometer_km: Option<f64>,
    /// Straight-line km across signal losses inside the trip, not in `distance_km`.
    pub gap_km: f64,
    /// Highest speed reported, km/h; when that is below the positions' average
    /// while driving (a speed field stuck at 0), their fastest half minute, and
    /// never below that average.
    pub max_speed_kmh: f64,
    /// Seconds driving (`analyze::distance::SpanTime`: the positions moved, or a
    /// fix reported walking pace or faster).
    pub driving_s: i64,
    /// Seconds standing with the ignition reported on: idling in traffic.
    pub idle_s: i64,
    /// Start point.
    pub start_lat: f64,
    /// Start point.
    pub start_lon: f64,
    /// End point.
    pub end_lat: f64,
    /// End point.
    pub end_lon: f64,
}

impl Trip {
    /// The trip's distance, as `analyze::distance::span_distance` found it.
    pub fn distance(&self) -> SpanDistance {
        SpanDistance {
            gps_km: self.distance_km,
            gap_km: self.gap_km,
            odometer_km: self.odometer_km,
            odometer_rejected: None,
        }
    }
}

/// The kinds of event detection derives from positions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    /// Above the speed limit for at least the minimum time.
    Speeding,
    /// A stop of at least the long-stop threshold.
    LongStop,
    /// A gap between fixes while on shift.
    SignalLoss,
    /// Entered a geofence.
    GeofenceEnter,
    /// Left a geofence.
    GeofenceExit,
    /// Engine switched on.
    IgnitionOn,
    /// Engine switched off.
    IgnitionOff,
}

impl EventKind {
    /// Every kind, in a fixed order.
    pub const ALL: [EventKind; 7] = [
        EventKind::Speeding,
        EventKind::LongStop,
        EventKind::SignalLoss,
        EventKind::GeofenceEnter,
        EventKind::GeofenceExit,
        EventKind::IgnitionOn,
        EventKind::IgnitionOff,
    ];

    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::Speeding => "speeding",
            EventKind::LongStop => "long_stop",
            EventKind::SignalLoss => "signal_loss",
            EventKind::GeofenceEnter => "geofence_enter",
            EventKind::GeofenceExit => "geofence_exit",
            EventKind::IgnitionOn => "ignition_on",
            EventKind::IgnitionOff => "ignition_off",
        }
    }

    /// The kind with this stored name.
    pub fn parse(name: &str) -> Option<EventKind> {
        EventKind::ALL.into_iter().find(|k| k.as_str() == name)
    }

    /// Whether an event of this kind lasts as long as the fixes say (a speeding
    /// episode, a long stop), so that one ending at a vehicle's newest fix may go
    /// on. A signal loss is found when it ends; the others are instants.
    pub fn lasts(self) -> bool {
        matches!(self, EventKind::Speeding | EventKind::LongStop)
    }
}

/// A detected event.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// The vehicle's store id.
    pub vehicle_id: i64,
    /// What happened.
    pub kind: EventKind,
    /// When it began, UTC epoch seconds.
    pub start_ts: i64,
    /// When it ended, UTC epoch seconds (equal to `start_ts` for instants).
    pub end_ts: i64,
    /// Where it began.
    pub lat: f64,
    /// Where it began.
    pub lon: f64,
    /// Kind-specific figures, including `place` where there is one.
    pub detail: EventDetail,
}

/// What tells one of a vehicle's events from its others: kind, start (UTC epoch
/// seconds) and, for a geofence's entry or exit, the geofence's id (else 0).
pub type EventKey = (EventKind, i64, i64);

impl Event {
    /// Its key among its vehicle's events.
    pub fn key(&self) -> EventKey {
        let geofence_id = match &self.detail {
            EventDetail::Geofence(g) => g.geofence_id,
            _ => 0,
        };
        (self.kind, self.start_ts, geofence_id)
    }
}

/// The figures of one detected event, by kind. Stored as a JSON object in
/// `events.detail` (the fields below, in this order) and read back into the type its
/// kind names (`EventDetail::from_json`), never by key.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum EventDetail {
    /// `speeding`.
    Speeding(SpeedingDetail),
    /// `long_stop`.
    LongStop(LongStopDetail),
    /// `signal_loss`.
    SignalLoss(SignalLossDetail),
    /// `geofence_enter`, `geofence_exit`.
    Geofence(GeofenceDetail),
    /// `ignition_on`, `ignition_off`: nothing more.
    Ignition(NoDetail),
}

/// A speeding episode's figures.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SpeedingDetail {
    /// The highest speed, km/h.
    pub max_speed_kmh: f64,
    /// The limit it broke, km/h: the lowest that applied during it.
    pub limit_kmh: f64,
    /// Where that limit comes from: `fleet` (the default), `vehicle` (its own) or
    /// `geofence` (a zone's, named in `limit_geofence`).
    pub limit_source: String,
    /// The geofence whose limit it broke, when `limit_source` is `geofence`.
    pub limit_geofence: Option<String>,
    /// How far over, km/h.
    pub over_limit_kmh: f64,
    /// What its fixes prove, seconds: from the first to the last fix above the
    /// limit (the event's span).
    pub duration_s: i64,
    /// The fixes above the limit it rests on.
    #[serde(default)]
    pub fixes: usize,
    /// Where it began, for people.
    pub place: String,
}

/// A long stop's figures.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LongStopDetail {
    /// How long, minutes.
    pub duration_min: f64,
    /// The engine ran for most of it.
    pub engine_on: bool,
    /// Minutes with the engine on.
    pub idle_min: f64,
    /// Minutes with the engine off.
    pub parked_min: f64,
    /// Still stopped at the vehicle's last fix.
    pub ongoing: bool,
    /// Where, for people.
    pub place: String,
}

/// A signal loss's figures.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SignalLossDetail {
    /// Minutes without fixes.
    pub minutes_lost: f64,
    /// Where the fixes resumed.
    pub resumed_lat: f64,
    /// Where the fixes resumed.
    pub resumed_lon: f64,
    /// Where the signal was lost, for people.
    pub place: String,
}

/// A geofence crossing's figures.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GeofenceDetail {
    /// The geofence's name.
    pub geofence: String,
    /// Its store id.
    pub geofence_id: i64,
}

/// No figures (ignition changes).
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NoDetail {}

impl EventDetail {
    /// Reads a stored detail as the type `kind` names; an error says what is wrong.
    pub fn from_json(kind: EventKind, text: &str) -> Result<EventDetail, String> {
        let read = |e: serde_json::Error| e.to_string();
        Ok(match kind {
            EventKind::Speeding => EventDetail::Speeding(serde_json::from_str(text).map_err(read)?),
            EventKind::LongStop => EventDetail::LongStop(serde_json::from_str(text).map_err(read)?),
            EventKind::SignalLoss => {
                EventDetail::SignalLoss(serde_json::from_str(text).map_err(read)?)
            }
            EventKind::GeofenceEnter | EventKind::GeofenceExit => {
                EventDetail::Geofence(serde_json::from_str(text).map_err(read)?)
            }
            EventKind::IgnitionOn | EventKind::IgnitionOff => {
                EventDetail::Ignition(serde_json::from_str(text).map_err(read)?)
            }
        })
    }

    /// The place it names, if any.
    pub fn place(&self) -> Option<&str> {
        match self {
            EventDetail::Speeding(d) => Some(&d.place),
            EventDetail::LongStop(d) => Some(&d.place),
            EventDetail::SignalLoss(d) => Some(&d.place),
            EventDetail::Geofence(_) | EventDetail::Ignition(_) => None,
        }
    }
}

/// A stay inside a geofence.
#[derive(Debug, Clone, PartialEq)]
pub struct Visit {
    /// The vehicle's store id.
    pub vehicle_id: i64,
    /// The geofence's store id.
    pub geofence_id: i64,
    /// First fix inside (or the first fix of the data, when it starts inside).
    pub enter_ts: i64,
    /// First fix outside again; `None` while still inside.
    pub exit_ts: Option<i64>,
}

/// One vehicle's local day, rolled up.
#[derive(Debug, Clone, PartialEq)]
pub struct DailyRollup {
    /// The vehicle's store id.
    pub vehicle_id: i64,
    /// Local date, `YYYY-MM-DD`.
    pub date: String,
    /// Distance from the fixes (jitter filtered), km.
    pub gps_distance_km: f64,
    /// Straight-line km across signal losses while moving, not in `gps_distance_km`.
    pub gap_km: f64,
    /// Distance from the odometer, km, when every fix has a reading and they earn
    /// their use (`analyze::distance::span_distance`).
    pub odometer_distance_km: Option<f64>,
    /// Why the day's odometer readings were not used, when every fix had one.
    pub odometer_rejected: Option<OdometerRejected>,
    /// Minutes driving: the day's trips' (the stored column keeps its first
    /// name, `moving_min`).
    pub driving_min: f64,
    /// Minutes not driving with the ignition reported on: the day's trips' and
    /// stops' idling.
    pub idle_min: f64,
    /// Minutes in the day's stops with the ignition off or unreported.
    pub parked_min: f64,
    /// Trips that began this day.
    pub trips: i64,
    /// Stops that began this day.
    pub stops: i64,
    /// Highest speed, km/h.
    pub max_speed_kmh: f64,
    /// GPS distance over driving time, km/h.
    pub avg_driving_speed_kmh: f64,
    /// First fix, UTC epoch seconds.
    pub first_ts: i64,
    /// Last fix, UTC epoch seconds.
    pub last_ts: i64,
    /// Signal losses that began this day.
    pub signal_losses: i64,
    /// Events of every kind that began this day (a range's event total sums them).
    pub events: i64,
}

impl DailyRollup {
    /// The day's distance, as `analyze::distance::span_distance` found it.
    pub fn distance(&self) -> SpanDistance {
        SpanDistance {
            gps_km: self.gps_distance_km,
            gap_km: self.gap_km,
            odometer_km: self.odometer_distance_km,
            odometer_rejected: self.odometer_rejected,
        }
    }
}

/// Everything detection found for one vehicle.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct VehicleAnalysis {
    /// Stops, in time order.
    pub stops: Vec<Stop>,
    /// Trips, in time order.
    pub trips: Vec<Trip>,
    /// Events, in time order.
    pub events: Vec<Event>,
    /// Geofence visits.
    pub visits: Vec<Visit>,
    /// Daily rollups.
    pub daily: Vec<DailyRollup>,
    /// The newest fix.
    pub latest: Option<Fix>,
}

impl VehicleAnalysis {
    /// Adds the rows found after these (the next window's), in order.
    pub fn append(&mut self, mut next: VehicleAnalysis) {
        self.stops.append(&mut next.stops);
        self.trips.append(&mut next.trips);
        self.events.append(&mut next.events);
        self.visits.append(&mut next.visits);
        self.daily.append(&mut next.daily);
        self.latest = next.latest.or(self.latest);
    }
}

/// One fix as a device pushed it, checked, before its device is looked up.
#[derive(Debug, Clone, PartialEq)]
pub struct Pushed {
    /// The device's own id (`id`, `deviceid`, `device_id`, `uniqueId`, OwnTracks' topic).
    pub device_id: String,
    /// UTC epoch seconds.
    pub ts: i64,
    /// Milliseconds past `ts`.
    pub ts_ms: i64,
    /// Latitude, degrees.
    pub lat: f64,
    /// Longitude, degrees.
    pub lon: f64,
    /// Ground speed, km/h, when sent.
    pub speed_kmh: Option<f64>,
    /// Heading, degrees clockwise from north, when sent.
    pub heading_deg: Option<f64>,
    /// Ignition, when sent.
    pub ignition: Option<bool>,
    /// The vehicle's odometer, km, when sent.
    pub odometer_km: Option<f64>,
}

/// An event the live feed's analysis found new: a live alert.
#[derive(Debug, Clone, PartialEq)]
pub struct NewEvent {
    /// The event as found.
    pub event: Event,
    /// It lasts ([`EventKind::lasts`]) and ends at the vehicle's newest fix: it may
    /// go on, so its end and figures are only as far as known.
    pub ongoing: bool,
}
