//! `fleetctl import`: positions from a fleet's own files into the store, with every
//! row accounted for.
//!
//! Readers (`crates/formats`) turn a file into [`RawRow`]s, cells as text. Here each row is
//! checked alone (plate, time, coordinates, numbers, units) and staged, or rejected
//! with a [`RejectReason`]; then, one vehicle at a time in time order, duplicates and
//! impossible jumps are settled, missing speeds derived from the neighbouring fixes
//! (and marked so), the survivors appended, and the vehicles touched re-analysed —
//! all in one transaction, so a failed or killed import leaves the database as it
//! was, and a second import of the same file adds nothing.
//!
//! This file runs an import (`import`, `Ingest`, the order rows arrive in, the
//! tallies); beside it: `rows.rs` (a row checked alone), `rejects.rs` (why a row is
//! refused), `settle.rs` (a vehicle's rows against each other), `sort.rs` (rows out
//! of order), `time.rs` (times), `units.rs` (units, and their check).

mod beside;
mod rejects;
mod rows;
pub mod settle;
pub mod sort;
pub mod time;
pub mod units;

pub use crate::parallel::Flow;
/// Where the fleet imported into lives (`ImportOptions::db`).
pub use crate::store::Location;
pub use rejects::{NoRejectsFile, Reject, RejectReason, RejectSink};
pub use rows::{CheckedBatch, Checker, RawRow, Rejected, TypedCells};
pub use units::{FileUnits, OdometerUnit, SpeedUnit};

use crate::clock::FleetZone;
use crate::error::{Error, ErrorCode, Result};
use crate::pipeline::{self, AnalyzeSummary};
use crate::store::{self, Probe, import::Importer, import::Staged};
use settle::{Settled, millis, settle_vehicle};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;

/// One file's tally.
#[derive(Debug, Clone, PartialEq)]
pub struct FileTally {
    /// The file, as named on the command line.
    pub name: String,
    /// The format it was read as.
    pub format: String,
    /// Rows read (header lines and blank lines excluded).
    pub rows_read: u64,
    /// Rows appended to the database.
    pub imported: u64,
    /// Rows rejected, by reason.
    pub rejected: BTreeMap<RejectReason, u64>,
    /// What its kept rows say about their units.
    pub units: units::UnitEvidence,
}

impl FileTally {
    /// Rows rejected, every reason together.
    pub fn rejected_total(&self) -> u64 {
        self.rejected.values().sum()
    }
}

/// One vehicle's part of an import.
#[derive(Debug, Clone, PartialEq)]
pub struct VehicleTally {
    /// Its plate.
    pub plate: String,
    /// True when this import added it to the database.
    pub added: bool,
    /// Fixes appended.
    pub imported: u64,
    /// The first and last fix appended, UTC epoch seconds.
    pub first_ts: i64,
    /// See `first_ts`.
    pub last_ts: i64,
    /// The median time between consecutive appended fixes, seconds (None for one fix).
    pub median_interval_s: Option<f64>,
    /// How many appended fixes had no speed in the source (derived from positions).
    pub derived_speeds: u64,
}

/// What an import did.
#[derive(Debug, Clone, PartialEq)]
pub struct ImportSummary {
    /// The database.
    pub db: PathBuf,
    /// True when this import created it.
    pub created: bool,
    /// The fleet's time zone.
    pub zone: FleetZone,
    /// Per file, in the order given.
    pub files: Vec<FileTally>,
    /// Per vehicle with appended fixes, by plate.
    pub vehicles: Vec<VehicleTally>,
    /// Detection over the vehicles touched (None when nothing was appended).
    pub analysis: Option<AnalyzeSummary>,
    /// Wall time, seconds.
    pub seconds: f64,
}

/// Where and how to import.
#[derive(Debug, Clone, PartialEq)]
pub struct ImportOptions {
    /// The database, created when missing (a file).
    pub db: store::Location,
    /// The fleet's IANA zone: required for a new database; for an existing one it
    /// must match the stored zone.
    pub time_zone: Option<String>,
    /// The computer's clock (UTC seconds), for the future-time check of files
    /// without a receipt time.
    pub wall_now: i64,
    /// Refuse the import (nothing written) when a file's speeds or odometer agree
    /// with another unit than the one they were read in.
    pub strict_units: bool,
}

/// An import in progress: the readers feed it rows.
pub struct Ingest<'c, 'r> {
    importer: Importer<'c>,
    order: Order,
    checker: Checker,
    plates: HashMap<String, i64>,
    /// Files whose plate column names devices (`deviceId`, `uniqueId`, `imei`): a
    /// vehicle they add is known by that id to the live feed too.
    device_files: HashSet<usize>,
    /// Vehicles whose device id a device file has set (or found set).
    devices_named: HashSet<i64>,
    books: Books<'r>,
}

/// How an import's rows reach the settling, which needs each vehicle's rows together
/// in time order.
enum Order {
    /// While the rows come grouped by vehicle and in time order within each (a
    /// per-device export, or fleetctl's own), each vehicle's rows are settled and
    /// appended as soon as the next vehicle's start: no sort, no spill, and the
    /// database is written while the files are still being read.
    Stream {
        /// The current vehicle's rows not yet settled, and what its window before
        /// left for them.
        group: settle::Window,
        carry: Box<settle::Carry>,
        /// Vehicles whose rows have ended; seeing one again breaks the order.
        done: HashSet<i64>,
        /// Set when a row broke the order: the import starts again, sorted.
        broken: bool,
    },
    /// Any order: rows are sorted (spilled beyond a memory budget) and settled at
    /// the end of the reading.
    Sort(sort::Sorter),
}

/// Where each row of an import ended up: the files' and vehicles' tallies, and the
/// rejects reported.
struct Books<'r> {
    files: Vec<FileTally>,
    /// Each vehicle's tally, growing with its windows.
    growing: HashMap<i64, GrowingTally>,
    touched: Vec<i64>,
    plate_of: HashMap<i64, String>,
    added: HashSet<i64>,
    rejects: &'r mut dyn RejectSink,
    /// The fleet's stored `teleport_kmh`: the jump rule detection uses too.
    teleport_kmh: f64,
    /// PostgreSQL: the vehicles this import adds, analysed as their rows are
    /// appended, and what was found.
    beside: Option<(beside::Beside, pipeline::Tally)>,
}

impl<'c, 'r> Ingest<'c, 'r> {
    /// The fleet's zone (naive local times in files are read in it).
    pub fn zone(&self) -> &FleetZone {
        &self.checker.zone
    }

    /// Starts a file; returns its index for [`Ingest::row`].
    pub fn begin_file(&mut self, name: &str, format: &str) -> usize {
        self.books.files.push(FileTally {
            name: name.to_string(),
            format: format.to_string(),
            rows_read: 0,
            imported: 0,
            rejected: BTreeMap::new(),
            units: units::UnitEvidence::default(),
        });
        self.books.files.len() - 1
    }

    /// Says that file `file`'s plate column holds device ids (a Traccar export's
    /// `deviceId`, a tracker's `imei`): each vehicle its rows add, or find without
    /// one, gets its plate as device id, so that the device's pushes to `serve
    /// --ingest` land on it.
    pub fn plates_name_devices(&mut self, file: usize) {
        self.device_files.insert(file);
    }

    /// Records the units file `file` is read in (its figures are checked against
    /// its positions when the import ends).
    pub fn file_units(&mut self, file: usize, read_in: &FileUnits) {
        self.books.files[file].units.read_in = Some((read_in.speed, read_in.odometer));
    }

    /// Checks one row alone and stages it, or rejects it. `Break`: the rows broke
    /// vehicle and time order while streamed; the reader stops here, and the import
    /// reads the files again through the sort.
    pub fn row(&mut self, file: usize, row: &RawRow, units: &FileUnits) -> Result<Flow> {
        self.books.files[file].rows_read += 1;
        match self.checker.check(row, units, file) {
            Ok((plate, staged)) => {
                let vehicle = self.vehicle(plate, file).map_err(|e| e.message);
                self.stage_as(file, row.line, vehicle, staged)
            }
            Err((reason, detail)) => self.reject(file, row.line, reason, detail),
        }
    }

    fn reject(
        &mut self,
        file: usize,
        line: u64,
        reason: RejectReason,
        detail: String,
    ) -> Result<Flow> {
        self.books.reject(file, line, reason, detail)?;
        Ok(Flow::Continue(()))
    }

    /// The checks a row passes alone, to run on other threads (see [`Checker`]).
    pub fn checker(&self) -> &Checker {
        &self.checker
    }

    /// Takes the rows of a [`CheckedBatch`] (in file order), each line counted from
    /// `line_base`: finds or adds each plate's vehicle once and stages its rows, or
    /// counts and reports each rejection. `Break` as from [`Ingest::row`].
    pub fn accept_batch(
        &mut self,
        file: usize,
        line_base: u64,
        batch: CheckedBatch,
    ) -> Result<Flow> {
        // Looked up at a plate's first accepted row, so that only plates with rows
        // to stage add vehicles.
        let mut vehicles: Vec<Option<std::result::Result<i64, String>>> =
            vec![None; batch.plates.len()];
        for (line, outcome) in batch.rows {
            let line = line_base + line;
            self.books.files[file].rows_read += 1;
            let (plate, staged) = match outcome {
                Ok(ok) => ok,
                Err((reason, detail)) => {
                    self.books.reject(file, line, reason, detail)?;
                    continue;
                }
            };
            let vehicle = vehicles[plate as usize]
                .get_or_insert_with(|| {
                    self.vehicle(&batch.plates[plate as usize], file)
                        .map_err(|e| e.message)
                })
                .clone();
            if self.stage_as(file, line, vehicle, staged)?.is_break() {
                return Ok(Flow::Break(()));
            }
        }
        Ok(Flow::Continue(()))
    }

    /// Stages a checked row of the vehicle found for its plate, or rejects it with
    /// the reason no vehicle could be found.
    fn stage_as(
        &mut self,
        file: usize,
        line: u64,
        vehicle: std::result::Result<i64, String>,
        mut staged: Staged,
    ) -> Result<Flow> {
        match vehicle {
            Ok(id) => {
                staged.fix.vehicle_id = id;
                staged.line = line;
                self.stage(staged)
            }
            Err(message) => self.reject(file, line, RejectReason::BadPlate, message),
        }
    }

    fn stage(&mut self, row: Staged) -> Result<Flow> {
        let (group, carry, done, broken) = match &mut self.order {
            Order::Sort(sorter) => return sorter.push(row).map(|()| Flow::Continue(())),
            Order::Stream {
                group,
                carry,
                done,
                broken,
            } => (group, carry, done, broken),
        };
        if *broken {
            return Ok(Flow::Break(()));
        }
        let vehicle = row.fix.vehicle_id;
        // A vehicle's rows are settled when they end, or a window of them at a time.
        let (ended, last) = match group.rows.last() {
            Some(last) if last.fix.vehicle_id == vehicle => {
                if millis(&row) < millis(last) {
                    *broken = true;
                }
                (group.full_before(&row).then(|| group.take()), false)
            }
            // A vehicle's first row: it must not have been seen before.
            Some(last) => {
                done.insert(last.fix.vehicle_id);
                *broken |= done.contains(&vehicle);
                (Some(group.take()), true)
            }
            None => {
                *broken |= done.contains(&vehicle);
                (None, false)
            }
        };
        if *broken {
            return Ok(Flow::Break(()));
        }
        group.push(row);
        if let Some(rows) = ended {
            let before = std::mem::take(&mut **carry);
            **carry = settle_now(&self.importer, &mut self.books, rows, before, last)?;
        }
        Ok(Flow::Continue(()))
    }

    /// True when the rows broke vehicle and time order while being streamed: the
    /// reading stopped, and must start again with [`Ingest::sorted`].
    fn out_of_order(&self) -> bool {
        matches!(self.order, Order::Stream { broken: true, .. })
    }

    /// Counts a row the reader could not split into cells, and rejects it.
    pub fn malformed(&mut self, file: usize, line: u64, detail: String) -> Result<Flow> {
        self.books.files[file].rows_read += 1;
        self.reject(file, line, RejectReason::MalformedRow, detail)
    }
}

impl Books<'_> {
    /// Counts a rejected row in its file's tally and reports it.
    fn reject(
        &mut self,
        file: usize,
        line: u64,
        reason: RejectReason,
        detail: String,
    ) -> Result<()> {
        *self.files[file].rejected.entry(reason).or_insert(0) += 1;
        self.rejects.reject(&Reject {
            file: &self.files[file].name,
            line,
            reason,
            detail,
        })
    }

    /// Books one vehicle's settled rows (all of them, or a window's) and appends the
    /// kept ones; a vehicle's tally grows with each of its windows. `whole`: these
    /// are all the vehicle's rows of the import.
    fn append(
        &mut self,
        importer: &Importer,
        vehicle_id: i64,
        settled: Settled,
        whole: bool,
    ) -> Result<()> {
        for (s, reason, detail) in settled.rejected {
            self.reject(s.file_index, s.line, reason, detail)?;
        }
        let kept = settled.kept;
        if kept.is_empty() {
            return Ok(());
        }
        // A vehicle this import added holds these fixes and no other: analysed now,
        // beside the reading, rather than read back at the end.
        let only_these =
            whole && self.added.contains(&vehicle_id) && !self.growing.contains_key(&vehicle_id);
        if let Some((beside, tally)) = &mut self.beside
            && only_these
        {
            let mut in_order: Vec<&Staged> = kept.iter().collect();
            in_order.sort_by_key(|s| (s.fix.ts, s.ts_ms));
            let fixes = in_order
                .into_iter()
                .map(|s| store::positions::as_stored(&s.fix))
                .collect::<Result<Vec<_>>>()?;
            beside.submit(fixes, &mut |n, a| {
                tally.add(n, &a);
                importer.write_analysis(a)
            })?;
        }
        for s in &kept {
            self.files[s.file_index].imported += 1;
        }
        // Each run of consecutive rows from one file is evidence of its units.
        for run in kept.chunk_by(|a, b| a.file_index == b.file_index) {
            self.files[run[0].file_index].units.observe(run);
        }
        let growing = match self.growing.remove(&vehicle_id) {
            Some(g) => g,
            None => {
                self.touched.push(vehicle_id);
                GrowingTally {
                    tally: VehicleTally {
                        plate: self.plate_of.get(&vehicle_id).cloned().unwrap_or_default(),
                        added: self.added.contains(&vehicle_id),
                        imported: 0,
                        first_ts: kept[0].fix.ts,
                        last_ts: kept[0].fix.ts,
                        median_interval_s: None,
                        derived_speeds: 0,
                    },
                    intervals_ms: BTreeMap::new(),
                    last_ms: None,
                }
            }
        };
        let mut g = growing;
        g.tally.imported += kept.len() as u64;
        g.tally.last_ts = kept[kept.len() - 1].fix.ts;
        g.tally.derived_speeds += kept.iter().filter(|s| s.fix.speed_derived).count() as u64;
        for s in &kept {
            let ms = millis(s);
            if let Some(before) = g.last_ms {
                *g.intervals_ms.entry(ms - before).or_insert(0) += 1;
            }
            g.last_ms = Some(ms);
        }
        self.growing.insert(vehicle_id, g);
        importer.append(kept)
    }

    /// The vehicles' tallies, complete, by plate.
    fn vehicle_tallies(&mut self) -> Vec<VehicleTally> {
        let mut out: Vec<VehicleTally> = std::mem::take(&mut self.growing)
            .into_values()
            .map(|mut g| {
                g.tally.median_interval_s =
                    median_of_counts(&g.intervals_ms).map(|ms| ms as f64 / 1000.0);
                g.tally
            })
            .collect();
        out.sort_by(|a, b| a.plate.cmp(&b.plate));
        out
    }
}

/// A vehicle's tally while its windows are appended: the time between consecutive
/// fixes is counted by value, for an exact median in little memory.
struct GrowingTally {
    tally: VehicleTally,
    intervals_ms: BTreeMap<i64, u64>,
    last_ms: Option<i64>,
}

/// The median of values counted by value (the lower middle one of an even count).
fn median_of_counts(counts: &BTreeMap<i64, u64>) -> Option<i64> {
    let n: u64 = counts.values().sum();
    if n == 0 {
        return None;
    }
    let middle = n / 2;
    let mut seen = 0;
    for (&value, &count) in counts {
        seen += count;
        if seen > middle {
            return Some(value);
        }
    }
    None
}

/// The fixes already stored at the instants of one vehicle's rows (in time order),
/// for the settling to find clashes: none for a vehicle this import added.
fn stored_at_instants(
    importer: &Importer,
    added: &HashSet<i64>,
    rows: &[Staged],
) -> Result<HashMap<(i64, i64), (f64, f64)>> {
    let vehicle_id = rows[0].fix.vehicle_id;
    if added.contains(&vehicle_id) {
        return Ok(HashMap::new());
    }
    // A repeated local time may be placed up to its shift later when settled.
    let last = rows
        .iter()
        .map(|s| s.fix.ts + s.repeated_later_by_s)
        .max()
        .unwrap_or(rows[0].fix.ts);
    importer.stored_between(vehicle_id, rows[0].fix.ts, last)
}

/// Settles and appends one vehicle's rows, here and now (streamed input).
/// Settles and appends one window of a vehicle's rows, here and now, after the
/// window `carry` comes from; returns the carry for its next window.
fn settle_now(
    importer: &Importer,
    books: &mut Books,
    rows: Vec<Staged>,
    carry: settle::Carry,
    last: bool,
) -> Result<settle::Carry> {
    let vehicle_id = rows[0].fix.vehicle_id;
    let stored = stored_at_instants(importer, &books.added, &rows)?;
    let (settled, carry) =
        settle::settle_window(rows, carry, last, books.teleport_kmh, &mut |ts, ms| {
            Ok(stored.get(&(ts, ms)).copied())
        })?;
    books.append(importer, vehicle_id, settled, last)?;
    Ok(carry)
}

/// Settles one vehicle's rows against what is stored at their instants.
fn settle_against(
    rows: Vec<Staged>,
    stored: &HashMap<(i64, i64), (f64, f64)>,
    teleport_kmh: f64,
) -> Result<Settled> {
    settle_vehicle(rows, teleport_kmh, &mut |ts, ms| {
        Ok(stored.get(&(ts, ms)).copied())
    })
}

impl<'c, 'r> Ingest<'c, 'r> {
    fn new(
        importer: Importer<'c>,
        order: Order,
        checker: Checker,
        rejects: &'r mut dyn RejectSink,
        teleport_kmh: f64,
        beside: Option<beside::Beside>,
    ) -> Self {
        Ingest {
            importer,
            order,
            checker,
            plates: HashMap::new(),
            device_files: HashSet::new(),
            devices_named: HashSet::new(),
            books: Books {
                files: Vec::new(),
                growing: HashMap::new(),
                touched: Vec::new(),
                plate_of: HashMap::new(),
                added: HashSet::new(),
                rejects,
                teleport_kmh,
                beside: beside.map(|b| (b, pipeline::Tally::default())),
            },
        }
    }

    fn vehicle(&mut self, plate: &str, file: usize) -> Result<i64> {
        let device = self.device_files.contains(&file);
        if let Some(&id) = self.plates.get(plate) {
            // First seen in a file whose plates are no device ids: this one's are.
            if device && self.devices_named.insert(id) {
                self.importer.vehicle_id(plate, true)?;
            }
            return Ok(id);
        }
        let (id, added) = self.importer.vehicle_id(plate, device)?;
        if device {
            self.devices_named.insert(id);
        }
        if added {
            self.books.added.insert(id);
        }
        self.plates.insert(plate.to_string(), id);
        self.books.plate_of.insert(id, plate.to_string());
        Ok(id)
    }

    /// Settles what is left (the last streamed vehicle, or every sorted one),
    /// appends the survivors and returns the tallies and the vehicles touched.
    fn settle(self, progress: &mut dyn FnMut(f64)) -> Result<SettledImport> {
        let Ingest {
            importer,
            order,
            plates,
            mut books,
            ..
        } = self;
        match order {
            Order::Stream {
                mut group, carry, ..
            } => {
                if !group.rows.is_empty() {
                    settle_now(&importer, &mut books, group.take(), *carry, true)?;
                }
            }
            Order::Sort(mut sorter) => {
                let vehicles = plates.len().max(1);
                let done = std::cell::Cell::new(0usize);
                let progress = std::cell::RefCell::new(progress);
                let vehicle_done = || {
                    (progress.borrow_mut())(done.get() as f64 / vehicles as f64);
                    done.set(done.get() + 1);
                };
                let added = books.added.clone();
                let teleport_kmh = books.teleport_kmh;
                let books_cell = std::cell::RefCell::new(&mut books);
                // A vehicle that fits in one window is merged here, settled on every
                // core (with the fixes already stored at its rows' instants, read
                // here) and appended here; a larger one is settled here, window after
                // window, each carrying what the next needs.
                type Job = (Vec<Staged>, HashMap<(i64, i64), (f64, f64)>);
                let work = |(rows, stored): Job| {
                    let vehicle_id = rows[0].fix.vehicle_id;
                    settle_against(rows, &stored, teleport_kmh).map(|s| (vehicle_id, s))
                };
                let mut carry = settle::Carry::default();
                crate::parallel::map_in_order(
                    &work,
                    &mut |submit| {
                        sorter.for_each_window(&mut |rows, first, last| {
                            let stored = stored_at_instants(&importer, &added, &rows)?;
                            if first && last {
                                return submit((rows, stored));
                            }
                            let vehicle_id = rows[0].fix.vehicle_id;
                            let (settled, next) = settle::settle_window(
                                rows,
                                std::mem::take(&mut carry),
                                last,
                                teleport_kmh,
                                &mut |ts, ms| Ok(stored.get(&(ts, ms)).copied()),
                            )?;
                            carry = next;
                            books_cell
                                .borrow_mut()
                                .append(&importer, vehicle_id, settled, false)?;
                            if last {
                                vehicle_done();
                            }
                            Ok(())
                        })
                    },
                    &mut |outcome| {
                        let (vehicle_id, settled) = outcome?;
                        vehicle_done();
                        books_cell
                            .borrow_mut()
                            .append(&importer, vehicle_id, settled, true)
                    },
                )?;
            }
        }
        let beside = match books.beside.take() {
            Some((mut beside, mut tally)) => {
                beside.finish(&mut |n, a| {
                    tally.add(n, &a);
                    importer.write_analysis(a)
                })?;
                Some((std::mem::take(&mut beside.analysed), tally))
            }
            None => None,
        };
        // Every row appended before the analysis of the rest reads them.
        importer.wait_for_appends()?;
        let vehicles = books.vehicle_tallies();
        Ok(SettledImport {
            files: books.files,
            vehicles,
            touched: books.touched,
            beside,
        })
    }
}

/// A PostgreSQL import was set up without its analysis beside it.
fn beside_missing() -> Error {
    Error::internal("a PostgreSQL import without its analysis beside it")
}

/// What settling an import leaves.
struct SettledImport {
    files: Vec<FileTally>,
    vehicles: Vec<VehicleTally>,
    /// Every vehicle that got rows.
    touched: Vec<i64>,
    /// PostgreSQL: the vehicles analysed beside the import, and what was found.
    beside: Option<(HashSet<i64>, pipeline::Tally)>,
}

/// The rows the files' tallies rejected, by reason: `bad_plate 104, …`.
pub fn rejected_by_reason(files: &[FileTally]) -> String {
    let mut reasons: BTreeMap<RejectReason, u64> = BTreeMap::new();
    for f in files {
        for (reason, n) in &f.rejected {
            *reasons.entry(*reason).or_insert(0) += n;
        }
    }
    let mut listed: Vec<(RejectReason, u64)> = reasons.into_iter().collect();
    listed.sort_by_key(|&(_, n)| std::cmp::Reverse(n));
    let text: Vec<String> = listed
        .iter()
        .map(|(r, n)| format!("{} {n}", r.as_str()))
        .collect();
    if text.is_empty() {
        "no rows".to_string()
    } else {
        text.join(", ")
    }
}

/// What to do when no row of the files was imported, for their most common reason.
pub fn nothing_imported_hint(files: &[FileTally]) -> String {
    let most = files
        .iter()
        .flat_map(|f| f.rejected.iter())
        .fold(BTreeMap::<RejectReason, u64>::new(), |mut m, (r, n)| {
            *m.entry(*r).or_insert(0) += n;
            m
        })
        .into_iter()
        .max_by_key(|(_, n)| *n)
        .map(|(r, _)| r);
    match most {
        Some(RejectReason::BadPlate | RejectReason::MissingPlate) => {
            "give the vehicle's plate with --plate PLATE (a GPX track's name is not one)"
                .to_string()
        }
        _ => "write the rejected rows with --rejects FILE to see each one and why".to_string(),
    }
}

/// Imports into the database of `opts`: `read` feeds the files' rows to the
/// [`Ingest`] it is given (and may be called twice: see below); `rejects` receives
/// every rejected row; `progress` the fraction of the settling done. One
/// transaction: on any error nothing changes (a new database is not created).
///
/// The rows are first streamed (see [`Order::Stream`]). At the first row out of
/// vehicle and time order, what the stream wrote is undone, `rejects` told to
/// restart, and the files read again through the sort: the outcome is the same
/// whatever the order, only the time differs.
pub fn import(
    opts: &ImportOptions,
    read: &mut dyn FnMut(&mut Ingest) -> Result<()>,
    rejects: &mut dyn RejectSink,
    progress: &mut dyn FnMut(f64),
) -> Result<ImportSummary> {
    let started = std::time::Instant::now();
    let wanted = opts
        .time_zone
        .as_deref()
        .map(FleetZone::named)
        .transpose()?;
    // The file, when the fleet is one (the PostgreSQL paths below never read it).
    let (postgres, file) = match &opts.db {
        store::Location::Postgres(target) => (Some(target.clone()), PathBuf::new()),
        store::Location::File(path) => (None, path.clone()),
    };
    let created = postgres.is_none() && matches!(store::probe(&file)?, Probe::Missing);
    // Sort runs go beside the file, or (PostgreSQL) in the temporary folder.
    let (spill_dir, spill_prefix) = match &postgres {
        Some(target) => (
            std::env::temp_dir(),
            format!(".fleetctl-{}.import-", target.database()),
        ),
        None => (
            file.parent()
                .filter(|p| !p.as_os_str().is_empty())
                .map_or_else(|| PathBuf::from("."), |p| p.to_path_buf()),
            format!(
                ".{}.import-",
                file.file_name()
                    .map_or_else(|| "fleet.db".into(), |n| n.to_string_lossy().into_owned())
            ),
        ),
    };
    // A killed import's sort runs go, whether or not this one needs to sort.
    crate::scratch::remove_abandoned(&spill_dir, &spill_prefix);
    // `undo` takes back what a stream wrote before it met a row out of order.
    let mut run = |conn: Backend,
                   zone: FleetZone,
                   undo: &dyn Fn() -> Result<()>,
                   before_detection: &dyn Fn() -> Result<()>|
     -> Result<_> {
        let checker = Checker {
            zone: zone.clone(),
            utc: FleetZone::named("UTC")?,
            wall_now: opts.wall_now,
        };
        let stream = Order::Stream {
            group: settle::Window::default(),
            carry: Box::default(),
            done: HashSet::new(),
            broken: false,
        };
        // The fleet's own jump rule (defaults for a new database).
        let teleport_kmh = pipeline::stored_thresholds(conn.sql())?.teleport_kmh;
        // PostgreSQL: the vehicles the import adds are analysed as they are appended.
        let ctx = match conn {
            Backend::Postgres(c) => {
                Some(std::sync::Arc::new(pipeline::stored_context(c.as_ref())?))
            }
            Backend::Sqlite(_) => None,
        };
        let mut ingest = Ingest::new(
            conn.importer()?,
            stream,
            checker.clone(),
            rejects,
            teleport_kmh,
            ctx.clone().map(beside::Beside::start),
        );
        let streamed = read(&mut ingest);
        let ingest = if ingest.out_of_order() {
            drop(ingest);
            undo()?;
            rejects.restart()?;
            let sorter = sort::Sorter::new(spill_dir.clone(), &spill_prefix);
            let mut sorted = Ingest::new(
                conn.importer()?,
                Order::Sort(sorter),
                checker,
                rejects,
                teleport_kmh,
                ctx.clone().map(beside::Beside::start),
            );
            read(&mut sorted)?;
            sorted
        } else {
            streamed?;
            ingest
        };
        let SettledImport {
            files,
            vehicles,
            touched,
            beside,
        } = ingest.settle(&mut *progress)?;
        if opts.strict_units {
            units_or_refuse(&files)?;
        }
        before_detection()?;
        let analysis = if touched.is_empty() {
            None
        } else {
            Some(match conn {
                Backend::Sqlite(c) => pipeline::detect_vehicles(c, &touched, &mut |_| {})?,
                Backend::Postgres(c) => {
                    let (Some((analysed, mut tally)), Some(ctx)) = (beside, &ctx) else {
                        return Err(beside_missing());
                    };
                    // The rest: vehicles the fleet had, or too big for one window.
                    let started = std::time::Instant::now();
                    let rest: Vec<i64> = touched
                        .into_iter()
                        .filter(|id| !analysed.contains(id))
                        .collect();
                    pipeline::analyse_each_postgres(c, &rest, ctx, &mut tally)?;
                    tally.summary(started)
                }
            })
        };
        Ok((zone, files, vehicles, analysis))
    };
    let (zone, files, vehicles, analysis) = if let Some(target) = &postgres {
        let (conn, new) = store::pg::import::begin(target, wanted.as_ref())?;
        let conn = std::sync::Arc::new(conn);
        let outcome = (|| {
            let zone = store::read_zone(conn.as_ref())?;
            if let Some(w) = wanted.as_ref().filter(|w| **w != zone) {
                return Err(Error::invalid(format!(
                    "{} keeps its times in {}, not {}",
                    target.display(),
                    zone.name,
                    w.name
                ))
                .with_hint("leave out --time-zone, or import into a new database"));
            }
            store::pg::execute(&conn, "SAVEPOINT stream")?;
            let undo = || store::pg::execute(&conn, "ROLLBACK TO SAVEPOINT stream");
            let out = run(Backend::Postgres(&conn), zone, &undo, &|| Ok(()))?;
            if new && out.2.is_empty() {
                return Err(Error::new(
                    ErrorCode::NoData,
                    format!(
                        "no row could be imported, so no fleet was created: {}",
                        rejected_by_reason(&out.1)
                    ),
                )
                .with_hint(nothing_imported_hint(&out.1)));
            }
            Ok(out)
        })();
        // One transaction: committed whole, or rolled back (the server does so by
        // itself if the connection is lost first).
        match outcome {
            Ok(out) => {
                store::pg::commit(&conn)?;
                out
            }
            Err(e) => {
                let _ = store::pg::execute(&conn, "ROLLBACK");
                return Err(e);
            }
        }
    } else if created {
        let zone = wanted.ok_or_else(|| {
            Error::invalid(format!(
                "{} does not exist, and a new database needs the fleet's time zone",
                file.display()
            ))
            .with_hint("add --time-zone with an IANA name, e.g. --time-zone Europe/London")
        })?;
        store::build_new(&file, false, store::BULK_PAGE_SIZE, |w| {
            w.set_meta("schema_version", &store::SCHEMA_VERSION.to_string())?;
            w.set_meta("time_zone", &zone.name)?;
            // The new file has no journal: the stream's rows are deleted instead.
            let undo = || w.clear_vehicles_and_positions();
            let out = run(
                Backend::Sqlite(w.connection()),
                zone.clone(),
                &undo,
                &|| w.build_indexes(),
            )?;
            if out.2.is_empty() {
                return Err(Error::new(
                    ErrorCode::NoData,
                    format!(
                        "no row could be imported, so no database was created: {}",
                        rejected_by_reason(&out.1)
                    ),
                )
                .with_hint(nothing_imported_hint(&out.1)));
            }
            Ok(out)
        })?
    } else {
        store::with_write_transaction(&file, |conn| {
            let zone = store::read_zone(conn)?;
            if let Some(w) = wanted.as_ref().filter(|w| **w != zone) {
                return Err(Error::invalid(format!(
                    "{} keeps its times in {}, not {}",
                    file.display(),
                    zone.name,
                    w.name
                ))
                .with_hint("leave out --time-zone, or import into a new database"));
            }
            conn.execute_batch("SAVEPOINT stream")
                .map_err(store::db_write_err)?;
            let undo = || {
                conn.execute_batch("ROLLBACK TO stream")
                    .map_err(store::db_write_err)
            };
            let out = run(Backend::Sqlite(conn), zone, &undo, &|| Ok(()))?;
            conn.execute_batch("RELEASE stream")
                .map_err(store::db_write_err)?;
            Ok(out)
        })?
    };
    Ok(ImportSummary {
        db: PathBuf::from(opts.db.shown()),
        created,
        zone,
        files,
        vehicles,
        analysis,
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// Where an import writes.
#[derive(Clone, Copy)]
enum Backend<'c> {
    Sqlite(&'c rusqlite::Connection),
    Postgres(&'c std::sync::Arc<store::pg::PgConn>),
}

impl<'c> Backend<'c> {
    fn importer(self) -> Result<Importer<'c>> {
        match self {
            Backend::Sqlite(c) => Ok(Importer::start(c)),
            Backend::Postgres(c) => Importer::postgres(std::sync::Arc::clone(c)),
        }
    }

    fn sql(self) -> &'c dyn store::sql::Sql {
        match self {
            Backend::Sqlite(c) => c,
            Backend::Postgres(c) => c.as_ref(),
        }
    }
}

/// `--strict-units`: the first file whose figures agree with another unit than the
/// one they were read in stops the import.
fn units_or_refuse(files: &[FileTally]) -> Result<()> {
    for f in files {
        if let Some(s) = f.units.suspicions().first() {
            return Err(Error::invalid(format!("{}: {s}", f.name)).with_hint(format!(
                "nothing was imported; run again with {} (or without --strict-units to import as read)",
                s.flag
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::settle::{could_be_jump, staged};
    use super::*;
    use crate::geo::{LatLon, haversine_m};

    fn settle(mut rows: Vec<Staged>) -> Settled {
        rows.sort_by_key(|s| (s.fix.ts, s.ts_ms, s.line));
        settle_vehicle(rows, 250.0, &mut |_, _| Ok(None)).unwrap()
    }

    fn reasons(s: &Settled) -> Vec<(u64, RejectReason)> {
        let mut v: Vec<_> = s
            .rejected
            .iter()
            .map(|(r, why, _)| (r.line, *why))
            .collect();
        v.sort();
        v
    }

    #[test]
    fn duplicates_are_settled_the_same_in_any_order() {
        let rows = vec![
            staged(1, 100, 14.60, -90.50, Some(30.0)),
            staged(2, 100, 14.60, -90.50, None),
            staged(3, 115, 14.601, -90.50, Some(31.0)),
            staged(4, 130, 14.602, -90.50, Some(32.0)),
            staged(5, 130, 14.70, -90.50, Some(32.0)),
        ];
        let a = settle(rows.clone());
        let mut reversed = rows.clone();
        reversed.reverse();
        for (i, r) in reversed.iter_mut().enumerate() {
            r.line = 5 - i as u64;
        }
        let b = settle(reversed);
        assert_eq!(a.kept.len(), 2);
        assert_eq!(a.kept[0].line, 1, "the row with a speed is kept");
        assert_eq!(
            reasons(&a),
            vec![
                (2, RejectReason::ExactDuplicate),
                (4, RejectReason::ConflictingDuplicate),
                (5, RejectReason::ConflictingDuplicate)
            ]
        );
        assert_eq!(reasons(&a), reasons(&b));
        assert_eq!(
            a.kept.iter().map(|s| s.fix).collect::<Vec<_>>(),
            b.kept.iter().map(|s| s.fix).collect::<Vec<_>>()
        );
    }

    #[test]
    fn jumps_over_250_kmh_are_rejected_and_missing_speeds_derived() {
        // 0.001° of latitude is 111 m; 15 s apart that is 26.7 km/h.
        let rows = vec![
            staged(1, 0, 14.600, -90.5, None),
            staged(2, 15, 14.601, -90.5, None),
            staged(3, 20, 15.601, -90.5, Some(50.0)),
            staged(4, 30, 14.602, -90.5, None),
        ];
        let s = settle(rows);
        assert_eq!(reasons(&s), vec![(3, RejectReason::ImpossibleJump)]);
        let speeds: Vec<f64> = s.kept.iter().map(|k| k.fix.speed_kmh).collect();
        assert!((speeds[0] - 26.7).abs() < 0.2, "{speeds:?}");
        assert!((speeds[1] - 26.7).abs() < 0.2, "{speeds:?}");
        assert!(s.kept.iter().all(|k| k.fix.speed_derived));
    }

    /// Regression (a real taxi fleet: the import kept a bad first fix and rejected
    /// the three good ones after it): a first fix that the three after it, agreeing
    /// with each other, all jump from is the one rejected; a bad fix later on is
    /// still judged from the good ones before it.
    #[test]
    fn a_bad_first_fix_does_not_condemn_the_good_ones_after_it() {
        let rows = vec![
            staged(1, 0, 15.600, -90.5, None), // 111 km away
            staged(2, 15, 14.600, -90.5, None),
            staged(3, 30, 14.601, -90.5, None),
            staged(4, 45, 14.602, -90.5, None),
            staged(5, 60, 14.603, -90.5, None),
            staged(6, 75, 15.603, -90.5, None), // a jump later on
            staged(7, 90, 14.604, -90.5, None),
        ];
        let s = settle(rows);
        assert_eq!(
            reasons(&s),
            vec![
                (1, RejectReason::ImpossibleJump),
                (6, RejectReason::ImpossibleJump)
            ]
        );
        let lines: Vec<u64> = s.kept.iter().map(|k| k.line).collect();
        assert_eq!(lines, [2, 3, 4, 5, 7]);
        // Two that agree are not enough to outvote it.
        let rows = vec![
            staged(1, 0, 15.600, -90.5, None),
            staged(2, 15, 14.600, -90.5, None),
            staged(3, 30, 14.601, -90.5, None),
        ];
        let s = settle(rows);
        assert_eq!(s.kept.iter().map(|k| k.line).collect::<Vec<_>>(), [1]);
    }

    /// A lone fix out and back, far and fast, is a spike; a vehicle turning back at
    /// driving speed, or driving on, is not.
    #[test]
    fn a_spike_is_set_aside_and_a_turn_is_not() {
        // 0.0054° of latitude is 600 m: 20 s out and 20 s back, 108 km/h each way.
        let rows = vec![
            staged(1, 0, 14.600, -90.5, None),
            staged(2, 20, 14.6054, -90.5, None),
            staged(3, 40, 14.600, -90.5, None),
            staged(4, 60, 14.6001, -90.5, None),
        ];
        assert_eq!(reasons(&settle(rows)), vec![(2, RejectReason::Spike)]);
        // Out and back at 54 km/h (0.0027°, 300 m, in 20 s each way): driving.
        let turn = vec![
            staged(1, 0, 14.600, -90.5, None),
            staged(2, 20, 14.6027, -90.5, None),
            staged(3, 40, 14.600, -90.5, None),
        ];
        assert_eq!(reasons(&settle(turn)), vec![]);
        // Fast and far, but on along the road: driving.
        let on = vec![
            staged(1, 0, 14.600, -90.5, None),
            staged(2, 20, 14.6054, -90.5, None),
            staged(3, 40, 14.6108, -90.5, None),
        ];
        assert_eq!(reasons(&settle(on)), vec![]);
    }

    /// A cluster of bad fixes 2.9 km off the track: the first ones are impossible
    /// jumps; the later ones come in slowly enough to pass the jump rule alone, yet
    /// the cluster went out and came back, so all of it goes and the track after it
    /// stays. A vehicle that drove there and stayed is kept.
    #[test]
    fn a_cluster_of_bad_fixes_is_set_aside_however_long_it_lasts() {
        let mut rows: Vec<Staged> = (0..8)
            .map(|i| staged(i + 1, i as i64 * 15, 14.600 + i as f64 * 1e-4, -90.5, None))
            .collect();
        // Six fixes at 15 s, 0.026° (2.9 km) north: 696, 348, 232 km/h… from the track.
        for k in 0..6u64 {
            let ts = 120 + k as i64 * 15;
            rows.push(staged(100 + k, ts, 14.626, -90.5, None));
        }
        // Back on the track, a little further on, and on.
        for i in 0..8u64 {
            let ts = 210 + i as i64 * 15;
            rows.push(staged(200 + i, ts, 14.6008 + i as f64 * 1e-4, -90.5, None));
        }
        let s = settle(rows.clone());
        let why = reasons(&s);
        assert!(
            why.iter().all(|(l, _)| (100..106).contains(l)),
            "only the cluster goes: {why:?}"
        );
        assert_eq!(why.len(), 6, "all of the cluster goes: {why:?}");
        assert!(why.contains(&(105, RejectReason::Spike)), "{why:?}");
        assert!(
            s.kept.iter().all(|k| k.fix.speed_kmh < 10.0),
            "no speed from it"
        );
        // Had the vehicle stayed there (no way back), what came in slowly enough stays.
        let stayed: Vec<Staged> = rows.into_iter().filter(|r| r.line < 200).collect();
        let s = settle(stayed);
        assert!(s.kept.iter().any(|k| k.line == 105), "{:?}", reasons(&s));
    }

    #[test]
    fn a_stored_fix_wins_over_the_rows_at_its_instant() {
        let rows = vec![
            staged(1, 100, 14.60, -90.50, Some(1.0)),
            staged(2, 100, 14.61, -90.50, Some(1.0)),
        ];
        let s = settle_vehicle(rows, 250.0, &mut |_, _| Ok(Some((14.60, -90.50)))).unwrap();
        assert!(s.kept.is_empty());
        assert_eq!(
            reasons(&s),
            vec![
                (1, RejectReason::AlreadyStored),
                (2, RejectReason::ConflictingDuplicate)
            ]
        );
    }

    #[test]
    fn the_quick_jump_bound_never_clears_a_jump_haversine_would_find() {
        // Pairs from a metre to thousands of km apart, a second to an hour apart,
        // from the equator to the Arctic and across the antimeridian.
        let mut jumps = 0;
        for (lat, lon) in [(14.6, -90.5), (0.0, 10.0), (69.5, 18.9), (-33.9, 179.9999)] {
            for d_deg in [1e-5, 1e-4, 5e-4, 2e-3, 0.01, 0.1, 1.0, 20.0] {
                for dt_s in [1, 5, 15, 60, 600, 3600] {
                    for (dlat, dlon) in [(d_deg, 0.0), (0.0, d_deg), (d_deg, -d_deg)] {
                        let lon_b = lon + dlon;
                        let lon_b = if lon_b > 180.0 { lon_b - 360.0 } else { lon_b };
                        let a = staged(1, 0, lat, lon, Some(0.0));
                        let b = staged(2, dt_s, lat + dlat, lon_b, Some(0.0));
                        let d_m =
                            haversine_m(LatLon::new(lat, lon), LatLon::new(lat + dlat, lon_b));
                        let jump = crate::analyze::is_jump(d_m, dt_s as f64, 250.0);
                        jumps += jump as u32;
                        assert!(
                            !jump || could_be_jump(&a, &b, 250.0),
                            "{lat},{lon} +{dlat},{dlon} in {dt_s} s"
                        );
                    }
                }
            }
        }
        assert!(jumps > 100, "the cases include jumps: {jumps}");
    }
}
