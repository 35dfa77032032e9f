//! `fleetctl generate`: the synthetic demo fleet, kept or brought up to date when a
//! database is already there and `--if-missing` is given.

use super::*;
use crate::clock::{self, FleetZone};
use crate::error::Result;
use crate::{render, store, synth};
use clap::Args;
use std::path::PathBuf;

#[derive(Debug, Args)]
pub(super) struct GenerateArgs {
    /// The data clock's "now": local time in the fleet's zone (America/Guatemala,
    /// UTC−06:00). The last day of data ends here. Default: the current time.
    #[arg(long, visible_alias = "now", value_name = "YYYY-MM-DDTHH:MM")]
    ahora: Option<String>,

    /// Random seed; the same seed and --ahora give the same database.
    #[arg(long, default_value_t = 7)]
    seed: u64,

    /// Number of vehicles (1..=5000); one in fifteen is out of service.
    #[arg(long, default_value_t = 15, value_name = "N")]
    vehicles: u32,

    /// Days of data ending on the --ahora day (1..=366).
    #[arg(long, default_value_t = 7, value_name = "N")]
    days: u32,

    /// Replace an existing fleetctl database (never any other file).
    #[arg(long, conflicts_with = "if_missing")]
    force: bool,

    /// Do nothing if a fleetctl database is already there (for scripts and `make run`).
    #[arg(long)]
    if_missing: bool,
}

pub(super) fn generate(db: store::Location, args: GenerateArgs) -> Result<()> {
    // PostgreSQL's fleet is built in a scratch file first (`generate_into_postgres`).
    let (path, postgres) = match db {
        store::Location::File(path) => (path, None),
        store::Location::Postgres(target) => (PathBuf::new(), Some(target)),
    };
    let zone = FleetZone::default();
    let now_ts = match &args.ahora {
        Some(text) => zone.parse_local_minute(text)?,
        None => clock::wall_clock_now() / 60 * 60,
    };
    let mut opts = synth::GenerateOptions {
        path,
        now_ts,
        seed: args.seed,
        vehicles: args.vehicles,
        days: args.days,
        force: args.force,
        zone,
    };
    synth::validate(&opts)?;
    if let Some(target) = postgres {
        return generate_into_postgres(opts, &target, args.if_missing);
    }
    if args.if_missing {
        match store::probe(&opts.path)? {
            store::Probe::Fleet { schema_version } if schema_version == store::SCHEMA_VERSION => {
                return print_stdout(&format!(
                    "{} already exists; kept it (pass --force to regenerate)\n",
                    opts.path.display()
                ));
            }
            // The previous schema: brought up to date in place (an import's fleet
            // may live at the default path), never replaced.
            store::Probe::Fleet { schema_version } if store::is_upgradable(schema_version) => {
                let mut bar = ProgressBar::new("bringing it up to date");
                crate::pipeline::reanalyze(&opts.path, &|_| {}, &mut |f| bar.set(f))?;
                bar.finish();
                return print_stdout(&format!(
                    "{} had schema version {schema_version}; brought it up to version {} and kept it\n",
                    opts.path.display(),
                    store::SCHEMA_VERSION
                ));
            }
            // Our own database, of a schema this binary cannot read: replace it.
            store::Probe::Fleet { schema_version } => {
                crate::logging::info(&format!(
                    "{} has schema version {schema_version}; regenerating it as version {}",
                    opts.path.display(),
                    store::SCHEMA_VERSION
                ));
                opts.force = true;
            }
            _ => {}
        }
    }
    let mut bar = ProgressBar::new("generating");
    let summary = synth::generate(&opts, &mut |f| bar.set(f));
    bar.finish();
    let text = render::generate_summary(&summary?);
    print_stdout(&text)
}

/// `generate --db postgres://…`: the fleet is built in a scratch SQLite file (written
/// in key order, the fast way), then copied into PostgreSQL in one transaction
/// (`store::pg::load_fleet`), so both stores hold the same rows.
fn generate_into_postgres(
    mut opts: synth::GenerateOptions,
    target: &store::pg::Target,
    if_missing: bool,
) -> Result<()> {
    // Said before the work: a fleet there is kept or refused, unless --force.
    let mut client = target.connect()?;
    if let store::pg::Found::Fleet { schema_version } = store::pg::probe(&mut client, target)? {
        if if_missing {
            return print_stdout(&format!(
                "{} holds a fleet already; kept it (pass --force to regenerate)\n",
                target.display()
            ));
        }
        if !opts.force {
            return Err(store::pg::holds_a_fleet(
                target,
                schema_version,
                store::pg::FORCE_HINT,
            ));
        }
    }
    drop(client);
    let scratch = Scratch::new();
    opts.path = scratch.0.clone();
    let force = std::mem::replace(&mut opts.force, true);
    let mut bar = ProgressBar::new("generating");
    let summary = synth::generate(&opts, &mut |f| bar.set(f));
    bar.finish();
    let mut summary = summary?;
    let source = store::open_read_only(&scratch.0)?;
    let mut bar = ProgressBar::new("copying into PostgreSQL");
    store::pg::load_fleet(&source, target, force, &mut |f| bar.set(f))?;
    bar.finish();
    summary.path = PathBuf::from(target.display());
    print_stdout(&render::generate_summary(&summary))
}

/// The scratch database in the temporary folder, removed when dropped (and, if this
/// process is killed, by the next run's clean-up).
struct Scratch(PathBuf);

impl Scratch {
    const PREFIX: &str = "fleetctl-generate-";

    fn new() -> Scratch {
        let dir = std::env::temp_dir();
        crate::scratch::remove_abandoned(&dir, Self::PREFIX);
        Scratch(dir.join(format!("{}{}.db", Self::PREFIX, std::process::id())))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        for suffix in ["", "-journal", "-wal", "-shm"] {
            let mut name = self.0.clone().into_os_string();
            name.push(suffix);
            let _ = std::fs::remove_file(name);
        }
    }
}
