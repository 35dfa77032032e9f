//! Settling: one vehicle's staged rows, in time order, checked against each other
//! (duplicates, conflicting duplicates, impossible jumps) and the fixes already
//! stored, with missing speeds derived from the neighbouring kept fixes. A vehicle of
//! any size is settled in windows of at most [`WINDOW_ROWS`] rows, each carrying what
//! the next needs of it, so that memory stays flat and the outcome is the one a single
//! pass over all of the vehicle's rows would give.

use super::{RejectReason, sort};
use crate::error::Result;
use crate::geo::{LatLon, haversine_m};
use crate::model::Fix;
use crate::store::import::Staged;
use std::collections::HashSet;

/// Two fixes closer than this, degrees (about 5 cm), are the same place.
const SAME_PLACE_DEG: f64 = 5e-7;

/// The most rows of one vehicle settled at once (about 30 MB of staged rows).
pub const WINDOW_ROWS: usize = 1 << 18;

/// A vehicle's rows gathered for settling: cut into a window when it is full, at a
/// point that keeps each instant's rows, and each night of repeated local times,
/// together in one window.
pub struct Window {
    /// The rows, in time order.
    pub rows: Vec<Staged>,
    /// The latest fix time of a row whose local time the clocks repeated.
    last_repeated_ts: Option<i64>,
    /// Rows that make it full.
    limit: usize,
}

impl Default for Window {
    fn default() -> Self {
        Window::of(WINDOW_ROWS)
    }
}

impl Window {
    /// An empty window that is full at `limit` rows.
    pub fn of(limit: usize) -> Window {
        Window {
            rows: Vec::new(),
            last_repeated_ts: None,
            limit: limit.max(1),
        }
    }

    /// True when the window is full and may end before `next` (the vehicle's next
    /// row): `next` begins a new instant, and no repeated local time lies within a
    /// day before it (their placing looks at a whole night's rows).
    pub fn full_before(&self, next: &Staged) -> bool {
        self.rows.len() >= self.limit
            && self
                .rows
                .last()
                .is_some_and(|last| millis(last) != millis(next))
            && self
                .last_repeated_ts
                .is_none_or(|ts| next.fix.ts - ts > 86_400)
    }

    /// Adds a row (in time order).
    pub fn push(&mut self, row: Staged) {
        if row.repeated_later_by_s != 0 {
            self.last_repeated_ts = Some(row.fix.ts);
        }
        self.rows.push(row);
    }

    /// Takes the rows, leaving the window empty.
    pub fn take(&mut self) -> Vec<Staged> {
        self.last_repeated_ts = None;
        std::mem::take(&mut self.rows)
    }
}

/// What a vehicle's next window needs of the one before: its last kept fixes.
/// The last is not appended yet (its derived speed waits for its next neighbour);
/// the one before it was.
#[derive(Debug, Clone, Default)]
pub struct Carry {
    appended: Option<Staged>,
    held: Vec<Staged>,
    /// The last row that stands (kept, or already stored), when it is newer than
    /// `held`: the next row's jump is judged from it.
    stands: Option<Staged>,
    /// The run of kept fixes that may still be a spike (the last `run.len` of
    /// `held`), and what stood before it.
    run: Run,
}

/// The kept fixes that left the track at once and have not come back yet: the last
/// `len` kept, and the fix that stood before them (`left`). With the next fix that
/// stands, they are judged a spike, one fix or a cluster of them.
#[derive(Debug, Clone, Default)]
struct Run {
    left: Option<Staged>,
    len: usize,
}

/// A run of fixes is a spike when each lies over this far from the fixes on both
/// sides…
const SPIKE_MIN_M: f64 = 300.0;
/// …reaching its first and leaving its last implies over this speed…
const SPIKE_KMH: f64 = 100.0;
/// …the fixes on both sides are closer to each other than this share of the way
/// out and back: it left the track and came back…
const SPIKE_RETURN_SHARE: f64 = 0.25;
/// …and it lasts at most this long, seconds: a vehicle that really drove off that
/// fast and back had time to do something in between.
const SPIKE_RUN_MAX_S: i64 = 300;

/// Distance and implied speed from `x` to `y`.
fn leg(x: &Staged, y: &Staged) -> (f64, f64) {
    let d_m = haversine_m(
        LatLon::new(x.fix.lat, x.fix.lon),
        LatLon::new(y.fix.lat, y.fix.lon),
    );
    let dt_s = ((millis(y) - millis(x)) as f64 / 1000.0).max(0.001);
    (d_m, d_m / dt_s * 3.6)
}

/// Whether `run` (one fix or several) is a spike between `a` before it and `b`
/// after it (see `SPIKE_*`): out and back, far and fast, in a way no vehicle
/// drives.
fn is_spike(a: &Staged, run: &[Staged], b: &Staged) -> bool {
    let (Some(first), Some(last)) = (run.first(), run.last()) else {
        return false;
    };
    let ((out_m, out_kmh), (back_m, back_kmh)) = (leg(a, first), leg(last, b));
    let (direct_m, _) = leg(a, b);
    out_m > SPIKE_MIN_M
        && back_m > SPIKE_MIN_M
        && out_kmh > SPIKE_KMH
        && back_kmh > SPIKE_KMH
        && direct_m < SPIKE_RETURN_SHARE * (out_m + back_m)
        && millis(last) - millis(first) <= SPIKE_RUN_MAX_S * 1000
        && run
            .iter()
            .all(|p| leg(a, p).0 > SPIKE_MIN_M && leg(p, b).0 > SPIKE_MIN_M)
}

/// Sets the run of last kept fixes aside as a spike when `next` (the next fix that
/// stands, kept or stored) and what stood before the run are its sides and it left
/// the track between them; what stood before it stands again. A fix written
/// already (the window's first, `appended_already`) is not judged again.
fn set_aside_spike(
    kept: &mut Vec<Staged>,
    appended_already: usize,
    run: &mut Run,
    next: &Staged,
    stands: &mut Option<Staged>,
    rejected: &mut Vec<(Staged, RejectReason, String)>,
) {
    let (Some(left), Some(p)) = (run.left.as_ref(), kept.last()) else {
        return;
    };
    let newest_stands = stands.as_ref().is_some_and(|s| millis(s) == millis(p));
    let from = kept.len().saturating_sub(run.len);
    if run.len == 0
        || from < appended_already
        || !newest_stands
        || !is_spike(left, &kept[from..], next)
    {
        return;
    }
    let left = run.left.take().expect("checked above");
    let n = run.len;
    let detail = if n == 1 {
        format!(
            "out and back between line {} and line {}",
            left.line, next.line
        )
    } else {
        format!(
            "out and back between line {} and line {}, {n} fixes",
            left.line, next.line
        )
    };
    for p in kept.drain(from..) {
        rejected.push((p, RejectReason::Spike, detail.clone()));
    }
    run.len = 0;
    *stands = Some(left);
}

impl Run {
    /// The run after `keep` is kept, `before` standing before it: a leap off the
    /// track (see `SPIKE_*`) begins one, a fix beside a run goes on with it while it
    /// is short enough to be a spike, and anything else ends it.
    fn after(&mut self, before: Option<Staged>, keep: &Staged, kept: &[Staged]) {
        let leap = before.as_ref().is_some_and(|b| {
            let (d_m, kmh) = leg(b, keep);
            d_m > SPIKE_MIN_M && kmh > SPIKE_KMH
        });
        let first = kept.len().checked_sub(self.len).and_then(|i| kept.get(i));
        if leap {
            (self.left, self.len) = (before, 1);
        } else if self.left.is_some()
            && self.len > 0
            && first.is_some_and(|f| millis(keep) - millis(f) <= SPIKE_RUN_MAX_S * 1000)
        {
            self.len += 1;
        } else {
            *self = Run::default();
        }
    }
}

/// Rows in a row that agree with each other and not with the vehicle's first fix
/// (each an impossible jump from it) that make it the bad one: a bad first fix does
/// not condemn the good ones after it.
const FIRST_FIX_OUTVOTED: usize = 3;

/// A row's time in milliseconds.
pub(crate) fn millis(s: &Staged) -> i64 {
    s.fix.ts * 1000 + s.ts_ms
}

fn same_place(a: &Fix, lat: f64, lon: f64) -> bool {
    (a.lat - lat).abs() < SAME_PLACE_DEG && (a.lon - lon).abs() < SAME_PLACE_DEG
}

/// One vehicle's staged rows after the checks that need their neighbours.
pub struct Settled {
    /// Rows to append, in time order, missing speeds derived.
    pub kept: Vec<Staged>,
    /// Rows rejected, with the reason and what they clashed with.
    pub rejected: Vec<(Staged, RejectReason, String)>,
}

/// Settles one vehicle's staged rows (in time order): duplicates first, then jumps,
/// then derived speeds. The outcome does not depend on the order rows came in.
///
/// - Rows at one instant with one place are one fix: the one kept is chosen by its
///   values, never by its position in the file; the others are exact duplicates.
/// - Rows at one instant with different places all go (conflicting duplicates): the
///   data cannot say which is right. A stored fix at that instant wins over any row.
/// - A row whose distance from the previous fix that stands (kept, or already
///   stored) implies over 250 km/h (and over 50 m, above GPS noise) is an impossible
///   jump. Judging from a stored fix too makes an import idempotent: a file imported
///   again adds nothing, not the jumps the first import refused.
/// - A missing speed is the distance between the neighbouring kept fixes over their
///   time apart (one-sided at the ends; 0 for a lone fix), marked derived.
pub fn settle_vehicle(
    rows: Vec<Staged>,
    teleport_kmh: f64,
    stored_at: &mut dyn FnMut(i64, i64) -> Result<Option<(f64, f64)>>,
) -> Result<Settled> {
    settle_window(rows, Carry::default(), true, teleport_kmh, stored_at).map(|(s, _)| s)
}

/// Settles one window of a vehicle's rows (see [`settle_vehicle`]), after the window
/// `carry` comes from. Returns the rows to append now and the carry for the next
/// window; with `last` (the vehicle's last window) everything kept is appended.
pub fn settle_window(
    rows: Vec<Staged>,
    carry: Carry,
    last: bool,
    teleport_kmh: f64,
    stored_at: &mut dyn FnMut(i64, i64) -> Result<Option<(f64, f64)>>,
) -> Result<(Settled, Carry)> {
    use RejectReason as R;
    let mut kept: Vec<Staged> = Vec::with_capacity(rows.len() + 2);
    // The carried fixes lead, as the previous kept fixes and neighbours.
    let appended_already = usize::from(carry.appended.is_some());
    kept.extend(carry.appended);
    kept.extend(carry.held);
    // The kept fixes that may still be a spike, and what stood before them.
    let mut run: Run = carry.run;
    // The last fix that stands, kept or stored: the jump rule's reference.
    let mut stands: Option<Staged> = carry.stands.or_else(|| kept.last().cloned());
    let mut rejected = Vec::new();
    // The vehicle's first fix, while nothing before or after it confirms it, and the
    // rows rejected as jumps from it since, agreeing with each other: when
    // `FIRST_FIX_OUTVOTED` of them do, the first fix was the bad one.
    let mut unconfirmed_first = stands.is_none();
    let mut outvoting: Vec<usize> = Vec::new();
    let rows = place_repeated_times(rows, &mut rejected);
    let mut rows = rows.into_iter().peekable();
    // The rows at one instant; one buffer for every instant (most hold one row).
    let mut group: Vec<Staged> = Vec::new();
    while let Some(first) = rows.next() {
        group.clear();
        group.push(first);
        while let Some(next) = rows.next_if(|r| millis(r) == millis(&group[0])) {
            group.push(next);
        }
        let (ts, ms) = (group[0].fix.ts, group[0].ts_ms);
        if let Some((lat, lon)) = stored_at(ts, ms)? {
            let mut stored = group[0].clone();
            (stored.fix.lat, stored.fix.lon) = (lat, lon);
            set_aside_spike(
                &mut kept,
                appended_already,
                &mut run,
                &stored,
                &mut stands,
                &mut rejected,
            );
            run = Run::default();
            stands = Some(stored);
            (unconfirmed_first, outvoting) = (false, Vec::new());
            for s in group.drain(..) {
                let reason = if same_place(&s.fix, lat, lon) {
                    R::AlreadyStored
                } else {
                    R::ConflictingDuplicate
                };
                rejected.push((s, reason, format!("stored fix at {lat}, {lon}")));
            }
            continue;
        }
        let (lat, lon) = (group[0].fix.lat, group[0].fix.lon);
        if group.iter().any(|s| !same_place(&s.fix, lat, lon)) {
            let n = group.len();
            for s in group.drain(..) {
                rejected.push((
                    s,
                    R::ConflictingDuplicate,
                    format!("{n} rows at this instant, in different places"),
                ));
            }
            continue;
        }
        // One place: keep the row with the most information, ties broken by value.
        group.sort_by(|a, b| {
            let key = |s: &Staged| {
                (!s.fix.speed_derived as u8
                    + s.fix.heading_deg.is_some() as u8
                    + s.fix.ignition.is_some() as u8
                    + s.fix.odometer_km.is_some() as u8,)
            };
            key(b)
                .cmp(&key(a))
                .then(b.fix.speed_kmh.total_cmp(&a.fix.speed_kmh))
                .then(
                    b.fix
                        .heading_deg
                        .unwrap_or(-1.0)
                        .total_cmp(&a.fix.heading_deg.unwrap_or(-1.0)),
                )
                .then(b.fix.ignition.cmp(&a.fix.ignition))
                .then(
                    b.fix
                        .odometer_km
                        .unwrap_or(-1.0)
                        .total_cmp(&a.fix.odometer_km.unwrap_or(-1.0)),
                )
        });
        let mut same = group.drain(..);
        let keep = same.next().expect("a group has a row");
        for s in same {
            let detail = format!("same as line {}", keep.line);
            rejected.push((s, R::ExactDuplicate, detail));
        }
        set_aside_spike(
            &mut kept,
            appended_already,
            &mut run,
            &keep,
            &mut stands,
            &mut rejected,
        );
        if let Some(prev) = &stands
            && could_be_jump(prev, &keep, teleport_kmh)
        {
            let d_m = haversine_m(
                LatLon::new(prev.fix.lat, prev.fix.lon),
                LatLon::new(keep.fix.lat, keep.fix.lon),
            );
            let dt_s = (millis(&keep) - millis(prev)) as f64 / 1000.0;
            let kmh = d_m / dt_s * 3.6;
            if crate::analyze::is_jump(d_m, dt_s, teleport_kmh) {
                let detail = format!(
                    "{:.1} km in {dt_s:.0} s ({kmh:.0} km/h) from line {}",
                    d_m / 1000.0,
                    prev.line
                );
                let agrees = outvoting.last().is_none_or(|&r| {
                    let before = &rejected[r].0;
                    let d_m = haversine_m(
                        LatLon::new(before.fix.lat, before.fix.lon),
                        LatLon::new(keep.fix.lat, keep.fix.lon),
                    );
                    let dt_s = (millis(&keep) - millis(before)) as f64 / 1000.0;
                    !crate::analyze::is_jump(d_m, dt_s, teleport_kmh)
                });
                if unconfirmed_first && kept.len() == 1 && agrees {
                    outvoting.push(rejected.len());
                } else {
                    outvoting.clear();
                }
                rejected.push((keep, R::ImpossibleJump, detail));
                if outvoting.len() == FIRST_FIX_OUTVOTED {
                    // The first fix is the jump: it goes, and the rows after it stand.
                    let first = kept.pop().expect("the first fix");
                    let mut agreeing: Vec<Staged> = Vec::new();
                    for &r in outvoting.iter().rev() {
                        agreeing.push(rejected.remove(r).0);
                    }
                    agreeing.reverse();
                    let detail = format!(
                        "a lone first fix: the {FIRST_FIX_OUTVOTED} after it (from line {}) agree with each other, not with it",
                        agreeing[0].line
                    );
                    rejected.push((first, R::ImpossibleJump, detail));
                    stands = agreeing.last().cloned();
                    kept.extend(agreeing);
                    run = Run::default();
                    (unconfirmed_first, outvoting) = (false, Vec::new());
                }
                continue;
            }
        }
        unconfirmed_first &= kept.is_empty();
        outvoting.clear();
        let before = stands.replace(keep.clone());
        run.after(before, &keep, &kept);
        kept.push(keep);
    }
    derive_speeds(&mut kept);
    let carry = if last {
        Carry::default()
    } else {
        // The last fix waits for its right neighbour (its derived speed); while a
        // run may still be set aside as a spike, so do its fixes and the one before
        // them, whose derived speed the run would change.
        let pending = run.left.is_some()
            && stands
                .as_ref()
                .zip(kept.last())
                .is_some_and(|(s, k)| millis(s) == millis(k));
        let hold = if pending { run.len + 1 } else { 1 };
        let hold = hold.min(kept.len().saturating_sub(appended_already));
        let held = kept.split_off(kept.len() - hold);
        let stands = stands.filter(|s| held.last().is_none_or(|h| millis(s) > millis(h)));
        let run = if pending && stands.is_none() {
            Run {
                len: run.len.min(held.len()),
                ..run
            }
        } else {
            Run::default()
        };
        Carry {
            appended: kept.last().cloned(),
            held,
            stands,
            run,
        }
    };
    let kept = kept.split_off(appended_already.min(kept.len()));
    Ok((Settled { kept, rejected }, carry))
}

/// Places one vehicle's naive local times of the hour the clocks repeated (the night
/// they go back), staged at their first occurrence, one night at a time: read in the
/// order the vehicle's rows were written, a stream that steps back by no more than
/// the shift, once, has crossed into the second occurrence, and its rows from there
/// on are moved to it. A row with the time and place of one read before it (sent
/// twice) is no step. A vehicle whose repeated times of a night never step back, or
/// step back more than once or by more than the shift, says nothing of which
/// occurrence they are: those rows are rejected as `ambiguous_local_time`, never
/// silently shifted. Returns the rows in settling order.
fn place_repeated_times(
    mut rows: Vec<Staged>,
    rejected: &mut Vec<(Staged, RejectReason, String)>,
) -> Vec<Staged> {
    if rows.iter().all(|s| s.repeated_later_by_s == 0) {
        return rows;
    }
    // The repeated rows, by night: a night's lie within one shift of each other,
    // nights months apart.
    let mut repeated: Vec<usize> = (0..rows.len())
        .filter(|&k| rows[k].repeated_later_by_s != 0)
        .collect();
    repeated.sort_by_key(|&k| rows[k].fix.ts);
    let mut nights: Vec<Vec<usize>> = Vec::new();
    for k in repeated {
        match nights.last_mut() {
            Some(night) if rows[k].fix.ts - rows[night[0]].fix.ts <= 86_400 => night.push(k),
            _ => nights.push(vec![k]),
        }
    }
    let mut out_of: Vec<bool> = vec![false; rows.len()];
    for mut night in nights {
        night.sort_by_key(|&k| (rows[k].file_index, rows[k].line));
        let mut steps_back = Vec::new();
        let mut disorder = false;
        let mut high = i64::MIN;
        let mut seen: HashSet<(i64, u64, u64)> = HashSet::new();
        for (n, &k) in night.iter().enumerate() {
            let s = &rows[k];
            let t = millis(s);
            if !seen.insert((t, s.fix.lat.to_bits(), s.fix.lon.to_bits())) {
                continue;
            }
            if t < high {
                if high - t <= s.repeated_later_by_s * 1000 {
                    steps_back.push(n);
                } else {
                    disorder = true;
                }
            }
            high = t;
        }
        let second_from = match (steps_back.as_slice(), disorder) {
            ([n], false) => Some(*n),
            _ => None,
        };
        for (n, &k) in night.iter().enumerate() {
            let s = &mut rows[k];
            match second_from {
                Some(from) => {
                    if n >= from {
                        s.fix.ts += s.repeated_later_by_s;
                    }
                    s.repeated_later_by_s = 0;
                }
                None => out_of[k] = true,
            }
        }
    }
    let mut kept = Vec::with_capacity(rows.len());
    for (k, s) in rows.into_iter().enumerate() {
        if out_of[k] {
            let detail = format!(
                "local time occurs twice (the clocks went back {} min) and this vehicle's rows do not say which: give times with their offset",
                s.repeated_later_by_s / 60
            );
            rejected.push((s, RejectReason::AmbiguousLocalTime, detail));
        } else {
            kept.push(s);
        }
    }
    kept.sort_by_key(sort::order_key);
    kept
}

/// False when `b` is surely no impossible jump from `a`, decided without
/// trigonometry from an upper bound of their distance: along the meridian, then
/// along a parallel, no shorter than the great circle and at most the radius times
/// |Δlat| + |Δlon| in radians. Only the rest need [`haversine_m`].
pub(crate) fn could_be_jump(a: &Staged, b: &Staged, teleport_kmh: f64) -> bool {
    let bound_m = crate::geo::EARTH_RADIUS_M
        * ((a.fix.lat - b.fix.lat).abs() + (a.fix.lon - b.fix.lon).abs()).to_radians();
    let dt_s = (millis(b) - millis(a)) as f64 / 1000.0;
    // A small margin over the bound, for rounding in either formula.
    crate::analyze::is_jump(bound_m * 1.001, dt_s, teleport_kmh)
}

fn derive_speeds(kept: &mut [Staged]) {
    for i in 0..kept.len() {
        if !kept[i].fix.speed_derived {
            continue;
        }
        let a = i.saturating_sub(1);
        let b = (i + 1).min(kept.len() - 1);
        let dt_s = (millis(&kept[b]) - millis(&kept[a])) as f64 / 1000.0;
        kept[i].fix.speed_kmh = if dt_s > 0.0 {
            let d_m = haversine_m(
                LatLon::new(kept[a].fix.lat, kept[a].fix.lon),
                LatLon::new(kept[b].fix.lat, kept[b].fix.lon),
            );
            // A speed past any road vehicle's is never kept (the store refuses it):
            // fixes a few metres apart in a fraction of a second say nothing more.
            ((d_m / dt_s * 3.6 * 10.0).round() / 10.0).min(crate::store::positions::MAX_SPEED_KMH)
        } else {
            0.0
        };
    }
}

/// A staged row of vehicle 1 for tests: a speed of `None` is one to derive.
#[cfg(test)]
pub(crate) fn staged(line: u64, ts: i64, lat: f64, lon: f64, speed: Option<f64>) -> Staged {
    Staged {
        fix: Fix {
            vehicle_id: 1,
            ts,
            lat,
            lon,
            speed_kmh: speed.unwrap_or(0.0),
            speed_derived: speed.is_none(),
            heading_deg: None,
            ignition: None,
            odometer_km: None,
        },
        ts_ms: 0,
        file_index: 0,
        line,
        repeated_later_by_s: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rows with every case the settling decides: duplicates (exact and in other
    /// places), jumps, spikes, missing speeds, several rows at one instant.
    fn rows() -> Vec<Staged> {
        let mut rows = Vec::new();
        let mut line = 0;
        let mut add = |ts: i64, lat: f64, speed: Option<f64>| {
            line += 1;
            rows.push(staged(line, ts, lat, -90.5, speed));
        };
        for i in 0..200i64 {
            let lat = 14.6 + i as f64 * 0.0002;
            let speed = (i % 3 != 0).then_some(40.0);
            add(i * 10, lat, speed);
            match i % 17 {
                3 => add(i * 10, lat, speed),           // sent twice
                5 => add(i * 10, lat + 0.01, speed),    // two places at one instant
                8 => add(i * 10 + 5, lat + 1.0, speed), // a jump
                // A spike: 322 m out and back in 5 s each way (232 km/h).
                11 => add(i * 10 + 5, lat + 0.0029, speed),
                // A cluster of three, in 5 s (232 km/h) and back in 3 s.
                14 => {
                    for t in 5..8 {
                        add(i * 10 + t, lat + 0.0029, speed);
                    }
                }
                _ => {}
            }
        }
        rows.sort_by_key(|s| (s.fix.ts, s.ts_ms, s.line));
        rows
    }

    /// Kept (line, speed in tenths of km/h) and rejected (line, reason).
    type Outcome = (Vec<(u64, i64)>, Vec<(u64, RejectReason)>);

    fn outcome(kept: &[Staged], rejected: &[(Staged, RejectReason, String)]) -> Outcome {
        let kept = kept
            .iter()
            .map(|s| (s.line, (s.fix.speed_kmh * 10.0).round() as i64))
            .collect();
        let mut rejected: Vec<_> = rejected.iter().map(|(s, why, _)| (s.line, *why)).collect();
        rejected.sort();
        (kept, rejected)
    }

    #[test]
    fn settling_in_windows_gives_what_one_pass_gives() {
        let whole = settle_vehicle(rows(), 250.0, &mut |_, _| Ok(None)).unwrap();
        let expected = outcome(&whole.kept, &whole.rejected);
        assert!(
            expected.1.len() > 20,
            "the rows have cases to settle: {:?}",
            expected.1
        );
        for limit in [1, 2, 3, 7, 64] {
            let (mut kept, mut rejected) = (Vec::new(), Vec::new());
            let mut window = Window::of(limit);
            let mut carry = Carry::default();
            let mut settle = |rows: Vec<Staged>, carry: Carry, last: bool| {
                let (s, next) =
                    settle_window(rows, carry, last, 250.0, &mut |_, _| Ok(None)).unwrap();
                kept.extend(s.kept);
                rejected.extend(s.rejected);
                next
            };
            for r in rows() {
                if window.full_before(&r) {
                    carry = settle(window.take(), carry, false);
                }
                window.push(r);
            }
            settle(window.take(), carry, true);
            assert_eq!(outcome(&kept, &rejected), expected, "windows of {limit}");
        }
    }
}
