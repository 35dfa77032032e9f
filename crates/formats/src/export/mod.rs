//! `fleetctl export`: the domain's rows (`fleetctl_core::export`, one vehicle-day
//! at a time) written as the files people and data engines use — CSV and Parquet
//! (polars), a Hive-style partitioned Parquet dataset, GeoJSON, GPX, KML and XLSX.
//!
//! Every export is written under a hidden temporary name beside the target and
//! renamed into place when complete, so an interrupted export never leaves a
//! half-written file under the name asked for; an existing target is replaced only
//! when the caller says so (`--force`).

mod geo;
mod tabular;
mod xlsx;

use fleetctl_core::error::{Error, Result};
use fleetctl_core::export::{self, Chunk, Dataset, ExportSummary, Order, Scope};
use fleetctl_core::report::Db;
use std::path::{Path, PathBuf};

/// The file formats `export` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutFormat {
    /// Comma-separated values with a header row; times as RFC 3339 UTC text.
    Csv,
    /// Apache Parquet; times as UTC timestamps (milliseconds).
    Parquet,
    /// A GeoJSON FeatureCollection: lines for positions and trips, points for stops and events.
    GeoJson,
    /// GPX 1.1: a track per vehicle-day (positions) or trip; waypoints for stops and events.
    Gpx,
    /// KML 2.2: the same as GPX, as placemarks.
    Kml,
    /// An Excel workbook: one sheet per dataset, typed cells, times in the fleet's zone.
    Xlsx,
}

impl OutFormat {
    /// The names `--format` accepts.
    pub const NAMES: &'static str = "csv, parquet, geojson, gpx, kml, xlsx";

    /// Reads a format name.
    pub fn parse(text: &str) -> Result<OutFormat> {
        Ok(match text.trim().to_ascii_lowercase().as_str() {
            "csv" => OutFormat::Csv,
            "parquet" => OutFormat::Parquet,
            "geojson" | "json" => OutFormat::GeoJson,
            "gpx" => OutFormat::Gpx,
            "kml" => OutFormat::Kml,
            "xlsx" | "excel" => OutFormat::Xlsx,
            _ => {
                return Err(Error::invalid(format!("no export format {text:?}"))
                    .with_hint(format!("accepted: {}", OutFormat::NAMES)));
            }
        })
    }

    /// The format an output path's extension names, if any.
    pub fn from_path(path: &Path) -> Option<OutFormat> {
        let ext = path.extension()?.to_str()?;
        OutFormat::parse(ext).ok()
    }

    /// Its usual file extension.
    pub fn extension(self) -> &'static str {
        match self {
            OutFormat::Csv => "csv",
            OutFormat::Parquet => "parquet",
            OutFormat::GeoJson => "geojson",
            OutFormat::Gpx => "gpx",
            OutFormat::Kml => "kml",
            OutFormat::Xlsx => "xlsx",
        }
    }
}

/// How a Parquet dataset is split into folders.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Partition {
    /// `date=2026-11-24/part-0.parquet`.
    Date,
    /// `plate=P-123BCD/part-0.parquet`.
    Vehicle,
}

impl Partition {
    /// Reads `date` or `vehicle`.
    pub fn parse(text: &str) -> Result<Partition> {
        match text.trim().to_ascii_lowercase().as_str() {
            "date" => Ok(Partition::Date),
            "vehicle" | "plate" => Ok(Partition::Vehicle),
            _ => Err(Error::invalid(format!("no partitioning by {text:?}"))
                .with_hint("accepted: date, vehicle")),
        }
    }

    /// The Hive key of its folders.
    fn key(self) -> &'static str {
        match self {
            Partition::Date => "date",
            Partition::Vehicle => "plate",
        }
    }
}

/// What to write, and where.
#[derive(Debug, Clone)]
pub struct ExportOptions {
    /// The datasets (several only for XLSX: a sheet each).
    pub datasets: Vec<Dataset>,
    /// The file format.
    pub format: OutFormat,
    /// A Parquet dataset split into folders, when asked.
    pub partition: Option<Partition>,
    /// The file (or, partitioned, the folder) to write.
    pub output: PathBuf,
    /// Replace an existing output.
    pub force: bool,
}

/// Checks that the options make sense together before any work is done.
pub fn check(opts: &ExportOptions) -> Result<()> {
    let names = || {
        opts.datasets
            .iter()
            .map(|d| d.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    if opts.datasets.is_empty() {
        return Err(Error::invalid("no dataset to export")
            .with_hint(format!("name one of {}", Dataset::NAMES)));
    }
    if opts.datasets.len() > 1 && opts.format != OutFormat::Xlsx {
        return Err(Error::invalid(format!(
            "{} datasets ({}) in one {} file",
            opts.datasets.len(),
            names(),
            opts.format.extension()
        ))
        .with_hint("export one dataset per file, or several as the sheets of one --format xlsx"));
    }
    if let Some(p) = opts.partition
        && opts.format != OutFormat::Parquet
    {
        return Err(Error::invalid(format!(
            "--partition-by {} writes a Parquet dataset, not {}",
            p.key(),
            opts.format.extension()
        ))
        .with_hint("add --format parquet, or leave out --partition-by"));
    }
    if matches!(
        opts.format,
        OutFormat::Gpx | OutFormat::Kml | OutFormat::GeoJson
    ) && let Some(d) = opts.datasets.iter().find(|d| !d.has_geometry())
    {
        return Err(Error::invalid(format!(
            "{} rows are not places: they cannot be written as {}",
            d.as_str(),
            opts.format.extension()
        ))
        .with_hint("export daily as csv, parquet or xlsx"));
    }
    if fleetctl_core::output::is_stdout(&opts.output) {
        if opts.partition.is_some() {
            return Err(
                Error::invalid("--partition-by writes a folder, not standard output")
                    .with_hint("give -o the name of a new folder"),
            );
        }
        return Ok(());
    }
    fleetctl_core::output::check(&opts.output, "-o", may(opts))
}

/// What `-o` may replace: nothing without `--force`; with it, a file or a dataset
/// folder fleetctl wrote.
fn may(opts: &ExportOptions) -> fleetctl_core::output::May {
    match opts.force {
        false => fleetctl_core::output::May::Create,
        true => fleetctl_core::output::May::ReplaceDataset {
            marker: DATASET_MARKER,
        },
    }
}

/// The file that marks a dataset folder as fleetctl's own.
const DATASET_MARKER: &str = "_fleetctl_dataset";

/// One writer of a format: takes chunks in order, then finishes its file.
trait Sink: Send {
    /// Writes one vehicle-day.
    fn write(&mut self, chunk: Chunk) -> Result<()>;
    /// Completes the file; the bytes written.
    fn finish(self: Box<Self>) -> Result<u64>;
}

/// A sink run on a thread of its own, so that encoding and writing overlap the
/// reading of the next rows (a Parquet file's zstd and the positions' SQLite reads
/// are the two big costs). At most a few chunks wait between them.
struct Threaded {
    chunks: Option<std::sync::mpsc::SyncSender<Chunk>>,
    done: Option<std::thread::JoinHandle<Result<u64>>>,
}

impl Threaded {
    fn start(mut sink: Box<dyn Sink + Send>) -> Threaded {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Chunk>(64);
        let done = std::thread::spawn(move || {
            for chunk in rx {
                sink.write(chunk)?;
            }
            sink.finish()
        });
        Threaded {
            chunks: Some(tx),
            done: Some(done),
        }
    }

    fn join(&mut self) -> Result<u64> {
        self.chunks.take();
        match self.done.take().map(std::thread::JoinHandle::join) {
            Some(Ok(result)) => result,
            Some(Err(_)) => Err(Error::internal("the export's writer thread panicked")),
            None => Ok(0),
        }
    }
}

impl Sink for Threaded {
    fn write(&mut self, chunk: Chunk) -> Result<()> {
        let sent = self.chunks.as_ref().map(|tx| tx.send(chunk));
        match sent {
            Some(Ok(())) => Ok(()),
            // The writer stopped: its own error says why.
            _ => self
                .join()
                .and(Err(Error::internal("the export's writer thread stopped"))),
        }
    }

    fn finish(mut self: Box<Self>) -> Result<u64> {
        self.join()
    }
}

fn open_sink(format: OutFormat, path: &Path, db: &Db, dataset: Dataset) -> Result<Box<dyn Sink>> {
    let file = || {
        std::fs::File::create(path)
            .map_err(|e| Error::io(path, e).with_hint("choose a writable folder with -o"))
    };
    Ok(match format {
        OutFormat::Csv => Box::new(Threaded::start(Box::new(tabular::TableSink::csv(
            file()?,
            path,
            dataset,
        )?))),
        OutFormat::Parquet => Box::new(Threaded::start(Box::new(tabular::TableSink::parquet(
            file()?,
            path,
            dataset,
            None,
        )?))),
        OutFormat::GeoJson => Box::new(geo::GeoJsonSink::new(file()?, path, dataset)?),
        OutFormat::Gpx => Box::new(geo::GpxSink::new(file()?, path, dataset)?),
        OutFormat::Kml => Box::new(geo::KmlSink::new(file()?, path, dataset)?),
        OutFormat::Xlsx => unreachable!("workbooks are written by xlsx::write, {}", db.zone.name),
    })
}

/// Exports `scope` of the database as `opts` say. `progress` receives the fraction
/// of vehicle-days done.
pub fn export(
    db: &Db,
    scope: &Scope,
    opts: &ExportOptions,
    progress: &mut dyn FnMut(f64),
) -> Result<ExportSummary> {
    check(opts)?;
    let started = std::time::Instant::now();
    let target = &opts.output;
    if fleetctl_core::output::is_stdout(target) {
        return export_to_stdout(db, scope, opts, progress, started);
    }
    let (dir, name) = split(target)?;
    fleetctl_core::scratch::recover_replaced(target);
    fleetctl_core::scratch::remove_abandoned(&dir, &format!(".{name}.partial-"));
    let tmp = dir.join(format!(".{name}.partial-{}", std::process::id()));
    let result = write_all(db, scope, opts, &tmp, progress);
    let (rows, files) = match result {
        Ok(done) => done,
        Err(e) => {
            remove_any(&tmp);
            return Err(e);
        }
    };
    let bytes = size_of(&tmp);
    // Checked again: a folder or link may have appeared at the target meanwhile.
    let placed = fleetctl_core::output::check(target, "-o", may(opts)).and_then(|()| {
        fleetctl_core::scratch::replace(&tmp, target)
            .map_err(|e| Error::io(target, e).with_hint("choose a writable path with -o"))
    });
    if let Err(e) = placed {
        remove_any(&tmp);
        return Err(e);
    }
    Ok(ExportSummary {
        output: target.clone(),
        rows,
        files,
        bytes,
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// `-o -`: the file is written in the temporary folder (its formats seek back), then
/// copied to standard output and removed.
fn export_to_stdout(
    db: &Db,
    scope: &Scope,
    opts: &ExportOptions,
    progress: &mut dyn FnMut(f64),
    started: std::time::Instant,
) -> Result<ExportSummary> {
    // A file of this process's own in the temporary folder (made new, never one
    // planted under its name), removed when done.
    let tmp = fleetctl_core::output::Aside::create(
        &std::env::temp_dir().join(format!("fleetctl-export.{}", opts.format.extension())),
        "-o",
        fleetctl_core::output::May::ReplaceFile,
    )?;
    let copied = write_all(db, scope, opts, tmp.path(), progress).and_then(|(rows, files)| {
        let mut file = std::fs::File::open(tmp.path()).map_err(|e| Error::io(tmp.path(), e))?;
        let bytes = fleetctl_core::output::copy_to_stdout(&mut file)?;
        Ok((rows, files, bytes))
    });
    drop(tmp);
    let (rows, files, bytes) = copied?;
    Ok(ExportSummary {
        output: opts.output.clone(),
        rows,
        files,
        bytes,
        seconds: started.elapsed().as_secs_f64(),
    })
}

type Written = (Vec<(Dataset, u64)>, usize);

fn write_all(
    db: &Db,
    scope: &Scope,
    opts: &ExportOptions,
    tmp: &Path,
    progress: &mut dyn FnMut(f64),
) -> Result<Written> {
    let days = (scope.vehicles.len() * scope.dates().count()).max(1) as f64;
    if opts.format == OutFormat::Xlsx {
        let rows = xlsx::write(db, scope, &opts.datasets, tmp, &mut |n| {
            progress(n as f64 / (days * opts.datasets.len() as f64))
        })?;
        return Ok((rows, 1));
    }
    let dataset = opts.datasets[0];
    let tracks = matches!(
        opts.format,
        OutFormat::Gpx | OutFormat::Kml | OutFormat::GeoJson
    );
    let mut rows = 0u64;
    let mut done = 0usize;
    let Some(partition) = opts.partition else {
        let mut sink = open_sink(opts.format, tmp, db, dataset)?;
        export::for_each_chunk(db, dataset, scope, Order::ByVehicle, tracks, &mut |chunk| {
            rows += chunk.table.rows() as u64;
            done += 1;
            if done.is_multiple_of(64) {
                progress(done as f64 / days);
            }
            sink.write(chunk)
        })?;
        sink.finish()?;
        return Ok((vec![(dataset, rows)], 1));
    };
    // A Hive-style dataset: one folder per key, chunks come grouped by it.
    std::fs::create_dir(tmp).map_err(|e| Error::io(tmp, e))?;
    // Marks the folder as fleetctl's: `--force` replaces only such a folder. A name
    // with a leading `_` is skipped by Hive-style readers.
    let marker = tmp.join(DATASET_MARKER);
    std::fs::write(&marker, "written by fleetctl export\n").map_err(|e| Error::io(&marker, e))?;
    let order = match partition {
        Partition::Date => Order::ByDate,
        Partition::Vehicle => Order::ByVehicle,
    };
    let mut open: Option<(String, Box<dyn Sink>)> = None;
    let mut files = 0usize;
    export::for_each_chunk(db, dataset, scope, order, false, &mut |chunk| {
        let value = match partition {
            Partition::Date => chunk.date.to_string(),
            Partition::Vehicle => chunk.plate.clone(),
        };
        if open.as_ref().is_none_or(|(v, _)| *v != value) {
            if let Some((_, sink)) = open.take() {
                sink.finish()?;
            }
            let folder = tmp.join(format!("{}={}", partition.key(), hive_escape(&value)));
            std::fs::create_dir(&folder).map_err(|e| Error::io(&folder, e))?;
            let path = folder.join("part-0.parquet");
            let file = std::fs::File::create(&path).map_err(|e| Error::io(&path, e))?;
            let parquet = tabular::TableSink::parquet(file, &path, dataset, Some(partition.key()))?;
            let sink: Box<dyn Sink> = Box::new(Threaded::start(Box::new(parquet)));
            files += 1;
            open = Some((value, sink));
        }
        rows += chunk.table.rows() as u64;
        done += 1;
        if done.is_multiple_of(64) {
            progress(done as f64 / days);
        }
        let (_, sink) = open.as_mut().expect("a partition is open");
        sink.write(chunk)
    })?;
    if let Some((_, sink)) = open.take() {
        sink.finish()?;
    }
    Ok((vec![(dataset, rows)], files))
}

/// A Hive partition value made safe for a folder name: `/`, `=`, `%`, control
/// characters and the like percent-encoded, as Hive and the engines that read it do.
fn hive_escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        if c.is_control() || "\"#%'*/:=?\\{[]^".contains(c) {
            let mut buf = [0u8; 4];
            for b in c.encode_utf8(&mut buf).bytes() {
                out.push_str(&format!("%{b:02X}"));
            }
        } else {
            out.push(c);
        }
    }
    out
}

fn split(target: &Path) -> Result<(PathBuf, String)> {
    let name = target
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| {
            Error::invalid(format!("-o {}: not a file name", target.display()))
                .with_hint("give a path such as trips.csv")
        })?
        .to_string();
    let dir = target
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
    if !dir.is_dir() {
        return Err(Error::invalid(format!(
            "-o {}: no folder {}",
            target.display(),
            dir.display()
        ))
        .with_hint("create the folder first, or choose another path"));
    }
    Ok((dir, name))
}

fn remove_any(path: &Path) {
    if path.is_dir() {
        let _ = std::fs::remove_dir_all(path);
    } else {
        let _ = std::fs::remove_file(path);
    }
}

fn size_of(path: &Path) -> u64 {
    if path.is_dir() {
        std::fs::read_dir(path)
            .map(|entries| entries.flatten().map(|e| size_of(&e.path())).sum())
            .unwrap_or(0)
    } else {
        std::fs::metadata(path).map_or(0, |m| m.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_values_are_safe_folder_names() {
        assert_eq!(hive_escape("P-123BCD"), "P-123BCD");
        assert_eq!(hive_escape("a/b=c%"), "a%2Fb%3Dc%25");
        assert_eq!(hive_escape("Camión 7"), "Camión 7");
    }

    #[test]
    fn formats_are_read_from_names_and_extensions() {
        assert_eq!(OutFormat::parse("XLSX").unwrap(), OutFormat::Xlsx);
        assert!(
            OutFormat::parse("pdf")
                .unwrap_err()
                .hint
                .unwrap()
                .contains("parquet")
        );
        assert_eq!(
            OutFormat::from_path(Path::new("out/trips.geojson")),
            Some(OutFormat::GeoJson)
        );
        assert_eq!(OutFormat::from_path(Path::new("trips")), None);
    }
}
