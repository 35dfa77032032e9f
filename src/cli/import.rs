//! `fleetctl import`: flags become read options, the formats crate reads the files
//! into the domain's ingest, and the summary is printed; rejected rows go to
//! `--rejects` when asked.

use crate::error::{Error, Result};
use crate::ingest::{self, ImportOptions, OdometerUnit, Reject, SpeedUnit};
use clap::Args;
use fleetctl_formats::{Format, ReadOptions, columns};
use std::io::Write;
use std::path::PathBuf;

/// `fleetctl import` flags.
#[derive(Debug, Args)]
pub struct ImportArgs {
    /// Files to import. The format is told from the content and extension: CSV or
    /// TSV with a header row, Parquet, Traccar's CSV export or JSON positions, GPX,
    /// GeoJSON.
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,

    /// The fleet's IANA time zone (e.g. Europe/London). Required to create a
    /// database; naive times in the files are read in it. An existing database keeps
    /// its zone and refuses another.
    #[arg(long, value_name = "ZONE")]
    time_zone: Option<String>,

    /// Read every file as this format instead of detecting it:
    /// csv, traccar-csv, traccar-json, gpx, geojson, parquet.
    #[arg(long, value_name = "FORMAT")]
    format: Option<String>,

    /// Name the column of a field when its name is not a well-known one (repeat
    /// for several). FIELD: plate, time, lat, lon, speed, heading, ignition,
    /// odometer. Example: --map plate=unit_name --map time="GPS Time".
    #[arg(long = "map", value_name = "FIELD=COLUMN")]
    map: Vec<String>,

    /// Unit of the speed cells: kmh, knots, mps, mph. Default: what the column's
    /// name says (speed_kmh), else knots for Traccar, mps for GPX, kmh otherwise.
    #[arg(long, value_name = "UNIT")]
    speed_unit: Option<String>,

    /// Unit of the odometer cells: km, m, mi. Default: what the column's name says
    /// (odometer_m), else m for Traccar, km otherwise.
    #[arg(long, value_name = "UNIT")]
    odometer_unit: Option<String>,

    /// The vehicle of rows that name none (a GPX from a phone).
    #[arg(long, value_name = "PLATE")]
    plate: Option<String>,

    /// Write every rejected row (file, line, reason, value) to this CSV file.
    #[arg(long, value_name = "FILE")]
    rejects: Option<PathBuf>,

    /// Refuse the import (nothing is written) when a file's speeds or odometer agree
    /// with another unit than the one they are read in. Without it, the summary
    /// names the suspicion and the flag that fixes it.
    #[arg(long)]
    strict_units: bool,
}

fn read_options(args: &ImportArgs) -> Result<ReadOptions> {
    let format = args
        .format
        .as_deref()
        .map(|f| {
            Format::parse(f).ok_or_else(|| {
                Error::invalid(format!("--format {f:?} is not a format fleetctl reads"))
                    .with_hint(format!("use one of {}", Format::NAMES))
            })
        })
        .transpose()?;
    let speed_unit = args
        .speed_unit
        .as_deref()
        .map(|u| {
            SpeedUnit::parse(u).ok_or_else(|| {
                Error::invalid(format!("--speed-unit {u:?} is not a speed unit"))
                    .with_hint(format!("use one of {}", SpeedUnit::NAMES))
            })
        })
        .transpose()?;
    let odometer_unit = args
        .odometer_unit
        .as_deref()
        .map(|u| {
            OdometerUnit::parse(u).ok_or_else(|| {
                Error::invalid(format!("--odometer-unit {u:?} is not a distance unit"))
                    .with_hint(format!("use one of {}", OdometerUnit::NAMES))
            })
        })
        .transpose()?;
    let map = args
        .map
        .iter()
        .map(|m| columns::parse_map(m))
        .collect::<Result<Vec<_>>>()?;
    Ok(ReadOptions {
        format,
        map,
        speed_unit,
        odometer_unit,
        plate: args.plate.clone(),
    })
}

/// `--rejects FILE`: one CSV line per rejected row (file, line, reason, detail),
/// written beside FILE and put in its place when the import ends.
struct RejectsFile {
    path: PathBuf,
    out: std::io::BufWriter<std::fs::File>,
    aside: crate::output::Aside,
}

impl RejectsFile {
    const HEADER: &'static str = "file,line,reason,detail";

    fn create(path: &std::path::Path) -> Result<RejectsFile> {
        let aside =
            crate::output::Aside::create(path, "--rejects", crate::output::May::ReplaceFile)?;
        let file = aside.file.try_clone().map_err(|e| Error::io(path, e))?;
        let mut out = std::io::BufWriter::new(file);
        writeln!(out, "{}", Self::HEADER).map_err(|e| Error::io(path, e))?;
        Ok(RejectsFile {
            path: path.to_path_buf(),
            out,
            aside,
        })
    }

    fn flush(&mut self) -> Result<()> {
        self.out.flush().map_err(|e| Error::io(&self.path, e))
    }

    /// Puts the complete file in place.
    fn finish(mut self) -> Result<()> {
        self.flush()?;
        self.aside.commit()
    }
}

impl ingest::RejectSink for RejectsFile {
    fn reject(&mut self, r: &Reject) -> Result<()> {
        writeln!(
            self.out,
            "{},{},{},{}",
            crate::render::csv_field(r.file),
            r.line,
            r.reason.as_str(),
            crate::render::csv_field(&r.detail)
        )
        .map_err(|e| Error::io(&self.path, e))
    }

    fn restart(&mut self) -> Result<()> {
        use std::io::Seek;
        self.flush()?;
        let file = self.out.get_mut();
        file.set_len(0)
            .and_then(|()| file.rewind())
            .and_then(|()| writeln!(self.out, "{}", Self::HEADER))
            .map_err(|e| Error::io(&self.path, e))
    }
}

/// Runs the import and prints its summary.
pub fn run(db: crate::store::Location, args: ImportArgs) -> Result<()> {
    let opts = read_options(&args)?;
    for f in &args.files {
        if !f.exists() {
            return Err(Error::new(
                crate::error::ErrorCode::Io,
                format!("no file at {}", f.display()),
            )
            .with_hint("check the path; nothing was imported"));
        }
    }
    let mut rejects_file = match &args.rejects {
        Some(path) => Some(RejectsFile::create(path)?),
        None => None,
    };
    let mut no_file = ingest::NoRejectsFile;
    let rejects: &mut dyn ingest::RejectSink = match rejects_file.as_mut() {
        Some(file) => file,
        None => &mut no_file,
    };
    let mut bar = super::ProgressBar::new("importing");
    let n = args.files.len() as f64;
    let files = args.files.clone();
    let mut read = |ingest: &mut ingest::Ingest| -> Result<()> {
        for (i, path) in files.iter().enumerate() {
            fleetctl_formats::read_file(path, &opts, ingest, &mut |f| {
                bar.set((i as f64 + f) / n * 0.9)
            })?;
        }
        Ok(())
    };
    let import_opts = ImportOptions {
        db,
        time_zone: args.time_zone.clone(),
        wall_now: crate::clock::wall_clock_now(),
        strict_units: args.strict_units,
    };
    let summary = ingest::import(&import_opts, &mut read, rejects, &mut |_| {});
    bar.finish();
    // The import's own outcome first: a rejects file that could not be put in place
    // must not hide it.
    let finished = rejects_file.map(RejectsFile::finish).transpose();
    let summary = summary?;
    finished?;
    super::print_stdout(&crate::render::import_summary(&summary))?;
    nothing_imported(&summary.files)
}

/// An error when rows were read but none imported (into an existing database; a new
/// one is not created at all): the summary above says why, the hint what to do.
fn nothing_imported(files: &[ingest::FileTally]) -> Result<()> {
    let read: u64 = files.iter().map(|f| f.rows_read).sum();
    let imported: u64 = files.iter().map(|f| f.imported).sum();
    if read == 0 || imported > 0 {
        return Ok(());
    }
    // A file imported again adds nothing, and that is no error (the rows its first
    // import refused are refused again, as the summary says).
    let known: u64 = files
        .iter()
        .flat_map(|f| f.rejected.iter())
        .filter(|(r, _)| {
            matches!(
                r,
                ingest::RejectReason::AlreadyStored | ingest::RejectReason::ExactDuplicate
            )
        })
        .map(|(_, n)| n)
        .sum();
    if known > 0 {
        return Ok(());
    }
    Err(Error::new(
        crate::error::ErrorCode::NoData,
        format!(
            "none of the {read} rows read was imported: {}",
            ingest::rejected_by_reason(files)
        ),
    )
    .with_hint(ingest::nothing_imported_hint(files)))
}
