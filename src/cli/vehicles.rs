//! `fleetctl vehicles`: add a vehicle (for a tracker that will push its positions),
//! and a vehicle's own settings. A speed limit of its own replaces the fleet's for
//! that vehicle (a geofence's lower limit still wins inside it), and detection
//! re-runs in the same transaction; a device id says which pushed positions are its.

use crate::error::{Error, Result};
use crate::{pipeline, report, store};
use clap::Subcommand;

/// `fleetctl vehicles` subcommands.
#[derive(Debug, Subcommand)]
pub enum VehiclesCommand {
    /// Add a vehicle, optionally with the id its tracker or phone app pushes
    /// positions with (`serve --http --ingest`).
    ///
    /// Example: fleetctl vehicles add P-123BCD --device-id 860000000000001
    Add {
        /// The plate, as it should be shown.
        plate: String,
        /// The device's own id: OsmAnd's and Traccar Client's `id`, Traccar's
        /// `uniqueId`, OwnTracks' topic (`owntracks/USER/DEVICE`).
        #[arg(long, value_name = "ID")]
        device_id: Option<String>,
    },
    /// Set a vehicle's own speed limit (km/h) or device id; `none` clears either.
    ///
    /// Examples: fleetctl vehicles set P-123BCD --speed-limit 90
    ///           fleetctl vehicles set P-123BCD --device-id 860000000000001
    #[command(arg_required_else_help = true)]
    Set {
        /// The plate (matched forgivingly: p123bcd, 123BCD).
        plate: String,
        /// km/h from 5 to 200, or `none` to follow the fleet's.
        #[arg(long, value_name = "KMH|none")]
        speed_limit: Option<String>,
        /// The id its tracker pushes positions with, or `none`.
        #[arg(long, value_name = "ID|none")]
        device_id: Option<String>,
    },
    /// Remove a vehicle (one added by mistake, or by --auto-register from a device
    /// that is not yours). A vehicle with positions is removed only with
    /// --delete-positions N, N its number of positions (the refusal says it):
    /// they and every row derived from them go with it, for good (`fleetctl
    /// export positions --plate PLATE` keeps a copy first).
    ///
    /// Examples: fleetctl vehicles remove 48241179
    ///           fleetctl vehicles remove 48241179 --delete-positions 3
    Remove {
        /// The plate, exactly as the fleet has it.
        plate: String,
        /// Delete its positions too; N must be their number.
        #[arg(long, value_name = "N")]
        delete_positions: Option<i64>,
    },
}

/// A device id as given: trimmed, not empty, at most 64 characters without control
/// characters; `none` clears.
fn device_id_arg(text: &str) -> Result<Option<String>> {
    let id = text.trim();
    if id == "none" {
        return Ok(None);
    }
    let max = crate::live::protocols::MAX_DEVICE_ID_CHARS;
    if id.is_empty() || id.chars().count() > max || id.chars().any(char::is_control) {
        return Err(
            Error::invalid(format!("--device-id {text:?} is not a device id")).with_hint(format!(
                "give the id the device sends (1 to {max} characters), or none"
            )),
        );
    }
    Ok(Some(id.to_string()))
}

/// Runs a `vehicles` subcommand on the database at `db`.
pub fn run(db: store::Location, cmd: VehiclesCommand) -> Result<()> {
    match cmd {
        VehiclesCommand::Add { plate, device_id } => {
            let plate = plate.trim().to_string();
            if plate.is_empty() || plate.chars().count() > 64 || plate.chars().any(char::is_control)
            {
                return Err(Error::invalid(format!("{plate:?} is not a plate"))
                    .with_hint("give 1 to 64 printable characters, e.g. P-123BCD"));
            }
            let device_id = device_id
                .as_deref()
                .map(device_id_arg)
                .transpose()?
                .flatten();
            store::with_write(&db, |conn| {
                store::live::add_vehicle(conn, &plate, device_id.as_deref())
            })?;
            let with = device_id.map_or(String::new(), |d| format!(" (device {d})"));
            super::print_stdout(&format!("Added {plate}{with}\n"))
        }
        VehiclesCommand::Remove {
            plate,
            delete_positions,
        } => remove(&db, &plate, delete_positions),
        VehiclesCommand::Set {
            plate,
            speed_limit,
            device_id,
        } => {
            if speed_limit.is_none() && device_id.is_none() {
                return Err(Error::invalid("nothing to set")
                    .with_hint("give --speed-limit KMH|none or --device-id ID|none"));
            }
            let vehicle = report::Db::open(&db)?.resolve_plate(&plate)?.clone();
            if let Some(text) = device_id {
                let id = device_id_arg(&text)?;
                store::with_write(&db, |conn| {
                    store::live::set_device_id(conn, vehicle.id, id.as_deref())
                })?;
                super::print_stdout(&match id {
                    Some(id) => format!("{} now pushes as device {id}\n", vehicle.plate),
                    None => format!("{} has no device id now\n", vehicle.plate),
                })?;
            }
            match speed_limit {
                Some(text) => set_speed_limit(&db, &vehicle, &text),
                None => Ok(()),
            }
        }
    }
}

/// `vehicles remove`: refused while the vehicle has positions, unless their number
/// is given (so that a typo never deletes a week of someone's fixes).
fn remove(db: &store::Location, plate: &str, delete_positions: Option<i64>) -> Result<()> {
    let removed = store::with_write(db, |conn| {
        store::live::remove_vehicle(conn, plate, delete_positions)
    })?;
    super::print_stdout(&format!("Removed {plate} and its {removed} positions\n"))
}

fn set_speed_limit(
    db: &store::Location,
    vehicle: &crate::model::Vehicle,
    text: &str,
) -> Result<()> {
    let limit = match text.trim() {
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
    let (_, summary) = pipeline::edit_and_reanalyze(
        db,
        |conn| store::set_vehicle_speed_limit(conn, vehicle.id, limit),
        Some(&[vehicle.id]),
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
        "{said}\nRe-analysed {}: {speeding} speeding episodes\n",
        vehicle.plate
    ))
}
