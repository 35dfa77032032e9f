//! `list_vehicles` (`fleetctl query vehicles`): the fleet, for discovery — plates,
//! kinds, drivers, and which days each vehicle has data.

use super::{Db, List, ReportSpec};
use crate::error::Result;
use crate::store::read;
use serde::{Deserialize, Serialize};

/// No arguments.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListVehiclesRequest {}

/// One vehicle.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct VehicleRow {
    /// Plate.
    pub plate: String,
    /// `truck`, `van`, `pickup` or `minibus`.
    pub kind: String,
    /// Driver.
    pub driver: String,
    /// False: out of service, no positions.
    pub active: bool,
    /// First local date with data.
    pub first_date: Option<String>,
    /// Last local date with data.
    pub last_date: Option<String>,
    /// Days with data.
    pub days_with_data: usize,
}

/// The fleet.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct ListVehiclesReport {
    /// The data clock.
    pub data_now: String,
    /// The fleet's time zone.
    pub time_zone: String,
    /// Vehicles, by plate.
    pub vehicles: List<VehicleRow>,
}

/// Runs the report.
pub fn run(db: &Db, _req: &ListVehiclesRequest) -> Result<ListVehiclesReport> {
    let mut rows = Vec::new();
    let data: std::collections::HashMap<i64, (String, String, i64)> =
        read::data_days_by_vehicle(db.conn())?
            .into_iter()
            .map(|(id, first, last, n)| (id, (first, last, n)))
            .collect();
    for (v, _) in &db.vehicles {
        let days = data.get(&v.id);
        rows.push(VehicleRow {
            plate: v.plate.clone(),
            kind: v.kind.clone(),
            driver: v.driver.clone(),
            active: v.active,
            first_date: days.map(|d| d.0.clone()),
            last_date: days.map(|d| d.1.clone()),
            days_with_data: days.map_or(0, |d| d.2 as usize),
        });
    }
    rows.sort_by(|a, b| a.plate.cmp(&b.plate));
    Ok(ListVehiclesReport {
        data_now: db.time(db.now_ts),
        time_zone: db.zone.name.clone(),
        vehicles: List::capped(rows),
    })
}

/// The registry entry.
pub const SPEC: ReportSpec = ReportSpec {
    tool: "list_vehicles",
    cli: "vehicles",
    title: "The fleet's vehicles",
    description: "Every vehicle of the fleet: plate, kind (truck, van, pickup, minibus), driver, whether it is \
active (an inactive vehicle is out of service and has no positions), and the first and last local dates with data. \
Also returns the data clock ('now') and the time zone. Call it first to learn valid plates and dates.",
    input: super::schema::derived_input::<ListVehiclesRequest>,
    rows: "vehicles",
    columns: &[],
    run: |db, args| super::invoke(db, args, run),
    output_schema: super::schema::derived::<ListVehiclesReport>,
    draws: false,
};
