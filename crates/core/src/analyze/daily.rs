//! The daily rollup: one row per vehicle and local day, so that day and range
//! reports read a handful of rows instead of thousands of fixes.

use super::Context;
use super::distance::{SpanDistance, span_distance};
use crate::clock::Date;
use crate::model::{DailyRollup, Fix};

/// Rolls up the local days of one vehicle's `fixes` (time-ordered) that begin at
/// index `from` or later and end before index `until` (`fixes.len()` when the slice
/// ends with the vehicle's data), and says where the first day left out begins. A
/// day's distance is the one span distance over that day's fixes, counted from the
/// vehicle's last fix before it (the step across midnight is the new day's); the
/// time between consecutive fixes (short gaps only) goes to moving, idle or parked
/// by `in_stop` (a fix that opens an interval inside a stop). The counts of trips,
/// stops and events are left to the caller (0 here).
pub fn day_rows(
    fixes: &[Fix],
    from: usize,
    until: usize,
    in_stop: &[bool],
    ctx: &Context,
) -> (Vec<(Date, DailyRollup)>, Option<usize>) {
    let (th, zone) = (&ctx.thresholds, &ctx.zone);
    let mut rows = Vec::new();
    let mut start = from;
    while start < fixes.len() {
        let date = zone.local_date(fixes[start].ts);
        let end = start
            + fixes[start..]
                .iter()
                .take_while(|f| zone.local_date(f.ts) == date)
                .count();
        if end > until {
            return (rows, Some(start));
        }
        let day = &fixes[start..end];
        let mut acc = Acc {
            distance: span_distance(&fixes[start.saturating_sub(1)..end], th),
            first_ts: day[0].ts,
            last_ts: day[day.len() - 1].ts,
            max_speed: day.iter().map(|f| f.speed_kmh).fold(0.0, f64::max),
            ..Acc::default()
        };
        for k in start..end.min(fixes.len() - 1) {
            let dt = fixes[k + 1].ts - fixes[k].ts;
            if dt > th.signal_loss_s() {
                continue;
            }
            // Stopped with the ignition unreported counts as parked: idling is
            // only ever claimed from an ignition that says so.
            match (in_stop[k], fixes[k].ignition) {
                (false, _) => acc.moving_s += dt,
                (true, Some(true)) => acc.idle_s += dt,
                (true, _) => acc.parked_s += dt,
            }
        }
        rows.push((date, acc.row(fixes[start].vehicle_id, date)));
        start = end;
    }
    (rows, None)
}

#[derive(Default)]
struct Acc {
    distance: SpanDistance,
    moving_s: i64,
    idle_s: i64,
    parked_s: i64,
    max_speed: f64,
    first_ts: i64,
    last_ts: i64,
}

impl Acc {
    fn row(self, vehicle_id: i64, date: Date) -> DailyRollup {
        let a = self;
        let moving_h = a.moving_s as f64 / 3600.0;
        DailyRollup {
            vehicle_id,
            date: date.to_string(),
            gps_distance_km: a.distance.gps_km,
            gap_km: a.distance.gap_km,
            odometer_distance_km: a.distance.odometer_km,
            odometer_rejected: a.distance.odometer_rejected,
            moving_min: a.moving_s as f64 / 60.0,
            idle_min: a.idle_s as f64 / 60.0,
            parked_min: a.parked_s as f64 / 60.0,
            trips: 0,
            stops: 0,
            max_speed_kmh: a.max_speed,
            avg_moving_speed_kmh: if moving_h > 0.0 {
                a.distance.gps_km / moving_h
            } else {
                0.0
            },
            first_ts: a.first_ts,
            last_ts: a.last_ts,
            signal_losses: 0,
            events: 0,
        }
    }
}
