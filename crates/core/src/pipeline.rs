//! The read–detect–write pipeline: a store's fixes, one vehicle at a time, through
//! detection (`analyze`, which knows nothing of SQLite), into the derived tables.
//! `generate` runs it inside its own bulk load; `fleetctl analyze` runs it over an
//! existing database in one transaction, so a failure or a kill leaves the previous
//! results.

use crate::analyze::{self, Thresholds};
use crate::error::Result;
use crate::model::{Fix, VehicleAnalysis};
use crate::parallel::Submit;
use crate::store;
use rusqlite::Connection;
use std::path::Path;

/// What a detection run found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AnalyzeSummary {
    /// Vehicles analysed.
    pub vehicles: usize,
    /// Fixes read.
    pub fixes: usize,
    /// Stops found.
    pub stops: usize,
    /// Trips found.
    pub trips: usize,
    /// Events found, by kind name.
    pub events: Vec<(&'static str, usize)>,
    /// Vehicle-days whose odometer readings were not used, by reason
    /// (`decreasing`, `implausible`).
    pub odometer_rejected: Vec<(&'static str, usize)>,
    /// Wall time, seconds.
    pub seconds: f64,
}

/// Runs detection over a whole store inside the connection's current state,
/// replacing the derived tables and the thresholds in `meta`. The caller decides
/// the transaction (so a failure leaves the previous results). `progress` receives
/// the fraction of vehicles done.
pub fn detect_into(
    conn: &Connection,
    thresholds: Thresholds,
    progress: &mut dyn FnMut(f64),
) -> Result<AnalyzeSummary> {
    let started = std::time::Instant::now();
    thresholds.validate()?;
    let zone = store::read_zone(conn)?;
    let ctx = analyze::Context::new(
        thresholds,
        zone,
        store::read_geofences(conn)?,
        &store::read_places(conn)?,
    )
    .with_vehicle_limits(store::read::vehicle_speed_limits(conn)?);
    let mut out = store::DerivedWriter::start(conn)?;
    for (k, v) in ctx.thresholds.to_meta() {
        out.set_meta(k, &v)?;
    }
    let mut summary = AnalyzeSummary::default();
    let mut counts = std::collections::BTreeMap::new();
    let mut odometer = std::collections::BTreeMap::new();
    let vehicles = store::read::vehicles(conn)?.len().max(1);
    in_parallel(
        &ctx,
        &mut |submit| store::read_fixes(conn, None, |next| feed(next, &ctx, submit)),
        &mut |fixes, a| {
            progress(summary.vehicles as f64 / vehicles as f64);
            summary.vehicles += 1;
            summary.fixes += fixes;
            summary.stops += a.stops.len();
            summary.trips += a.trips.len();
            for e in &a.events {
                *counts.entry(e.kind).or_insert(0usize) += 1;
            }
            for why in a.daily.iter().filter_map(|d| d.odometer_rejected) {
                *odometer.entry(why.as_str()).or_insert(0usize) += 1;
            }
            out.write(&a)
        },
    )?;
    out.finish()?;
    summary.events = counts.into_iter().map(|(k, n)| (k.as_str(), n)).collect();
    summary.odometer_rejected = odometer.into_iter().collect();
    summary.seconds = started.elapsed().as_secs_f64();
    Ok(summary)
}

/// One vehicle for detection: its fixes, or the analysis of one too big to hold,
/// done while it was read.
enum Job {
    Fixes(Vec<Fix>),
    Analysed(usize, VehicleAnalysis),
}

/// Groups the fixes `next` gives (vehicle and time order) into a job per vehicle; a
/// vehicle with more than a window of fixes is analysed here, a window at a time
/// (`analyze::window`), so that no vehicle is ever held whole.
fn feed(
    next: &mut dyn FnMut() -> Result<Option<Fix>>,
    ctx: &analyze::Context,
    submit: &mut Submit<Job>,
) -> Result<()> {
    let window = window_fixes();
    let mut pending = next()?;
    while let Some(first) = pending.take() {
        let vehicle_id = first.vehicle_id;
        let mut fixes = vec![first];
        let mut more = true;
        while more && fixes.len() < window {
            match next()? {
                Some(f) if f.vehicle_id == vehicle_id => fixes.push(f),
                other => (pending, more) = (other, false),
            }
        }
        if !more {
            submit(Job::Fixes(fixes))?;
            continue;
        }
        let mut rest = || -> Result<Option<Fix>> {
            Ok(match next()? {
                Some(f) if f.vehicle_id == vehicle_id => Some(f),
                other => {
                    pending = other;
                    None
                }
            })
        };
        let (read, found) = analyze::window::analyze_streamed(fixes, &mut rest, ctx, window)?;
        submit(Job::Analysed(read, found))?;
    }
    Ok(())
}

/// Fixes per window: `analyze::window::WINDOW_FIXES`, or `FLEETCTL_WINDOW_FIXES` in
/// debug builds (tests make every window small).
fn window_fixes() -> usize {
    if cfg!(debug_assertions)
        && let Some(n) = std::env::var("FLEETCTL_WINDOW_FIXES")
            .ok()
            .and_then(|v| v.parse().ok())
    {
        return n;
    }
    analyze::window::WINDOW_FIXES
}

/// Detection on every core, one writer (`parallel::map_in_order`): `feed` submits
/// each vehicle, read on this thread; `write` gets each vehicle's number of fixes
/// and analysis back on this thread, in submission order.
fn in_parallel(
    ctx: &analyze::Context,
    feed: &mut dyn FnMut(&mut Submit<Job>) -> Result<()>,
    write: &mut dyn FnMut(usize, VehicleAnalysis) -> Result<()>,
) -> Result<()> {
    crate::parallel::map_in_order(
        &|job: Job| match job {
            Job::Fixes(fixes) => (fixes.len(), analyze::analyze_vehicle(&fixes, ctx)),
            Job::Analysed(read, found) => (read, found),
        },
        feed,
        &mut |(n, a)| write(n, a),
    )
}

/// Re-runs detection for some vehicles only (those an import touched), with the
/// thresholds stored in `meta`, inside the caller's transaction.
pub fn detect_vehicles(
    conn: &Connection,
    vehicle_ids: &[i64],
    progress: &mut dyn FnMut(f64),
) -> Result<AnalyzeSummary> {
    let started = std::time::Instant::now();
    let ctx = stored_context(conn)?;
    let mut out = store::DerivedWriter::for_vehicles(conn, vehicle_ids)?;
    for (k, v) in ctx.thresholds.to_meta() {
        out.set_meta(k, &v)?;
    }
    let mut summary = AnalyzeSummary::default();
    let mut counts = std::collections::BTreeMap::new();
    let mut odometer = std::collections::BTreeMap::new();
    in_parallel(
        &ctx,
        &mut |submit| {
            for &id in vehicle_ids {
                store::read_fixes(conn, Some(id), |next| feed(next, &ctx, submit))?;
            }
            Ok(())
        },
        &mut |fixes, a| {
            progress(summary.vehicles as f64 / vehicle_ids.len().max(1) as f64);
            summary.vehicles += 1;
            summary.fixes += fixes;
            summary.stops += a.stops.len();
            summary.trips += a.trips.len();
            for e in &a.events {
                *counts.entry(e.kind).or_insert(0usize) += 1;
            }
            for why in a.daily.iter().filter_map(|d| d.odometer_rejected) {
                *odometer.entry(why.as_str()).or_insert(0usize) += 1;
            }
            out.write(&a)
        },
    )?;
    summary.events = counts.into_iter().map(|(k, n)| (k.as_str(), n)).collect();
    summary.odometer_rejected = odometer.into_iter().collect();
    summary.seconds = started.elapsed().as_secs_f64();
    Ok(summary)
}

/// The thresholds stored in a database's `meta`: the default for one that is missing
/// (a database from before it existed), an error for one that cannot be read or
/// is not a number — never a silent default, which the next analysis would write
/// back over the fleet's own settings. The one reading of them (`Db::open` too).
pub fn stored_thresholds(conn: &dyn store::sql::Sql) -> Result<Thresholds> {
    let keys: Vec<&str> = Thresholds::default()
        .to_meta()
        .into_iter()
        .map(|(key, _)| key)
        .collect();
    // One read: on PostgreSQL each is a round trip.
    let meta = store::read_meta_entries(conn, &keys)?;
    Thresholds::from_meta(|k| meta.get(k).cloned())
}

/// What detection needs from a database besides the fixes: its stored thresholds,
/// zone, geofences, places and the vehicles' own limits.
pub fn stored_context(conn: &dyn store::sql::Sql) -> Result<analyze::Context> {
    Ok(analyze::Context::new(
        stored_thresholds(conn)?,
        store::read_zone(conn)?,
        store::read_geofences(conn)?,
        &store::read_places(conn)?,
    )
    .with_vehicle_limits(store::read::vehicle_speed_limits(conn)?))
}

/// Removes every position before `before_ts` from the fleet at `db` and analyses
/// the vehicles that had some again, in one write transaction, so every derived row
/// is what a full analysis of the positions kept gives; how many positions went,
/// and from how many vehicles.
pub fn prune_before(db: &store::Location, before_ts: i64) -> Result<(usize, usize)> {
    let path = match db {
        store::Location::File(path) => path,
        store::Location::Postgres(target) => {
            let conn = store::pg::open_reader(target)?;
            let (deleted, vehicles) = store::pg::in_transaction(&conn, || {
                let (deleted, vehicles) = store::pg::delete_positions_before(&conn, before_ts)?;
                detect_vehicles_postgres(&conn, &vehicles)?;
                Ok((deleted, vehicles.len()))
            })?;
            // Months left empty go once the prune is committed, each in a moment of
            // its own (dropping one locks the positions for as long as it takes).
            store::pg::drop_empty_months_before(&conn, before_ts)?;
            return Ok((deleted, vehicles));
        }
    };
    store::with_write_transaction(path, |conn| {
        let (deleted, vehicles) = store::live::delete_positions_before(conn, before_ts)?;
        if !vehicles.is_empty() {
            detect_vehicles(conn, &vehicles, &mut |_| {})?;
        }
        Ok((deleted, vehicles.len()))
    })
}

/// The fleet's zone and the detection thresholds of the database at `path`.
pub fn settings(path: &Path) -> Result<(crate::clock::FleetZone, Thresholds)> {
    let conn = store::open_read_only(path)?;
    Ok((store::read_zone(&conn)?, stored_thresholds(&conn)?))
}

/// The fleet's zone and the detection thresholds of a PostgreSQL fleet, read by the
/// same rules as a file's.
pub fn settings_in_postgres(
    target: &store::pg::Target,
) -> Result<(crate::clock::FleetZone, Thresholds, Vec<String>)> {
    let meta = store::pg::read_meta(target)?;
    let mut under_way: Vec<String> = meta
        .iter()
        .filter_map(|(k, v)| {
            let shard = k.strip_prefix(UNDER_WAY_PREFIX)?.replace("_of_", "/");
            Some(format!(
                "analyze --shard {shard} {v} and has not completed: under way, or interrupted (run `fleetctl analyze --shard {shard}` again); until it completes its vehicles may keep rows of the thresholds before"
            ))
        })
        .collect();
    under_way.sort();
    Ok((
        store::zone_of(meta.get("time_zone").cloned())?,
        Thresholds::from_meta(|k| meta.get(k).cloned())?,
        under_way,
    ))
}

/// Debug builds only: `FLEETCTL_TEST_FAIL_SHARD` makes a shard's analysis fail at
/// its first vehicle, as a killed one stops.
fn injected_shard_failure() -> Result<()> {
    #[cfg(debug_assertions)]
    if std::env::var_os("FLEETCTL_TEST_FAIL_SHARD").is_some() {
        return Err(crate::error::Error::internal(
            "a shard's failure injected for a test",
        ));
    }
    Ok(())
}

/// The `meta` key a shard's analysis holds while it runs (`…1_of_2`), removed when
/// it completes: a shard killed half-way leaves it, and `settings` says so until the
/// shard is run again (the fleet then mixes rows of the old and new thresholds).
const UNDER_WAY_PREFIX: &str = "analysis_under_way_";

/// Re-runs detection over a fleet on PostgreSQL, or over one shard of it (`shard`:
/// `(I, N)`, the vehicles a stable hash of their id puts in shard I of N), with the
/// stored thresholds as `adjust` changes them (and stores them so). Each vehicle is
/// analysed in a transaction of its own under its advisory lock, so several
/// analysers (other shards, or live analysis) run at once and a failure or a kill
/// leaves every vehicle wholly analysed, before or after.
pub fn reanalyze_postgres(
    target: &store::pg::Target,
    adjust: &dyn Fn(&mut Thresholds),
    shard: (u32, u32),
    progress: &mut dyn FnMut(f64),
) -> Result<AnalyzeSummary> {
    let started = std::time::Instant::now();
    let conn = store::pg::open_reader(target)?;
    store::pg::refuse_standby(&conn, "analyze")?;
    let mut thresholds = stored_thresholds(&conn)?;
    adjust(&mut thresholds);
    thresholds.validate()?;
    let under_way = format!("{UNDER_WAY_PREFIX}{}_of_{}", shard.0, shard.1);
    let mut entries: Vec<(&str, String)> = thresholds.to_meta();
    let now = crate::clock::wall_clock_now();
    let since =
        jiff::Timestamp::from_second(now).map_or_else(|_| now.to_string(), |t| t.to_string());
    entries.push((under_way.as_str(), format!("began at {since}")));
    store::pg::write_meta(&conn, &entries)?;
    let ctx = stored_context(&conn)?;
    let vehicles: Vec<i64> = store::read::vehicles(&conn)?
        .into_iter()
        .map(|(v, _)| v.id)
        .filter(|&id| store::pg::in_shard(id, shard))
        .collect();
    drop(conn);
    // A worker per core, each on a connection of its own, takes the next vehicle:
    // reading, detecting and writing overlap across vehicles, and each vehicle is
    // still one transaction under its lock.
    let workers = crate::parallel::cores().min(vehicles.len()).max(1);
    let next = std::sync::atomic::AtomicUsize::new(0);
    let failed = std::sync::atomic::AtomicBool::new(false);
    let (found, results) = std::sync::mpsc::channel::<(usize, VehicleAnalysis)>();
    let mut tally = Tally::default();
    std::thread::scope(|scope| -> Result<()> {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                let (found, next, failed, ctx, vehicles) =
                    (found.clone(), &next, &failed, &ctx, &vehicles);
                scope.spawn(move || -> Result<()> {
                    use std::sync::atomic::Ordering;
                    let conn = store::pg::open_reader(target)?;
                    while !failed.load(Ordering::Relaxed) {
                        let Some(&vehicle_id) = vehicles.get(next.fetch_add(1, Ordering::Relaxed))
                        else {
                            break;
                        };
                        let done = injected_shard_failure().and_then(|()| {
                            store::pg::analyse_vehicle(&conn, vehicle_id, &|fixes| {
                                analyze::analyze_vehicle(fixes, ctx)
                            })
                        });
                        match done {
                            Ok(done) => {
                                let _ = found.send(done);
                            }
                            Err(e) => {
                                failed.store(true, Ordering::Relaxed);
                                return Err(e);
                            }
                        }
                    }
                    Ok(())
                })
            })
            .collect();
        drop(found);
        for (fixes, a) in results {
            tally.add(fixes, &a);
            progress(tally.summary.vehicles as f64 / vehicles.len() as f64);
        }
        for handle in handles {
            handle
                .join()
                .map_err(|_| crate::error::Error::internal("an analysis worker panicked"))??;
        }
        Ok(())
    })?;
    // What the analysis replaced is reclaimed now, not under the servers' load.
    store::pg::tidy_derived(target, shard.1 > 1)?;
    store::pg::delete_meta(&store::pg::open_reader(target)?, &under_way)?;
    Ok(tally.summary(started))
}

/// Re-runs detection for some vehicles of a PostgreSQL fleet (those an import
/// touched), with its stored thresholds, inside the caller's transaction.
pub fn detect_vehicles_postgres(
    conn: &store::pg::PgConn,
    vehicle_ids: &[i64],
) -> Result<AnalyzeSummary> {
    let started = std::time::Instant::now();
    let ctx = stored_context(conn)?;
    let mut tally = Tally::default();
    analyse_each_postgres(conn, vehicle_ids, &ctx, &mut tally)?;
    Ok(tally.summary(started))
}

/// Analyses each of `vehicle_ids` from every fix stored, inside the caller's
/// transaction, and adds what it found to `tally`.
pub(crate) fn analyse_each_postgres(
    conn: &store::pg::PgConn,
    vehicle_ids: &[i64],
    ctx: &analyze::Context,
    tally: &mut Tally,
) -> Result<()> {
    for &vehicle_id in vehicle_ids {
        let (fixes, a) = store::pg::analyse_vehicle_in(conn, vehicle_id, &|fixes| {
            analyze::analyze_vehicle(fixes, ctx)
        })?;
        tally.add(fixes, &a);
    }
    Ok(())
}

/// What analyses found, added up vehicle by vehicle.
#[derive(Default)]
pub(crate) struct Tally {
    summary: AnalyzeSummary,
    events: std::collections::BTreeMap<crate::model::EventKind, usize>,
    odometer: std::collections::BTreeMap<&'static str, usize>,
}

impl Tally {
    pub(crate) fn add(&mut self, fixes: usize, a: &VehicleAnalysis) {
        self.summary.vehicles += 1;
        self.summary.fixes += fixes;
        self.summary.stops += a.stops.len();
        self.summary.trips += a.trips.len();
        for e in &a.events {
            *self.events.entry(e.kind).or_insert(0) += 1;
        }
        for why in a.daily.iter().filter_map(|d| d.odometer_rejected) {
            *self.odometer.entry(why.as_str()).or_insert(0) += 1;
        }
    }

    pub(crate) fn summary(self, started: std::time::Instant) -> AnalyzeSummary {
        AnalyzeSummary {
            events: self
                .events
                .into_iter()
                .map(|(k, n)| (k.as_str(), n))
                .collect(),
            odometer_rejected: self.odometer.into_iter().collect(),
            seconds: started.elapsed().as_secs_f64(),
            ..self.summary
        }
    }
}

/// Re-runs detection over the database at `path`, with the stored thresholds as
/// `adjust` changes them (and stores them so), in one write transaction: committed
/// when complete, rolled back on any failure. Thresholds not adjusted keep their
/// stored values.
pub fn reanalyze(
    path: &Path,
    adjust: &dyn Fn(&mut Thresholds),
    progress: &mut dyn FnMut(f64),
) -> Result<AnalyzeSummary> {
    store::with_upgrading_write_transaction(path, |conn| {
        let mut thresholds = stored_thresholds(conn)?;
        adjust(&mut thresholds);
        detect_into(conn, thresholds, progress)
    })
}

/// Changes the fleet at `db` with `edit` (places,
/// geofences, a vehicle's limit) and re-runs detection with the stored thresholds —
/// for every vehicle, or for `only` these — in one write transaction.
pub fn edit_and_reanalyze<T>(
    db: &store::Location,
    edit: impl FnOnce(&dyn store::sql::Sql) -> Result<T>,
    only: Option<&[i64]>,
    progress: &mut dyn FnMut(f64),
) -> Result<(T, AnalyzeSummary)> {
    let path = match db {
        store::Location::File(path) => path,
        store::Location::Postgres(target) => {
            let conn = store::pg::open_reader(target)?;
            return store::pg::in_transaction(&conn, || {
                let out = edit(&conn)?;
                let all: Vec<i64>;
                let vehicles = match only {
                    Some(ids) => ids,
                    None => {
                        all = store::read::vehicles(&conn)?
                            .into_iter()
                            .map(|(v, _)| v.id)
                            .collect();
                        &all
                    }
                };
                Ok((out, detect_vehicles_postgres(&conn, vehicles)?))
            });
        }
    };
    store::with_write_transaction(path, |conn| {
        let out = edit(conn)?;
        let summary = match only {
            Some(ids) => detect_vehicles(conn, ids, progress)?,
            None => detect_into(conn, stored_thresholds(conn)?, progress)?,
        };
        Ok((out, summary))
    })
}
