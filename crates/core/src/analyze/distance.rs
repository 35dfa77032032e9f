//! The one distance: how far a vehicle went over a span of its fixes (a trip, a
//! local day, a map's window), GPS and odometer, with the odometer used only when
//! it earns it. Trips, the daily rollup (and so `daily_summary`, `trip_summary`,
//! `mileage_ranking` and the export) and `route_map` all call [`span_distance`], so
//! one vehicle and span has one figure whichever command asks.

use super::Thresholds;
use crate::geo::{LatLon, haversine_m};
use crate::model::Fix;
pub use crate::model::{OdometerRejected, SpanDistance};

/// Steps shorter than this from the last counted point are jitter, metres.
pub const JITTER_M: f64 = 15.0;
/// Within this many seconds, a step of `JITTER_M` is movement: the fixes' own path
/// counts, not only its straight line (dense fixes on a winding road).
const DENSE_S: i64 = 10;
/// An odometer may step back this much between two readings (rounding, a reading
/// sent twice out of order), km; more is `decreasing`.
pub const ODOMETER_STEP_BACK_KM: f64 = 0.1;
/// An odometer agrees with the GPS when its distance is at least this share of the
/// GPS path…
pub const ODOMETER_MIN_RATIO: f64 = 0.85;
/// …and at most this share of the GPS path with the gaps' straight lines (the road
/// across a gap is longer than its chord)…
pub const ODOMETER_MAX_RATIO: f64 = 1.25;
/// …give or take this many km (short spans: rounding of the readings).
pub const ODOMETER_SLACK_KM: f64 = 0.5;

fn at(f: &Fix) -> LatLon {
    LatLon::new(f.lat, f.lon)
}

/// How far the window around a step reaches on each side, seconds: the stretch that
/// tells standing from slow movement.
pub const STILL_HALF_WINDOW_S: i64 = 60;
/// Over that window, a vehicle that moved no more than this stood still, metres:
/// a parked receiver's noise wanders a few metres; a walker at 2 km/h covers 67 m
/// in two minutes.
pub const STILL_MAX_M: f64 = 30.0;

/// For each step between consecutive fixes (`k` to `k + 1`), whether the vehicle
/// stood still: the step itself, and the stretch from the earliest fix at most
/// `STILL_HALF_WINDOW_S` before it to the latest fix at most as long after it (never
/// across a gap longer than `gap_s`), each moved no more than
/// `STILL_MAX_M`, and neither fix of the step reports (not derives) a speed of
/// `MOVING_KMH` or more. Jitter while parked is standing; a walker, a cyclist or a
/// bus crawling in a jam keeps moving along a path, and is not. A step across a gap
/// is not still (the vehicle was unseen; see `span_distance` for its distance).
pub fn still_steps(fixes: &[Fix], gap_s: i64) -> Vec<bool> {
    let reports_moving = |f: &Fix| !f.speed_derived && f.speed_kmh >= super::events::MOVING_KMH;
    let gap_after = |k: usize| fixes[k + 1].ts - fixes[k].ts > gap_s;
    let n = fixes.len();
    let mut still = Vec::with_capacity(n.saturating_sub(1));
    let (mut a, mut b) = (0, 0);
    for k in 0..n.saturating_sub(1) {
        if gap_after(k) {
            still.push(false);
            a = k + 1;
            continue;
        }
        while a < k && fixes[a].ts < fixes[k].ts - STILL_HALF_WINDOW_S {
            a += 1;
        }
        b = b.max(k + 1);
        while b + 1 < n && !gap_after(b) && fixes[b + 1].ts <= fixes[k + 1].ts + STILL_HALF_WINDOW_S
        {
            b += 1;
        }
        still.push(
            haversine_m(at(&fixes[a]), at(&fixes[b])) <= STILL_MAX_M
                && haversine_m(at(&fixes[k]), at(&fixes[k + 1])) <= STILL_MAX_M
                && !reports_moving(&fixes[k])
                && !reports_moving(&fixes[k + 1]),
        );
    }
    still
}

/// The distance over `fixes` (one vehicle, time-ordered), a pure function of them:
///
/// - a step where the vehicle stood still ([`still_steps`]) adds nothing: its GPS
///   noise is not distance;
/// - a step is counted only once the vehicle is `JITTER_M` from the last point a
///   step was counted to; reached within `DENSE_S`, the fixes' own path since then
///   counts (curves), else the straight line;
/// - a step across a gap longer than `signal_loss_min` goes to `gap_km`, unless it
///   moved no more than `STILL_MAX_M` (a parked tracker's heartbeat: nothing);
/// - a fix implying more than `teleport_kmh` from the last one kept is skipped
///   (`analyze::is_jump`, the import's rule too);
/// - the odometer (see [`odometer_verdict`]) is used only when it earns it.
pub fn span_distance(fixes: &[Fix], th: &Thresholds) -> SpanDistance {
    if fixes.is_empty() {
        return SpanDistance::default();
    }
    let gap_s = th.signal_loss_s();
    let still = still_steps(fixes, gap_s);
    let (mut driven_m, mut gap_m) = (0.0, 0.0);
    let mut counted = 0; // the last point a step was counted to
    let mut good = 0; // the last fix not dropped as a teleport
    let mut path_m = 0.0; // the fixes' own path since `counted`
    for k in 1..fixes.len() {
        let dt = (fixes[k].ts - fixes[good].ts).max(1) as f64;
        let step = haversine_m(at(&fixes[good]), at(&fixes[k]));
        if super::is_jump(step, dt, th.teleport_kmh) {
            continue;
        }
        let across_gap = fixes[k].ts - fixes[good].ts > gap_s;
        let standing = still[k - 1] || (across_gap && step <= STILL_MAX_M);
        good = k;
        if standing {
            // Noise while standing: not added, and the point counted to stays
            // where the vehicle arrived, so that leaving counts from there.
            continue;
        }
        path_m += step;
        let d = haversine_m(at(&fixes[counted]), at(&fixes[k]));
        if across_gap {
            gap_m += d;
            counted = k;
            path_m = 0.0;
        } else if d >= JITTER_M {
            let quick = fixes[k].ts - fixes[counted].ts <= DENSE_S;
            driven_m += if quick { path_m.max(d) } else { d };
            counted = k;
            path_m = 0.0;
        }
    }
    let gps_km = driven_m / 1000.0;
    let gap_km = gap_m / 1000.0;
    let (odometer_km, odometer_rejected) = if fixes.iter().all(|f| f.odometer_km.is_some()) {
        match odometer_verdict(fixes, gps_km, gap_km) {
            Ok(km) => (Some(km), None),
            Err(why) => (None, Some(why)),
        }
    } else {
        (None, None)
    };
    SpanDistance {
        gps_km,
        gap_km,
        odometer_km,
        odometer_rejected,
    }
}

/// The odometer's km over `fixes` (every one with a reading), if it earns its use:
/// it never steps back more than `ODOMETER_STEP_BACK_KM`, and its distance is
/// between `ODOMETER_MIN_RATIO` × the GPS path and `ODOMETER_MAX_RATIO` × the GPS
/// path with the gaps' chords, each give or take `ODOMETER_SLACK_KM`.
pub fn odometer_verdict(fixes: &[Fix], gps_km: f64, gap_km: f64) -> Result<f64, OdometerRejected> {
    let readings = || fixes.iter().filter_map(|f| f.odometer_km);
    let mut high = f64::NEG_INFINITY;
    for r in readings() {
        if r < high - ODOMETER_STEP_BACK_KM {
            return Err(OdometerRejected::Decreasing);
        }
        high = high.max(r);
    }
    let low = readings().next().unwrap_or(0.0);
    let km = (high - low).max(0.0);
    let floor = ODOMETER_MIN_RATIO * gps_km - ODOMETER_SLACK_KM;
    let ceiling = ODOMETER_MAX_RATIO * (gps_km + gap_km) + ODOMETER_SLACK_KM;
    if (floor..=ceiling).contains(&km) {
        Ok(km)
    } else {
        Err(OdometerRejected::Implausible)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::geo::offset_m;

    const ORIGIN: LatLon = LatLon::new(14.60, -90.55);

    fn fix(ts: i64, north_m: f64, speed_kmh: f64, odometer_km: Option<f64>) -> Fix {
        let p = offset_m(ORIGIN, 0.0, north_m);
        Fix {
            vehicle_id: 1,
            ts,
            lat: p.lat,
            lon: p.lon,
            speed_kmh,
            speed_derived: false,
            heading_deg: None,
            ignition: None,
            odometer_km,
        }
    }

    /// 10 km north at 36 km/h, a fix every 10 s (100 m), odometer from `odo`.
    fn drive(odo: impl Fn(usize) -> Option<f64>) -> Vec<Fix> {
        (0..=100)
            .map(|k| fix(k as i64 * 10, k as f64 * 100.0, 36.0, odo(k)))
            .collect()
    }

    #[test]
    fn an_odometer_that_agrees_is_used_and_one_that_does_not_says_why() {
        let th = Thresholds::default();
        let good = span_distance(&drive(|k| Some(5000.0 + k as f64 * 0.101)), &th);
        assert!((good.gps_km - 10.0).abs() < 0.01, "{good:?}");
        assert_eq!(good.odometer_rejected, None);
        assert!((good.km() - 10.1).abs() < 1e-6, "{good:?}");

        let back = span_distance(
            &drive(|k| {
                Some(if k == 50 {
                    10.0
                } else {
                    5000.0 + k as f64 * 0.1
                })
            }),
            &th,
        );
        assert_eq!(back.odometer_rejected, Some(OdometerRejected::Decreasing));
        assert_eq!(back.km(), back.gps_km);

        // Miles read as km: 1.6 times the path.
        let miles = span_distance(&drive(|k| Some(k as f64 * 0.1609)), &th);
        assert_eq!(miles.odometer_rejected, Some(OdometerRejected::Implausible));
        // Metres read as km.
        let metres = span_distance(&drive(|k| Some(k as f64 * 100.0)), &th);
        assert_eq!(
            metres.odometer_rejected,
            Some(OdometerRejected::Implausible)
        );
        // A reading missing: no odometer at all, and nothing to reject.
        let partial = span_distance(&drive(|k| (k != 3).then_some(1.0)), &th);
        assert_eq!(
            (partial.odometer_km, partial.odometer_rejected),
            (None, None)
        );
    }

    #[test]
    fn parked_jitter_adds_nothing_and_a_slow_walk_counts() {
        let th = Thresholds::default();
        // An hour parked, a fix every 15 s swinging 0-20-0 m: a 2.4 km zigzag of noise.
        let parked: Vec<Fix> = (0..240)
            .map(|k| fix(k * 15, if k % 2 == 0 { 0.0 } else { 20.0 }, 0.0, None))
            .collect();
        assert_eq!(span_distance(&parked, &th).gps_km, 0.0);
        // Walking 1 km at 2 km/h, a fix every 15 s (8.3 m apart).
        let walk: Vec<Fix> = (0..=120)
            .map(|k| fix(k * 15, k as f64 * 1000.0 / 120.0, 2.0, None))
            .collect();
        let d = span_distance(&walk, &th);
        assert!((d.gps_km - 1.0).abs() < 0.03, "{d:?}");
        // Parked, then walking away: the walk counts, the jitter does not.
        let mut both = parked.clone();
        both.extend(walk.iter().map(|f| Fix {
            ts: f.ts + 3600,
            ..*f
        }));
        let d = span_distance(&both, &th);
        assert!((d.gps_km - 1.0).abs() < 0.03, "{d:?}");
    }
}
