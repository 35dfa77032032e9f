//! The daily rollup: one row per vehicle and local day, so that day and range
//! reports read a handful of rows instead of thousands of fixes.

use super::{Context, Segments, motion};
use crate::clock::Date;
use crate::model::{DailyRollup, EventKind, Fix, VehicleAnalysis};
use std::collections::BTreeMap;

#[derive(Default)]
struct Acc {
    gps_m: f64,
    gap_m: f64,
    odo_min: Option<f64>,
    odo_max: Option<f64>,
    odo_complete: bool,
    moving_s: i64,
    idle_s: i64,
    parked_s: i64,
    trips: i64,
    stops: i64,
    max_speed: f64,
    first_ts: i64,
    last_ts: i64,
    signal_losses: i64,
}

/// Rolls one vehicle's analysis up by local day.
pub fn rollup(
    fixes: &[Fix],
    segments: &Segments,
    found: &VehicleAnalysis,
    ctx: &Context,
) -> Vec<DailyRollup> {
    let (th, zone) = (&ctx.thresholds, &ctx.zone);
    let (ranges, spans) = (&segments.stop_ranges, &segments.movement_spans);
    let (stops, trips, events) = (&found.stops, &found.trips, &found.events);
    let mut days: BTreeMap<Date, Acc> = BTreeMap::new();
    for f in fixes {
        let acc = days.entry(zone.local_date(f.ts)).or_insert_with(|| Acc {
            first_ts: f.ts,
            odo_complete: true,
            ..Acc::default()
        });
        acc.last_ts = f.ts;
        acc.max_speed = acc.max_speed.max(f.speed_kmh);
        match f.odometer_km {
            Some(o) => {
                acc.odo_min = Some(acc.odo_min.map_or(o, |m| m.min(o)));
                acc.odo_max = Some(acc.odo_max.map_or(o, |m| m.max(o)));
            }
            None => acc.odo_complete = false,
        }
    }
    for &(a, b) in spans.iter() {
        motion::moving_distance_m(fixes, a, b, th, |f, d, gap| {
            if let Some(acc) = days.get_mut(&zone.local_date(f.ts)) {
                if gap {
                    acc.gap_m += d;
                } else {
                    acc.gps_m += d;
                }
            }
        });
    }
    // Time between consecutive fixes (short gaps only) goes to moving, idle or parked.
    let mut in_stop = vec![false; fixes.len()];
    for &(a, b, _) in ranges.iter() {
        in_stop[a..b].iter_mut().for_each(|x| *x = true);
    }
    for (k, w) in fixes.windows(2).enumerate() {
        let dt = w[1].ts - w[0].ts;
        if dt as f64 > th.signal_loss_min * 60.0 {
            continue;
        }
        if let Some(acc) = days.get_mut(&zone.local_date(w[0].ts)) {
            // Stopped with the ignition unreported counts as parked: idling is
            // only ever claimed from an ignition that says so.
            match (in_stop[k], w[0].ignition) {
                (false, _) => acc.moving_s += dt,
                (true, Some(true)) => acc.idle_s += dt,
                (true, _) => acc.parked_s += dt,
            }
        }
    }
    for t in trips {
        if let Some(acc) = days.get_mut(&zone.local_date(t.start_ts)) {
            acc.trips += 1;
        }
    }
    for s in stops {
        if let Some(acc) = days.get_mut(&zone.local_date(s.start_ts)) {
            acc.stops += 1;
        }
    }
    for e in events.iter().filter(|e| e.kind == EventKind::SignalLoss) {
        if let Some(acc) = days.get_mut(&zone.local_date(e.start_ts)) {
            acc.signal_losses += 1;
        }
    }
    let vehicle_id = fixes.first().map_or(0, |f| f.vehicle_id);
    days.into_iter()
        .map(|(date, a)| {
            let moving_h = a.moving_s as f64 / 3600.0;
            DailyRollup {
                vehicle_id,
                date: date.to_string(),
                gps_distance_km: a.gps_m / 1000.0,
                gap_km: a.gap_m / 1000.0,
                odometer_distance_km: match (a.odo_complete, a.odo_min, a.odo_max) {
                    (true, Some(lo), Some(hi)) => Some(hi - lo),
                    _ => None,
                },
                moving_min: a.moving_s as f64 / 60.0,
                idle_min: a.idle_s as f64 / 60.0,
                parked_min: a.parked_s as f64 / 60.0,
                trips: a.trips,
                stops: a.stops,
                max_speed_kmh: a.max_speed,
                avg_moving_speed_kmh: if moving_h > 0.0 {
                    a.gps_m / 1000.0 / moving_h
                } else {
                    0.0
                },
                first_ts: a.first_ts,
                last_ts: a.last_ts,
                signal_losses: a.signal_losses,
            }
        })
        .collect()
}
