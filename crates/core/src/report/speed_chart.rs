//! `speed_chart` (`fleetctl chart PLATE --date D`): one vehicle's speed over its local
//! day as a picture, for seeing a day's profile at a glance — the limit that applied,
//! the speeding episodes detection found, the stops with their minutes, the signal
//! losses and the ignition. The domain gathers what to draw (`ChartInput`) from the
//! store and from detection's results, and never draws: `render::chart` does.

use super::{Answer, Db, List, ReportSpec, round1};
use crate::analyze;
use crate::clock::{Date, FleetZone};
use crate::error::{Error, ErrorCode, Result};
use crate::model::{EventDetail, EventKind};
use crate::store::read;
use serde::{Deserialize, Serialize};

/// The default image width, pixels.
pub const DEFAULT_WIDTH_PX: u32 = 1200;
/// The default image height, pixels.
pub const DEFAULT_HEIGHT_PX: u32 = 560;

/// One fix as the chart plots it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ChartPoint {
    /// UTC epoch seconds.
    pub ts: i64,
    /// Ground speed, km/h.
    pub speed_kmh: f64,
    /// The limit that applied at this fix (a limited geofence's, else the vehicle's
    /// own, else the fleet's), km/h.
    pub limit_kmh: f64,
    /// Ignition on, off, or not reported.
    pub ignition: Option<bool>,
}

/// A speeding episode to shade.
#[derive(Debug, Clone, PartialEq)]
pub struct ChartSpeeding {
    /// First fix above the limit, UTC epoch seconds.
    pub start_ts: i64,
    /// Last fix above the limit.
    pub end_ts: i64,
    /// Its highest speed, km/h.
    pub max_speed_kmh: f64,
    /// The limit it broke, km/h.
    pub limit_kmh: f64,
}

/// A stop to shade as a band.
#[derive(Debug, Clone, PartialEq)]
pub struct ChartStop {
    /// First stationary fix, UTC epoch seconds.
    pub start_ts: i64,
    /// Last stationary fix.
    pub end_ts: i64,
    /// Its length, minutes.
    pub duration_min: f64,
}

/// A signal loss: the fix before the gap and the fix after.
#[derive(Debug, Clone, PartialEq)]
pub struct ChartGap {
    /// The last fix before the gap, UTC epoch seconds.
    pub start_ts: i64,
    /// The first fix after it.
    pub end_ts: i64,
    /// Minutes without fixes.
    pub minutes_lost: f64,
}

/// Everything a speed chart shows: the data `render::chart` draws.
#[derive(Debug, Clone, PartialEq)]
pub struct ChartInput {
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// First title line (plate, driver, date).
    pub title: String,
    /// Second title line (figures of the day).
    pub subtitle: String,
    /// The fleet's zone: the time axis is local time.
    pub zone: FleetZone,
    /// The local date drawn.
    pub date: Date,
    /// Start of the time axis (a local hour at or before the first fix), UTC epoch
    /// seconds.
    pub from_ts: i64,
    /// End of the time axis (a local hour at or after the last fix).
    pub to_ts: i64,
    /// The fixes, in time order, with the limit at each.
    pub points: Vec<ChartPoint>,
    /// Gaps between fixes longer than this many seconds (the signal-loss threshold)
    /// break the line.
    pub gap_s: i64,
    /// The vehicle's own limit, else the fleet's, km/h: the dashed limit line.
    pub limit_kmh: f64,
    /// What that limit is, for the line's label: `fleet limit` or `own limit`.
    pub limit_label: String,
    /// Speeding episodes (as detection found them).
    pub speeding: Vec<ChartSpeeding>,
    /// Stops that began this day.
    pub stops: Vec<ChartStop>,
    /// Signal losses detection found this day.
    pub signal_losses: Vec<ChartGap>,
    /// The limited geofences whose lower limit applied to some fix, with it (km/h).
    pub zone_limits: Vec<(String, f64)>,
}

/// Which vehicle and day, and how big.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SpeedChartRequest {
    /// Plate, e.g. P-123BCD
    #[schemars(extend("x-kind" = "plate", "x-positional" = true))]
    pub plate: String,
    /// Local date: YYYY-MM-DD, today or yesterday (default today)
    #[schemars(extend("x-kind" = "date"))]
    pub date: Option<String>,
    /// Image width in pixels, 320–2048 (default 1200)
    #[schemars(range(min = super::route_map::MIN_SIZE_PX, max = super::route_map::MAX_SIZE_PX))]
    pub width: Option<u32>,
    /// Image height in pixels, 320–2048 (default 560)
    #[schemars(range(min = super::route_map::MIN_SIZE_PX, max = super::route_map::MAX_SIZE_PX))]
    pub height: Option<u32>,
}

/// A limited geofence whose lower limit applied to some of the day's fixes.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct ZoneLimitRow {
    /// The geofence's name.
    pub geofence: String,
    /// Its limit, km/h.
    pub limit_kmh: f64,
    /// Minutes the vehicle spent under that limit this day.
    pub inside_min: f64,
}

/// What the chart shows.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct SpeedChartReport {
    /// Plate.
    pub plate: String,
    /// Driver.
    pub driver: String,
    /// The local date drawn.
    pub date: String,
    /// The data clock ("now").
    pub data_now: String,
    /// First fix of the day.
    pub first_fix_at: String,
    /// Last fix of the day.
    pub last_fix_at: String,
    /// Fixes plotted.
    pub fixes: usize,
    /// Start of the time axis (local time).
    pub chart_from: String,
    /// End of the time axis.
    pub chart_to: String,
    /// The limit line drawn, km/h: the vehicle's own limit, else the fleet's.
    pub limit_kmh: f64,
    /// `vehicle` (its own limit) or `fleet`.
    pub limit_source: analyze::LimitSource,
    /// Geofences whose lower limit applied to some fixes (drawn as a lower limit line
    /// there); empty when none did.
    pub zone_limits: List<ZoneLimitRow>,
    /// Highest speed, km/h.
    pub max_speed_kmh: f64,
    /// Speeding episodes shaded: detection's speeding events that began this day (as
    /// `events --kind speeding` lists them).
    pub speeding: usize,
    /// Stops shaded as bands: those that began this day (as `trip_summary` counts them).
    pub stops: usize,
    /// Signal losses drawn as breaks with a band.
    pub signal_losses: usize,
    /// Image width, pixels.
    pub width: u32,
    /// Image height, pixels.
    pub height: u32,
    /// Size of the PNG, bytes.
    pub png_bytes: usize,
}

/// The time axis: from the local hour at or before `first` to the local hour at or
/// after `last` (at least an hour), within the day.
fn axis(zone: &FleetZone, day: (i64, i64), first: i64, last: i64) -> (i64, i64) {
    let from = first - zone.local_seconds_of_day(first) % 3600;
    let past = zone.local_seconds_of_day(last) % 3600;
    let to = if past == 0 { last } else { last + 3600 - past };
    let to = to.max(from + 3600);
    (from.max(day.0), to.min(day.1))
}

/// `1 stop`, `3 stops`.
fn counted(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// The chart's summary and the data to draw it from (`render::call` draws the PNG).
pub fn run(db: &Db, req: &SpeedChartRequest) -> Result<Answer> {
    let v = db.resolve_plate(&req.plate)?;
    let date = db.resolve_date(req.date.as_deref())?;
    let day = db.day_bounds(date);
    let width = req.width.unwrap_or(DEFAULT_WIDTH_PX);
    let height = req.height.unwrap_or(DEFAULT_HEIGHT_PX);
    let fixes = read::fixes_between(db.conn(), v.id, day.0, day.1)?;
    if fixes.len() < 2 {
        let hint = if fixes.is_empty() {
            db.no_data_note(v, true, &date.to_string())?
                .unwrap_or_default()
        } else {
            // Only days the chart can draw: a hint never names one it refuses.
            let days = read::days_with_two_fixes(db.conn(), v.id)?;
            if days.is_empty() {
                format!("{} has no day with two fixes or more", v.plate)
            } else {
                format!(
                    "days with two fixes or more for {}: {}",
                    v.plate,
                    days.join(", ")
                )
            }
        };
        let what = if fixes.is_empty() {
            "no fixes"
        } else {
            "a single fix, nothing to chart,"
        };
        return Err(Error::new(
            ErrorCode::NoData,
            format!("{} has {what} on {date}", v.plate),
        )
        .with_hint(hint));
    }
    let own = read::vehicle_speed_limits(db.conn())?.get(&v.id).copied();
    let (limit_kmh, limit_source) = analyze::own_or_fleet_limit(own, db.thresholds.speed_limit_kmh);
    // Only the geofences whose limit is below the vehicle's can lower it.
    let limited: Vec<crate::geo::Geofence> = db
        .geofences
        .iter()
        .filter(|g| g.speed_limit_kmh.is_some_and(|l| l < limit_kmh))
        .cloned()
        .collect();
    let gap_s = db.thresholds.signal_loss_s();
    let mut zone_limits: Vec<ZoneLimitRow> = Vec::new();
    let mut points = Vec::with_capacity(fixes.len());
    for (i, f) in fixes.iter().enumerate() {
        let (limit, source) =
            analyze::speed_limit_at(f, own, db.thresholds.speed_limit_kmh, &limited);
        if let analyze::LimitSource::Geofence(name) = source {
            let seconds = fixes
                .get(i + 1)
                .map_or(0, |n| n.ts - f.ts)
                .min(gap_s)
                .max(0);
            match zone_limits.iter_mut().find(|z| z.geofence == name) {
                Some(z) => z.inside_min += seconds as f64 / 60.0,
                None => zone_limits.push(ZoneLimitRow {
                    geofence: name,
                    limit_kmh: limit,
                    inside_min: seconds as f64 / 60.0,
                }),
            }
        }
        points.push(ChartPoint {
            ts: f.ts,
            speed_kmh: f.speed_kmh,
            limit_kmh: limit,
            ignition: f.ignition,
        });
    }
    for z in &mut zone_limits {
        z.inside_min = round1(z.inside_min);
    }
    let stops: Vec<ChartStop> = read::stops_between(db.conn(), v.id, day.0, day.1)?
        .iter()
        .map(|s| ChartStop {
            start_ts: s.start_ts,
            end_ts: s.end_ts,
            duration_min: s.duration_s() as f64 / 60.0,
        })
        .collect();
    let events = read::events_between(
        db.conn(),
        Some(v.id),
        &[EventKind::Speeding, EventKind::SignalLoss],
        day.0,
        day.1,
    )?;
    let mut speeding = Vec::new();
    let mut signal_losses = Vec::new();
    for e in &events {
        match &e.detail {
            EventDetail::Speeding(d) => speeding.push(ChartSpeeding {
                start_ts: e.start_ts,
                end_ts: e.end_ts,
                max_speed_kmh: d.max_speed_kmh,
                limit_kmh: d.limit_kmh,
            }),
            EventDetail::SignalLoss(d) => signal_losses.push(ChartGap {
                start_ts: e.start_ts,
                end_ts: e.end_ts,
                minutes_lost: d.minutes_lost,
            }),
            _ => {}
        }
    }
    let (first, last) = (fixes[0].ts, fixes[fixes.len() - 1].ts);
    let (from_ts, to_ts) = axis(&db.zone, day, first, last);
    let max_speed = fixes.iter().map(|f| f.speed_kmh).fold(0.0, f64::max);
    let limit_label = match &limit_source {
        analyze::LimitSource::Vehicle => "own limit",
        analyze::LimitSource::Fleet => "fleet limit",
        analyze::LimitSource::Geofence(_) => "zone limit",
    };
    let input = ChartInput {
        width,
        height,
        title: format!("{} · speed on {date} · {}", v.plate, v.driver),
        subtitle: format!(
            "max {max_speed:.0} km/h · {limit_label} {limit_kmh} km/h · {} · {} · {} · {}–{}",
            counted(speeding.len(), "speeding episode", "speeding episodes"),
            counted(stops.len(), "stop", "stops"),
            counted(signal_losses.len(), "signal loss", "signal losses"),
            db.zone.hhmm(first),
            db.zone.hhmm(last)
        ),
        zone: db.zone.clone(),
        date,
        from_ts,
        to_ts,
        points,
        gap_s,
        limit_kmh,
        limit_label: limit_label.to_string(),
        zone_limits: zone_limits
            .iter()
            .map(|z| (z.geofence.clone(), z.limit_kmh))
            .collect(),
        speeding,
        stops,
        signal_losses,
    };
    // The picture's size is filled in when `render::call` draws it.
    let report = SpeedChartReport {
        plate: v.plate.clone(),
        driver: v.driver.clone(),
        date: date.to_string(),
        data_now: db.time(db.now_ts),
        first_fix_at: db.time(first),
        last_fix_at: db.time(last),
        fixes: fixes.len(),
        chart_from: db.time(from_ts),
        chart_to: db.time(to_ts),
        limit_kmh,
        limit_source,
        zone_limits: List::capped(zone_limits),
        max_speed_kmh: round1(max_speed),
        speeding: input.speeding.len(),
        stops: input.stops.len(),
        signal_losses: input.signal_losses.len(),
        width,
        height,
        png_bytes: 0,
    };
    super::drawn(report, super::Drawing::Speed(input))
}

/// The registry entry.
pub const SPEC: ReportSpec = ReportSpec {
    tool: "speed_chart",
    cli: "chart",
    title: "Chart of a vehicle's speed over a day",
    description: "Draws one vehicle's speed over a local day as a PNG chart (x: local time, y: km/h): the speed \
line, broken where fixes are missing (signal losses shaded grey and labelled with their minutes), the limit that \
applied as a dashed line (the vehicle's own limit, else the fleet's; a geofence's lower limit where it applied), \
speeding episodes shaded red with their top speed, stops shaded as bands labelled with their minutes, and an \
ignition strip (on, off, not reported) along the bottom. Returns a short summary (the limit and where it comes from, \
counts of speeding episodes, stops and signal losses, first and last fix) and the image. Use it to see a day's \
speed profile; use alerts or events to list the speeding episodes, trip_summary for the day's numbers, route_map \
for where the vehicle went. A day without fixes is a no_data error that names the days with data.",
    input: super::schema::derived_input::<SpeedChartRequest>,
    rows: "",
    columns: &[],
    run: |db, args| super::invoke_drawing(db, args, run),
    output_schema: super::schema::derived::<SpeedChartReport>,
    draws: true,
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_time_axis_runs_from_the_hour_before_the_first_fix_to_the_hour_after_the_last() {
        let zone = FleetZone::default();
        let date = Date::parse("2026-11-24").unwrap();
        let day = (zone.day_start(date), zone.day_end(date));
        let at = |h: i64, m: i64| zone.at(date, h * 3600 + m * 60);
        assert_eq!(
            axis(&zone, day, at(6, 47), at(15, 36)),
            (at(6, 0), at(16, 0))
        );
        assert_eq!(
            axis(&zone, day, at(7, 0), at(9, 0)),
            (at(7, 0), at(9, 0)),
            "whole hours stay"
        );
        assert_eq!(
            axis(&zone, day, at(7, 10), at(7, 20)),
            (at(7, 0), at(8, 0)),
            "at least an hour"
        );
        assert_eq!(
            axis(&zone, day, at(23, 10), at(23, 50)),
            (at(23, 0), day.1),
            "within the day"
        );
    }
}
