//! Stops, trips and distance from a vehicle's fixes alone (displacement-based).
//!
//! A stop: the vehicle stays within `stop_radius_m` of one point for at least
//! `stop_min_s`. Its start and end are refined to the fixes where the vehicle was
//! really standing (close to the stop's centre, or reporting no speed), so that the
//! slow approach and departure belong to the trips. A trip is the movement between
//! two stops, at least `trip_min_m` long; a gap of more than `trip_gap_s` closes it.
//! Distance counts a step only once the vehicle is `JITTER_M` away from the last
//! counted point, so GPS noise while standing adds nothing (when that takes at most
//! `DENSE_S`, the fixes' own path in between counts, so dense fixes keep their
//! curves), and drops fixes that would imply more than `teleport_kmh`.

use super::Thresholds;
use crate::geo::{LatLon, haversine_m, places::Namer};
use crate::model::{Fix, Stop, Trip};

/// Steps shorter than this from the last counted point are jitter, metres.
pub const JITTER_M: f64 = 25.0;
/// Within this many seconds, a step of `JITTER_M` is movement: the fixes' own path
/// counts, not only its straight line (dense fixes on a winding road).
const DENSE_S: i64 = 10;
/// A stop's edges are fixes within this distance of its centre (or without speed).
const STANDING_M: f64 = 50.0;
const STANDING_KMH: f64 = 3.0;

fn at(f: &Fix) -> LatLon {
    LatLon::new(f.lat, f.lon)
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

/// The index ranges of the stops in `fixes` (inclusive), in order.
pub fn stop_ranges(fixes: &[Fix], th: &Thresholds) -> Vec<(usize, usize, LatLon)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < fixes.len() {
        let anchor = at(&fixes[i]);
        let mut j = i;
        while j + 1 < fixes.len()
            && fixes[j + 1].ts - fixes[j].ts <= th.trip_gap_s
            && haversine_m(anchor, at(&fixes[j + 1])) <= th.stop_radius_m
        {
            j += 1;
        }
        if fixes[j].ts - fixes[i].ts < th.stop_min_s {
            i += 1;
            continue;
        }
        // Re-centre on where it stood, and extend while it stays within the radius.
        let center = LatLon::new(
            median(fixes[i..=j].iter().map(|f| f.lat).collect()),
            median(fixes[i..=j].iter().map(|f| f.lon).collect()),
        );
        while j + 1 < fixes.len()
            && fixes[j + 1].ts - fixes[j].ts <= th.trip_gap_s
            && haversine_m(center, at(&fixes[j + 1])) <= th.stop_radius_m
        {
            j += 1;
        }
        let standing =
            |f: &Fix| haversine_m(center, at(f)) <= STANDING_M || f.speed_kmh < STANDING_KMH;
        let start = (i..=j).find(|&k| standing(&fixes[k])).unwrap_or(i);
        let end = (start..=j)
            .rev()
            .find(|&k| standing(&fixes[k]))
            .unwrap_or(j);
        // The edges are trimmed to where it really stood; a spell that meets the
        // definition only with its edges stays a stop, with them.
        let (start, end) = if fixes[end].ts - fixes[start].ts >= th.stop_min_s {
            (start, end)
        } else {
            (i, j)
        };
        // Crawling within the radius (a bus in a jam, a walker) is not a stop.
        if crawling(&fixes[start..=end]) {
            i += 1;
            continue;
        }
        out.push((start, end, center));
        i = end + 1;
    }
    out
}

/// Sustained movement, over windows of at least `CRAWL_WINDOW_S`: a window counts as
/// moving when its fixes end over `CRAWL_MIN_M` from where they began at
/// `CRAWL_KMH` or more (GPS noise while standing moves a fix a few metres, not
/// tens). A spell that moved most of its time is slow driving, not a stop.
fn crawling(fixes: &[Fix]) -> bool {
    let total_s = fixes[fixes.len() - 1].ts - fixes[0].ts;
    if total_s <= 0 {
        return false;
    }
    let mut moving_s = 0;
    let mut a = 0;
    while a + 1 < fixes.len() {
        let mut b = a + 1;
        while b + 1 < fixes.len() && fixes[b].ts - fixes[a].ts < CRAWL_WINDOW_S {
            b += 1;
        }
        let dt = fixes[b].ts - fixes[a].ts;
        let d = haversine_m(at(&fixes[a]), at(&fixes[b]));
        if dt > 0 && d > CRAWL_MIN_M && d / dt as f64 * 3.6 >= CRAWL_KMH {
            moving_s += dt;
        }
        a = b;
    }
    moving_s * 2 > total_s
}

/// See [`crawling`].
const CRAWL_WINDOW_S: i64 = 60;
const CRAWL_MIN_M: f64 = 50.0;
const CRAWL_KMH: f64 = 3.0;

/// Builds the stops of one vehicle's fixes (time-ordered).
pub fn stops(fixes: &[Fix], ranges: &[(usize, usize, LatLon)], namer: &Namer) -> Vec<Stop> {
    let last = fixes.len().saturating_sub(1);
    ranges
        .iter()
        .map(|&(a, b, center)| {
            let (mut idle_s, mut parked_s, mut unknown_s) = (0, 0, 0);
            for w in fixes[a..=b].windows(2) {
                let dt = w[1].ts - w[0].ts;
                // Idling is only claimed from an ignition that says so; time with
                // the ignition unreported counts as parked (and as unknown).
                match w[0].ignition {
                    Some(true) => idle_s += dt,
                    Some(false) => parked_s += dt,
                    None => {
                        parked_s += dt;
                        unknown_s += dt
                    }
                }
            }
            Stop {
                vehicle_id: fixes[a].vehicle_id,
                start_ts: fixes[a].ts,
                end_ts: fixes[b].ts,
                lat: center.lat,
                lon: center.lon,
                idle_s,
                parked_s,
                unknown_s,
                ongoing: b == last,
                place: namer.name(center),
            }
        })
        .collect()
}

/// Distance from fix `a` to fix `b`: driven, and across gaps.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Distance {
    /// Driven, km-worthy metres (jitter and teleports filtered).
    pub driven_m: f64,
    /// Straight-line metres across gaps longer than the signal-loss threshold: the
    /// vehicle went there unseen, so it is not counted as driven.
    pub gap_m: f64,
}

/// Distance travelled from fix `a` to fix `b` (inclusive), jitter and teleports
/// filtered, gaps set apart; `on_step` receives each counted step (its end fix, its
/// metres, and whether it crossed a gap). The one definition of distance: trips,
/// daily totals and maps all add up these steps.
pub fn moving_distance_m(
    fixes: &[Fix],
    a: usize,
    b: usize,
    th: &Thresholds,
    mut on_step: impl FnMut(&Fix, f64, bool),
) -> Distance {
    let gap_s = (th.signal_loss_min * 60.0) as i64;
    let mut gap_m = 0.0;
    let mut total = 0.0;
    let mut counted = a; // the last point a step was counted to
    let mut good = a; // the last fix not dropped as a teleport
    let mut path_m = 0.0; // the fixes' own path since `counted`
    for k in a + 1..=b {
        let dt = (fixes[k].ts - fixes[good].ts).max(1) as f64;
        let step = haversine_m(at(&fixes[good]), at(&fixes[k]));
        if step / dt * 3.6 > th.teleport_kmh {
            continue;
        }
        let across_gap = fixes[k].ts - fixes[good].ts > gap_s;
        good = k;
        path_m += step;
        let d = haversine_m(at(&fixes[counted]), at(&fixes[k]));
        if across_gap {
            gap_m += d;
            counted = k;
            path_m = 0.0;
            on_step(&fixes[k], d, true);
        } else if d >= JITTER_M {
            // Reached quickly (dense fixes on the move), the path between is driven
            // distance, curves included; reached slowly, only the straight line
            // counts, so that noise while standing adds nothing.
            let quick = fixes[k].ts - fixes[counted].ts <= DENSE_S;
            let counted_m = if quick { path_m.max(d) } else { d };
            total += counted_m;
            counted = k;
            path_m = 0.0;
            on_step(&fixes[k], counted_m, false);
        }
    }
    Distance {
        driven_m: total,
        gap_m,
    }
}

/// The movement spans between stops: inclusive index ranges not inside a stop,
/// split at gaps longer than `trip_gap_s`.
pub fn movement_spans(
    fixes: &[Fix],
    ranges: &[(usize, usize, LatLon)],
    th: &Thresholds,
) -> Vec<(usize, usize)> {
    let mut spans = Vec::new();
    let mut from = 0usize;
    let mut bounds: Vec<(usize, usize)> = ranges.iter().map(|&(a, b, _)| (a, b)).collect();
    bounds.push((fixes.len(), fixes.len()));
    for (a, b) in bounds {
        // Movement runs from the last stationary fix of the previous stop to the first
        // of the next one (backdated to when movement began).
        let to = a.min(fixes.len().saturating_sub(1));
        if to > from {
            let mut start = from;
            for k in from + 1..=to {
                if fixes[k].ts - fixes[k - 1].ts > th.trip_gap_s {
                    if k - 1 > start {
                        spans.push((start, k - 1));
                    }
                    start = k;
                }
            }
            if to > start {
                spans.push((start, to));
            }
        }
        from = b;
    }
    spans
}

/// Builds trips from the movement spans that cover at least `trip_min_m`.
pub fn trips(fixes: &[Fix], spans: &[(usize, usize)], th: &Thresholds) -> Vec<Trip> {
    spans
        .iter()
        .filter_map(|&(a, b)| {
            let d = moving_distance_m(fixes, a, b, th, |_, _, _| {});
            let (moving_s, idle_s) = trip_time_s(&fixes[a..=b], th);
            (d.driven_m >= th.trip_min_m).then(|| Trip {
                vehicle_id: fixes[a].vehicle_id,
                start_ts: fixes[a].ts,
                end_ts: fixes[b].ts,
                distance_km: d.driven_m / 1000.0,
                gap_km: d.gap_m / 1000.0,
                max_speed_kmh: fixes[a..=b].iter().map(|f| f.speed_kmh).fold(0.0, f64::max),
                moving_s,
                idle_s,
                start_lat: fixes[a].lat,
                start_lon: fixes[a].lon,
                end_lat: fixes[b].lat,
                end_lon: fixes[b].lon,
            })
        })
        .collect()
}

/// A trip's time moving and idling, seconds: each interval between two fixes is
/// moving when the fix that opens it is at `MOVING_KMH` or faster, idle when it is
/// slower with the ignition reported on (lights, traffic); slower with the ignition
/// off or unreported is neither, nor is a gap over the signal-loss threshold (the
/// vehicle was unseen).
pub fn trip_time_s(fixes: &[Fix], th: &Thresholds) -> (i64, i64) {
    let gap_s = (th.signal_loss_min * 60.0) as i64;
    let (mut moving_s, mut idle_s) = (0, 0);
    for w in fixes.windows(2) {
        let dt = w[1].ts - w[0].ts;
        if dt > gap_s {
            continue;
        }
        if w[0].speed_kmh >= super::events::MOVING_KMH {
            moving_s += dt;
        } else if w[0].ignition == Some(true) {
            idle_s += dt;
        }
    }
    (moving_s, idle_s)
}
