//! The daily rollup: one row per vehicle and local day, so that day and range
//! reports read a handful of rows instead of thousands of fixes.

use super::Context;
use super::Thresholds;
use super::distance::SpanWalk;
use crate::clock::Date;
use crate::model::{DailyRollup, Fix};

/// One vehicle's daily rollup, read a fix at a time as detection settles them, so
/// that a day's figures are worked out once however it is cut into windows (a live
/// vehicle's open day is not measured again at every fix).
///
/// A day's distance is the one span walk over that day's fixes, counted from the
/// vehicle's last fix before it (the step across midnight is the new day's). How
/// its time was spent (driving, idling, parked) and the counts of trips, stops and
/// events are its trips' and stops', left to the caller (0 here).
#[derive(Debug, Clone, Default)]
pub struct Rollup {
    /// The next fix to read (the vehicle's index).
    pub next: usize,
    /// The day of the last fix read, and its figures so far.
    open: Option<(Date, Acc)>,
    /// The last fix read: the next day's distance starts from it.
    last: Option<Fix>,
}

impl Rollup {
    /// Reads `fixes` (the vehicle's from index `base` on, time-ordered) from `next`
    /// up to index `until` of the slice, and returns the
    /// days that ended: those whose every fix, and the one after, is before
    /// `until` (`at_end`: the slice ends the vehicle's fixes, and `until` with it).
    pub fn read(
        &mut self,
        fixes: &[Fix],
        base: usize,
        until: usize,
        ctx: &Context,
        at_end: bool,
    ) -> Vec<(Date, DailyRollup)> {
        let (th, zone) = (&ctx.thresholds, &ctx.zone);
        let mut rows = Vec::new();
        for &f in &fixes[self.next - base..until] {
            let date = zone.local_date(f.ts);
            if self.open.as_ref().is_none_or(|(d, _)| *d != date) {
                rows.extend(self.roll());
                let mut acc = Acc::new(th);
                if let Some(last) = self.last {
                    acc.distance.push(last);
                }
                acc.first_ts = f.ts;
                self.open = Some((date, acc));
            }
            let (_, acc) = self.open.as_mut().expect("opened above");
            acc.distance.push(f);
            acc.max_speed = acc.max_speed.max(f.speed_kmh);
            acc.last_ts = f.ts;
            self.last = Some(f);
        }
        self.next = self.next.max(base + until);
        let ended = match fixes.get(until) {
            Some(after) => self
                .open
                .as_ref()
                .is_some_and(|(d, _)| *d != zone.local_date(after.ts)),
            None => at_end,
        };
        if ended {
            rows.extend(self.roll());
        }
        rows
    }

    /// The open day's row, closed.
    fn roll(&mut self) -> Option<(Date, DailyRollup)> {
        let (date, acc) = self.open.take()?;
        let vehicle_id = self.last.expect("a day holds a fix").vehicle_id;
        Some((date, acc.row(vehicle_id, date)))
    }
}

#[derive(Debug, Clone)]
struct Acc {
    distance: SpanWalk,
    max_speed: f64,
    first_ts: i64,
    last_ts: i64,
}

impl Acc {
    fn new(th: &Thresholds) -> Acc {
        Acc {
            distance: SpanWalk::new(th),
            max_speed: 0.0,
            first_ts: 0,
            last_ts: 0,
        }
    }

    fn row(self, vehicle_id: i64, date: Date) -> DailyRollup {
        let a = self;
        let distance = a.distance.finish();
        DailyRollup {
            vehicle_id,
            date: date.to_string(),
            gps_distance_km: distance.gps_km,
            gap_km: distance.gap_km,
            odometer_distance_km: distance.odometer_km,
            odometer_rejected: distance.odometer_rejected,
            driving_min: 0.0,
            idle_min: 0.0,
            parked_min: 0.0,
            trips: 0,
            stops: 0,
            max_speed_kmh: a.max_speed,
            avg_driving_speed_kmh: 0.0,
            first_ts: a.first_ts,
            last_ts: a.last_ts,
            signal_losses: 0,
            events: 0,
        }
    }
}
