//! One row of an outside file, checked alone: its cells read (plate, time,
//! coordinates, numbers, units) and staged as a fix, or rejected with the reason.
//! The checks run on worker threads, a batch at a time.

use super::*;
use crate::clock::FleetZone;
use crate::model::Fix;
use crate::store::import::Staged;
use std::collections::HashMap;
use time::parse_time;

/// One row of a source file, its cells as text, before any check. `None` is a
/// missing cell (or a column the file does not have).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RawRow {
    /// Line (CSV) or record (JSON, GPX, Parquet) number in the file, from 1.
    pub line: u64,
    /// Plate or device name.
    pub plate: Option<String>,
    /// The fix's time.
    pub time: Option<String>,
    /// Latitude, degrees.
    pub lat: Option<String>,
    /// Longitude, degrees.
    pub lon: Option<String>,
    /// Ground speed, in the file's speed unit.
    pub speed: Option<String>,
    /// Heading, degrees clockwise from north.
    pub heading: Option<String>,
    /// Ignition: true/false, 1/0, on/off, yes/no.
    pub ignition: Option<String>,
    /// Odometer, in the file's odometer unit.
    pub odometer: Option<String>,
    /// When the server received the fix (Traccar's serverTime): the file's own data
    /// clock, which no fix may be ahead of.
    pub received: Option<String>,
    /// The tracker's own verdict on the fix (Traccar's `valid`): false means no
    /// satellite lock, the position repeated from an earlier fix.
    pub valid: Option<String>,
    /// Cells a typed format (Parquet) holds as numbers: taken as they are, rather
    /// than written out as text and parsed back. A field set here has no text.
    pub typed: TypedCells,
}

/// The numeric cells of a [`RawRow`] from a typed source; `None`: not typed (see
/// the text cell).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TypedCells {
    /// The fix's time as an epoch number (seconds, milliseconds or microseconds,
    /// told apart by size as in text).
    pub time_epoch: Option<f64>,
    /// Latitude, degrees.
    pub lat: Option<f64>,
    /// Longitude, degrees.
    pub lon: Option<f64>,
    /// Ground speed, in the file's speed unit.
    pub speed: Option<f64>,
    /// Heading, degrees.
    pub heading: Option<f64>,
    /// Ignition.
    pub ignition: Option<bool>,
    /// Odometer, in the file's odometer unit.
    pub odometer: Option<f64>,
}

/// Why a row is rejected, and the offending value.
pub type Rejected = (RejectReason, String);

/// A checked row of a [`CheckedBatch`]: its plate's index and staged fix, or why it
/// is rejected.
type PlateRow = std::result::Result<(u32, Staged), Rejected>;

/// Rows checked on a worker thread, for [`Ingest::accept_batch`] to take in file
/// order. Each plate is kept once, however many rows carry it: the taking thread
/// finds a vehicle per plate, not per row, and no row carries a string of its own.
#[derive(Debug, Default)]
pub struct CheckedBatch {
    /// Each plate once.
    pub(super) plates: Vec<String>,
    plate_index: HashMap<String, u32>,
    last_plate: Option<u32>,
    /// Each row's line (added to the base the batch is accepted with) and its plate's
    /// index in `plates` and staged fix, or why it is rejected.
    pub(super) rows: Vec<(u64, PlateRow)>,
}

impl CheckedBatch {
    /// An empty batch with room for `rows` rows.
    pub fn with_capacity(rows: usize) -> CheckedBatch {
        CheckedBatch {
            rows: Vec::with_capacity(rows),
            ..CheckedBatch::default()
        }
    }

    /// Checks `row` (see [`Checker::check`]) and adds it.
    pub fn check(&mut self, checker: &Checker, row: &RawRow, units: &FileUnits, file: usize) {
        let outcome = checker.check(row, units, file).map(|(plate, staged)| {
            // Rows come in runs of one vehicle: the last row's plate is the likely one.
            let index = match self.last_plate {
                Some(i) if self.plates[i as usize] == plate => i,
                _ => self.intern(plate),
            };
            self.last_plate = Some(index);
            (index, staged)
        });
        self.rows.push((row.line, outcome));
    }

    /// The rows in the batch.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// True when the batch has no rows.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Adds a row that could not be split into cells.
    pub fn malformed(&mut self, line: u64, detail: String) {
        self.rows
            .push((line, Err((RejectReason::MalformedRow, detail))));
    }

    fn intern(&mut self, plate: &str) -> u32 {
        if let Some(&i) = self.plate_index.get(plate) {
            return i;
        }
        self.plates.push(plate.to_string());
        let i = self.plates.len() as u32 - 1;
        self.plate_index.insert(plate.to_string(), i);
        i
    }
}

/// The checks a row passes alone (plate, time, coordinates, numbers, units): no
/// database, nothing mutable, so readers may run them on every core.
#[derive(Debug, Clone)]
pub struct Checker {
    /// The fleet's zone.
    pub(super) zone: FleetZone,
    /// For files whose time column says UTC.
    pub(super) utc: FleetZone,
    /// The wall clock at the start of the import (no fix may come from the future).
    pub(super) wall_now: i64,
}

impl Checker {
    /// Checks one row of file `file`: its plate (from the row or `--plate`) and
    /// staged fix, the vehicle still to be found.
    pub fn check<'a>(
        &self,
        row: &'a RawRow,
        units: &'a FileUnits,
        file: usize,
    ) -> std::result::Result<(&'a str, Staged), Rejected> {
        use RejectReason as R;
        let plate = row
            .plate
            .as_deref()
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .or(units.plate.as_deref())
            .ok_or((R::MissingPlate, String::new()))?;
        if plate.chars().count() > 64 {
            return Err((
                R::BadPlate,
                format!(
                    "plate {plate:?} is over 64 characters (a track's name?): give the vehicle's plate with --plate"
                ),
            ));
        }
        if plate.chars().any(char::is_control) {
            return Err((
                R::BadPlate,
                format!("plate {plate:?} holds control characters"),
            ));
        }
        let time_text = row.time.as_deref().unwrap_or("");
        let at = match row.typed.time_epoch {
            Some(epoch) => time::epoch_number(epoch)
                .ok_or_else(|| (R::UnparseableTime, format!("time {epoch}")))?,
            None => {
                let zone = if units.naive_times_utc {
                    &self.utc
                } else {
                    &self.zone
                };
                time::parse_time_strict(time_text, zone).map_err(|problem| match problem {
                    time::TimeProblem::Unparseable => {
                        (R::UnparseableTime, format!("time {time_text:?}"))
                    }
                    time::TimeProblem::Skipped => (
                        R::NonexistentLocalTime,
                        format!("time {time_text:?}: the clocks of {} skipped it", zone.name),
                    ),
                })?
            }
        };
        let received = row
            .received
            .as_deref()
            .and_then(|t| parse_time(t, &self.zone));
        let future = match received {
            Some(r) => at.ts > r.ts + 60,
            None => at.ts > self.wall_now + 86_400,
        };
        if future {
            return Err((R::FutureTime, format!("time {time_text:?}")));
        }
        if let Err(why) = time::check_plausible(at.ts) {
            let cell = match row.typed.time_epoch {
                Some(epoch) => epoch.to_string(),
                None => time_text.to_string(),
            };
            let why = time::epoch_readings(&cell).unwrap_or(why);
            return Err((R::TimeOutOfRange, format!("time {cell:?}: {why}")));
        }
        if let Some(valid) = non_empty(&row.valid)
            && parse_bool(valid) == Some(false)
        {
            return Err((R::InvalidFix, format!("valid {valid:?}")));
        }
        let typed = &row.typed;
        let (Some(lat), Some(lon)) = (
            cell_number("lat", typed.lat, &row.lat)?,
            cell_number("lon", typed.lon, &row.lon)?,
        ) else {
            return Err((R::MissingCoordinates, String::new()));
        };
        if !(-90.0..=90.0).contains(&lat) || !(-180.0..=180.0).contains(&lon) {
            return Err((R::CoordinatesOutOfRange, format!("lat {lat}, lon {lon}")));
        }
        if lat == 0.0 && lon == 0.0 {
            return Err((R::ZeroZero, "lat 0, lon 0".to_string()));
        }
        let speed = cell_number("speed", typed.speed, &row.speed)?;
        if let Some(s) = speed.filter(|s| *s < 0.0) {
            return Err((R::NegativeSpeed, format!("speed {s}")));
        }
        let heading = cell_number("heading", typed.heading, &row.heading)?;
        if let Some(h) = heading.filter(|h| !(0.0..=360.0).contains(h)) {
            return Err((R::HeadingOutOfRange, format!("heading {h}")));
        }
        let ignition = match typed.ignition {
            Some(on) => Some(on),
            None => non_empty(&row.ignition)
                .map(|t| parse_bool(t).ok_or_else(|| (R::NonNumeric, format!("ignition {t:?}"))))
                .transpose()?,
        };
        let odometer = cell_number("odometer", typed.odometer, &row.odometer)?;
        let speed_kmh = speed.map(|s| units.speed.to_kmh(s));
        if let Some(s) = speed_kmh.filter(|s| *s > crate::store::positions::MAX_SPEED_KMH) {
            return Err((
                R::SpeedOutOfRange,
                format!("speed {} ({s} km/h, over 1000)", speed.unwrap_or_default()),
            ));
        }
        let odometer_km = odometer.map(|o| units.odometer.to_km(o));
        if let Some(km) =
            odometer_km.filter(|km| !(0.0..=crate::store::positions::MAX_ODOMETER_KM).contains(km))
        {
            return Err((
                R::OdometerOutOfRange,
                format!(
                    "odometer {} ({km} km, outside 0..=10,000,000)",
                    odometer.unwrap_or_default()
                ),
            ));
        }
        let staged = Staged {
            fix: Fix {
                vehicle_id: 0,
                ts: at.ts,
                lat,
                lon,
                speed_kmh: speed_kmh.unwrap_or(0.0),
                speed_derived: speed.is_none(),
                heading_deg: heading.map(|h| h % 360.0),
                ignition,
                odometer_km,
            },
            ts_ms: at.ms,
            file_index: file,
            line: row.line,
            repeated_later_by_s: at.repeated_later_by_s,
        };
        Ok((plate, staged))
    }
}

fn non_empty(cell: &Option<String>) -> Option<&str> {
    cell.as_deref().map(str::trim).filter(|t| !t.is_empty())
}

fn number(field: &str, text: &str) -> std::result::Result<f64, (RejectReason, String)> {
    text.trim()
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite())
        .ok_or_else(|| (RejectReason::NonNumeric, format!("{field} {text:?}")))
}

/// A numeric cell: the typed value if the source had one (a NaN or infinity is not a
/// number), else its text parsed; `None` when missing.
fn cell_number(
    field: &str,
    typed: Option<f64>,
    text: &Option<String>,
) -> std::result::Result<Option<f64>, (RejectReason, String)> {
    match typed {
        Some(v) if v.is_finite() => Ok(Some(v)),
        Some(v) => Err((RejectReason::NonNumeric, format!("{field} {v}"))),
        None => non_empty(text).map(|t| number(field, t)).transpose(),
    }
}

fn parse_bool(text: &str) -> Option<bool> {
    let text = text.trim();
    let is = |words: [&str; 6]| words.iter().any(|w| w.eq_ignore_ascii_case(text));
    if is(["1", "true", "t", "on", "yes", "y"]) {
        Some(true)
    } else if is(["0", "false", "f", "off", "no", "n"]) {
        Some(false)
    } else {
        None
    }
}
