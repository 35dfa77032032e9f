//! Detection from positions alone: stops and trips, events, visits and daily
//! rollups. It works on any fleet's data, synthetic or imported, and knows nothing
//! of the generator's ground truth. The results go to the derived tables that the
//! reports read; the thresholds used are stored beside them in `meta`.

pub mod daily;
pub mod distance;
pub mod events;
pub mod motion;
pub mod window;

use crate::clock::FleetZone;
use crate::error::{Error, Result};
use crate::geo::{Geofence, places::Namer};
use crate::model::{Fix, VehicleAnalysis};

/// A jump shorter than this is GPS noise, never a teleport, metres (two fixes a
/// second apart can be this far apart on a bad fix).
pub const JUMP_NOISE_M: f64 = 50.0;

/// The one jump rule, for the import's settling and detection's distance: `d_m`
/// metres in `dt_s` seconds is a jump (not driving) when it implies more than
/// `teleport_kmh` and is longer than GPS noise.
pub fn is_jump(d_m: f64, dt_s: f64, teleport_kmh: f64) -> bool {
    d_m > JUMP_NOISE_M && d_m / dt_s * 3.6 > teleport_kmh
}

/// Every threshold detection uses; each is stored in `meta` under its field name.
#[derive(Debug, Clone, PartialEq)]
pub struct Thresholds {
    /// Speeding above this, km/h.
    pub speed_limit_kmh: f64,
    /// Speeding episodes last at least this, seconds.
    pub speeding_min_s: i64,
    /// Stops of at least this many minutes are long stops.
    pub long_stop_min: f64,
    /// Gaps longer than this, minutes, on shift are signal losses.
    pub signal_loss_min: f64,
    /// A stop stays within this radius, metres.
    pub stop_radius_m: f64,
    /// …for at least this long, seconds.
    pub stop_min_s: i64,
    /// Trips are at least this long, metres.
    pub trip_min_m: f64,
    /// A gap between fixes longer than this, seconds, ends a trip: rides a few
    /// minutes apart (a tracker silent between them) are separate trips; a trip
    /// through a longer dead zone is two, the gap's km in the day's but in neither.
    pub trip_gap_s: i64,
    /// Consecutive fixes needed on a geofence's other side to flip its state.
    pub geofence_hold_fixes: usize,
    /// Jumps implying more than this, km/h, are dropped.
    pub teleport_kmh: f64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            speed_limit_kmh: 80.0,
            speeding_min_s: 20,
            long_stop_min: 40.0,
            signal_loss_min: 5.0,
            stop_radius_m: 200.0,
            stop_min_s: 180,
            trip_min_m: 500.0,
            trip_gap_s: 300,
            geofence_hold_fixes: 2,
            teleport_kmh: 250.0,
        }
    }
}

/// A threshold that `analyze` takes as a flag: its name, the unit it is given in and
/// what it accepts.
pub struct ThresholdFlag {
    /// The long flag, without its dashes.
    pub name: &'static str,
    /// The value's name in `--help` (KMH, MIN, M).
    pub value_name: &'static str,
    /// The stored value is the flag's times this (minutes given, seconds stored: 60).
    pub stored_per_unit: f64,
    /// The values the flag accepts, inclusive, in its own unit.
    pub range: (f64, f64),
}

/// One threshold: stored in `meta` under `key` (its field's name), explained by
/// `meaning` (in `fleetctl settings` and in the flag's help), set by `flag` if a user
/// may set it. The one list from which the meta rows, the settings table, the flags
/// and their checks all come.
pub struct ThresholdSpec {
    /// The `meta` key, the field's name.
    pub key: &'static str,
    /// What it decides, with its unit.
    pub meaning: &'static str,
    /// The `analyze` flag that sets it, if any.
    pub flag: Option<ThresholdFlag>,
    /// Reads it.
    pub get: fn(&Thresholds) -> f64,
    /// Sets it (whole numbers are rounded; at least one fix holds a geofence state).
    pub set: fn(&mut Thresholds, f64),
}

/// Every threshold, in the order `fleetctl settings` shows them.
pub const THRESHOLDS: [ThresholdSpec; 10] = [
    ThresholdSpec {
        key: "speed_limit_kmh",
        meaning: "Speeding above this speed, km/h",
        flag: Some(ThresholdFlag {
            name: "speed-limit",
            value_name: "KMH",
            stored_per_unit: 1.0,
            range: (10.0, 200.0),
        }),
        get: |t| t.speed_limit_kmh,
        set: |t, v| t.speed_limit_kmh = v,
    },
    ThresholdSpec {
        key: "speeding_min_s",
        meaning: "A speeding episode lasts at least this, seconds",
        flag: None,
        get: |t| t.speeding_min_s as f64,
        set: |t, v| t.speeding_min_s = v.round() as i64,
    },
    ThresholdSpec {
        key: "long_stop_min",
        meaning: "Stops of at least this many minutes are long stops",
        flag: Some(ThresholdFlag {
            name: "long-stop-min",
            value_name: "MIN",
            stored_per_unit: 1.0,
            range: (5.0, 1440.0),
        }),
        get: |t| t.long_stop_min,
        set: |t, v| t.long_stop_min = v,
    },
    ThresholdSpec {
        key: "signal_loss_min",
        meaning: "Gaps longer than this many minutes, on shift, are signal losses",
        flag: Some(ThresholdFlag {
            name: "signal-loss-min",
            value_name: "MIN",
            stored_per_unit: 1.0,
            range: (1.0, 120.0),
        }),
        get: |t| t.signal_loss_min,
        set: |t, v| t.signal_loss_min = v,
    },
    ThresholdSpec {
        key: "stop_radius_m",
        meaning: "A stop stays within this radius, metres",
        flag: Some(ThresholdFlag {
            name: "stop-radius-m",
            value_name: "M",
            stored_per_unit: 1.0,
            range: (10.0, 2000.0),
        }),
        get: |t| t.stop_radius_m,
        set: |t, v| t.stop_radius_m = v,
    },
    ThresholdSpec {
        key: "stop_min_s",
        meaning: "A stop lasts at least this long, seconds (the flag takes minutes)",
        flag: Some(ThresholdFlag {
            name: "stop-min-minutes",
            value_name: "MIN",
            stored_per_unit: 60.0,
            range: (0.5, 120.0),
        }),
        get: |t| t.stop_min_s as f64,
        set: |t, v| t.stop_min_s = v.round() as i64,
    },
    ThresholdSpec {
        key: "trip_min_m",
        meaning: "Shorter movements than this, metres, are not trips",
        flag: None,
        get: |t| t.trip_min_m,
        set: |t, v| t.trip_min_m = v,
    },
    ThresholdSpec {
        key: "trip_gap_s",
        meaning: "A gap between fixes longer than this, seconds, ends a trip (the flag takes minutes)",
        flag: Some(ThresholdFlag {
            name: "trip-gap-min",
            value_name: "MIN",
            stored_per_unit: 60.0,
            range: (1.0, 1440.0),
        }),
        get: |t| t.trip_gap_s as f64,
        set: |t, v| t.trip_gap_s = v.round() as i64,
    },
    ThresholdSpec {
        key: "geofence_hold_fixes",
        meaning: "Fixes on a geofence's other side to enter or leave it",
        flag: None,
        get: |t| t.geofence_hold_fixes as f64,
        set: |t, v| t.geofence_hold_fixes = (v.round() as usize).max(1),
    },
    ThresholdSpec {
        key: "teleport_kmh",
        meaning: "Jumps implying more than this, km/h, are dropped (import and detection)",
        flag: None,
        get: |t| t.teleport_kmh,
        set: |t, v| t.teleport_kmh = v,
    },
];

impl Thresholds {
    /// The thresholds as `meta` entries.
    pub fn to_meta(&self) -> Vec<(&'static str, String)> {
        THRESHOLDS
            .iter()
            .map(|spec| (spec.key, (spec.get)(self).to_string()))
            .collect()
    }

    /// The thresholds stored in `meta` by `lookup` (key → value); the default for one
    /// that is missing (a database from before it existed), an error for one that
    /// does not read as a number — never a silent default.
    pub fn from_meta(lookup: impl Fn(&str) -> Option<String>) -> Result<Thresholds> {
        let mut t = Thresholds::default();
        for spec in &THRESHOLDS {
            let Some(text) = lookup(spec.key) else {
                continue;
            };
            let value: f64 = text
                .trim()
                .parse()
                .ok()
                .filter(|v: &f64| v.is_finite())
                .ok_or_else(|| {
                    Error::new(
                        crate::error::ErrorCode::DbSchema,
                        format!("meta.{} is {text:?}, not a number", spec.key),
                    )
                    .with_hint("run `fleetctl analyze` to store the thresholds again")
                })?;
            (spec.set)(&mut t, value);
        }
        Ok(t)
    }

    /// The signal-loss threshold in whole seconds: a gap between fixes longer than
    /// this is a signal loss on shift, and no driving in any case.
    pub fn signal_loss_s(&self) -> i64 {
        (self.signal_loss_min * 60.0) as i64
    }

    /// Checks the values a user may set, each against its flag's range.
    pub fn validate(&self) -> Result<()> {
        for spec in &THRESHOLDS {
            let Some(flag) = &spec.flag else {
                continue;
            };
            let v = (spec.get)(self) / flag.stored_per_unit;
            let (lo, hi) = flag.range;
            if !(lo..=hi).contains(&v) {
                return Err(
                    Error::invalid(format!("--{} {v} is out of range", flag.name))
                        .with_hint(format!("use {lo}..={hi}")),
                );
            }
        }
        Ok(())
    }
}

/// What detection needs besides the fixes.
pub struct Context {
    /// Thresholds.
    pub thresholds: Thresholds,
    /// The fleet's zone, for local days.
    pub zone: FleetZone,
    /// The geofences.
    pub geofences: Vec<Geofence>,
    /// Names points.
    pub namer: Namer,
    /// Vehicles with a limit of their own, km/h, by id.
    pub vehicle_limits: std::collections::HashMap<i64, f64>,
}

impl Context {
    /// A context over these geofences and places.
    pub fn new(
        thresholds: Thresholds,
        zone: FleetZone,
        geofences: Vec<Geofence>,
        places: &[crate::geo::Place],
    ) -> Context {
        let namer = Namer::for_geofences(&geofences, places);
        Context {
            thresholds,
            zone,
            geofences,
            namer,
            vehicle_limits: Default::default(),
        }
    }

    /// The same context, with the vehicles' own speed limits.
    pub fn with_vehicle_limits(
        self,
        vehicle_limits: std::collections::HashMap<i64, f64>,
    ) -> Context {
        Context {
            vehicle_limits,
            ..self
        }
    }

    /// The limit that applies to a fix and where it comes from: the lowest of the
    /// limited geofences it is inside and the vehicle's own limit (else the fleet's).
    pub fn speed_limit(&self, f: &Fix) -> (f64, LimitSource) {
        speed_limit_at(
            f,
            self.vehicle_limits.get(&f.vehicle_id).copied(),
            self.thresholds.speed_limit_kmh,
            &self.geofences,
        )
    }

    /// The limit that applies to a fix, without naming where it comes from.
    pub fn speed_limit_kmh(&self, f: &Fix) -> f64 {
        lowest_limit(
            f,
            self.vehicle_limits.get(&f.vehicle_id).copied(),
            self.thresholds.speed_limit_kmh,
            &self.geofences,
        )
        .0
    }
}

/// The limit that applies to a fix and where it comes from: the lowest of the
/// limited geofences it is inside and the vehicle's own limit (`own_kmh`, else the
/// fleet's `fleet_kmh`). Detection and the speed chart share this one rule.
pub fn speed_limit_at(
    f: &Fix,
    own_kmh: Option<f64>,
    fleet_kmh: f64,
    geofences: &[Geofence],
) -> (f64, LimitSource) {
    match lowest_limit(f, own_kmh, fleet_kmh, geofences) {
        (limit, Some(g)) => (limit, LimitSource::Geofence(g.name.clone())),
        (_, None) => own_or_fleet_limit(own_kmh, fleet_kmh),
    }
}

/// The rule itself, naming nothing: the limit at a fix, and the geofence that set it
/// when one did (detection asks this for every fix, and names a source only for an
/// episode's fix).
fn lowest_limit<'g>(
    f: &Fix,
    own_kmh: Option<f64>,
    fleet_kmh: f64,
    geofences: &'g [Geofence],
) -> (f64, Option<&'g Geofence>) {
    let mut best = (own_or_fleet_limit(own_kmh, fleet_kmh).0, None);
    for g in geofences {
        if let Some(limit) = g.speed_limit_kmh
            && limit < best.0
            && g.shape.contains(crate::geo::LatLon::new(f.lat, f.lon))
        {
            best = (limit, Some(g));
        }
    }
    best
}

/// A vehicle's limit before any geofence lowers it: its own (`own_kmh`), else the
/// fleet's.
pub fn own_or_fleet_limit(own_kmh: Option<f64>, fleet_kmh: f64) -> (f64, LimitSource) {
    match own_kmh {
        Some(v) => (v, LimitSource::Vehicle),
        None => (fleet_kmh, LimitSource::Fleet),
    }
}

/// Where a speed limit comes from.
#[derive(Debug, Clone, PartialEq, serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum LimitSource {
    /// The fleet's default (`analyze --speed-limit`).
    Fleet,
    /// The vehicle's own (`vehicles set --speed-limit`).
    Vehicle,
    /// A geofence's `speed_limit_kmh`, by name.
    Geofence(String),
}

/// Analyses one vehicle's time-ordered fixes.
pub fn analyze_vehicle(fixes: &[Fix], ctx: &Context) -> VehicleAnalysis {
    window::analyze_all(fixes, ctx)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::geo::{LatLon, offset_m};
    use crate::model::EventKind;
    use rand::rngs::Xoshiro256PlusPlus;
    use rand::{RngExt, SeedableRng};

    const ORIGIN: LatLon = LatLon::new(14.60, -90.55);
    const T0: i64 = 1_795_000_000;

    fn fix(ts: i64, east_m: f64, north_m: f64, speed_kmh: f64, ignition: bool) -> Fix {
        let p = offset_m(ORIGIN, east_m, north_m);
        Fix {
            vehicle_id: 1,
            ts,
            lat: p.lat,
            lon: p.lon,
            speed_kmh,
            speed_derived: false,
            heading_deg: Some(0.0),
            ignition: Some(ignition),
            odometer_km: None,
        }
    }

    fn ctx(geofences: Vec<Geofence>) -> Context {
        Context::new(
            Thresholds::default(),
            FleetZone::default(),
            geofences,
            crate::geo::atlas::places(),
        )
    }

    /// Standing still for `n` fixes with GPS noise of σ = 5 m.
    fn parked(
        rng: &mut Xoshiro256PlusPlus,
        t: &mut i64,
        n: usize,
        at_east_m: f64,
        ignition: bool,
    ) -> Vec<Fix> {
        (0..n)
            .map(|_| {
                *t += 15;
                let (dx, dy): (f64, f64) =
                    (rng.random_range(-9.0..9.0), rng.random_range(-9.0..9.0));
                fix(*t, at_east_m + dx, dy, 0.0, ignition)
            })
            .collect()
    }

    /// Driving east at `kmh` for `n` fixes from `from_east_m`.
    fn drive(t: &mut i64, n: usize, from_east_m: f64, kmh: f64) -> Vec<Fix> {
        (1..=n)
            .map(|k| {
                *t += 15;
                fix(
                    *t,
                    from_east_m + kmh / 3.6 * 15.0 * k as f64,
                    0.0,
                    kmh,
                    true,
                )
            })
            .collect()
    }

    #[test]
    fn parked_jitter_makes_no_trip_and_no_distance() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
        let mut t = T0;
        let fixes = parked(&mut rng, &mut t, 8 * 240, 0.0, false);
        let a = analyze_vehicle(&fixes, &ctx(vec![]));
        assert!(a.trips.is_empty(), "{:?}", a.trips);
        assert_eq!(a.stops.len(), 1);
        assert_eq!(a.daily.iter().map(|d| d.gps_distance_km).sum::<f64>(), 0.0);
        assert!(a.stops[0].ongoing && !a.stops[0].engine_on());
    }

    #[test]
    fn a_parked_tracker_that_reports_every_ten_minutes_is_one_stop_and_no_distance() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(5);
        let mut t = T0;
        let mut fixes = drive(&mut t, 20, 0.0, 48.0);
        // Eight hours parked, a heartbeat every 10 minutes wandering up to 13 m.
        for mut f in parked(&mut rng, &mut t, 48, 4000.0, false) {
            f.ts = T0 + 20 * 15 + (f.ts - T0 - 20 * 15) * 40;
            fixes.push(f);
        }
        let a = analyze_vehicle(&fixes, &ctx(vec![]));
        assert_eq!(a.stops.len(), 1, "{:?}", a.stops);
        assert!(a.stops[0].duration_s() > 7 * 3600, "{:?}", a.stops);
        let (km, gap): (f64, f64) = a.daily.iter().fold((0.0, 0.0), |(k, g), d| {
            (k + d.gps_distance_km, g + d.gap_km)
        });
        assert!((km - 3.8).abs() < 0.1, "{km}");
        assert_eq!(gap, 0.0, "heartbeats while parked are no gap driven");
    }

    #[test]
    fn a_drive_between_two_stops_is_one_trip_of_the_right_length() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(2);
        let mut t = T0;
        let mut fixes = parked(&mut rng, &mut t, 40, 0.0, true);
        fixes.extend(drive(&mut t, 40, 0.0, 48.0)); // 40 × 200 m = 8 km
        fixes.extend(parked(&mut rng, &mut t, 40, 8000.0, true));
        let a = analyze_vehicle(&fixes, &ctx(vec![]));
        assert_eq!(a.stops.len(), 2, "{:?}", a.stops);
        assert_eq!(a.trips.len(), 1);
        let km = a.trips[0].distance_km;
        assert!((km - 8.0).abs() < 0.08, "{km}");
        // The trip starts at the last stationary fix and ends at the first one.
        assert_eq!(a.trips[0].start_ts, a.stops[0].end_ts);
        assert_eq!(a.trips[0].end_ts, a.stops[1].start_ts);
        assert!((a.stops[1].start_ts - (T0 + 80 * 15)).abs() <= 15);
    }

    #[test]
    fn a_signal_loss_inside_a_drive_is_gap_km_not_driven_km() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
        let mut t = T0;
        let mut fixes = parked(&mut rng, &mut t, 40, 0.0, true);
        fixes.extend(drive(&mut t, 20, 0.0, 48.0)); // 4 km
        t += 600; // ten minutes unseen, 8.2 km further on
        fixes.extend(drive(&mut t, 20, 12_000.0, 48.0)); // 3.8 km more, to 16 km
        fixes.extend(parked(&mut rng, &mut t, 40, 16_000.0, true));
        // By default a gap over 5 minutes ends a trip: two, and the gap's km in
        // neither (the day has them).
        let a = analyze_vehicle(&fixes, &ctx(vec![]));
        let trips: Vec<_> = a.trips.iter().map(|t| (t.distance_km, t.gap_km)).collect();
        assert_eq!(trips.len(), 2, "{trips:?}");
        assert!((trips[0].0 - 4.0).abs() < 0.1 && (trips[1].0 - 3.8).abs() < 0.1);
        assert_eq!((trips[0].1, trips[1].1), (0.0, 0.0));
        let day_gap: f64 = a.daily.iter().map(|d| d.gap_km).sum();
        assert!((day_gap - 8.2).abs() < 0.1, "the day's gap {day_gap}");
        // With --trip-gap-min 60 the drive is one trip across the gap.
        let mut long_gap = ctx(vec![]);
        long_gap.thresholds.trip_gap_s = 3600;
        let a = analyze_vehicle(&fixes, &long_gap);
        assert_eq!(a.trips.len(), 1, "{:?}", a.trips);
        let (km, gap) = (a.trips[0].distance_km, a.trips[0].gap_km);
        assert!((km - 7.8).abs() < 0.1, "driven {km}");
        assert!((gap - 8.2).abs() < 0.1, "gap {gap}");
        // The day is a longer span than its one trip (it holds the stops around
        // it), where standing adds nothing: the same km give or take where the
        // vehicle stood in each stop.
        let day: f64 = a.daily.iter().map(|d| d.gps_distance_km).sum();
        assert!((day - km).abs() < 0.05, "the day {day} vs its trip {km}");
        assert!(a.events.iter().any(|e| e.kind == EventKind::SignalLoss));
    }

    #[test]
    fn crawling_within_the_stop_radius_is_driving_not_a_stop() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(4);
        let mut t = T0;
        let mut fixes = parked(&mut rng, &mut t, 40, 0.0, true);
        // 4 km/h for four minutes: 267 m, no fix more than 200 m from the last stop.
        fixes.extend(drive(&mut t, 16, 0.0, 4.0));
        fixes.extend(drive(&mut t, 40, 267.0, 48.0));
        fixes.extend(parked(&mut rng, &mut t, 40, 8267.0, true));
        let a = analyze_vehicle(&fixes, &ctx(vec![]));
        assert_eq!(a.stops.len(), 2, "{:?}", a.stops);
        let km: f64 = a.trips.iter().map(|t| t.distance_km).sum();
        assert!(
            (km - 8.267).abs() < 0.1,
            "the crawl's metres are kept: {km}"
        );
    }

    #[test]
    fn a_gap_makes_no_trip() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
        let mut t = T0;
        let mut fixes = parked(&mut rng, &mut t, 20, 0.0, false);
        t += 2 * 3600; // two hours without data, then the vehicle is elsewhere
        fixes.extend(parked(&mut rng, &mut t, 20, 3000.0, false));
        let a = analyze_vehicle(&fixes, &ctx(vec![]));
        assert!(a.trips.is_empty(), "{:?}", a.trips);
        assert_eq!(a.daily.iter().map(|d| d.gps_distance_km).sum::<f64>(), 0.0);
        // Ignition was off before the gap: not a signal loss.
        assert!(!a.events.iter().any(|e| e.kind == EventKind::SignalLoss));
    }

    #[test]
    fn a_gap_on_shift_is_a_signal_loss() {
        let mut t = T0;
        let mut fixes = drive(&mut t, 10, 0.0, 40.0);
        t += 9 * 60;
        fixes.extend(drive(&mut t, 10, 8000.0, 40.0));
        let a = analyze_vehicle(&fixes, &ctx(vec![]));
        let losses: Vec<_> = a
            .events
            .iter()
            .filter(|e| e.kind == EventKind::SignalLoss)
            .collect();
        assert_eq!(losses.len(), 1);
        assert_eq!(losses[0].start_ts, fixes[9].ts);
        assert_eq!(losses[0].end_ts, fixes[10].ts);
        let crate::model::EventDetail::SignalLoss(d) = &losses[0].detail else {
            panic!("a signal loss's detail")
        };
        assert_eq!(d.minutes_lost, 9.3);
    }

    #[test]
    fn one_fix_above_the_limit_is_not_an_episode() {
        let mut t = T0;
        let mut fixes = drive(&mut t, 10, 0.0, 60.0);
        fixes[5].speed_kmh = 104.0;
        let a = analyze_vehicle(&fixes, &ctx(vec![]));
        assert!(!a.events.iter().any(|e| e.kind == EventKind::Speeding));
        // Three fixes in a row (30 s) are.
        fixes[6].speed_kmh = 97.0;
        fixes[7].speed_kmh = 91.0;
        let a = analyze_vehicle(&fixes, &ctx(vec![]));
        let ep: Vec<_> = a
            .events
            .iter()
            .filter(|e| e.kind == EventKind::Speeding)
            .collect();
        assert_eq!(ep.len(), 1);
        assert_eq!(ep[0].start_ts, fixes[5].ts);
        let crate::model::EventDetail::Speeding(d) = &ep[0].detail else {
            panic!("a speeding detail")
        };
        // 30 s from the first fast fix to the last, the event's span.
        assert_eq!((d.max_speed_kmh, d.duration_s), (104.0, 30));
        assert_eq!(ep[0].end_ts - ep[0].start_ts, 30);
        assert_eq!(d.fixes, 3);
        // Regression (a real fleet at a fix a minute: 16 episodes of one fix): a fix
        // every 60 s, one fast: it may stand for a minute, but it proves one
        // reading, no time: no episode. Two in a row prove the 60 s between them.
        let sparse: Vec<Fix> = fixes
            .iter()
            .step_by(4)
            .map(|f| Fix {
                speed_kmh: if f.ts == fixes[4].ts { 95.0 } else { 60.0 },
                ..*f
            })
            .collect();
        let a = analyze_vehicle(&sparse, &ctx(vec![]));
        assert!(
            !a.events.iter().any(|e| e.kind == EventKind::Speeding),
            "{:?}",
            a.events
        );
        let mut two = sparse.clone();
        two[2].speed_kmh = 92.0;
        let a = analyze_vehicle(&two, &ctx(vec![]));
        let ep: Vec<_> = a
            .events
            .iter()
            .filter(|e| e.kind == EventKind::Speeding)
            .collect();
        assert_eq!(ep.len(), 1, "{:?}", a.events);
        let crate::model::EventDetail::Speeding(d) = &ep[0].detail else {
            panic!("a speeding detail")
        };
        assert_eq!((d.duration_s, d.fixes), (60, 2));
        // One fast fix between hour-long gaps (a sampled extract) says nothing of
        // how long it lasted: no episode.
        let gaps: Vec<Fix> = (0..3)
            .map(|k| Fix {
                ts: T0 + k * 3600,
                speed_kmh: if k == 1 { 97.0 } else { 60.0 },
                ..fixes[0]
            })
            .collect();
        let a = analyze_vehicle(&gaps, &ctx(vec![]));
        assert!(!a.events.iter().any(|e| e.kind == EventKind::Speeding));
    }

    #[test]
    fn touching_a_geofence_for_one_fix_is_not_a_visit() {
        let zone = crate::geo::Shape::Circle {
            center: offset_m(ORIGIN, 1000.0, 0.0),
            radius_m: 60.0,
        };
        let c = ctx(vec![Geofence {
            id: 1,
            name: "Bodega".into(),
            kind: "depot".into(),
            shape: zone,
            speed_limit_kmh: None,
        }]);
        let mut t = T0;
        // At 48 km/h a fix every 200 m: only one lands inside a 120 m wide circle.
        let fixes = drive(&mut t, 20, 0.0, 48.0);
        let inside = fixes
            .iter()
            .filter(|f| c.geofences[0].shape.contains(LatLon::new(f.lat, f.lon)))
            .count();
        assert_eq!(inside, 1);
        let a = analyze_vehicle(&fixes, &c);
        assert!(a.visits.is_empty());
        assert!(!a.events.iter().any(|e| e.kind == EventKind::GeofenceEnter));
        // Two fixes inside (slower) are a visit, entered at the first of them.
        let mut t = T0;
        let slow = drive(&mut t, 60, 0.0, 12.0);
        let a = analyze_vehicle(&slow, &c);
        assert_eq!(a.visits.len(), 1, "{:?}", a.visits);
        let first_inside = slow
            .iter()
            .find(|f| c.geofences[0].shape.contains(LatLon::new(f.lat, f.lon)))
            .unwrap();
        assert_eq!(a.visits[0].enter_ts, first_inside.ts);
        assert!(a.visits[0].exit_ts.is_some());
    }

    #[test]
    fn a_teleport_adds_no_distance() {
        let mut t = T0;
        let mut fixes = drive(&mut t, 20, 0.0, 36.0);
        fixes[10].lat += 0.2; // 22 km away for one fix
        let a = analyze_vehicle(&fixes, &ctx(vec![]));
        let km: f64 = a.daily.iter().map(|d| d.gps_distance_km).sum();
        assert!((km - 19.0 * 0.15).abs() < 0.2, "{km}");
    }
}
