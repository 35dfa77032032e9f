//! `fleetctl export`: flags become the domain's scope and the formats crate's
//! options; the file is written by `fleetctl_formats::export`, and a line saying
//! what was written goes to stdout.

use crate::error::Result;
use crate::export::{Dataset, Scope};
use crate::report::Db;
use clap::Args;
use fleetctl_formats::export::{ExportOptions, OutFormat, Partition};
use std::path::PathBuf;

/// `fleetctl export` flags.
#[derive(Debug, Args)]
pub struct ExportArgs {
    /// What to export: positions, trips, stops, events, daily. Several (for
    /// example `trips stops daily`) only with --format xlsx: a sheet each.
    #[arg(required = true, value_name = "DATASET")]
    datasets: Vec<String>,

    /// First local date, YYYY-MM-DD, today or yesterday (default: the first day with data).
    #[arg(long, value_name = "DATE")]
    from: Option<String>,

    /// Last local date (default: the last day with data).
    #[arg(long, value_name = "DATE")]
    to: Option<String>,

    /// Only this vehicle (default: the whole fleet).
    #[arg(long, value_name = "PLATE")]
    plate: Option<String>,

    /// csv, parquet, geojson, gpx, kml or xlsx. Default: what -o's extension says,
    /// else csv.
    #[arg(long, value_name = "FORMAT")]
    format: Option<String>,

    /// Write a Hive-style Parquet dataset, a folder per date or vehicle
    /// (date=2026-11-24/part-0.parquet), which DuckDB, Spark, Trino and pandas read
    /// as it is. Needs --format parquet.
    #[arg(long, value_name = "date|vehicle")]
    partition_by: Option<String>,

    /// The file (or folder, with --partition-by) to write. Default: DATASET.EXT in
    /// the current folder. - writes the file to standard output (not a partitioned
    /// dataset); a folder, link, device or FIFO there is refused.
    #[arg(short = 'o', long = "output", value_name = "PATH")]
    output: Option<PathBuf>,

    /// Replace the output if it exists (it is never overwritten otherwise).
    #[arg(long)]
    force: bool,
}

/// Runs `fleetctl export`.
pub fn run(db_path: crate::store::Location, args: ExportArgs) -> Result<()> {
    let datasets = args
        .datasets
        .iter()
        .flat_map(|d| d.split(','))
        .filter(|d| !d.trim().is_empty())
        .map(Dataset::parse)
        .collect::<Result<Vec<_>>>()?;
    let format = match (&args.format, &args.output) {
        (Some(f), _) => OutFormat::parse(f)?,
        (None, Some(path)) => OutFormat::from_path(path).unwrap_or(OutFormat::Csv),
        (None, None) => OutFormat::Csv,
    };
    let partition = args
        .partition_by
        .as_deref()
        .map(Partition::parse)
        .transpose()?;
    let output = args.output.clone().unwrap_or_else(|| {
        let name = datasets
            .iter()
            .map(|d| d.as_str())
            .collect::<Vec<_>>()
            .join("-");
        match partition {
            Some(_) => PathBuf::from(name),
            None => PathBuf::from(format!("{name}.{}", format.extension())),
        }
    });
    let opts = ExportOptions {
        datasets,
        format,
        partition,
        output,
        force: args.force,
    };
    // Refuse what cannot work before opening the database.
    fleetctl_formats::export::check(&opts)?;
    let db = Db::open(&db_path)?;
    let scope = Scope::resolve(
        &db,
        args.from.as_deref(),
        args.to.as_deref(),
        args.plate.as_deref(),
    )?;
    let mut bar = super::ProgressBar::new("exporting");
    let summary = fleetctl_formats::export::export(&db, &scope, &opts, &mut |f| bar.set(f));
    bar.finish();
    let summary = summary.map_err(|e| match e.hint {
        Some(_) => e,
        None => e.with_hint("nothing was written under the target name"),
    })?;
    let said = crate::render::export_summary(&summary, &scope);
    if crate::output::is_stdout(&opts.output) {
        // The file is standard output: what was written is said on standard error.
        eprint!("{said}");
        return Ok(());
    }
    super::print_stdout(&said)
}
