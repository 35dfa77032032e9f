//! `mileage_ranking` (`fleetctl query mileage`): vehicles ranked by kilometres over
//! a range, with active days, daily average and the fleet total.

use super::{Db, List, ReportSpec, round1, round2};
use crate::error::Result;
use crate::store::read;
use serde::{Deserialize, Serialize};

/// The range.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MileageRankingRequest {
    /// First local date: YYYY-MM-DD, today or yesterday (default: 6 days before to)
    #[schemars(extend("x-kind" = "date"))]
    pub from: Option<String>,
    /// Last local date (default today)
    #[schemars(extend("x-kind" = "date"))]
    pub to: Option<String>,
}

/// One vehicle's kilometres.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct MileageRow {
    /// 1 for the most kilometres.
    pub rank: usize,
    /// Plate.
    pub plate: String,
    /// Driver.
    pub driver: String,
    /// Kilometres over the range.
    pub distance_km: f64,
    /// Days with any fix.
    pub active_days: usize,
    /// Kilometres per active day.
    pub daily_average_km: f64,
    /// `odometer` when every day's readings earned their use, `gps` when none did, `mixed` when some did (each day counts its own source).
    pub distance_source: super::DistanceSource,
    /// Why some day's odometer readings were not used: `decreasing` or `implausible`.
    pub odometer_rejected: Option<String>,
    /// False for a vehicle out of service.
    pub active: bool,
}

/// The ranking.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct MileageRankingReport {
    /// First local date.
    pub from: String,
    /// Last local date.
    pub to: String,
    /// Days in the range.
    pub days: i64,
    /// The data clock.
    pub data_now: String,
    /// Kilometres of the whole fleet.
    pub fleet_total_km: f64,
    /// Every vehicle, most kilometres first.
    pub vehicles: List<MileageRow>,
}

/// Runs the report.
pub fn run(db: &Db, req: &MileageRankingRequest) -> Result<MileageRankingReport> {
    let (from, to) = db.resolve_range(req.from.as_deref(), req.to.as_deref())?;
    let days = read::daily_between(db.conn(), None, &from.to_string(), &to.to_string())?;
    let mut by_vehicle: std::collections::HashMap<i64, Vec<&crate::model::DailyRollup>> =
        std::collections::HashMap::new();
    for d in &days {
        by_vehicle.entry(d.vehicle_id).or_default().push(d);
    }
    let mut rows: Vec<MileageRow> = db
        .vehicles
        .iter()
        .map(|(v, _)| {
            let mine: &[_] = by_vehicle.get(&v.id).map_or(&[], Vec::as_slice);
            // A range's km is the sum of its days' (so one day asked alone gives
            // the daily_summary's figure).
            let km: f64 = mine.iter().map(|d| d.distance().km()).sum();
            let on_odometer = mine
                .iter()
                .filter(|d| d.odometer_distance_km.is_some())
                .count();
            let source = match on_odometer {
                0 => super::DistanceSource::Gps,
                n if n == mine.len() => super::DistanceSource::Odometer,
                _ => super::DistanceSource::Mixed,
            };
            let odometer_rejected = mine
                .iter()
                .find_map(|d| d.odometer_rejected)
                .map(|r| r.as_str().to_string());
            MileageRow {
                rank: 0,
                plate: v.plate.clone(),
                driver: v.driver.clone(),
                distance_km: round2(km),
                active_days: mine.len(),
                daily_average_km: if mine.is_empty() {
                    0.0
                } else {
                    round1(km / mine.len() as f64)
                },
                distance_source: source,
                odometer_rejected,
                active: v.active,
            }
        })
        .collect();
    rows.sort_by(|a, b| {
        b.distance_km
            .total_cmp(&a.distance_km)
            .then_with(|| a.plate.cmp(&b.plate))
    });
    for (i, r) in rows.iter_mut().enumerate() {
        r.rank = i + 1;
    }
    Ok(MileageRankingReport {
        from: from.to_string(),
        to: to.to_string(),
        days: to.days_since_epoch() - from.days_since_epoch() + 1,
        data_now: db.time(db.now_ts),
        fleet_total_km: round2(rows.iter().map(|r| r.distance_km).sum()),
        vehicles: List::capped(rows),
    })
}

/// The registry entry.
pub const SPEC: ReportSpec = ReportSpec {
    tool: "mileage_ranking",
    cli: "mileage",
    title: "Kilometres by vehicle over a date range",
    description: "Every vehicle ranked by kilometres driven over an inclusive range of local dates (default: the \
last 7 days up to today; at most 92 days), with active days (days with any fix), the daily average over active \
days, which source the kilometres came from (odometer, gps, or mixed when days differ; odometer_rejected says why an \
odometer was not believed), and the fleet total. A range's km are the sum of its days', as daily_summary gives them. Use it for 'who drove the \
most this week?' or fleet totals.",
    input: super::schema::derived_input::<MileageRankingRequest>,
    rows: "vehicles",
    columns: &[(
        "vehicles",
        &[
            "rank",
            "plate",
            "driver",
            "distance_km",
            "active_days",
            "daily_average_km",
            "distance_source",
        ],
    )],
    run: |db, args| super::invoke(db, args, run),
    output_schema: super::schema::derived::<MileageRankingReport>,
    draws: false,
};
