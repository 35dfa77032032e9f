//! fleetctl-formats: the files a fleet already has, read into `fleetctl import` —
//! CSV/TSV and Parquet (through polars), Traccar's CSV export and JSON positions,
//! GPX tracks and GeoJSON. Each reader turns its file into rows of text cells
//! ([`RawRow`]) and hands them to the domain's [`Ingest`], which checks, counts and
//! stores them; a reader never judges a value, it only finds it.

#![warn(missing_docs)]

pub mod columns;
mod csv;
pub mod export;
mod frame;
mod gpx;
mod json;
mod parquet;
pub mod places;

pub use columns::{ColumnMap, Field};
use fleetctl_core::error::{Error, ErrorCode, Result};
use fleetctl_core::ingest::{FileUnits, Ingest, OdometerUnit, RawRow, SpeedUnit};
use std::path::Path;

/// The formats `import` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Comma-, semicolon-, tab- or pipe-separated values with a header row.
    Csv,
    /// Traccar's positions export: unquoted cells, times without an offset.
    TraccarCsv,
    /// Traccar's positions API: a JSON array of position objects.
    TraccarJson,
    /// GPX 1.0/1.1 tracks.
    Gpx,
    /// GeoJSON points with a time, or lines with a parallel list of times.
    GeoJson,
    /// Apache Parquet.
    Parquet,
}

impl Format {
    /// The names `--format` accepts.
    pub const NAMES: &'static str = "csv, traccar-csv, traccar-json, gpx, geojson, parquet";

    /// Reads a format name.
    pub fn parse(text: &str) -> Option<Format> {
        match text.trim().to_ascii_lowercase().as_str() {
            "csv" | "tsv" => Some(Format::Csv),
            "traccar-csv" | "traccar" => Some(Format::TraccarCsv),
            "traccar-json" => Some(Format::TraccarJson),
            "gpx" => Some(Format::Gpx),
            "geojson" => Some(Format::GeoJson),
            "parquet" => Some(Format::Parquet),
            _ => None,
        }
    }

    /// The format's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Format::Csv => "csv",
            Format::TraccarCsv => "traccar-csv",
            Format::TraccarJson => "traccar-json",
            Format::Gpx => "gpx",
            Format::GeoJson => "geojson",
            Format::Parquet => "parquet",
        }
    }

    /// The speed unit of the format when its columns do not say (Traccar: knots;
    /// GPX: metres per second; others: km/h).
    pub fn default_speed_unit(self) -> SpeedUnit {
        match self {
            Format::TraccarCsv | Format::TraccarJson => SpeedUnit::Knots,
            Format::Gpx => SpeedUnit::Mps,
            _ => SpeedUnit::Kmh,
        }
    }

    /// The odometer unit of the format when its columns do not say (Traccar: metres).
    pub fn default_odometer_unit(self) -> OdometerUnit {
        match self {
            Format::TraccarCsv | Format::TraccarJson => OdometerUnit::M,
            _ => OdometerUnit::Km,
        }
    }

    /// Tells a file's format from its first bytes, then its extension.
    pub fn detect(path: &Path) -> Result<Format> {
        use std::io::Read;
        let mut head = vec![0u8; 4096];
        let mut f = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
        let n = f.read(&mut head).map_err(|e| Error::io(path, e))?;
        head.truncate(n);
        let ext = path
            .extension()
            .map(|e| e.to_string_lossy().to_ascii_lowercase())
            .unwrap_or_default();
        if head.starts_with(b"PAR1") {
            return Ok(Format::Parquet);
        }
        let text = String::from_utf8_lossy(&head);
        let text = text.trim_start_matches('\u{feff}').trim_start();
        if text.starts_with("<?xml") || text.starts_with("<gpx") {
            return Ok(Format::Gpx);
        }
        if text.starts_with('[') {
            return Ok(Format::TraccarJson);
        }
        if text.starts_with('{') {
            return Ok(Format::GeoJson);
        }
        let first_line = text.lines().next().unwrap_or("");
        let names: Vec<String> = first_line
            .split([',', ';', '\t'])
            .map(columns::normalise)
            .collect();
        let has = |n: &str| names.iter().any(|x| x == n);
        if has("deviceid") && has("fixtime") && has("servertime") && has("valid") {
            return Ok(Format::TraccarCsv);
        }
        match ext.as_str() {
            "gpx" => Ok(Format::Gpx),
            "geojson" => Ok(Format::GeoJson),
            "json" => Ok(Format::TraccarJson),
            "parquet" | "pq" => Ok(Format::Parquet),
            "csv" | "tsv" | "txt" | "" => Ok(Format::Csv),
            _ if !first_line.is_empty() && !head.contains(&0) => Ok(Format::Csv),
            _ => Err(
                Error::invalid(format!("cannot tell the format of {}", path.display()))
                    .with_hint(format!("pass --format, one of {}", Format::NAMES)),
            ),
        }
    }
}

/// The longest line a delimited file may have (a position row is a few hundred
/// bytes; a file of one endless line is not a table).
pub const MAX_LINE_BYTES: u64 = 1 << 20;

/// The largest JSON file read (it is parsed whole; larger fleets' exports go as CSV,
/// Parquet or GPX, which are streamed).
pub const MAX_JSON_BYTES: u64 = 256 << 20;

/// Appends one line (up to and including `\n`) to `buf`, refusing one longer than
/// `MAX_LINE_BYTES` before it is all in memory; 0 at the end of the input.
fn read_line_capped<R: std::io::BufRead>(
    reader: &mut R,
    buf: &mut Vec<u8>,
) -> std::io::Result<usize> {
    use std::io::{BufRead, Read};
    let n = reader
        .by_ref()
        .take(MAX_LINE_BYTES + 1)
        .read_until(b'\n', buf)?;
    if n as u64 > MAX_LINE_BYTES {
        return Err(long_line(None));
    }
    Ok(n)
}

/// The error for a line over `MAX_LINE_BYTES`, at `line` when it is known.
fn long_line(line: Option<u64>) -> std::io::Error {
    let at = line.map(|n| format!(" at line {n}")).unwrap_or_default();
    std::io::Error::new(
        std::io::ErrorKind::InvalidData,
        format!(
            "a line over {} KiB{at}: not a table of positions",
            MAX_LINE_BYTES / 1024
        ),
    )
}

/// How to read the files of one import.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReadOptions {
    /// Force a format instead of detecting it.
    pub format: Option<Format>,
    /// `--map FIELD=COLUMN` entries.
    pub map: Vec<(Field, String)>,
    /// `--speed-unit`: beats the columns' suffixes and the format's default.
    pub speed_unit: Option<SpeedUnit>,
    /// `--odometer-unit`: likewise.
    pub odometer_unit: Option<OdometerUnit>,
    /// `--plate`: the vehicle of rows that name none.
    pub plate: Option<String>,
}

/// Reads one file into `ingest`. `progress` receives the fraction of the file read.
pub fn read_file(
    path: &Path,
    opts: &ReadOptions,
    ingest: &mut Ingest,
    progress: &mut dyn FnMut(f64),
) -> Result<Format> {
    let meta = std::fs::metadata(path).map_err(|e| Error::io(path, e))?;
    if meta.is_dir() {
        return Err(
            Error::invalid(format!("{} is a folder", path.display())).with_hint(format!(
                "give the files in it, e.g. `fleetctl import {}/*.csv`",
                path.display()
            )),
        );
    }
    if !meta.is_file() {
        return Err(Error::new(
            ErrorCode::Io,
            format!("{} is not a regular file", path.display()),
        ));
    }
    let format = match opts.format {
        Some(f) => f,
        None => Format::detect(path)?,
    };
    let name = path.display().to_string();
    let file = ingest.begin_file(&name, format.as_str());
    let mut source = Source {
        path,
        file,
        ingest,
        opts,
        format,
        progress,
    };
    match format {
        Format::Csv => csv::read_csv(&mut source, meta.len()),
        Format::TraccarCsv => csv::read_traccar(&mut source, meta.len()),
        Format::TraccarJson => json::read_traccar(&mut source),
        Format::GeoJson => json::read_geojson(&mut source),
        Format::Gpx => gpx::read(&mut source, meta.len()),
        Format::Parquet => parquet::read(&mut source),
    }?;
    Ok(format)
}

/// One file being read: where its rows go and how to read their values.
struct Source<'a, 'i, 'c, 'r> {
    path: &'a Path,
    file: usize,
    ingest: &'i mut Ingest<'c, 'r>,
    opts: &'a ReadOptions,
    format: Format,
    progress: &'a mut dyn FnMut(f64),
}

impl Source<'_, '_, '_, '_> {
    /// The units for this file: the flags, else what the columns say, else the
    /// format's default.
    fn units(&mut self, columns: Option<&ColumnMap>) -> FileUnits {
        let units = FileUnits {
            speed: self
                .opts
                .speed_unit
                .or(columns.and_then(|c| c.speed_unit))
                .unwrap_or(self.format.default_speed_unit()),
            odometer: self
                .opts
                .odometer_unit
                .or(columns.and_then(|c| c.odometer_unit))
                .unwrap_or(self.format.default_odometer_unit()),
            plate: self.opts.plate.clone(),
            naive_times_utc: columns.is_some_and(|c| c.time_utc),
        };
        // The import checks the file's figures against these when it ends.
        self.ingest.file_units(self.file, &units);
        if columns.is_some_and(|c| c.plate_is_device_id) {
            self.ingest.plates_name_devices(self.file);
        }
        units
    }

    /// Hands a row to the import; `Break`: stop reading (see `Ingest::row`).
    fn row(&mut self, row: &RawRow, units: &FileUnits) -> Result<fleetctl_core::ingest::Flow> {
        self.ingest.row(self.file, row, units)
    }

    /// An error about this file's content.
    fn bad(&self, message: impl std::fmt::Display) -> Error {
        Error::invalid(format!("{}: {message}", self.path.display()))
    }

    /// The error for a header without time or coordinates.
    fn missing_columns(&self, map: &ColumnMap, header: &[String]) -> Option<Error> {
        let missing = map.missing_required();
        if map.index.is_empty() {
            // Not one column it knows: most likely not telemetry at all.
            let first = header.join(",");
            let first: String = first.chars().take(60).collect();
            return Some(
                self.bad(format!(
                    "does not look like positions: its first line ({first:?}) names no time, latitude, longitude or plate column"
                ))
                .with_hint(
                    "import takes positions as CSV, Traccar CSV or JSON, GPX, GeoJSON or Parquet; if this is one, name its columns with --map time=COLUMN --map lat=COLUMN --map lon=COLUMN",
                ),
            );
        }
        (!missing.is_empty()).then(|| {
            let names: Vec<&str> = missing.iter().map(|f| f.as_str()).collect();
            self.bad(format!("no column for {}", names.join(", ")))
                .with_hint(format!(
                    "its columns are: {}; name them with --map FIELD=COLUMN (e.g. --map {}=…)",
                    header.join(", "),
                    names[0]
                ))
        })
    }
}

/// A time of day alone (`02:59:37`) with the date of a `date` column beside it;
/// None when the time has a date of its own.
fn dated_time(time: &str, date: &str) -> Option<String> {
    (!time.contains(['-', '/', 'T']) && time.contains(':'))
        .then(|| format!("{} {}", date.trim(), time.trim()))
}

/// A row's cells by field, from a mapped header.
fn raw_row(line: u64, map: &ColumnMap, cell: impl Fn(usize) -> Option<String>) -> RawRow {
    let get = |f: Field| map.index.get(&f).and_then(|&i| cell(i));
    let time = get(Field::Time).map(|t| {
        map.date_index
            .and_then(&cell)
            .and_then(|date| dated_time(&t, &date))
            .unwrap_or(t)
    });
    RawRow {
        line,
        plate: get(Field::Plate),
        time,
        lat: get(Field::Lat),
        lon: get(Field::Lon),
        speed: get(Field::Speed),
        heading: get(Field::Heading),
        ignition: get(Field::Ignition),
        odometer: get(Field::Odometer),
        received: None,
        valid: None,
        typed: Default::default(),
    }
}
