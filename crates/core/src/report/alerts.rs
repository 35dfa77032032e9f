//! `alerts` (`fleetctl query alerts`): speeding, long stops and signal losses over a
//! range — counts by kind and by vehicle, and the most severe of each kind, ranked
//! in the kind's own unit (never adding km/h to minutes).

use super::{Db, List, ReportSpec, round1};
use crate::error::Result;
use crate::model::{Event, EventDetail, EventKind};
use crate::store::read;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// The alert kinds, in the order they are listed.
pub const ALERT_KINDS: [EventKind; 3] = [
    EventKind::Speeding,
    EventKind::LongStop,
    EventKind::SignalLoss,
];
/// The kinds of alert (the `type` filter).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum AlertType {
    /// Above the speed limit.
    Speeding,
    /// A long stop.
    LongStop,
    /// A signal loss on shift.
    SignalLoss,
}

impl AlertType {
    /// The type a filter names.
    pub fn parse(name: &str) -> Option<AlertType> {
        match name {
            "speeding" => Some(AlertType::Speeding),
            "long_stop" => Some(AlertType::LongStop),
            "signal_loss" => Some(AlertType::SignalLoss),
            _ => None,
        }
    }
}
/// How many of the most severe alerts are listed per kind.
pub const MOST_SEVERE: usize = 5;

/// Range and filters.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AlertsRequest {
    /// First local date: YYYY-MM-DD, today or yesterday (default: 6 days before to)
    #[schemars(extend("x-kind" = "date"))]
    pub from: Option<String>,
    /// Last local date (default today)
    #[schemars(extend("x-kind" = "date"))]
    pub to: Option<String>,
    /// Only this kind: speeding, long_stop or signal_loss
    #[serde(rename = "type")]
    #[schemars(with = "Option<AlertType>")]
    pub kind: Option<String>,
    /// Only this vehicle
    #[schemars(extend("x-kind" = "plate"))]
    pub plate: Option<String>,
}

/// The thresholds behind the alerts.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Thresholds {
    /// Speeding is above this speed, km/h.
    pub speed_limit_kmh: f64,
    /// …for at least this long, seconds.
    pub speeding_min_s: i64,
    /// Long stops last at least this many minutes.
    pub long_stop_min: f64,
    /// Signal losses are gaps longer than this many minutes.
    pub signal_loss_min: f64,
}

/// Alerts of one kind.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct KindCount {
    /// Kind.
    pub kind: &'static str,
    /// How many.
    pub count: usize,
    /// The unit severity is measured in for this kind.
    pub severity_unit: &'static str,
}

/// Alerts of one vehicle.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct VehicleCount {
    /// Plate.
    pub plate: String,
    /// Driver.
    pub driver: String,
    /// All alerts.
    pub total: usize,
    /// Speeding episodes.
    pub speeding: usize,
    /// Long stops.
    pub long_stop: usize,
    /// Signal losses.
    pub signal_loss: usize,
}

/// One alert.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct AlertRow {
    /// Plate.
    pub plate: String,
    /// Kind.
    pub kind: &'static str,
    /// Severity in the kind's unit (km/h over the limit, minutes stopped, minutes lost).
    pub severity: f64,
    /// That unit.
    pub severity_unit: &'static str,
    /// When it began.
    pub at: String,
    /// When it ended.
    pub until: String,
    /// Where, for people.
    pub place: String,
    /// Kind-specific figures.
    #[schemars(with = "serde_json::Map<String, Value>")]
    pub detail: Value,
}

/// The alerts over a range.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct AlertsReport {
    /// First local date.
    pub from: String,
    /// Last local date.
    pub to: String,
    /// The data clock.
    pub data_now: String,
    /// The kind filter, if any.
    #[serde(rename = "type")]
    pub kind: Option<AlertType>,
    /// The vehicle filter (resolved plate), if any.
    pub plate: Option<String>,
    /// The thresholds detection used for this data.
    pub thresholds: Thresholds,
    /// Alerts in all.
    pub total: usize,
    /// Counts by kind.
    pub by_kind: Vec<KindCount>,
    /// Counts by vehicle, most alerts first.
    pub by_vehicle: List<VehicleCount>,
    /// The most severe of each kind (up to 5 each), worst first within the kind.
    pub most_severe: List<AlertRow>,
}

/// An alert's severity in its kind's own unit.
fn severity(e: &Event) -> (f64, &'static str) {
    let amount = match &e.detail {
        EventDetail::Speeding(d) => d.over_limit_kmh,
        EventDetail::LongStop(d) => d.duration_min,
        EventDetail::SignalLoss(d) => d.minutes_lost,
        // Not alert kinds: never asked for here.
        EventDetail::Geofence(_) | EventDetail::Ignition(_) => 0.0,
    };
    (amount, severity_unit(e.kind))
}

/// Runs the report.
pub fn run(db: &Db, req: &AlertsRequest) -> Result<AlertsReport> {
    let (from, to) = db.resolve_range(req.from.as_deref(), req.to.as_deref())?;
    let vehicle = req
        .plate
        .as_deref()
        .map(|p| db.resolve_plate(p))
        .transpose()?;
    let kinds: Vec<EventKind> = match &req.kind {
        Some(k) => ALERT_KINDS
            .into_iter()
            .filter(|x| x.as_str() == k)
            .collect(),
        None => ALERT_KINDS.to_vec(),
    };
    let events = read::events_between(
        db.conn(),
        vehicle.map(|v| v.id),
        &kinds,
        db.day_bounds(from).0,
        db.day_bounds(to).1,
    )?;

    let by_kind = kinds
        .iter()
        .map(|&k| KindCount {
            kind: k.as_str(),
            count: events.iter().filter(|e| e.kind == k).count(),
            severity_unit: severity_unit(k),
        })
        .collect();
    let mut per_vehicle: BTreeMap<i64, [usize; 3]> = BTreeMap::new();
    for e in &events {
        let slot = ALERT_KINDS.iter().position(|k| *k == e.kind).unwrap_or(0);
        per_vehicle.entry(e.vehicle_id).or_default()[slot] += 1;
    }
    let mut by_vehicle: Vec<VehicleCount> = per_vehicle
        .into_iter()
        .map(|(id, c)| {
            let v = db.vehicle_of(id)?;
            Ok(VehicleCount {
                plate: v.plate.clone(),
                driver: v.driver.clone(),
                total: c.iter().sum(),
                speeding: c[0],
                long_stop: c[1],
                signal_loss: c[2],
            })
        })
        .collect::<Result<_>>()?;
    by_vehicle.sort_by(|a, b| b.total.cmp(&a.total).then_with(|| a.plate.cmp(&b.plate)));

    let mut most_severe = Vec::new();
    for &k in &kinds {
        let mut of_kind: Vec<&Event> = events.iter().filter(|e| e.kind == k).collect();
        of_kind.sort_by(|a, b| {
            severity(b)
                .0
                .total_cmp(&severity(a).0)
                .then(a.start_ts.cmp(&b.start_ts))
        });
        for e in of_kind.into_iter().take(MOST_SEVERE) {
            let row = super::trip_summary::event_row(db, e);
            let (sev, unit) = severity(e);
            most_severe.push(AlertRow {
                plate: db.vehicle_of(e.vehicle_id)?.plate.clone(),
                kind: row.kind,
                severity: round1(sev),
                severity_unit: unit,
                at: row.at,
                until: row.until,
                place: row.place,
                detail: row.detail,
            });
        }
    }
    Ok(AlertsReport {
        from: from.to_string(),
        to: to.to_string(),
        data_now: db.time(db.now_ts),
        kind: req.kind.as_deref().and_then(AlertType::parse),
        plate: vehicle.map(|v| v.plate.clone()),
        thresholds: Thresholds {
            speed_limit_kmh: db.thresholds.speed_limit_kmh,
            speeding_min_s: db.thresholds.speeding_min_s,
            long_stop_min: db.thresholds.long_stop_min,
            signal_loss_min: db.thresholds.signal_loss_min,
        },
        total: events.len(),
        by_kind,
        by_vehicle: List::capped(by_vehicle),
        most_severe: List::capped(most_severe),
    })
}

fn severity_unit(k: EventKind) -> &'static str {
    match k {
        EventKind::Speeding => "km/h over the limit",
        EventKind::LongStop => "minutes stopped",
        _ => "minutes without fixes",
    }
}

/// The registry entry.
pub const SPEC: ReportSpec = ReportSpec {
    tool: "alerts",
    cli: "alerts",
    title: "Alerts over a date range",
    description: "Speeding episodes (above the speed limit, 80 km/h by default, for at least 20 s), long stops \
(40 min or more by default) and signal losses (over 5 min without fixes while the engine was on, by default), \
detected from the positions; the thresholds in force are echoed in the answer over an inclusive range \
of local dates (default: the last 7 days up to today; at most 92 days). Returns the total, counts by kind, counts \
by vehicle, and the 5 most severe alerts of each kind ranked in that kind's own unit (km/h over the limit, minutes \
stopped, minutes without fixes) with time and place. Filter with type and plate. Use it for 'any speeding this \
week?' or 'which driver has the most alerts?'.",
    input: super::schema::derived_input::<AlertsRequest>,
    rows: "most_severe",
    columns: &[(
        "most_severe",
        &["plate", "kind", "severity", "severity_unit", "at", "place"],
    )],
    run: |db, args| super::invoke(db, args, run),
    output_schema: super::schema::derived::<AlertsReport>,
    draws: false,
};
