//! The driving simulation: one vehicle's shift along its route, integrated second by
//! second, sampled every 15 s into fixes with GPS noise.
//!
//! Normal driving is built to stay clearly inside docs/definitions.md's limits (cruise at
//! most 70 km/h, dwells at most 25 min, a fix every 15 s), so that every speeding
//! episode, long stop, signal loss and stop "now" in the data is one this module
//! planted on purpose and recorded as ground truth.

use crate::geo::{self, LatLon, atlas};
use crate::model::{Fix, InjectedEvent, PlantedKind};
use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};
use rand_distr::{Distribution, Normal};
use serde_json::json;

/// Seconds between fixes.
pub const FIX_INTERVAL_S: i64 = 15;
/// GPS noise, metres (σ on each axis).
pub const GPS_NOISE_M: f64 = 5.0;
/// The fastest normal cruise, km/h (the speed limit is 80; normal driving stays ≤ 75).
pub const MAX_CRUISE_KMH: f64 = 70.0;
/// The longest normal dwell, minutes (the long-stop threshold is 40; normal stays ≤ 35).
pub const MAX_NORMAL_DWELL_MIN: f64 = 25.0;
/// Keep traffic-light halts this far from customer stops and the depot, metres.
const HALT_MARGIN_M: f64 = 300.0;
/// Acceleration and braking, m/s².
const ACCEL: f64 = 1.5;
const BRAKE: f64 = 2.5;
/// Braking assumed when planning for curves and halts, m/s² (gentler than `BRAKE`).
const PLAN_BRAKE: f64 = 1.8;
const KMH: f64 = 1.0 / 3.6;

/// A route prepared for driving: vertices with cumulative distance, bearings, and a
/// speed limit at each vertex from the turn it makes.
pub struct RoutePath {
    /// The route slug.
    pub slug: String,
    pts: Vec<LatLon>,
    cum_m: Vec<f64>,
    seg_bearing: Vec<f64>,
    turn_limit_ms: Vec<f64>,
    /// Distance along the loop of each named stop, metres, increasing.
    pub stop_s: Vec<f64>,
    /// Names of the stops.
    pub stop_names: Vec<String>,
    /// Loop length, metres.
    pub length_m: f64,
}

impl RoutePath {
    /// Prepares an embedded route.
    pub fn new(route: &atlas::Route) -> crate::error::Result<RoutePath> {
        let pts = geo::decode_polyline(&route.polyline)?;
        let mut cum_m = Vec::with_capacity(pts.len());
        let mut total = 0.0;
        cum_m.push(0.0);
        for w in pts.windows(2) {
            total += geo::haversine_m(w[0], w[1]);
            cum_m.push(total);
        }
        let seg_bearing: Vec<f64> = pts
            .windows(2)
            .map(|w| geo::bearing_deg(w[0], w[1]))
            .collect();
        let turn_limit_ms = (0..pts.len())
            .map(|i| {
                if i == 0 || i + 1 >= pts.len() {
                    return 15.0 * KMH;
                }
                let turn = (seg_bearing[i] - seg_bearing[i - 1] + 540.0).rem_euclid(360.0) - 180.0;
                let kmh = match turn.abs() {
                    a if a < 15.0 => f64::INFINITY,
                    a if a < 35.0 => 45.0,
                    a if a < 70.0 => 28.0,
                    a if a < 120.0 => 18.0,
                    _ => 12.0,
                };
                kmh * KMH
            })
            .collect();
        let mut stop_s = Vec::new();
        let mut from = 0;
        for stop in &route.stops {
            let p = LatLon::new(stop.lat, stop.lon);
            let (i, _) = (from..pts.len())
                .map(|i| (i, geo::haversine_m(pts[i], p)))
                .min_by(|a, b| a.1.total_cmp(&b.1))
                .ok_or_else(|| {
                    crate::error::Error::internal(format!(
                        "route {}: stop after the end",
                        route.slug
                    ))
                })?;
            stop_s.push(cum_m[i]);
            from = i + 1;
        }
        Ok(RoutePath {
            slug: route.slug.clone(),
            pts,
            cum_m,
            seg_bearing,
            turn_limit_ms,
            stop_s,
            stop_names: route.stops.iter().map(|s| s.name.clone()).collect(),
            length_m: total,
        })
    }

    /// The segment holding distance `s`, searched forward from `cursor`.
    fn segment(&self, s: f64, cursor: &mut usize) -> usize {
        if s < self.cum_m[*cursor] {
            *cursor = 0;
        }
        while *cursor + 2 < self.cum_m.len() && self.cum_m[*cursor + 1] <= s {
            *cursor += 1;
        }
        *cursor
    }

    /// The point at distance `s` along the loop, and the bearing of the road there.
    pub fn locate(&self, s: f64, cursor: &mut usize) -> (LatLon, f64) {
        let i = self.segment(s, cursor);
        let (a, b) = (self.pts[i], self.pts[i + 1]);
        let len = self.cum_m[i + 1] - self.cum_m[i];
        let f = if len > 0.0 {
            ((s - self.cum_m[i]) / len).clamp(0.0, 1.0)
        } else {
            0.0
        };
        (
            LatLon::new(a.lat + (b.lat - a.lat) * f, a.lon + (b.lon - a.lon) * f),
            self.seg_bearing[i],
        )
    }

    /// The longest stretch between consecutive halts (depot, stops), less the margins
    /// kept around them, metres: how much room a speeding episode can have.
    pub fn longest_free_run_m(&self) -> f64 {
        let mut edges = vec![0.0];
        edges.extend(&self.stop_s);
        edges.push(self.length_m);
        edges
            .windows(2)
            .map(|w| w[1] - w[0] - 2.0 * HALT_MARGIN_M)
            .fold(0.0, f64::max)
    }

    /// The straightest window of `len_m` metres between two halts: its start and end.
    fn straightest_window(&self, len_m: f64) -> Option<(f64, f64)> {
        let mut edges = vec![0.0];
        edges.extend(&self.stop_s);
        edges.push(self.length_m);
        let mut best: Option<(usize, f64)> = None;
        for w in edges.windows(2) {
            let (lo, hi) = (w[0] + HALT_MARGIN_M, w[1] - HALT_MARGIN_M);
            let first = self.cum_m.partition_point(|&c| c < lo);
            for i in first..self.cum_m.len() {
                let start = self.cum_m[i];
                if start + len_m > hi {
                    break;
                }
                let bends = (i..self.cum_m.len())
                    .take_while(|&j| self.cum_m[j] <= start + len_m)
                    .filter(|&j| self.turn_limit_ms[j] < 45.0 * KMH)
                    .count();
                if best.is_none_or(|(b, _)| bends < b) {
                    best = Some((bends, start));
                }
            }
        }
        best.map(|(_, start)| (start, start + len_m))
    }
}

/// An anomaly to plant in one loop of a shift.
#[derive(Debug, Clone, PartialEq)]
pub enum Plant {
    /// Drive at `target_kmh` for about `duration_s` on the straightest free stretch.
    Speeding {
        /// Which loop of the shift (0-based).
        loop_index: u32,
        /// The speed held, km/h.
        target_kmh: f64,
        /// How long it is held, seconds.
        duration_s: f64,
    },
    /// Stay `dwell_s` at one named stop.
    LongStop {
        /// Which loop of the shift.
        loop_index: u32,
        /// Which stop of the route.
        stop_index: usize,
        /// How long, seconds.
        dwell_s: i64,
        /// Engine left running.
        engine_on: bool,
    },
    /// No fixes for `gap_s` once the vehicle has driven `at_fraction` of the loop.
    SignalLoss {
        /// Which loop of the shift.
        loop_index: u32,
        /// Where in the loop it starts (0..1).
        at_fraction: f64,
        /// Seconds from the last fix before the gap to the first after it.
        gap_s: i64,
    },
}

impl Plant {
    fn loop_index(&self) -> u32 {
        match self {
            Plant::Speeding { loop_index, .. }
            | Plant::LongStop { loop_index, .. }
            | Plant::SignalLoss { loop_index, .. } => *loop_index,
        }
    }
}

/// One vehicle's shift on one day, fully decided before it is simulated.
#[derive(Debug, Clone)]
pub struct ShiftPlan {
    /// The vehicle's store id.
    pub vehicle_id: i64,
    /// When the engine starts at the depot, UTC epoch seconds.
    pub start_ts: i64,
    /// How many loops of the route.
    pub loops: u32,
    /// Scales the normal dwells so the loops fill the shift.
    pub dwell_factor: f64,
    /// Anomalies to plant.
    pub plants: Vec<Plant>,
    /// For a vehicle stopped "now": the instant its final stop begins.
    pub stopped_now_at: Option<i64>,
    /// The data clock: nothing is emitted after it.
    pub cutoff_ts: i64,
    /// Seed of this shift's random stream.
    pub seed: u64,
}

/// A halt on a loop: where, and why.
#[derive(Debug, Clone, Copy)]
enum Halt {
    Customer(usize),
    Traffic(i64),
}

/// The moving state of one vehicle through a shift.
struct Driver<'a> {
    route: &'a RoutePath,
    plan: &'a ShiftPlan,
    rng: Xoshiro256PlusPlus,
    noise: Normal<f64>,
    t: i64,
    s: f64,
    v: f64,
    heading: f64,
    ignition: bool,
    odometer_m: f64,
    cursor: usize,
    suppress_until: i64,
    last_fix_ts: Option<i64>,
    fixes: Vec<Fix>,
    truth: Vec<InjectedEvent>,
    done: bool,
    // Per loop:
    vlimit: Vec<f64>,
    cruise: Vec<(f64, f64)>,
    speeding: Option<(f64, f64, f64)>,
    speeding_seen: Option<(i64, i64, f64)>,
    signal_loss_at: Option<(f64, i64)>,
    final_halt_started: bool,
}

/// The result of one shift.
pub struct ShiftOutput {
    /// The fixes, in time order.
    pub fixes: Vec<Fix>,
    /// What was planted, with the times it actually happened.
    pub truth: Vec<InjectedEvent>,
    /// The odometer at the end, metres.
    pub odometer_m: f64,
}

/// Drives one shift. `odometer_m` is the reading at the start.
pub fn simulate_shift(route: &RoutePath, plan: &ShiftPlan, odometer_m: f64) -> ShiftOutput {
    let mut d = Driver {
        route,
        plan,
        rng: Xoshiro256PlusPlus::seed_from_u64(plan.seed),
        noise: Normal::new(0.0, GPS_NOISE_M).expect("σ is positive"),
        t: plan.start_ts,
        s: 0.0,
        v: 0.0,
        heading: route.seg_bearing[0],
        ignition: true,
        odometer_m,
        cursor: 0,
        suppress_until: i64::MIN,
        last_fix_ts: None,
        fixes: Vec::with_capacity(4096),
        truth: Vec::new(),
        done: false,
        vlimit: Vec::new(),
        cruise: Vec::new(),
        speeding: None,
        speeding_seen: None,
        signal_loss_at: None,
        final_halt_started: false,
    };
    d.run();
    ShiftOutput {
        fixes: d.fixes,
        truth: d.truth,
        odometer_m: d.odometer_m,
    }
}

impl Driver<'_> {
    fn run(&mut self) {
        let warmup = self.rng.random_range(60..=240);
        self.dwell(warmup, false);
        let loops = self.plan.loops.max(1);
        let mut loop_index = 0;
        while !self.done && (loop_index < loops || self.plan.stopped_now_at.is_some()) {
            self.drive_loop(loop_index);
            loop_index += 1;
            if self.done {
                break;
            }
            if loop_index < loops || self.plan.stopped_now_at.is_some() {
                let base = 15.0 * 60.0 * self.plan.dwell_factor * self.rng.random_range(0.7..1.3);
                self.dwell(base.clamp(300.0, MAX_NORMAL_DWELL_MIN * 60.0) as i64, true);
            }
        }
        if !self.done {
            // End of shift: idle a moment, engine off, and the tracker reports a few
            // more minutes parked before it sleeps (long enough to be a stop).
            let idle = self.rng.random_range(60..=120);
            self.hold(idle);
            self.ignition = false;
            let parked = self.rng.random_range(240..=480);
            self.hold(parked);
        }
    }

    fn in_approach(&self) -> bool {
        self.plan
            .stopped_now_at
            .is_some_and(|at| self.t >= at - 400)
    }

    /// Prepares the speed limits, cruise speeds and halts of one loop.
    fn prepare_loop(&mut self, loop_index: u32) -> Vec<(f64, Halt)> {
        let route = self.route;
        let plants: Vec<Plant> = self
            .plan
            .plants
            .iter()
            .filter(|p| p.loop_index() == loop_index)
            .cloned()
            .collect();
        self.vlimit = route.turn_limit_ms.clone();
        self.speeding = None;
        self.speeding_seen = None;
        self.signal_loss_at = None;
        for plant in &plants {
            match *plant {
                Plant::Speeding {
                    target_kmh,
                    duration_s,
                    ..
                } => {
                    // A few seconds more than the hold, for the ramps into and out of it.
                    let len = target_kmh * KMH * (duration_s + 6.0);
                    // Room to accelerate into it and to brake out of it.
                    if let Some((a, b)) = route.straightest_window(len + 600.0) {
                        let (a, b) = (a + 250.0, b - 250.0);
                        for (i, c) in route.cum_m.iter().enumerate() {
                            if (a - 100.0..=b + 100.0).contains(c) {
                                self.vlimit[i] = f64::INFINITY;
                            }
                        }
                        self.speeding = Some((a, b, target_kmh * KMH));
                    }
                }
                Plant::SignalLoss {
                    at_fraction, gap_s, ..
                } => {
                    self.signal_loss_at = Some((at_fraction * route.length_m, gap_s));
                }
                Plant::LongStop { .. } => {}
            }
        }
        // Halts: the named stops, then traffic lights away from them.
        let mut halts: Vec<(f64, Halt)> = route
            .stop_s
            .iter()
            .enumerate()
            .map(|(i, &s)| (s, Halt::Customer(i)))
            .collect();
        let mut s = 0.0;
        loop {
            s += self.rng.random_range(500.0..2200.0);
            if s >= route.length_m - HALT_MARGIN_M {
                break;
            }
            let near_stop =
                route.stop_s.iter().any(|&q| (q - s).abs() < HALT_MARGIN_M) || s < HALT_MARGIN_M;
            let in_speeding = self
                .speeding
                .is_some_and(|(a, b, _)| s > a - 700.0 && s < b + 700.0);
            if !near_stop && !in_speeding {
                halts.push((s, Halt::Traffic(self.rng.random_range(15..=90))));
            }
        }
        halts.sort_by(|a, b| a.0.total_cmp(&b.0));
        // Cruise speeds: stretches of 0.6–2 km, mostly moderate, sometimes congested.
        self.cruise.clear();
        let mut s = 0.0;
        while s < route.length_m {
            s += self.rng.random_range(600.0..2000.0);
            let class: f64 = self.rng.random();
            let kmh = if class < 0.15 {
                self.rng.random_range(12.0..25.0)
            } else if class < 0.65 {
                self.rng.random_range(35.0..55.0)
            } else {
                self.rng.random_range(55.0..MAX_CRUISE_KMH)
            };
            self.cruise.push((s, kmh * KMH));
        }
        // Make every limit reachable by braking from the one before it.
        for i in (0..self.vlimit.len().saturating_sub(1)).rev() {
            let ds = route.cum_m[i + 1] - route.cum_m[i];
            let reachable = (self.vlimit[i + 1].powi(2) + 2.0 * PLAN_BRAKE * ds).sqrt();
            self.vlimit[i] = self.vlimit[i].min(reachable);
        }
        halts
    }

    fn drive_loop(&mut self, loop_index: u32) {
        let halts = self.prepare_loop(loop_index);
        let long_stop = self.plan.plants.iter().find_map(|p| match *p {
            Plant::LongStop {
                loop_index: l,
                stop_index,
                dwell_s,
                engine_on,
            } if l == loop_index => Some((stop_index, dwell_s, engine_on)),
            _ => None,
        });
        self.s = 0.0;
        self.cursor = 0;
        for (halt_s, halt) in halts {
            if self.done {
                return;
            }
            if self.in_approach() {
                continue;
            }
            self.drive_to(halt_s);
            if self.done || self.in_approach() {
                continue;
            }
            match halt {
                Halt::Traffic(wait) => self.hold(wait),
                Halt::Customer(i) => match long_stop {
                    Some((stop_index, dwell_s, engine_on)) if stop_index == i => {
                        let start = self.t;
                        self.dwell(dwell_s, !engine_on);
                        self.truth.push(InjectedEvent {
                            vehicle_id: self.plan.vehicle_id,
                            kind: PlantedKind::LongStop,
                            start_ts: start,
                            end_ts: self.t,
                            detail: json!({
                                "duration_min": ((self.t - start) as f64 / 60.0 * 10.0).round() / 10.0,
                                "stop_name": self.route.stop_names[i],
                                "engine_on": engine_on,
                            }),
                        });
                    }
                    _ => {
                        let base =
                            12.0 * 60.0 * self.plan.dwell_factor * self.rng.random_range(0.5..1.5);
                        let engine_off = self.rng.random_bool(0.7);
                        self.dwell(
                            base.clamp(180.0, MAX_NORMAL_DWELL_MIN * 60.0) as i64,
                            engine_off,
                        );
                    }
                },
            }
        }
        if !self.done {
            self.drive_to(self.route.length_m);
        }
        if let (Some((a, b, max)), Some(Plant::Speeding { .. })) = (
            self.speeding_seen,
            self.plan
                .plants
                .iter()
                .find(|p| p.loop_index() == loop_index && matches!(p, Plant::Speeding { .. })),
        ) {
            self.truth.push(InjectedEvent {
                vehicle_id: self.plan.vehicle_id,
                kind: PlantedKind::Speeding,
                start_ts: a,
                end_ts: b,
                detail: json!({
                    "max_speed_kmh": (max * 10.0).round() / 10.0,
                    "limit_kmh": 80,
                    "duration_s": b - a,
                }),
            });
        }
    }

    /// Cruise speed at distance `s` of the loop.
    fn cruise_at(&self, s: f64) -> f64 {
        if let Some((a, b, v)) = self.speeding
            && (a..=b).contains(&s)
        {
            return v;
        }
        let i = self.cruise.partition_point(|&(end, _)| end < s);
        self.cruise
            .get(i)
            .or(self.cruise.last())
            .map_or(30.0 * KMH, |c| c.1)
    }

    /// Drives to distance `target` along the loop and stops there.
    fn drive_to(&mut self, target: f64) {
        let route = self.route;
        while !self.done {
            if let Some(at) = self.plan.stopped_now_at
                && self.in_approach()
                && self.t + (self.v / 2.0).ceil() as i64 >= at
            {
                self.final_stop();
                return;
            }
            // While heading for the final stop, halts are passed, not stopped at.
            let pass_through = self.in_approach() && target < route.length_m;
            let rem = target - self.s;
            if rem <= 0.05 {
                self.s = target;
                if !pass_through {
                    self.v = 0.0;
                }
                return;
            }
            let i = route.segment(self.s, &mut self.cursor);
            let limit = self.vlimit[(i + 1).min(self.vlimit.len() - 1)];
            let aim = self.cruise_at(self.s).min(limit);
            let mut v_next = if self.v < aim {
                (self.v + ACCEL).min(aim)
            } else {
                (self.v - BRAKE).max(aim)
            };
            if !pass_through {
                v_next = v_next.min((2.0 * PLAN_BRAKE * rem).sqrt());
            }
            let mut ds = 0.5 * (self.v + v_next);
            if ds >= rem {
                ds = rem;
                if !pass_through {
                    v_next = 0.0;
                }
            }
            self.s += ds;
            self.odometer_m += ds;
            self.v = v_next;
            if self.v > 0.0 {
                self.heading = route.locate(self.s, &mut self.cursor).1;
            }
            self.track_speeding();
            if let Some((at_s, gap_s)) = self.signal_loss_at
                && self.s >= at_s
                && self.v > 0.0
            {
                self.signal_loss_at = None;
                self.start_signal_loss(gap_s);
            }
            self.tick();
            if pass_through && self.s >= target {
                return;
            }
        }
    }

    fn track_speeding(&mut self) {
        if self.speeding.is_some() && self.v * 3.6 > 80.0 {
            let (a, _, max) = self.speeding_seen.unwrap_or((self.t + 1, self.t + 1, 0.0));
            self.speeding_seen = Some((a, self.t + 1, max.max(self.v * 3.6)));
        }
    }

    fn start_signal_loss(&mut self, gap_s: i64) {
        let Some(last) = self.last_fix_ts else { return };
        self.suppress_until = last + gap_s;
        self.truth.push(InjectedEvent {
            vehicle_id: self.plan.vehicle_id,
            kind: PlantedKind::SignalLoss,
            start_ts: last,
            end_ts: last + gap_s,
            detail: json!({ "minutes_lost": gap_s as f64 / 60.0 }),
        });
    }

    /// Brakes to a halt and idles, engine on, until the data clock.
    fn final_stop(&mut self) {
        while self.v > 0.0 && !self.done {
            let v_next = (self.v - 2.0).max(0.0);
            let ds = 0.5 * (self.v + v_next);
            self.s += ds;
            self.odometer_m += ds;
            self.v = v_next;
            self.tick();
        }
        self.final_halt_started = true;
        let start = self.t;
        self.ignition = true;
        let minutes = (self.plan.cutoff_ts - start) as f64 / 60.0;
        self.truth.push(InjectedEvent {
            vehicle_id: self.plan.vehicle_id,
            kind: PlantedKind::StoppedNow,
            start_ts: start,
            end_ts: self.plan.cutoff_ts,
            detail: json!({ "minutes_stopped": (minutes * 10.0).round() / 10.0, "engine_on": true }),
        });
        while !self.done {
            self.tick();
        }
    }

    /// Stays put for `seconds`; with `engine_off`, the engine is switched off after a
    /// short idle and on again shortly before leaving.
    fn dwell(&mut self, seconds: i64, engine_off: bool) {
        self.v = 0.0;
        let end = self.t + seconds;
        let (off_after, on_before) = (
            self.rng.random_range(20..=60),
            self.rng.random_range(20..=60),
        );
        while self.t < end && !self.done {
            if let Some(at) = self.plan.stopped_now_at
                && self.t >= at - 240
                && !self.final_halt_started
            {
                break; // leave now, so the final stop begins on time
            }
            let elapsed = seconds - (end - self.t);
            self.ignition = !(engine_off && elapsed >= off_after && end - self.t > on_before);
            self.tick();
        }
        self.ignition = true;
    }

    fn hold(&mut self, seconds: i64) {
        self.v = 0.0;
        for _ in 0..seconds {
            if self.done {
                return;
            }
            self.tick();
        }
    }

    /// Advances the clock one second and emits a fix when one is due.
    fn tick(&mut self) {
        self.t += 1;
        if self.t > self.plan.cutoff_ts {
            self.done = true;
            return;
        }
        if (self.t - self.plan.start_ts) % FIX_INTERVAL_S != 0 || self.t < self.suppress_until {
            return;
        }
        let (p, _) = self.route.locate(self.s, &mut self.cursor);
        let noisy = geo::offset_m(
            p,
            self.noise.sample(&mut self.rng),
            self.noise.sample(&mut self.rng),
        );
        self.fixes.push(Fix {
            vehicle_id: self.plan.vehicle_id,
            ts: self.t,
            lat: round_to(noisy.lat, 6),
            lon: round_to(noisy.lon, 6),
            speed_kmh: round_to(self.v * 3.6, 1),
            speed_derived: false,
            heading_deg: Some(round_to(self.heading, 1) % 360.0),
            ignition: Some(self.ignition),
            odometer_km: Some(round_to(self.odometer_m / 1000.0, 3)),
        });
        self.last_fix_ts = Some(self.t);
    }
}

fn round_to(x: f64, decimals: i32) -> f64 {
    let k = 10f64.powi(decimals);
    (x * k).round() / k
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A rectangular loop of about 2 × 3 km with two stops, from a depot corner.
    fn test_route() -> RoutePath {
        let o = LatLon::new(14.60, -90.55);
        let corners = [
            (0.0, 0.0),
            (3000.0, 0.0),
            (3000.0, 2000.0),
            (0.0, 2000.0),
            (0.0, 0.0),
        ];
        let mut coords = Vec::new();
        for w in corners.windows(2) {
            for k in 0..30 {
                let f = f64::from(k) / 30.0;
                let p = geo::offset_m(
                    o,
                    w[0].0 + (w[1].0 - w[0].0) * f,
                    w[0].1 + (w[1].1 - w[0].1) * f,
                );
                coords.push(geo_types_coord(p));
            }
        }
        coords.push(geo_types_coord(o));
        let stop = |e: f64, n: f64| {
            let p = geo::offset_m(o, e, n);
            atlas::RouteStop {
                name: format!("stop {e} {n}"),
                lat: p.lat,
                lon: p.lon,
            }
        };
        let route = atlas::Route {
            slug: "test".into(),
            name: "Test loop".into(),
            depot: "Depot".into(),
            stops: vec![stop(3000.0, 1000.0), stop(1500.0, 2000.0)],
            length_km: 10.0,
            polyline: polyline::encode_coordinates(coords, 5).unwrap(),
        };
        RoutePath::new(&route).unwrap()
    }

    fn geo_types_coord(p: LatLon) -> ::geo::Coord<f64> {
        ::geo::Coord { x: p.lon, y: p.lat }
    }

    fn plan(plants: Vec<Plant>, loops: u32) -> ShiftPlan {
        ShiftPlan {
            vehicle_id: 1,
            start_ts: 1_000_000_020,
            loops,
            dwell_factor: 1.0,
            plants,
            stopped_now_at: None,
            cutoff_ts: i64::MAX,
            seed: 42,
        }
    }

    #[test]
    fn a_normal_shift_stays_inside_the_margins() {
        let route = test_route();
        let out = simulate_shift(&route, &plan(vec![], 3), 1_000_000.0);
        assert!(out.truth.is_empty());
        assert!(out.fixes.len() > 500, "{}", out.fixes.len());
        assert!(
            out.fixes.iter().all(|f| f.speed_kmh <= MAX_CRUISE_KMH),
            "no fix above the cruise cap"
        );
        assert!(
            out.fixes
                .windows(2)
                .all(|w| w[1].ts - w[0].ts == FIX_INTERVAL_S),
            "a fix every 15 s"
        );
        assert_eq!(out.fixes[0].ignition, Some(true), "engine on at the start");
        assert!(
            out.fixes.last().unwrap().ignition == Some(false),
            "parked, engine off, at the end"
        );
        let driven_km = out.odometer_m / 1000.0 - 1000.0;
        assert!(
            (driven_km - 3.0 * route.length_m / 1000.0).abs() < 0.01,
            "{driven_km}"
        );
        assert!(
            out.fixes.iter().any(|f| f.speed_kmh > 50.0),
            "it does drive"
        );
    }

    #[test]
    fn planted_speeding_is_above_85_inside_its_window() {
        let route = test_route();
        let p = Plant::Speeding {
            loop_index: 1,
            target_kmh: 100.0,
            duration_s: 70.0,
        };
        let out = simulate_shift(&route, &plan(vec![p], 2), 0.0);
        let truth: Vec<_> = out
            .truth
            .iter()
            .filter(|e| e.kind == PlantedKind::Speeding)
            .collect();
        assert_eq!(truth.len(), 1);
        let (a, b) = (truth[0].start_ts, truth[0].end_ts);
        assert!((55..=200).contains(&(b - a)), "{}", b - a);
        let inside: Vec<_> = out
            .fixes
            .iter()
            .filter(|f| (a..=b).contains(&f.ts))
            .collect();
        assert!(inside.iter().filter(|f| f.speed_kmh > 85.0).count() >= 3);
        let outside_max = out
            .fixes
            .iter()
            .filter(|f| !(a..=b).contains(&f.ts))
            .map(|f| f.speed_kmh)
            .fold(0.0, f64::max);
        assert!(outside_max <= 80.0, "{outside_max}");
    }

    #[test]
    fn planted_signal_loss_is_a_gap_of_exactly_its_length() {
        let route = test_route();
        let p = Plant::SignalLoss {
            loop_index: 0,
            at_fraction: 0.2,
            gap_s: 600,
        };
        let out = simulate_shift(&route, &plan(vec![p], 2), 0.0);
        let truth = &out.truth[0];
        assert_eq!(truth.kind, PlantedKind::SignalLoss);
        assert_eq!(truth.end_ts - truth.start_ts, 600);
        let before = out
            .fixes
            .iter()
            .find(|f| f.ts == truth.start_ts)
            .expect("the last fix before the gap");
        assert_eq!(before.ignition, Some(true));
        assert!(
            out.fixes.iter().any(|f| f.ts == truth.end_ts),
            "fixes resume"
        );
        assert!(
            !out.fixes
                .iter()
                .any(|f| f.ts > truth.start_ts && f.ts < truth.end_ts)
        );
    }

    #[test]
    fn stopped_now_halts_on_time_with_the_engine_on() {
        let route = test_route();
        let mut p = plan(vec![], 1);
        p.cutoff_ts = p.start_ts + 3 * 3600;
        p.stopped_now_at = Some(p.cutoff_ts - 52 * 60);
        let out = simulate_shift(&route, &p, 0.0);
        let truth = out
            .truth
            .iter()
            .find(|e| e.kind == PlantedKind::StoppedNow)
            .expect("planted");
        assert!(
            (truth.start_ts - (p.cutoff_ts - 52 * 60)).abs() <= 15,
            "{}",
            truth.start_ts - p.cutoff_ts
        );
        assert_eq!(truth.end_ts, p.cutoff_ts);
        let tail: Vec<_> = out.fixes.iter().filter(|f| f.ts > truth.start_ts).collect();
        assert!(tail.len() >= 200);
        assert!(
            tail.iter()
                .all(|f| f.speed_kmh == 0.0 && f.ignition == Some(true))
        );
        assert!(out.fixes.last().unwrap().ts <= p.cutoff_ts);
    }

    #[test]
    fn a_long_stop_stays_put_for_its_length() {
        let route = test_route();
        let p = Plant::LongStop {
            loop_index: 0,
            stop_index: 1,
            dwell_s: 50 * 60,
            engine_on: false,
        };
        let out = simulate_shift(&route, &plan(vec![p], 1), 0.0);
        let t = &out.truth[0];
        assert_eq!(t.end_ts - t.start_ts, 50 * 60);
        let still: Vec<_> = out
            .fixes
            .iter()
            .filter(|f| f.ts > t.start_ts && f.ts < t.end_ts)
            .collect();
        assert!(still.iter().all(|f| f.speed_kmh == 0.0));
        assert!(
            still.iter().any(|f| f.ignition == Some(false)),
            "engine off while it waits"
        );
    }

    #[test]
    fn the_same_seed_drives_the_same_shift() {
        let route = test_route();
        let a = simulate_shift(&route, &plan(vec![], 2), 0.0);
        let b = simulate_shift(&route, &plan(vec![], 2), 0.0);
        assert_eq!(a.fixes, b.fixes);
    }
}
