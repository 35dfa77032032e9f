//! Stops, trips and distance from a vehicle's fixes alone (displacement-based).
//!
//! A stop: the vehicle stays within `stop_radius_m` of one point for at least
//! `stop_min_s`. Its start and end are refined to the fixes where the vehicle was
//! really standing (close to the stop's centre, or reporting no speed), so that the
//! slow approach and departure belong to the trips. A trip is the movement between
//! two stops, at least `trip_min_m` long; a gap of more than `trip_gap_s` closes it.
//! Its distance is `distance::span_distance` over its fixes, as every span's is.

use super::Thresholds;
use super::distance::SpanWalk;
use crate::geo::{LatLon, haversine_m, places::Namer};
use crate::model::{Fix, Stop, Trip};

/// A stay goes on across a silence of up to this long, seconds, when the vehicle is
/// still there after it: a parked tracker may report only every 10 or 30 minutes.
/// (A trip ends at a shorter gap, `trip_gap_s`.)
pub const STAY_GAP_S: i64 = 3600;

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

/// How long a stay is judged by, seconds: its centre is the median of where it stood
/// over its first this long, and whether it crawled is judged over the same span of
/// the stop. Past it, nothing can change the stop but its end, so that a vehicle
/// parked for weeks is settled a few fixes at a time (see `analyze::window`).
pub fn judged_s(th: &Thresholds) -> i64 {
    JUDGED_S.max(th.stop_min_s)
}

const JUDGED_S: i64 = 1800;

/// Whether the vehicle stood at `f`, for a stop centred at `centre`: the fixes a
/// stop's edges are trimmed to.
pub fn standing(centre: LatLon, f: &Fix) -> bool {
    haversine_m(centre, at(f)) <= STANDING_M || f.speed_kmh < STANDING_KMH
}

/// A stop that goes on through the last fix read, with everything but its end
/// settled: its first standing fix (an index into the slice) and its centre.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stay {
    /// Its first standing fix.
    pub start: usize,
    /// Its centre.
    pub centre: LatLon,
}

/// What a scan of a slice of fixes found: its stops' index ranges (inclusive, in
/// order, each with its centre), and the stop still going on at its end, if settled.
#[derive(Debug, Clone, Default)]
pub struct StopScan {
    /// The stops that ended: first and last fix, centre.
    pub ranges: Vec<(usize, usize, LatLon)>,
    /// The stop going on at the slice's end, once settled.
    pub open: Option<Stay>,
}

/// The stops in `fixes`, scanning from `scan_from`. When `at_end` is false more
/// fixes follow the slice, and the scan stops at the first position whose answer
/// they could change (a stay that reaches the slice's last fix): every range
/// returned is then what the whole data gives, and so is `open`, a stay reaching the
/// last fix that is settled as a stop. `going_on` says that `fixes[scan_from]` is a
/// standing fix of such a stop, with this centre: the scan takes it up there (its
/// rest is the first range, or `open` again).
pub fn stop_ranges(
    fixes: &[Fix],
    th: &Thresholds,
    scan_from: usize,
    at_end: bool,
    going_on: Option<LatLon>,
) -> StopScan {
    let mut out = StopScan::default();
    let gap_s = th.signal_loss_s();
    let judged_s = judged_s(th);
    let last = fixes.len().saturating_sub(1);
    // Grows a stay from `j` while the next fix is within the radius of `centre`.
    let extend = |centre: LatLon, mut j: usize| {
        while j + 1 < fixes.len()
            && fixes[j + 1].ts - fixes[j].ts <= STAY_GAP_S
            && haversine_m(centre, at(&fixes[j + 1])) <= th.stop_radius_m
        {
            j += 1;
        }
        j
    };
    // The fixes a stop from `start` to `end` is judged by: up to the first at
    // `judged_s` or later.
    let judged = |start: usize, end: usize| {
        (start..=end)
            .find(|&k| fixes[k].ts - fixes[start].ts >= judged_s)
            .unwrap_or(end)
    };
    let mut i = scan_from;
    if let Some(centre) = going_on
        && i < fixes.len()
    {
        let j = extend(centre, i);
        if j == last && !at_end {
            out.open = Some(Stay { start: i, centre });
            return out;
        }
        let end = (i..=j)
            .rev()
            .find(|&k| standing(centre, &fixes[k]))
            .unwrap_or(i);
        out.ranges.push((i, end, centre));
        i = end + 1;
    }
    while i < fixes.len() {
        let anchor = at(&fixes[i]);
        let mut j = i;
        while j + 1 < fixes.len()
            && fixes[j].ts - fixes[i].ts < judged_s
            && fixes[j + 1].ts - fixes[j].ts <= STAY_GAP_S
            && haversine_m(anchor, at(&fixes[j + 1])) <= th.stop_radius_m
        {
            j += 1;
        }
        if j == last && !at_end {
            break;
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
        let j = extend(center, j);
        let first_standing = (i..=j).find(|&k| standing(center, &fixes[k]));
        if j == last && !at_end {
            // Still there. Settled once it stood past the span it is judged by: its
            // end will be that fix or a later one.
            let Some(start) = first_standing else { break };
            let e = judged(start, j);
            if fixes[e].ts - fixes[start].ts < judged_s
                || !(e..=j).any(|k| standing(center, &fixes[k]))
            {
                break;
            }
            if crawling(&fixes[start..=e], gap_s) {
                i += 1;
                continue;
            }
            out.open = Some(Stay {
                start,
                centre: center,
            });
            return out;
        }
        let start = first_standing.unwrap_or(i);
        let end = (start..=j)
            .rev()
            .find(|&k| standing(center, &fixes[k]))
            .unwrap_or(j);
        // The edges are trimmed to where it really stood; a spell that meets the
        // definition only with its edges stays a stop, with them.
        let (start, end) = if fixes[end].ts - fixes[start].ts >= th.stop_min_s {
            (start, end)
        } else {
            (i, j)
        };
        // Crawling within the radius (a bus in a jam, a walker) is not a stop.
        if crawling(&fixes[start..=judged(start, end)], gap_s) {
            i += 1;
            continue;
        }
        out.ranges.push((start, end, center));
        i = end + 1;
    }
    out
}

/// Slow movement, not a stop: a spell whose steps moved most of its time, each step
/// judged by `distance::still_steps` over the spell's own fixes (the driving that
/// brought the vehicle there is no part of it). A step longer than `gap_s` (a parked
/// tracker that reports every 10 minutes) is left out of the count: unseen, it says
/// nothing of moving, and the spell already keeps within the stop's radius.
fn crawling(fixes: &[Fix], gap_s: i64) -> bool {
    let still = super::distance::still_steps(fixes, gap_s);
    let (mut driving_s, mut seen_s) = (0, 0);
    for (w, still) in fixes.windows(2).zip(&still) {
        let dt = w[1].ts - w[0].ts;
        if dt > gap_s {
            continue;
        }
        seen_s += dt;
        if !still {
            driving_s += dt;
        }
    }
    driving_s * 2 > seen_s
}

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

/// The movement spans between stops: inclusive index ranges not inside a stop,
/// split at gaps longer than `trip_gap_s`, from `from` (the end of the stop before
/// `ranges`, or the first fix).
pub fn movement_spans(
    fixes: &[Fix],
    ranges: &[(usize, usize, LatLon)],
    th: &Thresholds,
    from: usize,
) -> Vec<(usize, usize)> {
    let mut spans = Vec::new();
    let mut from = from;
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

/// Builds trips from the movement spans whose GPS path is at least `trip_min_m`.
/// A trip's driving and idle time are its span's (`distance::SpanTime`: from the
/// positions, whatever the speed field says). Its top speed is the highest
/// reported, unless that is below the positions' average while driving (a speed
/// field stuck at 0, or one that under-reports): then the fastest half minute of
/// the positions, and never below their average.
pub fn trips(fixes: &[Fix], spans: &[(usize, usize)], th: &Thresholds) -> Vec<Trip> {
    spans
        .iter()
        .filter_map(|&(a, b)| {
            let mut walk = SpanWalk::new(th);
            fixes[a..=b].iter().for_each(|f| walk.push(*f));
            let (d, time) = walk.finish_with_time();
            let reported_kmh = fixes[a..=b].iter().map(|f| f.speed_kmh).fold(0.0, f64::max);
            // The positions' average while driving: no maximum is below it.
            let average_kmh = match time.driving_s {
                0 => 0.0,
                s => d.gps_km / (s as f64 / 3600.0),
            };
            let max_speed_kmh = if reported_kmh >= average_kmh {
                reported_kmh
            } else {
                reported_kmh.max(time.top_kmh).max(average_kmh)
            };
            (d.gps_km * 1000.0 >= th.trip_min_m).then(|| Trip {
                vehicle_id: fixes[a].vehicle_id,
                start_ts: fixes[a].ts,
                end_ts: fixes[b].ts,
                distance_km: d.gps_km,
                odometer_km: d.odometer_km,
                gap_km: d.gap_km,
                max_speed_kmh,
                driving_s: time.driving_s,
                idle_s: time.idle_s,
                start_lat: fixes[a].lat,
                start_lon: fixes[a].lon,
                end_lat: fixes[b].lat,
                end_lon: fixes[b].lon,
            })
        })
        .collect()
}
