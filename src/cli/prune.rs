//! `fleetctl prune --older-than 400d [--archive DIR]`: retention. The positions of
//! local days older than that go — written first, with `--archive`, as the export's
//! Hive-partitioned Parquet dataset, so the history stays readable by DuckDB or
//! Spark — and the vehicles that lost positions are analysed again in the same
//! transaction, so every derived row is what a full analysis of the positions kept
//! would give.

use crate::error::{Error, ErrorCode, Result};
use crate::export::{Dataset, Scope};
use crate::pipeline;
use crate::report::Db;
use clap::Args;
use fleetctl_formats::export::{ExportOptions, OutFormat, Partition};
use std::path::PathBuf;

#[derive(Debug, Args)]
pub(super) struct PruneArgs {
    /// Remove the positions of local days older than this many days before today
    /// (the database's clock): 400d, or 400.
    #[arg(long, value_name = "DAYS")]
    older_than: String,

    /// First write the removed days' positions here, as a Hive-partitioned Parquet
    /// dataset (date=YYYY-MM-DD/part-0.parquet); a new folder each time.
    #[arg(long, value_name = "DIR")]
    archive: Option<PathBuf>,
}

pub(super) fn run(db_path: crate::store::Location, args: PruneArgs) -> Result<()> {
    let text = args.older_than.trim();
    let days: i64 = text
        .strip_suffix('d')
        .unwrap_or(text)
        .parse()
        .ok()
        .filter(|d| *d >= 1)
        .ok_or_else(|| {
            Error::invalid(format!(
                "--older-than {:?} is not a number of days",
                args.older_than
            ))
            .with_hint("give whole days, at least 1: e.g. --older-than 400d")
        })?;
    let db = Db::open(&db_path)?;
    let keep_from = db.today().add_days(-days);
    let Some((first, _)) = db.data_dates()? else {
        return super::print_stdout("Nothing to prune: the database has no positions\n");
    };
    let last_pruned = keep_from.add_days(-1);
    if first.as_str() > last_pruned.to_string().as_str() {
        return super::print_stdout(&format!(
            "Nothing to prune: no positions before {keep_from} (the first are of {first})\n"
        ));
    }
    let archived = match &args.archive {
        None => String::new(),
        Some(dir) => {
            // `--archive archive/2026-12`: the folder of archives is made if missing.
            if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
                std::fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
            }
            let opts = ExportOptions {
                datasets: vec![Dataset::Positions],
                format: OutFormat::Parquet,
                partition: Some(Partition::Date),
                output: dir.clone(),
                force: false,
            };
            fleetctl_formats::export::check(&opts)
                .map_err(|e| e.with_hint("give a new folder for each prune's archive"))?;
            let scope = Scope::resolve(&db, Some(&first), Some(&last_pruned.to_string()), None)?;
            let mut bar = super::ProgressBar::new("archiving");
            let summary = fleetctl_formats::export::export(&db, &scope, &opts, &mut |f| bar.set(f));
            bar.finish();
            let summary = summary
                .map_err(|e| Error::new(e.code, format!("{} (nothing was pruned)", e.message)))?;
            let rows: u64 = summary.rows.iter().map(|r| r.1).sum();
            format!(
                "; archived first to {} ({} positions in {} Parquet files, a folder per date)",
                dir.display(),
                crate::render::thousands(rows),
                summary.files
            )
        }
    };
    let before_ts = db.zone.day_start(keep_from);
    drop(db);
    let (deleted, vehicles) =
        pipeline::prune_before(&db_path, before_ts).map_err(|e| match e.code {
            ErrorCode::Busy => {
                e.with_hint("the archive was written; nothing was pruned: run it again")
            }
            _ => e,
        })?;
    super::print_stdout(&format!(
        "Pruned {} positions of {} vehicles from before {keep_from}{archived}; their trips, stops, events and days analysed again\n",
        crate::render::thousands(deleted as u64),
        vehicles
    ))
}
