//! The daily rollup: one row per vehicle and local day, so that day and range
//! reports read a handful of rows instead of thousands of fixes.

use super::Context;
use super::distance::{SpanDistance, span_distance};
use crate::clock::Date;
use crate::model::{DailyRollup, EventKind, Fix, VehicleAnalysis};
use std::collections::BTreeMap;

#[derive(Default)]
struct Acc {
    distance: SpanDistance,
    moving_s: i64,
    idle_s: i64,
    parked_s: i64,
    trips: i64,
    stops: i64,
    max_speed: f64,
    first_ts: i64,
    last_ts: i64,
    signal_losses: i64,
    events: i64,
}

/// Rolls one vehicle's analysis up by local day.
pub fn rollup(
    fixes: &[Fix],
    ranges: &[(usize, usize, crate::geo::LatLon)],
    found: &VehicleAnalysis,
    ctx: &Context,
) -> Vec<DailyRollup> {
    let (th, zone) = (&ctx.thresholds, &ctx.zone);
    let (stops, trips, events) = (&found.stops, &found.trips, &found.events);
    let mut days: BTreeMap<Date, Acc> = BTreeMap::new();
    // A day's distance is the one span distance over that day's fixes, counted from
    // the vehicle's last fix before it (the step across midnight is the new day's).
    let mut start = 0;
    while start < fixes.len() {
        let date = zone.local_date(fixes[start].ts);
        let end = start
            + fixes[start..]
                .iter()
                .take_while(|f| zone.local_date(f.ts) == date)
                .count();
        let day = &fixes[start..end];
        days.insert(
            date,
            Acc {
                distance: span_distance(&fixes[start.saturating_sub(1)..end], th),
                first_ts: day[0].ts,
                last_ts: day[day.len() - 1].ts,
                max_speed: day.iter().map(|f| f.speed_kmh).fold(0.0, f64::max),
                ..Acc::default()
            },
        );
        start = end;
    }
    // Time between consecutive fixes (short gaps only) goes to moving, idle or parked.
    let mut in_stop = vec![false; fixes.len()];
    for &(a, b, _) in ranges.iter() {
        in_stop[a..b].iter_mut().for_each(|x| *x = true);
    }
    for (k, w) in fixes.windows(2).enumerate() {
        let dt = w[1].ts - w[0].ts;
        if dt > th.signal_loss_s() {
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
    for e in events {
        if let Some(acc) = days.get_mut(&zone.local_date(e.start_ts)) {
            acc.events += 1;
            acc.signal_losses += i64::from(e.kind == EventKind::SignalLoss);
        }
    }
    let vehicle_id = fixes.first().map_or(0, |f| f.vehicle_id);
    days.into_iter()
        .map(|(date, a)| {
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
                trips: a.trips,
                stops: a.stops,
                max_speed_kmh: a.max_speed,
                avg_moving_speed_kmh: if moving_h > 0.0 {
                    a.distance.gps_km / moving_h
                } else {
                    0.0
                },
                first_ts: a.first_ts,
                last_ts: a.last_ts,
                signal_losses: a.signal_losses,
                events: a.events,
            }
        })
        .collect()
}
