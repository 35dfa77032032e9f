//! The one distance: how far a vehicle went over a span of its fixes (a trip, a
//! local day, a map's window), GPS and odometer, with the odometer used only when
//! it earns it. Trips, the daily rollup (and so `daily_summary`, `trip_summary`,
//! `mileage_ranking` and the export) and `route_map` all call [`span_distance`], so
//! one vehicle and span has one figure whichever command asks.

use super::Thresholds;
use crate::geo::{LatLon, haversine_m};
use crate::model::Fix;
pub use crate::model::{OdometerRejected, SpanDistance};
use std::collections::VecDeque;

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

/// A tracker that gives its coordinates to this many degrees (3 decimals, about
/// 110 m of latitude) makes a parked vehicle hop between neighbouring grid points:
/// between two such fixes the still rule allows one and a half steps of the grid
/// instead of `STILL_MAX_M`, so that the hops are no kilometres.
const GRID_DEG: f64 = 1e-3;

/// Whether a fix's coordinates lie on the `GRID_DEG` grid (as rounded data does;
/// full-precision coordinates almost never do, both at once).
fn on_grid(f: &Fix) -> bool {
    let on = |x: f64| ((x / GRID_DEG).round() * GRID_DEG - x).abs() < 1e-7;
    on(f.lat) && on(f.lon)
}

/// How far apart two fixes may be and still show a vehicle standing: `STILL_MAX_M`,
/// or one and a half grid steps between fixes rounded to `GRID_DEG`.
pub fn still_max_m(a: &Fix, b: &Fix) -> f64 {
    if on_grid(a) && on_grid(b) {
        1.5 * GRID_DEG * 111_320.0
    } else {
        STILL_MAX_M
    }
}

/// For each step between consecutive fixes (`k` to `k + 1`), whether the vehicle
/// stood still: the step itself, and the stretch from the earliest fix at most
/// `STILL_HALF_WINDOW_S` before it to the latest fix at most as long after it (never
/// across a gap longer than `gap_s`), each moved no more than
/// `STILL_MAX_M`, and neither fix of the step reports (not derives) a speed of
/// `MOVING_KMH` or more. Jitter while parked is standing; a walker, a cyclist or a
/// bus crawling in a jam keeps moving along a path, and is not. A step across a gap
/// is not still (the vehicle was unseen; see `span_distance` for its distance).
pub fn still_steps(fixes: &[Fix], gap_s: i64) -> Vec<bool> {
    let mut window = StillWindow::new(gap_s);
    let mut still = Vec::with_capacity(fixes.len().saturating_sub(1));
    for f in fixes {
        window.push(*f);
        while let Some((s, _)) = window.decide(false) {
            still.push(s);
        }
    }
    while let Some((s, _)) = window.decide(true) {
        still.push(s);
    }
    still
}

/// [`still_steps`] a fix at a time: each step is decided once the fixes after it
/// reach past its window (or the span ends), holding only the fixes a window needs.
#[derive(Debug, Clone)]
struct StillWindow {
    gap_s: i64,
    /// The span's fixes from `first` on: from the earliest a later step's window
    /// can reach back to.
    held: VecDeque<Fix>,
    /// The span index of `held[0]`.
    first: usize,
    /// Fixes pushed.
    len: usize,
    /// The next step to decide (fix `next` to `next + 1`).
    next: usize,
    /// The window's ends for the last step decided: both only move forward.
    a: usize,
    b: usize,
}

impl StillWindow {
    fn new(gap_s: i64) -> StillWindow {
        StillWindow {
            gap_s,
            held: VecDeque::new(),
            first: 0,
            len: 0,
            next: 0,
            a: 0,
            b: 0,
        }
    }

    fn push(&mut self, fix: Fix) {
        self.held.push_back(fix);
        self.len += 1;
    }

    fn at(&self, k: usize) -> &Fix {
        &self.held[k - self.first]
    }

    /// Decides the next step if the fixes pushed settle it (`at_end`: no more
    /// follow): whether it stood still, and the fix it reaches.
    fn decide(&mut self, at_end: bool) -> Option<(bool, Fix)> {
        let k = self.next;
        if k + 1 >= self.len {
            return None;
        }
        let gap_after = |w: &StillWindow, j: usize| w.at(j + 1).ts - w.at(j).ts > w.gap_s;
        let (from, to) = (*self.at(k), *self.at(k + 1));
        if gap_after(self, k) {
            // Nothing before a gap is in a later step's window.
            self.next = k + 1;
            self.a = k + 1;
            self.drop_before(k + 1);
            return Some((false, to));
        }
        let mut b = self.b.max(k + 1);
        while b + 1 < self.len
            && !gap_after(self, b)
            && self.at(b + 1).ts <= to.ts + STILL_HALF_WINDOW_S
        {
            b += 1;
        }
        if b + 1 == self.len && !at_end {
            // The next fix may still belong to this step's window.
            return None;
        }
        let mut a = self.a;
        while a < k && self.at(a).ts < from.ts - STILL_HALF_WINDOW_S {
            a += 1;
        }
        let reports_moving = |f: &Fix| !f.speed_derived && f.speed_kmh >= super::events::MOVING_KMH;
        let (wa, wb) = (self.at(a), self.at(b));
        let still = haversine_m(at(wa), at(wb)) <= still_max_m(wa, wb)
            && haversine_m(at(&from), at(&to)) <= still_max_m(&from, &to)
            && !reports_moving(&from)
            && !reports_moving(&to);
        (self.a, self.b, self.next) = (a, b, k + 1);
        self.drop_before(a);
        Some((still, to))
    }

    fn drop_before(&mut self, k: usize) {
        while self.first < k {
            self.held.pop_front();
            self.first += 1;
        }
    }
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
/// - the odometer is used only when it earns it: no reading steps back more than
///   `ODOMETER_STEP_BACK_KM`, and its km fit the GPS ([`odometer_fits`]).
pub fn span_distance(fixes: &[Fix], th: &Thresholds) -> SpanDistance {
    let mut walk = SpanWalk::new(th);
    for f in fixes {
        walk.push(*f);
    }
    walk.finish()
}

/// [`span_distance`] a fix at a time, holding a few minutes of fixes: a span that
/// grows (a live vehicle's open day) is measured once, not again at every fix.
/// Its figure equals `span_distance` over the same fixes, to the last bit: the same
/// steps, in the same order.
#[derive(Debug, Clone)]
pub struct SpanWalk {
    teleport_kmh: f64,
    time: SpanTime,
    /// Where the path stood `TOP_WINDOW_S` ago and since: (time, driven metres).
    recent: VecDeque<(i64, f64)>,
    still: StillWindow,
    /// The first fix, and the last point a step was counted to.
    counted: Option<Fix>,
    /// The last fix not dropped as a teleport.
    good: Option<Fix>,
    /// The fixes' own path since `counted`, metres.
    path_m: f64,
    driven_m: f64,
    gap_m: f64,
    odometer: OdometerWalk,
}

/// How a span's time was spent, by the steps of [`SpanWalk`] (each step's time to
/// the fix that opens it): driving when that fix reports `MOVING_KMH` or more, or
/// when the positions moved at least that fast over the step and the vehicle was
/// not standing still ([`still_steps`]) — so that a speed field stuck at 0 does not
/// hide a drive; idling when not driving with the ignition reported on; standing
/// otherwise. A step across a gap over `signal_loss_min` is none of them.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SpanTime {
    /// Seconds driving.
    pub driving_s: i64,
    /// Seconds standing with the ignition reported on.
    pub idle_s: i64,
    /// Seconds standing with the ignition off or unreported.
    pub standing_s: i64,
    /// The fastest the positions went over any `TOP_WINDOW_S` of the span, km/h
    /// (0 for a span shorter than that): a speed that does not rely on the
    /// tracker's speed field.
    pub top_kmh: f64,
}

/// The stretch [`SpanTime::top_kmh`] is measured over, seconds: long enough that a
/// few metres of noise at each end are a few km/h.
pub const TOP_WINDOW_S: i64 = 30;

/// What the odometer's verdict needs of the readings so far.
#[derive(Debug, Clone)]
struct OdometerWalk {
    /// Every fix had a reading.
    complete: bool,
    /// A reading stepped back more than `ODOMETER_STEP_BACK_KM`.
    decreasing: bool,
    low: Option<f64>,
    high: f64,
}

impl SpanWalk {
    /// An empty span.
    pub fn new(th: &Thresholds) -> SpanWalk {
        SpanWalk {
            teleport_kmh: th.teleport_kmh,
            time: SpanTime::default(),
            recent: VecDeque::new(),
            still: StillWindow::new(th.signal_loss_s()),
            counted: None,
            good: None,
            path_m: 0.0,
            driven_m: 0.0,
            gap_m: 0.0,
            odometer: OdometerWalk {
                complete: true,
                decreasing: false,
                low: None,
                high: f64::NEG_INFINITY,
            },
        }
    }

    /// Adds the span's next fix (time order).
    pub fn push(&mut self, fix: Fix) {
        let o = &mut self.odometer;
        match fix.odometer_km {
            Some(r) => {
                o.decreasing |= r < o.high - ODOMETER_STEP_BACK_KM;
                o.high = o.high.max(r);
                o.low.get_or_insert(r);
            }
            None => o.complete = false,
        }
        if self.counted.is_none() {
            (self.counted, self.good) = (Some(fix), Some(fix));
            self.recent.push_back((fix.ts, 0.0));
        }
        self.still.push(fix);
        self.walk(false);
    }

    /// The span's distance so far.
    pub fn finish(self) -> SpanDistance {
        self.finish_with_time().0
    }

    /// The span's distance and how its time was spent.
    pub fn finish_with_time(mut self) -> (SpanDistance, SpanTime) {
        if self.counted.is_none() {
            return Default::default();
        }
        self.walk(true);
        let gps_km = self.driven_m / 1000.0;
        let gap_km = self.gap_m / 1000.0;
        let o = &self.odometer;
        let (odometer_km, odometer_rejected) = if !o.complete {
            (None, None)
        } else if o.decreasing {
            (None, Some(OdometerRejected::Decreasing))
        } else {
            match odometer_fits((o.high - o.low.unwrap_or(0.0)).max(0.0), gps_km, gap_km) {
                Ok(km) => (Some(km), None),
                Err(why) => (None, Some(why)),
            }
        };
        let distance = SpanDistance {
            gps_km,
            gap_km,
            odometer_km,
            odometer_rejected,
        };
        (distance, self.time)
    }

    /// Counts the steps the fixes pushed settle (`at_end`: all of them).
    fn walk(&mut self, at_end: bool) {
        let gap_s = self.still.gap_s;
        while let Some((still, fix)) = self.still.decide(at_end) {
            let (Some(good), Some(counted)) = (self.good, self.counted) else {
                unreachable!("the first fix is pushed before any step");
            };
            let dt = (fix.ts - good.ts).max(1) as f64;
            let step = haversine_m(at(&good), at(&fix));
            if super::is_jump(step, dt, self.teleport_kmh) {
                continue;
            }
            let across_gap = fix.ts - good.ts > gap_s;
            let standing = still || (across_gap && step <= still_max_m(&good, &fix));
            let step_s = fix.ts - good.ts;
            let moved_kmh = step / step_s.max(1) as f64 * 3.6;
            let driving = good.speed_kmh >= super::events::MOVING_KMH
                || (!standing && moved_kmh >= super::events::MOVING_KMH);
            match (across_gap, driving, good.ignition) {
                (true, _, _) => {}
                (false, true, _) => self.time.driving_s += step_s,
                (false, false, Some(true)) => self.time.idle_s += step_s,
                (false, false, _) => self.time.standing_s += step_s,
            }
            self.good = Some(fix);
            if standing {
                // Noise while standing: not added, and the point counted to stays
                // where the vehicle arrived, so that leaving counts from there.
                continue;
            }
            self.path_m += step;
            let d = haversine_m(at(&counted), at(&fix));
            if across_gap {
                self.gap_m += d;
                (self.counted, self.path_m) = (Some(fix), 0.0);
                // Speed is measured along what was seen.
                self.recent.clear();
                self.recent.push_back((fix.ts, self.driven_m));
            } else if d >= JITTER_M {
                let quick = fix.ts - counted.ts <= DENSE_S;
                self.driven_m += if quick { self.path_m.max(d) } else { d };
                (self.counted, self.path_m) = (Some(fix), 0.0);
                self.note_speed(fix.ts);
            }
        }
    }
}

impl SpanWalk {
    /// Keeps the fastest `TOP_WINDOW_S` so far, the path having reached
    /// `driven_m` at `ts`.
    fn note_speed(&mut self, ts: i64) {
        self.recent.push_back((ts, self.driven_m));
        // The latest point at least a window back stays first.
        while self.recent.len() > 2 && self.recent[1].0 <= ts - TOP_WINDOW_S {
            self.recent.pop_front();
        }
        let (from_ts, from_m) = self.recent[0];
        if from_ts <= ts - TOP_WINDOW_S {
            let kmh = (self.driven_m - from_m) / (ts - from_ts) as f64 * 3.6;
            self.time.top_kmh = self.time.top_kmh.max(kmh);
        }
    }
}

/// Whether an odometer's `km` over a span earns its use against the GPS: between
/// `ODOMETER_MIN_RATIO` × the GPS path and `ODOMETER_MAX_RATIO` × the GPS path with
/// the gaps' chords, each give or take `ODOMETER_SLACK_KM`. (Readings that step back
/// more than `ODOMETER_STEP_BACK_KM` are rejected before: `decreasing`.)
fn odometer_fits(km: f64, gps_km: f64, gap_km: f64) -> Result<f64, OdometerRejected> {
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

    // The definitions written plainly over a whole slice (as they were before the
    // walk): the reference the walk must equal, bit for bit.
    fn plain_still_steps(fixes: &[Fix], gap_s: i64) -> Vec<bool> {
        let reports_moving =
            |f: &Fix| !f.speed_derived && f.speed_kmh >= crate::analyze::events::MOVING_KMH;
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
            while b + 1 < n
                && !gap_after(b)
                && fixes[b + 1].ts <= fixes[k + 1].ts + STILL_HALF_WINDOW_S
            {
                b += 1;
            }
            still.push(
                haversine_m(at(&fixes[a]), at(&fixes[b])) <= still_max_m(&fixes[a], &fixes[b])
                    && haversine_m(at(&fixes[k]), at(&fixes[k + 1]))
                        <= still_max_m(&fixes[k], &fixes[k + 1])
                    && !reports_moving(&fixes[k])
                    && !reports_moving(&fixes[k + 1]),
            );
        }
        still
    }

    fn plain_span_distance(fixes: &[Fix], th: &Thresholds) -> SpanDistance {
        if fixes.is_empty() {
            return SpanDistance::default();
        }
        let gap_s = th.signal_loss_s();
        let still = plain_still_steps(fixes, gap_s);
        let (mut driven_m, mut gap_m) = (0.0, 0.0);
        let mut counted = 0; // the last point a step was counted to
        let mut good = 0; // the last fix not dropped as a teleport
        let mut path_m = 0.0; // the fixes' own path since `counted`
        for k in 1..fixes.len() {
            let dt = (fixes[k].ts - fixes[good].ts).max(1) as f64;
            let step = haversine_m(at(&fixes[good]), at(&fixes[k]));
            if crate::analyze::is_jump(step, dt, th.teleport_kmh) {
                continue;
            }
            let across_gap = fixes[k].ts - fixes[good].ts > gap_s;
            let standing =
                still[k - 1] || (across_gap && step <= still_max_m(&fixes[good], &fixes[k]));
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
            match plain_odometer_verdict(fixes, gps_km, gap_km) {
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

    fn plain_odometer_verdict(
        fixes: &[Fix],
        gps_km: f64,
        gap_km: f64,
    ) -> Result<f64, OdometerRejected> {
        let readings = || fixes.iter().filter_map(|f| f.odometer_km);
        let mut high = f64::NEG_INFINITY;
        for r in readings() {
            if r < high - ODOMETER_STEP_BACK_KM {
                return Err(OdometerRejected::Decreasing);
            }
            high = high.max(r);
        }
        let low = readings().next().unwrap_or(0.0);
        // The fit itself is one rule, shared: what is checked here is the readings.
        odometer_fits((high - low).max(0.0), gps_km, gap_km)
    }

    #[test]
    fn a_span_walked_a_fix_at_a_time_measures_each_prefix_as_the_whole_pass_does() {
        let th = Thresholds::default();
        // Parked jitter, a drive, a signal loss, a teleport, a slow walk, the
        // odometer missing on one fix: every rule's state crosses the pushes.
        let mut fixes: Vec<Fix> = (0..20)
            .map(|k| {
                fix(
                    k * 15,
                    if k % 2 == 0 { 0.0 } else { 20.0 },
                    0.0,
                    Some(100.0),
                )
            })
            .collect();
        fixes.extend((1..40).map(|k| {
            fix(
                300 + k * 10,
                k as f64 * 90.0,
                32.0,
                Some(100.0 + k as f64 * 0.09),
            )
        }));
        fixes.push(fix(1400, 9000.0, 40.0, Some(104.5)));
        fixes.push(fix(1410, 60_000.0, 40.0, Some(104.6)));
        fixes.extend((0..30).map(|k| {
            fix(
                1420 + k * 15,
                9000.0 + k as f64 * 8.0,
                2.0,
                (k != 7).then_some(105.0),
            )
        }));
        let mut walk = SpanWalk::new(&th);
        for (n, f) in fixes.iter().enumerate() {
            walk.push(*f);
            let prefix = &fixes[..=n];
            assert_eq!(
                walk.clone().finish(),
                plain_span_distance(prefix, &th),
                "after fix {n}"
            );
            assert_eq!(
                still_steps(prefix, th.signal_loss_s()),
                plain_still_steps(prefix, th.signal_loss_s())
            );
        }
    }
}
