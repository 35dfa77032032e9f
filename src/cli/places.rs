//! `fleetctl places …` and `fleetctl geofences …`: a fleet's own places and
//! geofences read from files, listed and removed; every change re-runs detection in
//! the same transaction, since stop names, visits and events depend on them.

use crate::error::{Error, ErrorCode, Result};
use crate::{pipeline, render, store};
use clap::{Args, Subcommand};
use fleetctl_formats::places as files;
use std::path::{Path, PathBuf};

/// `fleetctl places` subcommands.
#[derive(Debug, Subcommand)]
pub enum PlacesCommand {
    /// Add places from a GeoJSON file (Point features with a "name") or a GeoNames
    /// tab-separated dump (e.g. cities1000.txt from download.geonames.org).
    ///
    /// Example: fleetctl places import cities1000.txt --replace
    Import(PlacesImportArgs),
    /// List the database's places.
    List,
    /// Remove the places with this name.
    Remove {
        /// The place's name, exactly.
        name: String,
    },
}

/// `fleetctl places import` flags.
#[derive(Debug, Args)]
pub struct PlacesImportArgs {
    /// The file.
    file: PathBuf,
    /// Remove every existing place first (the demo's gazetteer, for one).
    #[arg(long)]
    replace: bool,
}

/// `fleetctl geofences` subcommands.
#[derive(Debug, Subcommand)]
pub enum GeofencesCommand {
    /// Add geofences from GeoJSON: Polygon or MultiPolygon features, or Points with
    /// a "radius_m" property (circles). Properties: "name" (required), "kind"
    /// (default zone), "speed_limit_kmh" (optional).
    ///
    /// Example: fleetctl geofences import depots.geojson
    Import {
        /// The GeoJSON file.
        file: PathBuf,
    },
    /// List the database's geofences.
    List,
    /// Remove the geofence with this name (its visits and events go with it).
    Remove {
        /// The geofence's name, exactly.
        name: String,
    },
}

fn skipped_note(skipped: &[(u64, String)]) -> String {
    let mut out = String::new();
    if !skipped.is_empty() {
        out.push_str(&format!("Left out {} entries:\n", skipped.len()));
        for (n, why) in skipped.iter().take(20) {
            out.push_str(&format!("  #{n}: {why}\n"));
        }
        if skipped.len() > 20 {
            out.push_str(&format!("  … and {} more\n", skipped.len() - 20));
        }
    }
    out
}

fn not_found(what: &str, name: &str) -> Error {
    Error::new(ErrorCode::NotFound, format!("no {what} named {name:?}"))
        .with_hint(format!("`fleetctl {what}s list` shows them"))
}

fn reanalysed(db: &store::Location, summary: &pipeline::AnalyzeSummary) -> String {
    render::analyze_summary(Path::new(&db.shown()), summary)
}

/// Runs a `places` subcommand.
pub fn run_places(db: store::Location, cmd: PlacesCommand) -> Result<()> {
    let text = match cmd {
        PlacesCommand::Import(args) => {
            let loaded = files::read_places(&args.file)?;
            if loaded.items.is_empty() {
                return Err(
                    Error::invalid(format!("{}: no place in it", args.file.display()))
                        .with_hint("places are Point features with a \"name\" property"),
                );
            }
            let (_, summary) = pipeline::edit_and_reanalyze(
                &db,
                |conn| {
                    if args.replace {
                        store::remove_places(conn, None)?;
                    }
                    store::insert_places(conn, &loaded.items)
                },
                None,
                &mut |_| {},
            )?;
            format!(
                "Added {} places from {}{}\n{}{}",
                loaded.items.len(),
                args.file.display(),
                if args.replace {
                    " (the old ones removed)"
                } else {
                    ""
                },
                skipped_note(&loaded.skipped),
                reanalysed(&db, &summary)
            )
        }
        PlacesCommand::List => {
            let places = store::read_places(store::open_for_reading(&db)?.as_ref())?;
            let mut out = format!("{} places\n", places.len());
            for p in places {
                out.push_str(&format!(
                    "  {:<40} {:<14} {:>10.5} {:>11.5}\n",
                    p.name, p.kind, p.lat, p.lon
                ));
            }
            out
        }
        PlacesCommand::Remove { name } => {
            let (removed, summary) = pipeline::edit_and_reanalyze(
                &db,
                |conn| match store::remove_places(conn, Some(&name))? {
                    0 => Err(not_found("place", &name)),
                    n => Ok(n),
                },
                None,
                &mut |_| {},
            )?;
            format!(
                "Removed {removed} place(s) named {name:?}\n{}",
                reanalysed(&db, &summary)
            )
        }
    };
    super::print_stdout(&text)
}

/// Runs a `geofences` subcommand.
pub fn run_geofences(db: store::Location, cmd: GeofencesCommand) -> Result<()> {
    let text = match cmd {
        GeofencesCommand::Import { file } => {
            let loaded = files::read_geofences(&file)?;
            if loaded.items.is_empty() {
                return Err(Error::invalid(format!("{}: no geofence in it", file.display()))
                    .with_hint("geofences are Polygon, MultiPolygon, or Point features with radius_m, each with a \"name\""));
            }
            let (_, summary) = pipeline::edit_and_reanalyze(
                &db,
                |conn| {
                    for g in &loaded.items {
                        store::insert_geofence(conn, g)?;
                    }
                    Ok(())
                },
                None,
                &mut |_| {},
            )?;
            format!(
                "Added {} geofences from {}\n{}{}",
                loaded.items.len(),
                file.display(),
                skipped_note(&loaded.skipped),
                reanalysed(&db, &summary)
            )
        }
        GeofencesCommand::List => {
            let geofences = store::read_geofences(store::open_for_reading(&db)?.as_ref())?;
            let mut out = format!("{} geofences\n", geofences.len());
            for g in geofences {
                let c = g.shape.center();
                out.push_str(&format!(
                    "  {:<40} {:<20} {:>10.5} {:>11.5}\n",
                    g.name, g.kind, c.lat, c.lon
                ));
            }
            out
        }
        GeofencesCommand::Remove { name } => {
            let (_, summary) = pipeline::edit_and_reanalyze(
                &db,
                |conn| match store::remove_geofence(conn, &name)? {
                    0 => Err(not_found("geofence", &name)),
                    n => Ok(n),
                },
                None,
                &mut |_| {},
            )?;
            format!("Removed geofence {name:?}\n{}", reanalysed(&db, &summary))
        }
    };
    super::print_stdout(&text)
}
