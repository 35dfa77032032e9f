//! `fleetctl export`'s domain half: the rows a file of positions, trips, stops, events
//! or daily summaries holds, as typed columns, one vehicle-day at a time (so that an
//! export of any size streams), for the writers of `fleetctl-formats` to turn into
//! CSV, Parquet, GeoJSON, GPX, KML or XLSX. It never writes a file.
//!
//! Trips, stops, events and daily rows are the range reports' own rows
//! (`trips::trip_row`, `stops::stop_row`, …), so an export and the report agree on
//! every figure; their columns are read from the row types' schemas. Two changes
//! make them data rather than text: every time (a `date-time` field) becomes a UTC
//! timestamp column named `…_utc`, and each row carries its local `date`.

use crate::clock::{Date, FleetZone};
use crate::error::{Error, Result};
use crate::report::{self, Db, schema};
use crate::store::read::{self, RangeQuery};
use serde::Serialize;
use serde_json::Value;

/// What an export holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dataset {
    /// Every stored fix.
    Positions,
    /// The `trips` report's rows.
    Trips,
    /// The `stops` report's rows.
    Stops,
    /// The `events` report's rows.
    Events,
    /// The `daily_summary` report's rows.
    Daily,
}

impl Dataset {
    /// Every dataset, in the order docs/export.md documents them.
    pub const ALL: [Dataset; 5] = [
        Dataset::Positions,
        Dataset::Trips,
        Dataset::Stops,
        Dataset::Events,
        Dataset::Daily,
    ];

    /// The names `fleetctl export` accepts.
    pub const NAMES: &'static str = "positions, trips, stops, events, daily";

    /// Reads a dataset name.
    pub fn parse(text: &str) -> Result<Dataset> {
        Dataset::ALL
            .into_iter()
            .find(|d| d.as_str() == text.trim().to_ascii_lowercase())
            .ok_or_else(|| {
                Error::invalid(format!("no dataset {text:?} to export"))
                    .with_hint(format!("accepted: {}", Dataset::NAMES))
            })
    }

    /// Its name.
    pub fn as_str(self) -> &'static str {
        match self {
            Dataset::Positions => "positions",
            Dataset::Trips => "trips",
            Dataset::Stops => "stops",
            Dataset::Events => "events",
            Dataset::Daily => "daily",
        }
    }

    /// Whether its rows are places on a map (GPX, KML and GeoJSON need it).
    pub fn has_geometry(self) -> bool {
        self != Dataset::Daily
    }

    /// Its columns, in file order: name (units in it), type, meaning.
    pub fn columns(self) -> Vec<ColumnSpec> {
        match self {
            Dataset::Positions => POSITION_COLUMNS.to_vec(),
            Dataset::Trips => report_columns::<report::trips::TripRow>(true),
            Dataset::Stops => report_columns::<report::stops::StopsRow>(true),
            Dataset::Events => report_columns::<report::events::EventsRow>(true),
            Dataset::Daily => report_columns::<report::daily_summary::DayRow>(false),
        }
    }
}

/// What an export wrote.
#[derive(Debug, Clone, PartialEq)]
pub struct ExportSummary {
    /// Where.
    pub output: std::path::PathBuf,
    /// Rows written, per dataset.
    pub rows: Vec<(Dataset, u64)>,
    /// Files written (more than one when partitioned).
    pub files: usize,
    /// Bytes written.
    pub bytes: u64,
    /// Wall time, seconds.
    pub seconds: f64,
}

/// The type of a column's cells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnKind {
    /// A whole number.
    Int,
    /// A number.
    Float,
    /// True or false.
    Bool,
    /// Text.
    Text,
    /// An instant: UTC milliseconds since the epoch.
    TimeUtc,
    /// The same instant as people read it: local time with its UTC offset, RFC 3339
    /// text (`2026-11-24T07:04:00-06:00`), beside its `…_utc` column.
    TimeLocal,
}

impl ColumnKind {
    /// Its name in the README's schema tables.
    pub fn as_str(self) -> &'static str {
        match self {
            ColumnKind::Int => "integer",
            ColumnKind::Float => "float",
            ColumnKind::Bool => "boolean",
            ColumnKind::Text => "text",
            ColumnKind::TimeUtc => "timestamp (UTC, ms)",
            ColumnKind::TimeLocal => "text (local time with offset)",
        }
    }
}

/// One column of an export.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnSpec {
    /// Its name in the file.
    pub name: String,
    /// Its cells' type.
    pub kind: ColumnKind,
    /// What it holds.
    pub doc: String,
}

fn spec(name: &str, kind: ColumnKind, doc: &str) -> ColumnSpec {
    ColumnSpec {
        name: name.to_string(),
        kind,
        doc: doc.to_string(),
    }
}

static POSITION_COLUMNS: std::sync::LazyLock<Vec<ColumnSpec>> = std::sync::LazyLock::new(|| {
    use ColumnKind::*;
    vec![
        spec("plate", Text, "Plate."),
        spec(
            "date",
            Text,
            "Local date of the fix, YYYY-MM-DD, in the fleet's zone.",
        ),
        spec(
            "time_local",
            TimeLocal,
            "When the fix was taken, local time with its UTC offset (seconds).",
        ),
        spec("time_utc", TimeUtc, "When the fix was taken."),
        spec("lat", Float, "Latitude, WGS84 degrees."),
        spec("lon", Float, "Longitude, WGS84 degrees."),
        spec("speed_kmh", Float, "Ground speed, km/h."),
        spec(
            "speed_derived",
            Bool,
            "True when the source had no speed and it was derived from the fixes around.",
        ),
        spec(
            "heading_deg",
            Float,
            "Heading, degrees clockwise from north; empty when unknown.",
        ),
        spec(
            "ignition",
            Bool,
            "Ignition on; empty when the tracker does not report it.",
        ),
        spec(
            "odometer_km",
            Float,
            "Odometer reading, km; empty without an odometer.",
        ),
    ]
});

/// The columns of a report's row type: its fields in order, a time (`date-time`)
/// as `NAME_local` (as people read it) then `NAME_utc` (for data engines), lists and
/// objects as JSON text; `with_date` adds the local date of the row's first time
/// after the plate.
fn report_columns<T: schemars::JsonSchema>(with_date: bool) -> Vec<ColumnSpec> {
    let schema = schema::derived_input::<T>();
    let mut out = Vec::new();
    let Some(properties) = schema["properties"].as_object() else {
        return out;
    };
    for (name, p) in properties {
        let doc = p["description"].as_str().unwrap_or_default();
        let kind = if p["format"] == "date-time" {
            ColumnKind::TimeUtc
        } else if schema::has_type(p, "integer") {
            ColumnKind::Int
        } else if schema::has_type(p, "number") {
            ColumnKind::Float
        } else if schema::has_type(p, "boolean") {
            ColumnKind::Bool
        } else {
            ColumnKind::Text
        };
        let name = match kind {
            ColumnKind::TimeUtc => {
                out.push(spec(
                    &format!("{name}_local"),
                    ColumnKind::TimeLocal,
                    &format!("{doc} Local time with its UTC offset."),
                ));
                format!("{name}_utc")
            }
            _ => name.clone(),
        };
        out.push(spec(&name, kind, doc));
        if with_date && name == "plate" {
            out.push(spec(
                "date",
                ColumnKind::Text,
                "Local date the row began on, YYYY-MM-DD, in the fleet's zone.",
            ));
        }
    }
    out
}

/// A column's cells.
#[derive(Debug, Clone, PartialEq)]
pub enum Cells {
    /// Whole numbers.
    Int(Vec<Option<i64>>),
    /// Numbers.
    Float(Vec<Option<f64>>),
    /// True or false.
    Bool(Vec<Option<bool>>),
    /// Text.
    Text(Vec<Option<String>>),
    /// Text as runs of one value (a vehicle-day's plate and date): no string per row.
    Runs(Vec<(String, usize)>),
    /// Text end to end in one string, and where each cell ends in it (a
    /// vehicle-day's local times): no string per row either.
    Joined {
        /// The cells' text, one after the other.
        text: String,
        /// The byte offset in `text` where each cell ends.
        ends: Vec<usize>,
    },
    /// UTC milliseconds since the epoch.
    TimeUtc(Vec<Option<i64>>),
}

impl Cells {
    fn empty(kind: ColumnKind) -> Cells {
        match kind {
            ColumnKind::Int => Cells::Int(Vec::new()),
            ColumnKind::Float => Cells::Float(Vec::new()),
            ColumnKind::Bool => Cells::Bool(Vec::new()),
            ColumnKind::Text | ColumnKind::TimeLocal => Cells::Text(Vec::new()),
            ColumnKind::TimeUtc => Cells::TimeUtc(Vec::new()),
        }
    }

    /// Its number of cells.
    pub fn len(&self) -> usize {
        match self {
            Cells::Int(v) | Cells::TimeUtc(v) => v.len(),
            Cells::Float(v) => v.len(),
            Cells::Bool(v) => v.len(),
            Cells::Text(v) => v.len(),
            Cells::Runs(v) => v.iter().map(|r| r.1).sum(),
            Cells::Joined { ends, .. } => ends.len(),
        }
    }

    /// True without cells.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn append(&mut self, other: Cells) {
        match (self, other) {
            (Cells::Int(a), Cells::Int(b)) | (Cells::TimeUtc(a), Cells::TimeUtc(b)) => a.extend(b),
            (Cells::Float(a), Cells::Float(b)) => a.extend(b),
            (Cells::Bool(a), Cells::Bool(b)) => a.extend(b),
            (Cells::Text(a), Cells::Text(b)) => a.extend(b),
            (
                Cells::Joined { text, ends },
                Cells::Joined {
                    text: more,
                    ends: more_ends,
                },
            ) => {
                let base = text.len();
                text.push_str(&more);
                ends.extend(more_ends.into_iter().map(|end| base + end));
            }
            (Cells::Runs(a), Cells::Runs(b)) => {
                for (value, n) in b {
                    match a.last_mut() {
                        Some(last) if last.0 == value => last.1 += n,
                        _ => a.push((value, n)),
                    }
                }
            }
            _ => unreachable!("tables of one dataset have one column set"),
        }
    }

    /// One cell as JSON (a time as RFC 3339 UTC text).
    pub fn json(&self, row: usize) -> Value {
        match self {
            Cells::Int(v) => v[row].map_or(Value::Null, Value::from),
            Cells::Float(v) => v[row].map_or(Value::Null, Value::from),
            Cells::Bool(v) => v[row].map_or(Value::Null, Value::from),
            Cells::Text(v) => v[row].as_deref().map_or(Value::Null, Value::from),
            Cells::Runs(_) | Cells::Joined { .. } => {
                self.text(row).map_or(Value::Null, Value::from)
            }
            Cells::TimeUtc(v) => v[row].map_or(Value::Null, |ms| Value::from(utc_text(ms))),
        }
    }

    /// One cell of a text column.
    pub fn text(&self, row: usize) -> Option<&str> {
        match self {
            Cells::Text(v) => v[row].as_deref(),
            Cells::Joined { text, ends } => {
                let start = row.checked_sub(1).map_or(0, |before| ends[before]);
                Some(&text[start..ends[row]])
            }
            Cells::Runs(runs) => {
                let mut left = row;
                for (value, n) in runs {
                    if left < *n {
                        return Some(value);
                    }
                    left -= n;
                }
                None
            }
            _ => None,
        }
    }
}

/// RFC 3339 in UTC with milliseconds: `2026-11-24T14:13:00.000Z`.
pub fn utc_text(ms: i64) -> String {
    jiff::Timestamp::from_millisecond(ms)
        .map(|t| format!("{t:.3}"))
        .unwrap_or_default()
}

/// Rows of one dataset as typed columns.
#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    /// The columns' names and types, as `Dataset::columns` gives them.
    pub specs: Vec<ColumnSpec>,
    /// The cells, one entry per spec.
    pub cells: Vec<Cells>,
}

impl Table {
    /// A table with no rows.
    pub fn empty(specs: Vec<ColumnSpec>) -> Table {
        let cells = specs.iter().map(|s| Cells::empty(s.kind)).collect();
        Table { specs, cells }
    }

    /// Rows in it.
    pub fn rows(&self) -> usize {
        self.cells.first().map_or(0, Cells::len)
    }

    /// Adds `other`'s rows (a table of the same dataset) after its own.
    pub fn append(&mut self, other: Table) {
        for (mine, theirs) in self.cells.iter_mut().zip(other.cells) {
            mine.append(theirs);
        }
    }

    /// The cells of the column with this name.
    pub fn column(&self, name: &str) -> Option<&Cells> {
        self.specs
            .iter()
            .position(|s| s.name == name)
            .map(|i| &self.cells[i])
    }

    /// A number column's cell (`None` when missing or empty).
    pub fn float(&self, name: &str, row: usize) -> Option<f64> {
        match self.column(name)? {
            Cells::Float(v) => v[row],
            Cells::Int(v) => v[row].map(|n| n as f64),
            _ => None,
        }
    }

    /// A time column's cell, UTC milliseconds.
    pub fn time_ms(&self, name: &str, row: usize) -> Option<i64> {
        match self.column(name)? {
            Cells::TimeUtc(v) => v[row],
            _ => None,
        }
    }

    /// A text column's cell.
    pub fn text(&self, name: &str, row: usize) -> Option<&str> {
        self.column(name)?.text(row)
    }

    /// Drops a column (a partition key the file's path already holds).
    pub fn without(mut self, name: &str) -> Table {
        if let Some(i) = self.specs.iter().position(|s| s.name == name) {
            self.specs.remove(i);
            self.cells.remove(i);
        }
        self
    }
}

/// A point of a track: where and when.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TrackPoint {
    /// Latitude, degrees.
    pub lat: f64,
    /// Longitude, degrees.
    pub lon: f64,
    /// UTC milliseconds since the epoch.
    pub time_ms: i64,
    /// Ground speed, km/h.
    pub speed_kmh: f64,
    /// Heading, degrees, when known.
    pub heading_deg: Option<f64>,
}

impl TrackPoint {
    /// A fix as a track point; `ms`: its milliseconds past the second.
    fn of(f: &crate::model::Fix, ms: i64) -> TrackPoint {
        TrackPoint {
            lat: f.lat,
            lon: f.lon,
            time_ms: f.ts * 1000 + ms,
            speed_kmh: f.speed_kmh,
            heading_deg: f.heading_deg,
        }
    }
}

/// A line on the map: a vehicle-day's fixes (positions) or a trip's (trips).
#[derive(Debug, Clone, PartialEq)]
pub struct Track {
    /// The table row it belongs to (a trip); `None` for a vehicle-day of positions.
    pub row: Option<usize>,
    /// The fixes, in time order.
    pub points: Vec<TrackPoint>,
}

/// One vehicle-day of a dataset.
#[derive(Debug, Clone, PartialEq)]
pub struct Chunk {
    /// The vehicle.
    pub plate: String,
    /// The local date.
    pub date: Date,
    /// Its rows.
    pub table: Table,
    /// Its lines, when asked for: one per trip, or the day's fixes for positions.
    pub tracks: Vec<Track>,
}

/// The order chunks come in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// Vehicle by vehicle (by plate), each one's days in order.
    ByVehicle,
    /// Day by day, each day's vehicles by plate.
    ByDate,
}

/// What an export covers: local dates and vehicles.
#[derive(Debug, Clone, PartialEq)]
pub struct Scope {
    /// First local date.
    pub from: Date,
    /// Last local date.
    pub to: Date,
    /// The vehicles (store id, plate), by plate.
    pub vehicles: Vec<(i64, String)>,
}

impl Scope {
    /// Resolves `from`, `to` (YYYY-MM-DD, today, yesterday) and `plate`; a missing
    /// end is the first or last date with data, so that no flag exports everything.
    pub fn resolve(
        db: &Db,
        from: Option<&str>,
        to: Option<&str>,
        plate: Option<&str>,
    ) -> Result<Scope> {
        let data = db.data_dates()?;
        let data = data
            .as_ref()
            .and_then(|(a, b)| Some((Date::parse(a)?, Date::parse(b)?)));
        let end = |given: Option<&str>, fallback: Option<Date>| match given {
            Some(text) => db.resolve_date(Some(text)),
            None => Ok(fallback.unwrap_or_else(|| db.today())),
        };
        let from = end(from, data.map(|d| d.0))?;
        let to = end(to, data.map(|d| d.1))?;
        if from > to {
            return Err(Error::invalid(format!("--from {from} is after --to {to}"))
                .with_hint("give --from on or before --to"));
        }
        let mut vehicles: Vec<(i64, String)> = match plate {
            Some(p) => {
                let v = db.resolve_plate(p)?;
                vec![(v.id, v.plate.clone())]
            }
            None => db
                .vehicles
                .iter()
                .map(|(v, _)| (v.id, v.plate.clone()))
                .collect(),
        };
        vehicles.sort_by(|a, b| a.1.cmp(&b.1));
        Ok(Scope { from, to, vehicles })
    }

    /// Its local dates, in order.
    pub fn dates(&self) -> impl Iterator<Item = Date> + '_ {
        (self.from.days_since_epoch()..=self.to.days_since_epoch()).map(Date::from_days_since_epoch)
    }
}

/// Hands `each` every non-empty vehicle-day of `dataset` in `scope`, in `order`;
/// with `tracks`, each chunk carries its lines (positions and trips).
pub fn for_each_chunk(
    db: &Db,
    dataset: Dataset,
    scope: &Scope,
    order: Order,
    tracks: bool,
    each: &mut dyn FnMut(Chunk) -> Result<()>,
) -> Result<()> {
    let mut days: Vec<(i64, &str, Date)> = Vec::new();
    match order {
        Order::ByVehicle => {
            for (id, plate) in &scope.vehicles {
                days.extend(scope.dates().map(|date| (*id, plate.as_str(), date)));
            }
        }
        Order::ByDate => {
            for date in scope.dates() {
                days.extend(
                    scope
                        .vehicles
                        .iter()
                        .map(|(id, plate)| (*id, plate.as_str(), date)),
                );
            }
        }
    }
    if dataset == Dataset::Positions {
        return positions_in_parallel(db, &days, tracks, each);
    }
    let specs = dataset.columns();
    // Daily rows are read for the whole scope at once (with their trips and events
    // summed in two queries), then handed out by vehicle-day.
    let mut daily = std::collections::HashMap::new();
    if dataset == Dataset::Daily
        && let (Some(first), Some(last)) = (
            days.iter().map(|d| d.2).min(),
            days.iter().map(|d| d.2).max(),
        )
    {
        let wanted: std::collections::HashSet<i64> = days.iter().map(|d| d.0).collect();
        let rollups: Vec<_> =
            read::daily_between(db.conn(), None, &first.to_string(), &last.to_string())?
                .into_iter()
                .filter(|d| wanted.contains(&d.vehicle_id))
                .collect();
        let rows = report::daily_summary::day_rows(db, &rollups)?;
        daily = rollups
            .into_iter()
            .zip(rows)
            .map(|(d, row)| ((d.vehicle_id, d.date), row))
            .collect();
    }
    for (id, plate, date) in days {
        if let Some(chunk) =
            vehicle_day(db, dataset, &specs, &mut daily, (id, plate), date, tracks)?
        {
            each(chunk)?;
        }
    }
    Ok(())
}

/// Vehicle-days of positions a worker reads on one connection of its own.
const DAYS_PER_JOB: usize = 32;

/// Positions are most of any database: they are read on every core, each worker on
/// its own read-only connection, and handed to `each` in order on this thread.
fn positions_in_parallel(
    db: &Db,
    days: &[(i64, &str, Date)],
    tracks: bool,
    each: &mut dyn FnMut(Chunk) -> Result<()>,
) -> Result<()> {
    type Job = Vec<(i64, String, Date, (i64, i64))>;
    let path = db.path.clone();
    let postgres = db.postgres().cloned();
    let zone = &db.zone;
    let work = |job: Job| -> Result<Vec<Chunk>> {
        let conn: Box<dyn crate::store::sql::Sql> = match &postgres {
            Some(target) => Box::new(crate::store::pg::open_reader(target)?),
            None => Box::new(crate::store::open_read_only(&path)?),
        };
        let conn = conn.as_ref();
        let mut chunks = Vec::with_capacity(job.len());
        for (vehicle_id, plate, date, bounds) in job {
            if let Some(chunk) = positions_day(conn, zone, vehicle_id, plate, date, bounds, tracks)?
            {
                chunks.push(chunk);
            }
        }
        Ok(chunks)
    };
    crate::parallel::map_in_order(
        &work,
        &mut |submit| {
            for batch in days.chunks(DAYS_PER_JOB) {
                let job: Job = batch
                    .iter()
                    .map(|&(id, plate, date)| (id, plate.to_string(), date, db.day_bounds(date)))
                    .collect();
                submit(job)?;
            }
            Ok(())
        },
        &mut |chunks| {
            for chunk in chunks? {
                each(chunk)?;
            }
            Ok(())
        },
    )
}

fn vehicle_day(
    db: &Db,
    dataset: Dataset,
    specs: &[ColumnSpec],
    daily: &mut std::collections::HashMap<(i64, String), report::daily_summary::DayRow>,
    (vehicle_id, plate): (i64, &str),
    date: Date,
    with_tracks: bool,
) -> Result<Option<Chunk>> {
    let (start, end) = db.day_bounds(date);
    let range = RangeQuery {
        vehicle_id: Some(vehicle_id),
        from_ts: start,
        to_ts: end,
        min_s: 0,
        bbox: None,
    };
    let mut table = Table::empty(specs.to_vec());
    let mut tracks = Vec::new();
    match dataset {
        Dataset::Positions => unreachable!("positions are read in parallel"),
        Dataset::Trips => {
            let trips = read::trips_after(db.conn(), &range, [i64::MIN; 2], usize::MAX)?;
            let last_end = trips.iter().map(|t| t.end_ts).max().unwrap_or(end);
            let events =
                read::events_between(db.conn(), Some(vehicle_id), &[], start, last_end + 1)?;
            for (i, t) in trips.iter().enumerate() {
                push_row(
                    &mut table,
                    &report::trips::trip_row(db, t, &events)?,
                    &db.zone,
                )?;
                if with_tracks {
                    let fixes =
                        read::fixes_between(db.conn(), vehicle_id, t.start_ts, t.end_ts + 1)?;
                    tracks.push(Track {
                        row: Some(i),
                        points: fixes.iter().map(|f| TrackPoint::of(f, 0)).collect(),
                    });
                }
            }
        }
        Dataset::Stops => {
            let stops = read::stops_after(db.conn(), &range, [i64::MIN; 2], usize::MAX)?;
            for s in &stops {
                push_row(&mut table, &report::stops::stop_row(db, s)?, &db.zone)?;
            }
        }
        Dataset::Events => {
            let query = read::EventQuery {
                vehicle_id: Some(vehicle_id),
                kinds: &[],
                geofence_id: None,
                from_ts: start,
                to_ts: end,
            };
            for (_, e) in &read::events_after(db.conn(), &query, [i64::MIN; 3], usize::MAX)? {
                push_row(&mut table, &report::events::events_row(db, e)?, &db.zone)?;
            }
        }
        Dataset::Daily => {
            if let Some(row) = daily.remove(&(vehicle_id, date.to_string())) {
                push_row(&mut table, &row, &db.zone)?;
            }
        }
    }
    Ok((table.rows() > 0).then(|| Chunk {
        plate: plate.to_string(),
        date,
        table,
        tracks,
    }))
}

fn positions_day(
    conn: &dyn crate::store::sql::Sql,
    zone: &FleetZone,
    vehicle_id: i64,
    plate: String,
    date: Date,
    (start, end): (i64, i64),
    with_tracks: bool,
) -> Result<Option<Chunk>> {
    let (mut time, mut local, mut local_ends) = (Vec::new(), String::new(), Vec::new());
    let (mut lat, mut lon, mut speed, mut derived) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut heading, mut ignition, mut odometer) = (Vec::new(), Vec::new(), Vec::new());
    let mut points = Vec::new();
    read::positions_between(conn, vehicle_id, start, end, &mut |f, ms| {
        let time_ms = f.ts * 1000 + ms;
        time.push(Some(time_ms));
        zone.push_rfc3339(f.ts, &mut local);
        local_ends.push(local.len());
        lat.push(Some(f.lat));
        lon.push(Some(f.lon));
        speed.push(Some(f.speed_kmh));
        derived.push(Some(f.speed_derived));
        heading.push(f.heading_deg);
        ignition.push(f.ignition);
        odometer.push(f.odometer_km);
        if with_tracks {
            points.push(TrackPoint::of(f, ms));
        }
    })?;
    let n = time.len();
    if n == 0 {
        return Ok(None);
    }
    let table = Table {
        specs: POSITION_COLUMNS.clone(),
        cells: vec![
            Cells::Runs(vec![(plate.clone(), n)]),
            Cells::Runs(vec![(date.to_string(), n)]),
            Cells::Joined {
                text: local,
                ends: local_ends,
            },
            Cells::TimeUtc(time),
            Cells::Float(lat),
            Cells::Float(lon),
            Cells::Float(speed),
            Cells::Bool(derived),
            Cells::Float(heading),
            Cells::Bool(ignition),
            Cells::Float(odometer),
        ],
    };
    let tracks = if with_tracks {
        vec![Track { row: None, points }]
    } else {
        Vec::new()
    };
    Ok(Some(Chunk {
        plate,
        date,
        table,
        tracks,
    }))
}

/// Appends one report row to `table`, field by field as its specs say. A value that
/// does not fit its column's type is an error (a report row and its schema that
/// disagree), never an empty cell.
fn push_row(table: &mut Table, row: &impl Serialize, zone: &FleetZone) -> Result<()> {
    let value = serde_json::to_value(row).map_err(|e| Error::internal(e.to_string()))?;
    let fields = value
        .as_object()
        .ok_or_else(|| Error::internal("a report row is not an object"))?;
    let mut first_time = None;
    for (spec, cells) in table.specs.iter().zip(table.cells.iter_mut()) {
        let field = match spec.kind {
            ColumnKind::TimeUtc => spec.name.trim_end_matches("_utc"),
            ColumnKind::TimeLocal => spec.name.trim_end_matches("_local"),
            _ => spec.name.as_str(),
        };
        let v = fields.get(field).unwrap_or(&Value::Null);
        // A null is an empty cell; anything else must be of the column's type.
        fn typed<T>(
            v: &Value,
            field: &str,
            get: impl Fn(&Value) -> Option<T>,
        ) -> Result<Option<T>> {
            if v.is_null() {
                return Ok(None);
            }
            get(v).map(Some).ok_or_else(|| {
                Error::internal(format!(
                    "export: the value {v} of `{field}` does not fit its column's type"
                ))
            })
        }
        match cells {
            Cells::Int(c) => c.push(typed(v, field, Value::as_i64)?),
            Cells::Float(c) => c.push(typed(v, field, Value::as_f64)?),
            Cells::Bool(c) => c.push(typed(v, field, Value::as_bool)?),
            Cells::Runs(c) => c.push((
                typed(v, field, |v| v.as_str().map(str::to_string))?.unwrap_or_default(),
                1,
            )),
            Cells::TimeUtc(c) => {
                let ms = typed(v, field, |v| {
                    v.as_str()
                        .and_then(|t| t.parse::<jiff::Timestamp>().ok())
                        .map(|t| t.as_millisecond())
                })?;
                first_time = first_time.or(ms);
                c.push(ms);
            }
            Cells::Text(c) => c.push(match v {
                Value::Null => None,
                Value::String(s) => Some(s.clone()),
                other => Some(other.to_string()),
            }),
            // Rows begin with text columns (`Cells::empty`); joined text holds
            // no empty cell.
            Cells::Joined { text, ends } => {
                let cell =
                    typed(v, field, |v| v.as_str().map(str::to_string))?.ok_or_else(|| {
                        Error::internal(format!("export: `{field}` is empty in a joined column"))
                    })?;
                text.push_str(&cell);
                ends.push(text.len());
            }
        }
    }
    // The local date of the row's first time, when the row has no date of its own.
    if let Some(i) = table.specs.iter().position(|s| s.name == "date")
        && !fields.contains_key("date")
        && let Cells::Text(c) = &mut table.cells[i]
        && let Some(last) = c.last_mut()
    {
        *last = first_time.map(|ms| zone.local_date(ms.div_euclid(1000)).to_string());
    }
    Ok(())
}

#[cfg(test)]
mod push_row_tests {
    use super::*;

    #[test]
    fn a_value_that_does_not_fit_its_column_is_an_error_not_an_empty_cell() {
        let spec = |name: &str, kind| ColumnSpec {
            name: name.into(),
            kind,
            doc: String::new(),
        };
        let mut table = Table::empty(vec![
            spec("stops", ColumnKind::Int),
            spec("start_utc", ColumnKind::TimeUtc),
        ]);
        let zone = FleetZone::default();
        push_row(
            &mut table,
            &serde_json::json!({"stops": 3, "start": "2026-11-24T08:00:00-06:00"}),
            &zone,
        )
        .unwrap();
        push_row(
            &mut table,
            &serde_json::json!({"stops": null, "start": null}),
            &zone,
        )
        .unwrap();
        assert_eq!(table.rows(), 2);
        for bad in [
            serde_json::json!({"stops": "three", "start": null}),
            serde_json::json!({"stops": 2.5, "start": null}),
            serde_json::json!({"stops": 1, "start": "yesterday"}),
        ] {
            let e = push_row(&mut table, &bad, &zone).unwrap_err();
            assert!(e.message.contains("does not fit"), "{bad}: {}", e.message);
        }
    }
}
