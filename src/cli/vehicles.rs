//! `fleetctl vehicles set PLATE --speed-limit N`: a vehicle's own settings. A limit
//! of its own replaces the fleet's for that vehicle (a geofence's lower limit still
//! wins inside it), and detection re-runs in the same transaction.

use crate::error::{Error, Result};
use crate::{pipeline, report, store};
use clap::Subcommand;
use std::path::PathBuf;

/// `fleetctl vehicles` subcommands.
#[derive(Debug, Subcommand)]
pub enum VehiclesCommand {
    /// Set a vehicle's own speed limit (km/h), or `none` to follow the fleet's again.
    ///
    /// Example: fleetctl vehicles set P-123BCD --speed-limit 90
    Set {
        /// The plate (matched forgivingly: p123bcd, 123BCD).
        plate: String,
        /// km/h from 5 to 200, or `none`.
        #[arg(long, value_name = "KMH|none")]
        speed_limit: String,
    },
}

/// Runs a `vehicles` subcommand on the database at `db`.
pub fn run(db: PathBuf, cmd: VehiclesCommand) -> Result<()> {
    let VehiclesCommand::Set { plate, speed_limit } = cmd;
    let limit = match speed_limit.trim() {
        "none" => None,
        text => Some(
            text.parse::<f64>()
                .ok()
                .filter(|v| (5.0..=200.0).contains(v))
                .ok_or_else(|| {
                    Error::invalid(format!("--speed-limit {text:?} is not a speed limit"))
                        .with_hint("give km/h from 5 to 200, or none for the fleet's limit")
                })?,
        ),
    };
    let vehicle = report::Db::open(&db)?.resolve_plate(&plate)?.clone();
    let (_, summary) = pipeline::edit_and_reanalyze(
        &db,
        |conn| store::set_vehicle_speed_limit(conn, vehicle.id, limit),
        &mut |_| {},
    )?;
    let speeding = summary
        .events
        .iter()
        .find(|(k, _)| *k == "speeding")
        .map_or(0, |(_, n)| *n);
    let said = match limit {
        Some(l) => format!("{} now speeds above {l} km/h", vehicle.plate),
        None => format!("{} follows the fleet's speed limit again", vehicle.plate),
    };
    super::print_stdout(&format!(
        "{said}\nRe-analysed {} vehicles: {speeding} speeding episodes in the database\n",
        summary.vehicles
    ))
}
