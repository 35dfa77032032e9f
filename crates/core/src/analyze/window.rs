//! Detection over one vehicle's fixes a window at a time, so that a tracker with
//! tens of millions of fixes is analysed in bounded memory — with the answer a
//! single pass over all of them gives, row for row.
//!
//! A window is cut at the end of a stop that no later fix can change (its stay
//! ended inside the window) and whose last fix is not over the speed limit. Every
//! rule then restarts there exactly: the stop scan resumes on the next fix, movement
//! (trips) runs from that fix, no speeding run crosses it, and the pairwise rules
//! (signal losses, ignition) take the pairs that start before it. Geofences are a
//! state machine carried across windows, and so is the daily rollup: each fix is
//! read into its local day once nothing more can be found on it (before the cut and
//! every geofence's reading), and a day is closed with the first fix of the next.
//! The next window keeps what these need: from the cut, or a geofence's pending
//! flip, whichever is earliest. A window with no such stop (a vehicle parked, or
//! driving, for more than a whole window) grows until it has one, or holds the
//! vehicle.

use super::{Context, daily, events, motion};
use crate::clock::{Date, FleetZone};
use crate::error::Result;
use crate::geo::LatLon;
use crate::model::{Event, EventDetail, EventKind, Fix, Stop, Trip, VehicleAnalysis};
use std::collections::BTreeMap;

/// Fixes read per window by the pipeline: 80 MB of fixes, far more than any
/// ordinary vehicle has (a 15-second tracker makes 2.1 M in a year).
pub const WINDOW_FIXES: usize = 1 << 20;

/// What a pass over one window concluded.
enum Pass {
    /// The data ended; everything is found.
    Done,
    /// Found up to a cut; the next window starts at this fix (vehicle index).
    Cut(usize),
    /// No cut in this window: it must grow.
    Grow,
}

/// The trips, stops and events found that start on one local day: its row's counts;
/// and its part of their time (a trip's driving and idling, a stop's idling and
/// parking), seconds.
#[derive(Debug, Clone, Copy, Default)]
struct DayCounts {
    trips: i64,
    stops: i64,
    events: i64,
    signal_losses: i64,
    driving_s: i64,
    idle_s: i64,
    parked_s: i64,
    /// The fastest trip that starts on it (a trip's top speed may come from its
    /// positions, when the tracker's speed field says less).
    trip_max_kmh: f64,
}

/// Adds a trip's driving and idling to the days it covers: all to its day, or,
/// across midnight, to each day in proportion to the part of the trip on it (whole
/// seconds; the last day takes what rounding left).
fn add_trip_time(days: &mut BTreeMap<Date, DayCounts>, zone: &FleetZone, t: &Trip) {
    let (mut date, mut from) = (zone.local_date(t.start_ts), t.start_ts);
    let (mut driving_s, mut idle_s) = (t.driving_s, t.idle_s);
    let first = days.entry(date).or_default();
    first.trip_max_kmh = first.trip_max_kmh.max(t.max_speed_kmh);
    loop {
        let until = zone.day_end(date).min(t.end_ts);
        let day = days.entry(date).or_default();
        if until >= t.end_ts {
            day.driving_s += driving_s;
            day.idle_s += idle_s;
            break;
        }
        let part = |s: i64| {
            (s as f64 * (until - from) as f64 / (t.end_ts - t.start_ts) as f64).round() as i64
        };
        let (d, i) = (part(t.driving_s), part(t.idle_s));
        (day.driving_s, day.idle_s) = (day.driving_s + d, day.idle_s + i);
        (driving_s, idle_s) = (driving_s - d, idle_s - i);
        (date, from) = (date.add_days(1), until);
    }
}

/// Adds a stop's idling and parking (the stretch `fixes` of it: a stop cut while it
/// goes on is added a stretch at a time) to the days its steps fall on, a step
/// across midnight split there: by the rule of [`motion::stops`].
fn add_stop_time(days: &mut BTreeMap<Date, DayCounts>, zone: &FleetZone, fixes: &[Fix]) {
    for w in fixes.windows(2) {
        let mut from = w[0].ts;
        while from < w[1].ts {
            let date = zone.local_date(from);
            let until = zone.day_end(date).min(w[1].ts);
            let day = days.entry(date).or_default();
            match w[0].ignition {
                Some(true) => day.idle_s += until - from,
                _ => day.parked_s += until - from,
            }
            from = until;
        }
    }
}

/// One vehicle's detection in progress: what the rules carry from one window to the
/// next, and what they found so far. Indexes are into the vehicle's fixes.
#[derive(Debug, Clone, Default)]
struct Run {
    /// Where the stop scan resumes.
    scan_from: usize,
    /// Where movement (the next trip) runs from: the last stop's end, or 0.
    movement_from: usize,
    /// Events anchored before this fix are found.
    events_from: usize,
    /// The local days read so far, and the one still open.
    rollup: daily::Rollup,
    /// Each geofence's state, in `ctx.geofences` order (set by the first window).
    geofences: Vec<events::GeofenceWatch>,
    /// A stop cut while it goes on (a vehicle parked for longer than a window):
    /// its row so far, up to the fix the scan takes it up at (`scan_from`).
    going_on: Option<Stop>,
    /// What was found on each local day not yet rolled up (a day is rolled up only
    /// once nothing more can be found on it).
    day_counts: BTreeMap<Date, DayCounts>,
    found: VehicleAnalysis,
}

impl Run {
    /// Detects over `fixes`, the vehicle's from index `base` on (`at_end`: the last
    /// of them is the vehicle's last).
    fn pass(&mut self, ctx: &Context, fixes: &[Fix], base: usize, at_end: bool) -> Pass {
        let th = &ctx.thresholds;
        let n = fixes.len();
        let going_on = self.going_on.as_ref().map(|s| LatLon::new(s.lat, s.lon));
        let scan = motion::stop_ranges(fixes, th, self.scan_from - base, at_end, going_on);
        let limits_kmh: Vec<f64> = fixes.iter().map(|f| ctx.speed_limit_kmh(f)).collect();
        // A stop still going on is cut at its latest fix where it stood, not
        // speeding, once long enough that its long-stop event is settled too.
        let settled_s = motion::judged_s(th).max((th.long_stop_min * 60.0).ceil() as i64);
        // The scan's open stay is the stop going on when it starts where it was
        // taken up; else that stop ended, as the scan's first range.
        let from = self.scan_from - base;
        let goes_on = scan.open.is_some_and(|o| o.start == from) && self.going_on.is_some();
        let open_cut = scan.open.and_then(|stay| {
            let start_ts = match &self.going_on {
                Some(s) if goes_on => s.start_ts,
                _ => fixes[stay.start].ts,
            };
            (stay.start + 1..n)
                .rev()
                .take_while(|&k| fixes[k].ts - start_ts >= settled_s)
                .find(|&k| {
                    motion::standing(stay.centre, &fixes[k]) && fixes[k].speed_kmh <= limits_kmh[k]
                })
                .map(|k| (stay, k))
        });
        // The cut, in the window: the open stop's, else the last final stop's end
        // that is not speeding.
        let cut = if at_end {
            None
        } else if let Some((_, k)) = open_cut {
            Some(k)
        } else {
            match scan
                .ranges
                .iter()
                .rev()
                .map(|r| r.1)
                .find(|&b| fixes[b].speed_kmh <= limits_kmh[b])
            {
                Some(b) => Some(b),
                None => return Pass::Grow,
            }
        };
        let until = cut.unwrap_or(n);
        let rest_of = self.going_on.take_if(|_| !goes_on);
        let stops: Vec<_> = scan.ranges.into_iter().filter(|r| r.1 <= until).collect();
        let (new_stops, new_trips, new_events) = (
            self.found.stops.len(),
            self.found.trips.len(),
            self.found.events.len(),
        );

        let mut found_stops = motion::stops(fixes, &stops, &ctx.namer);
        for &(a, b, _) in &stops {
            add_stop_time(&mut self.day_counts, &ctx.zone, &fixes[a..=b]);
        }
        if let (Some(before), Some(rest)) = (&rest_of, found_stops.first_mut()) {
            *rest = joined(before, rest);
        }
        self.found.stops.extend(found_stops);
        // Movement runs up to the stop going on at the cut, if any.
        let bounds: Vec<_> = stops
            .iter()
            .copied()
            .chain(open_cut.map(|(stay, k)| (stay.start, k, stay.centre)))
            .collect();
        let spans: Vec<_> = motion::movement_spans(fixes, &bounds, th, self.movement_from - base)
            .into_iter()
            .filter(|s| s.0 < until)
            .collect();
        let found_trips = motion::trips(fixes, &spans, th);
        for t in &found_trips {
            add_trip_time(&mut self.day_counts, &ctx.zone, t);
        }
        self.found.trips.extend(found_trips);
        let events = &mut self.found.events;
        events.extend(events::long_stops(&self.found.stops[new_stops..], th));

        // Runs and pairs from the last cut to this one: neither cut is speeding, so
        // no run crosses one, and each pair is counted in the window it starts in.
        let lo = self.events_from - base;
        let hi = cut.map_or(n, |c| c + 1);
        let limit_at = |f: &Fix| ctx.speed_limit(f);
        events.extend(events::speeding(
            &fixes[lo..hi],
            &limits_kmh[lo..hi],
            &limit_at,
            th,
            &ctx.namer,
        ));
        events.extend(events::signal_losses(&fixes[lo..hi], th, &ctx.namer));
        events.extend(events::ignition(&fixes[lo..hi]));

        if self.geofences.is_empty() && base == 0 {
            self.geofences = ctx
                .geofences
                .iter()
                .map(|g| events::GeofenceWatch::start(&fixes[0], g))
                .collect();
        }
        for (watch, g) in self.geofences.iter_mut().zip(&ctx.geofences) {
            watch.advance(fixes, base, g, th, at_end, &mut self.found);
        }
        // A stop cut while it goes on is counted on its day when first cut (its day
        // may be rolled up before it ends), and not again when it ends.
        let counted = rest_of.as_ref().map(|s| s.start_ts);
        self.count(ctx, new_stops, new_trips, new_events, counted);
        if let Some((stay, k)) = open_cut {
            let so_far = motion::stops(fixes, &[(stay.start, k, stay.centre)], &ctx.namer)
                .pop()
                .expect("one range");
            add_stop_time(&mut self.day_counts, &ctx.zone, &fixes[stay.start..=k]);
            let so_far = match self.going_on.take() {
                Some(before) => joined(&before, &so_far),
                None => {
                    let day = self.day_counts.entry(ctx.zone.local_date(so_far.start_ts));
                    let day = day.or_default();
                    day.stops += 1;
                    day.events += 1;
                    so_far
                }
            };
            self.going_on = Some(so_far);
        }

        // A day is rolled up once all its fixes are before the cut and every
        // geofence has read past them: nothing more can be found on it.
        let days_until = self
            .geofences
            .iter()
            .map(|w| w.next - base)
            .fold(until, usize::min);
        let days = self.rollup.read(fixes, base, days_until, ctx, at_end);
        for (date, mut row) in days {
            let c = self.day_counts.remove(&date).unwrap_or_default();
            (row.trips, row.stops, row.events, row.signal_losses) =
                (c.trips, c.stops, c.events, c.signal_losses);
            let minutes = |s: i64| s as f64 / 60.0;
            row.max_speed_kmh = row.max_speed_kmh.max(c.trip_max_kmh);
            (row.driving_min, row.idle_min, row.parked_min) =
                (minutes(c.driving_s), minutes(c.idle_s), minutes(c.parked_s));
            row.avg_driving_speed_kmh = if c.driving_s > 0 {
                row.gps_distance_km / (c.driving_s as f64 / 3600.0)
            } else {
                0.0
            };
            self.found.daily.push(row);
        }

        let Some(cut) = cut else {
            let vehicle_id = fixes[0].vehicle_id;
            for (watch, g) in self.geofences.iter().zip(&ctx.geofences) {
                self.found.visits.extend(watch.open_visit(vehicle_id, g));
            }
            self.found.latest = fixes.last().copied();
            return Pass::Done;
        };
        let keep_from = self
            .geofences
            .iter()
            .map(|w| w.next - base)
            .chain([cut, self.rollup.next - base])
            .min()
            .expect("the cut is a candidate");
        // After a stop that ended the scan goes on with the next fix; a stop going
        // on is taken up at the cut.
        self.scan_from = base + cut + usize::from(open_cut.is_none());
        self.movement_from = base + cut;
        self.events_from = base + cut;
        Pass::Cut(base + keep_from)
    }

    /// Counts the rows found from these positions on by the local day they start.
    /// A stop starting at `counted` (and its long-stop event) was counted before.
    fn count(
        &mut self,
        ctx: &Context,
        stops: usize,
        trips: usize,
        events: usize,
        counted: Option<i64>,
    ) {
        let (zone, found, days) = (&ctx.zone, &self.found, &mut self.day_counts);
        let before = |kind: EventKind, ts: i64| kind == EventKind::LongStop && Some(ts) == counted;
        for s in &found.stops[stops..] {
            if Some(s.start_ts) != counted {
                days.entry(zone.local_date(s.start_ts)).or_default().stops += 1;
            }
        }
        for t in &found.trips[trips..] {
            days.entry(zone.local_date(t.start_ts)).or_default().trips += 1;
        }
        for e in found.events[events..]
            .iter()
            .filter(|e| !before(e.kind, e.start_ts))
        {
            let d = days.entry(zone.local_date(e.start_ts)).or_default();
            d.events += 1;
            d.signal_losses += i64::from(e.kind == EventKind::SignalLoss);
        }
    }

    /// What was found, in the order one pass gives (see [`in_one_pass_order`]).
    fn finish(&mut self, ctx: &Context) -> VehicleAnalysis {
        let mut found = std::mem::take(&mut self.found);
        in_one_pass_order(&mut found, ctx);
        found
    }
}

/// A stop cut while it went on, `before`, joined with its `rest`.
fn joined(before: &Stop, rest: &Stop) -> Stop {
    Stop {
        start_ts: before.start_ts,
        idle_s: before.idle_s + rest.idle_s,
        parked_s: before.parked_s + rest.parked_s,
        unknown_s: before.unknown_s + rest.unknown_s,
        ..rest.clone()
    }
}

/// Puts rows found a window at a time in the order one pass gives: events by time
/// and kind (a fix's geofence events in the geofences' order), visits by geofence.
fn in_one_pass_order(found: &mut VehicleAnalysis, ctx: &Context) {
    let rank_of = |id: i64| ctx.geofences.iter().position(|g| g.id == id);
    let rank = |e: &Event| match &e.detail {
        EventDetail::Geofence(d) => rank_of(d.geofence_id).unwrap_or(0),
        _ => 0,
    };
    found
        .events
        .sort_by_cached_key(|e| (e.start_ts, e.kind, rank(e)));
    found.visits.sort_by_cached_key(|v| rank_of(v.geofence_id));
}

/// How far back in the vehicle's time a late fix may land and have only the
/// stretch after the last stop before it analysed again: the checkpoints kept span
/// this much before the newest fix (an older one has the vehicle analysed whole).
pub const REWIND_KEPT_S: i64 = 2 * 86_400;

/// A checkpoint is kept at a cut at most this often, seconds of the vehicle's time.
const CHECKPOINT_EVERY_S: i64 = 600;

/// At most this many checkpoints are kept a vehicle, thinned so that they lie
/// closer together the more recent they are: a fix a few minutes late re-runs a
/// few minutes, one a day late a few hours.
const CHECKPOINTS_KEPT: usize = 24;

/// The rules' state at a cut, to take detection back to when a late fix lands
/// after it.
#[derive(Debug, Clone)]
struct Checkpoint {
    /// The segment the rows found after this cut belong to.
    segment: u64,
    /// The rules' state at the cut (nothing found yet).
    run: Run,
    /// The first fix the rules need from there on, and its index.
    first: Fix,
    base: usize,
    /// The newest fix read when the cut was made: whatever comes after it, what
    /// came before the cut stands.
    read_to_ts: i64,
}

/// Rows a push made final, by the segment of detection they were found in: the
/// rows found after a checkpoint belong to its segment, and taking detection back
/// to it ([`Tail::rewind`]) takes back the rows of its segment and every later one.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Settled {
    /// Each segment's rows, in order.
    pub segments: Vec<(u64, VehicleAnalysis)>,
}

impl Settled {
    /// The events among the rows.
    pub fn events(&self) -> impl Iterator<Item = &Event> {
        self.segments.iter().flat_map(|(_, rows)| &rows.events)
    }

    /// Adds `later`'s rows after these.
    pub fn append(&mut self, later: Settled) {
        for (segment, rows) in later.segments {
            match self.segments.last_mut() {
                Some((last, kept)) if *last == segment => kept.append(rows),
                _ => self.segments.push((segment, rows)),
            }
        }
    }

    /// All the rows, whatever their segment.
    pub fn rows(self) -> VehicleAnalysis {
        let mut all = VehicleAnalysis::default();
        for (_, rows) in self.segments {
            all.append(rows);
        }
        all
    }
}

/// One vehicle's detection kept open as its fixes arrive (the live feed): the rules'
/// state at the last cut and the fixes since, so that new fixes re-run only the
/// stretch after the vehicle's last finished stop (or the last cut of a stop going
/// on); and the state at recent cuts, so that a late fix re-runs only what follows
/// the last of them before it.
#[derive(Debug, Clone, Default)]
pub struct Tail {
    run: Run,
    held: Vec<Fix>,
    base: usize,
    /// The segment rows found now belong to.
    segment: u64,
    /// Checkpoints at recent cuts, oldest first.
    checkpoints: std::collections::VecDeque<Checkpoint>,
}

impl Tail {
    /// The newest fix held, if any.
    pub fn last_ts(&self) -> Option<i64> {
        self.held.last().map(|f| f.ts)
    }

    /// Whether this very fix is among those held. Another fix in the same second
    /// is not: the store keeps a fix per vehicle and millisecond.
    pub fn holds(&self, fix: &Fix) -> bool {
        let first = self.held.partition_point(|h| h.ts < fix.ts);
        self.held[first..]
            .iter()
            .take_while(|h| h.ts == fix.ts)
            .any(|h| h == fix)
    }

    /// Fixes held since the last cut.
    pub fn held(&self) -> usize {
        self.held.len()
    }

    /// The oldest segment a rewind can take back: rows of earlier segments are
    /// final for good.
    pub fn oldest_segment(&self) -> u64 {
        self.checkpoints.front().map_or(self.segment, |c| c.segment)
    }

    /// Adds fixes newer than every fix held (in time order), runs the rules as far as
    /// the fixes decide, and returns what that made final: rows no later fix can
    /// change (no `latest`), by segment.
    pub fn push(&mut self, fixes: impl IntoIterator<Item = Fix>, ctx: &Context) -> Settled {
        self.held.extend(fixes);
        let mut settled = Settled::default();
        while !self.held.is_empty() {
            match self.run.pass(ctx, &self.held, self.base, false) {
                Pass::Cut(keep_from) => {
                    let read_to_ts = self.held.last().expect("not empty").ts;
                    self.held.drain(..keep_from - self.base);
                    self.base = keep_from;
                    let due = self
                        .checkpoints
                        .back()
                        .is_none_or(|c| read_to_ts - c.read_to_ts >= CHECKPOINT_EVERY_S);
                    if due && !self.held.is_empty() {
                        self.settle(&mut settled, ctx);
                        self.segment += 1;
                        self.checkpoints.push_back(Checkpoint {
                            segment: self.segment,
                            run: self.run.clone(),
                            first: self.held[0],
                            base: self.base,
                            read_to_ts,
                        });
                        self.thin_checkpoints(read_to_ts);
                    }
                }
                Pass::Grow | Pass::Done => break,
            }
        }
        self.settle(&mut settled, ctx);
        if let Some(newest) = self.last_ts() {
            while self
                .checkpoints
                .front()
                .is_some_and(|c| c.read_to_ts < newest - REWIND_KEPT_S)
            {
                self.checkpoints.pop_front();
            }
        }
        settled
    }

    /// Drops the checkpoint (not the oldest nor the newest) whose neighbours lie
    /// closest together for its age, when over [`CHECKPOINTS_KEPT`].
    fn thin_checkpoints(&mut self, newest_ts: i64) {
        if self.checkpoints.len() <= CHECKPOINTS_KEPT {
            return;
        }
        let c = &self.checkpoints;
        let crowded = (1..c.len() - 1).min_by(|&a, &b| {
            let crowding = |k: usize| {
                let gap = (c[k + 1].read_to_ts - c[k - 1].read_to_ts) as f64;
                gap / (newest_ts - c[k].read_to_ts + CHECKPOINT_EVERY_S) as f64
            };
            crowding(a).total_cmp(&crowding(b))
        });
        if let Some(k) = crowded {
            self.checkpoints.remove(k);
        }
    }

    /// Adds the rows found so far to the current segment's.
    fn settle(&mut self, settled: &mut Settled, ctx: &Context) {
        let rows = self.run.finish(ctx);
        if rows != VehicleAnalysis::default() {
            settled.append(Settled {
                segments: vec![(self.segment, rows)],
            });
        }
    }

    /// Takes detection back to its latest checkpoint that a fix at `ts` (a late one)
    /// cannot change, if one is kept. Returns the segment whose rows, and every later
    /// one's, are taken back, and the fix to [`Tail::push`] again from: every fix
    /// of the vehicle from this one on, in time order.
    pub fn rewind(&mut self, ts: i64) -> Option<(u64, Fix)> {
        let at = self.checkpoints.iter().rposition(|c| c.read_to_ts < ts)?;
        self.checkpoints.truncate(at + 1);
        let c = self.checkpoints.back().expect("kept").clone();
        self.run = c.run;
        self.base = c.base;
        self.segment = c.segment;
        self.held.clear();
        Some((c.segment, c.first))
    }

    /// What the stretch after the last cut comes to if no fix follows: the open
    /// stop or trip, today's row, open visits, the latest fix. It replaces the
    /// previous answer of this kind.
    pub fn provisional(&self, ctx: &Context) -> VehicleAnalysis {
        if self.held.is_empty() {
            return VehicleAnalysis::default();
        }
        let mut probe = self.run.clone();
        probe.found = VehicleAnalysis::default();
        match probe.pass(ctx, &self.held, self.base, true) {
            Pass::Done => probe.finish(ctx),
            Pass::Cut(_) | Pass::Grow => unreachable!("a pass to the end ends"),
        }
    }
}

/// Analyses one vehicle's time-ordered fixes, all in memory.
pub fn analyze_all(fixes: &[Fix], ctx: &Context) -> VehicleAnalysis {
    if fixes.is_empty() {
        return VehicleAnalysis::default();
    }
    let mut run = Run::default();
    match run.pass(ctx, fixes, 0, true) {
        Pass::Done => run.finish(ctx),
        Pass::Cut(_) | Pass::Grow => unreachable!("a pass over all the fixes ends"),
    }
}

/// Analyses one vehicle whose fixes are `first` and then whatever `next` gives
/// (in time order, `None` at the end), holding about `window` fixes at a time.
/// Returns how many fixes it read, and the analysis, equal to [`analyze_all`]'s.
pub fn analyze_streamed(
    first: Vec<Fix>,
    next: &mut dyn FnMut() -> Result<Option<Fix>>,
    ctx: &Context,
    window: usize,
) -> Result<(usize, VehicleAnalysis)> {
    let window = window.max(2);
    let mut run = Run::default();
    let mut held = first;
    let mut base = 0;
    let mut want = window;
    let mut at_end = false;
    loop {
        while held.len() < want && !at_end {
            match next()? {
                Some(fix) => held.push(fix),
                None => at_end = true,
            }
        }
        if held.is_empty() {
            return Ok((0, VehicleAnalysis::default()));
        }
        match run.pass(ctx, &held, base, at_end) {
            Pass::Done => return Ok((base + held.len(), run.finish(ctx))),
            Pass::Cut(keep_from) => {
                held.drain(..keep_from - base);
                base = keep_from;
                // Read at least half a window of new fixes each time.
                want = window.max(held.len() + window / 2);
            }
            Pass::Grow => want = held.len() * 2,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyze::Thresholds;
    use crate::clock::FleetZone;
    use crate::geo::{Geofence, LatLon, Shape, offset_m};
    use rand::rngs::Xoshiro256PlusPlus;
    use rand::{RngExt, SeedableRng};

    const ORIGIN: LatLon = LatLon::new(14.60, -90.55);

    /// Days of a vehicle that parks, idles, drives (sometimes too fast, through two
    /// geofences), loses its signal and sleeps, with a cadence of 1 to 120 s; parked,
    /// its receiver now and then reports a wild speed.
    fn eventful_vehicle(seed: u64, fixes: usize) -> Vec<Fix> {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        let mut t = 1_795_000_000;
        let (mut east, mut north) = (0.0f64, 0.0f64);
        let mut out = Vec::with_capacity(fixes);
        while out.len() < fixes {
            let cadence_s = [1, 5, 15, 15, 30, 120][rng.random_range(0..6)];
            let ignition = [Some(true), Some(false), None][rng.random_range(0..3)];
            let n = rng.random_range(1..200);
            let moving = rng.random_bool(0.5);
            let kmh = if rng.random_bool(0.2) {
                rng.random_range(80.0..120.0)
            } else {
                rng.random_range(5.0..70.0)
            };
            let heading = rng.random_range(0.0..std::f64::consts::TAU);
            for _ in 0..n {
                t += cadence_s;
                if moving {
                    east += heading.cos() * kmh / 3.6 * cadence_s as f64;
                    north += heading.sin() * kmh / 3.6 * cadence_s as f64;
                    // Keep within 6 km of the origin, where the geofences are.
                    if east.hypot(north) > 6000.0 {
                        (east, north) = (east * 0.5, north * 0.5);
                    }
                }
                let p = offset_m(
                    ORIGIN,
                    east + rng.random_range(-8.0..8.0),
                    north + rng.random_range(-8.0..8.0),
                );
                out.push(Fix {
                    vehicle_id: 7,
                    ts: t,
                    lat: p.lat,
                    lon: p.lon,
                    // A parked receiver now and then reports a wild speed.
                    speed_kmh: match (moving, rng.random_bool(0.05)) {
                        (true, _) => kmh,
                        (false, true) => 95.0,
                        (false, false) => rng.random_range(0.0..2.0),
                    },
                    speed_derived: false,
                    heading_deg: None,
                    ignition: if moving { Some(true) } else { ignition },
                    odometer_km: None,
                });
            }
            match rng.random_range(0..10) {
                0 => t += rng.random_range(400..3000),   // a signal loss
                1 => t += rng.random_range(3600..40000), // asleep for hours
                _ => {}
            }
        }
        out
    }

    fn context() -> Context {
        let circle =
            |id: i64, name: &str, east_m: f64, radius_m: f64, limit: Option<f64>| Geofence {
                id,
                name: name.into(),
                kind: "zone".into(),
                shape: Shape::Circle {
                    center: offset_m(ORIGIN, east_m, 0.0),
                    radius_m,
                },
                speed_limit_kmh: limit,
            };
        Context::new(
            Thresholds::default(),
            FleetZone::default(),
            vec![
                circle(1, "Depot", 0.0, 800.0, None),
                circle(2, "School", 1500.0, 1500.0, Some(30.0)),
                circle(3, "Yard", 300.0, 400.0, None),
            ],
            crate::geo::atlas::places(),
        )
    }

    fn streamed(fixes: &[Fix], ctx: &Context, window: usize) -> VehicleAnalysis {
        let mut rest = fixes[window.min(fixes.len())..].iter().copied();
        let (read, found) = analyze_streamed(
            fixes[..window.min(fixes.len())].to_vec(),
            &mut || Ok(rest.next()),
            ctx,
            window,
        )
        .unwrap();
        assert_eq!(read, fixes.len());
        found
    }

    #[test]
    fn windows_of_any_size_find_what_one_pass_finds() {
        let ctx = context();
        for seed in 0..6 {
            let fixes = eventful_vehicle(seed, 6000);
            let whole = analyze_all(&fixes, &ctx);
            assert!(whole.stops.len() > 5 && whole.trips.len() > 5, "{seed}");
            assert!(whole.visits.len() > 2 && whole.daily.len() > 1, "{seed}");
            for window in [2, 3, 7, 64, 500, 2500] {
                let found = streamed(&fixes, &ctx, window);
                assert_eq!(
                    found.stops, whole.stops,
                    "stops, seed {seed}, window {window}"
                );
                assert_eq!(
                    found.trips, whole.trips,
                    "trips, seed {seed}, window {window}"
                );
                assert_eq!(
                    found.events, whole.events,
                    "events, seed {seed}, window {window}"
                );
                assert_eq!(
                    found.visits, whole.visits,
                    "visits, seed {seed}, window {window}"
                );
                assert_eq!(
                    found.daily, whole.daily,
                    "daily, seed {seed}, window {window}"
                );
                assert_eq!(found.latest, whole.latest);
            }
        }
    }

    /// A tail holds the fixes it was given, and no other: a second fix in the
    /// newest's second (the store keys fixes by the millisecond) is new, so the
    /// live feed analyses the vehicle whole again rather than dropping it.
    #[test]
    fn a_tail_holds_its_own_fixes_and_not_another_in_the_same_second() {
        let ctx = context();
        let fixes = eventful_vehicle(7, 50);
        let mut tail = Tail::default();
        tail.push(fixes.iter().copied(), &ctx);
        let newest = *fixes.last().unwrap();
        assert!(tail.holds(&newest));
        let beside = Fix {
            lat: newest.lat + 1e-4,
            ..newest
        };
        assert!(!tail.holds(&beside));
        let later = Fix {
            ts: newest.ts + 1,
            ..newest
        };
        assert!(!tail.holds(&later));
    }

    /// A vehicle that drives, parks for `parked_days` reporting every 15 s (its
    /// position jittering, a wild speed now and then, the ignition off), and drives
    /// away.
    fn parked_vehicle(parked_days: i64) -> Vec<Fix> {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(parked_days as u64);
        let mut out = Vec::new();
        let mut t = 1_795_000_000;
        let mut fix =
            |t: i64, east: f64, speed_kmh: f64, ignition: bool, rng: &mut Xoshiro256PlusPlus| {
                let p = offset_m(
                    ORIGIN,
                    east + rng.random_range(-15.0..15.0),
                    rng.random_range(-15.0..15.0),
                );
                out.push(Fix {
                    vehicle_id: 7,
                    ts: t,
                    lat: p.lat,
                    lon: p.lon,
                    speed_kmh,
                    speed_derived: false,
                    heading_deg: None,
                    ignition: Some(ignition),
                    odometer_km: None,
                });
            };
        for k in 0..120 {
            t += 15;
            fix(t, -3000.0 + 25.0 * k as f64, 90.0, true, &mut rng);
        }
        for _ in 0..parked_days * 86_400 / 15 {
            t += 15;
            let wild = if rng.random_bool(0.01) { 120.0 } else { 0.0 };
            fix(t, 0.0, wild, false, &mut rng);
        }
        for k in 0..120 {
            t += 15;
            fix(t, 25.0 * k as f64 + 400.0, 50.0, true, &mut rng);
        }
        out
    }

    /// Regression: a vehicle parked for days held every fix since it parked, and
    /// each new fix re-ran the rules over all of them. Now the stop is cut while it
    /// goes on: what is held stays within an hour of fixes, and the answer is the
    /// one pass's.
    #[test]
    fn a_parked_vehicle_is_held_for_a_bounded_stretch() {
        let ctx = context();
        let fixes = parked_vehicle(3);
        let whole = analyze_all(&fixes, &ctx);
        assert_eq!(whole.stops.len(), 1, "{:?}", whole.stops);
        assert!(whole.stops[0].duration_s() > 3 * 86_000);
        let mut tail = Tail::default();
        let mut kept = VehicleAnalysis::default();
        let mut most_held = 0;
        for (k, f) in fixes.iter().enumerate() {
            kept.append(tail.push([*f], &ctx).rows());
            most_held = most_held.max(tail.held());
            if k % 997 == 0 {
                assert_eq!(tail.provisional(&ctx).latest, Some(*f));
            }
        }
        // 40 minutes (the long-stop threshold) of fixes at 15 s, and the drive.
        assert!(most_held <= 2 * 160 + 120, "held {most_held} fixes");
        kept.append(tail.provisional(&ctx));
        in_one_pass_order(&mut kept, &ctx);
        assert_eq!(kept, whole);
        assert_eq!(streamed(&fixes, &ctx, 64), whole);
    }

    /// Rows kept by segment, as the live feed's writers keep them.
    fn keep(kept: &mut BTreeMap<u64, VehicleAnalysis>, settled: Settled) {
        for (segment, rows) in settled.segments {
            kept.entry(segment).or_default().append(rows);
        }
    }

    /// What a report reads: the rows kept and the open stretch, in one pass's order.
    fn answer(
        kept: &BTreeMap<u64, VehicleAnalysis>,
        tail: &Tail,
        ctx: &Context,
    ) -> VehicleAnalysis {
        let mut all = VehicleAnalysis::default();
        for rows in kept.values() {
            all.append(rows.clone());
        }
        all.append(tail.provisional(ctx));
        in_one_pass_order(&mut all, ctx);
        all
    }

    /// Regression: a fix older than the newest had the live feed analyse the
    /// vehicle's whole history again. Now detection goes back to its last
    /// checkpoint before the fix and re-runs from there over the fixes stored: the
    /// rows of the segments it takes back are dropped, and what is kept plus the
    /// open stretch is one pass's over the fixes stored, after every late batch.
    #[test]
    fn a_tail_takes_late_fixes_from_its_last_checkpoint_before_them() {
        let ctx = context();
        let mut rewinds = 0;
        for seed in 0..6 {
            let fixes = eventful_vehicle(seed, 6000);
            let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed + 200);
            let mut stored = std::collections::BTreeSet::new();
            let (mut late, mut at) = (Vec::new(), 0);
            let mut kept = BTreeMap::new();
            let mut tail = Tail::default();
            while at < fixes.len() || !late.is_empty() {
                let n = rng.random_range(1..200).min(fixes.len() - at);
                let mut batch = Vec::new();
                for k in at..at + n {
                    if rng.random_bool(0.01) {
                        late.push(k)
                    } else {
                        batch.push(k)
                    }
                }
                at += n;
                stored.extend(batch.iter().copied());
                keep(&mut kept, tail.push(batch.iter().map(|&k| fixes[k]), &ctx));
                if late.is_empty() || (at < fixes.len() && rng.random_bool(0.8)) {
                    continue;
                }
                let earliest = late.iter().map(|&k| fixes[k].ts).min().unwrap();
                stored.extend(late.drain(..));
                if tail.last_ts().is_none_or(|last| earliest > last) {
                    let newer = stored.iter().filter(|&&k| fixes[k].ts >= earliest);
                    keep(&mut kept, tail.push(newer.map(|&k| fixes[k]), &ctx));
                } else if let Some((segment, first)) = tail.rewind(earliest) {
                    assert!(segment >= 1 && fixes[*stored.first().unwrap()].ts <= first.ts);
                    kept.split_off(&segment);
                    let again = stored.iter().map(|&k| fixes[k]).skip_while(|f| *f != first);
                    keep(&mut kept, tail.push(again, &ctx));
                    rewinds += 1;
                } else {
                    tail = Tail::default();
                    kept.clear();
                    keep(&mut kept, tail.push(stored.iter().map(|&k| fixes[k]), &ctx));
                }
                let so_far: Vec<Fix> = stored.iter().map(|&k| fixes[k]).collect();
                assert_eq!(
                    answer(&kept, &tail, &ctx),
                    analyze_all(&so_far, &ctx),
                    "seed {seed}"
                );
            }
            assert_eq!(
                answer(&kept, &tail, &ctx),
                analyze_all(&fixes, &ctx),
                "seed {seed}"
            );
        }
        assert!(rewinds > 20, "{rewinds} rewinds");
    }

    /// The live feed's way: fixes arrive a few at a time; what became final is
    /// kept, and the stretch after the last cut is answered afresh each time.
    /// Final rows plus the last provisional answer equal one pass, whatever the
    /// batches.
    #[test]
    fn a_tail_fed_in_batches_ends_where_one_pass_does() {
        let ctx = context();
        for seed in 0..6 {
            let fixes = eventful_vehicle(seed, 6000);
            let whole = analyze_all(&fixes, &ctx);
            let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed + 100);
            let mut tail = Tail::default();
            let mut kept = VehicleAnalysis::default();
            let mut at = 0;
            while at < fixes.len() {
                let n = rng.random_range(1..400).min(fixes.len() - at);
                let done = tail.push(fixes[at..at + n].iter().copied(), &ctx).rows();
                assert!(done.latest.is_none());
                kept.stops.extend(done.stops);
                kept.trips.extend(done.trips);
                kept.events.extend(done.events);
                kept.visits.extend(done.visits);
                kept.daily.extend(done.daily);
                at += n;
                // What a report would read now: kept plus the provisional stretch.
                let open = tail.provisional(&ctx);
                assert_eq!(open.latest, Some(fixes[at - 1]));
            }
            assert!(
                tail.held() < fixes.len() / 2,
                "the tail was cut: {}",
                tail.held()
            );
            let open = tail.provisional(&ctx);
            let mut all = kept.clone();
            all.stops.extend(open.stops);
            all.trips.extend(open.trips);
            all.events.extend(open.events);
            all.visits.extend(open.visits);
            all.daily.extend(open.daily);
            all.latest = open.latest;
            in_one_pass_order(&mut all, &ctx);
            assert_eq!(all, whole, "seed {seed}");
        }
    }
}
