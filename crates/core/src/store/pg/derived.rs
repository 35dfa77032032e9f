//! Detection's results into PostgreSQL, one vehicle per transaction: the vehicle's
//! advisory lock taken first (two analysers, two shards or a batch and a live one,
//! never analyse one vehicle at once), its fixes read, detection run, its derived
//! rows replaced with `COPY`, and all committed together, so a killed analyser
//! leaves each vehicle analysed before or after, never half.

use super::Target;
use super::load::escape_into;
use crate::error::{Error, Result};
use crate::model::{Fix, VehicleAnalysis};
use crate::store::derived::DERIVED_TABLES;
use crate::store::pg::PgConn;
use crate::store::read;
use crate::store::tables::{Cell, Derived};
use std::fmt::Write as _;
use std::io::Write as _;

/// The advisory lock class of a vehicle's analysis (the vehicle id is the other key).
pub(crate) const ANALYSIS_LOCK: i32 = 0x666c_7461; // "flta"

/// Analyses one vehicle in a transaction of its own: waits for its lock, reads its
/// fixes, runs `detect` on them and replaces its derived rows. Returns how many
/// fixes were read and what was found.
pub fn analyse_vehicle(
    conn: &PgConn,
    vehicle_id: i64,
    detect: &dyn Fn(&[Fix]) -> VehicleAnalysis,
) -> Result<(usize, VehicleAnalysis)> {
    super::in_transaction(conn, || analyse_vehicle_in(conn, vehicle_id, detect))
}

/// [`analyse_vehicle`] inside the caller's transaction (an import's): the lock is
/// held until it ends.
pub fn analyse_vehicle_in(
    conn: &PgConn,
    vehicle_id: i64,
    detect: &dyn Fn(&[Fix]) -> VehicleAnalysis,
) -> Result<(usize, VehicleAnalysis)> {
    let target = conn.target().clone();
    conn.with_client(|client| lock_vehicle(client, &target, vehicle_id))?;
    let mut fixes = Vec::new();
    read::positions_between(conn, vehicle_id, i64::MIN, i64::MAX, &mut |f, _| {
        fixes.push(*f)
    })?;
    let found = detect(&fixes);
    conn.with_client(|client| write_analysis(client, &target, vehicle_id, &found))?;
    Ok((fixes.len(), found))
}

/// Writes the rows of a vehicle added in the caller's transaction, which has none
/// yet. No other connection can see the vehicle before the commit, so no other
/// analyser can be at it: no lock is taken.
pub fn write_new_vehicle_analysis(conn: &PgConn, a: &VehicleAnalysis) -> Result<()> {
    let target = conn.target().clone();
    conn.with_client(|client| {
        append_analysis(client, &target, a, &mut NextIds::default()).map(drop)
    })
}

/// Replaces one vehicle's derived rows with `a`'s (inside the caller's transaction).
fn write_analysis(
    client: &mut postgres::Client,
    target: &Target,
    vehicle_id: i64,
    a: &VehicleAnalysis,
) -> Result<()> {
    delete_vehicle_rows(client, target, vehicle_id)?;
    append_analysis(client, target, a, &mut NextIds::default()).map(drop)
}

/// The ids a vehicle's next stop, trip and event rows get.
#[derive(Debug, Clone, Copy)]
pub struct NextIds {
    stops: i64,
    trips: i64,
    events: i64,
}

impl Default for NextIds {
    /// A vehicle without rows: each numbering starts at 1.
    fn default() -> NextIds {
        NextIds {
            stops: 1,
            trips: 1,
            events: 1,
        }
    }
}

/// The keys of rows [`append_analysis`] wrote, so that they can be taken back: the
/// live feed's provisional answer for a vehicle's open stretch.
#[derive(Debug, Clone, Default)]
pub struct WrittenKeys {
    vehicle_id: i64,
    stops: Vec<i64>,
    trips: Vec<i64>,
    events: Vec<i64>,
    visits: Vec<(i64, i64)>,
    daily: Vec<String>,
}

impl WrittenKeys {
    /// Adds the keys of a later write.
    pub fn extend(&mut self, later: WrittenKeys) {
        self.vehicle_id = later.vehicle_id;
        self.stops.extend(later.stops);
        self.trips.extend(later.trips);
        self.events.extend(later.events);
        self.visits.extend(later.visits);
        self.daily.extend(later.daily);
    }
}

/// Appends `a`'s rows (its latest fix replacing the vehicle's, when it has one),
/// numbering stops, trips and events from `next` on, inside the caller's
/// transaction; the keys written.
pub fn append_analysis(
    client: &mut postgres::Client,
    target: &Target,
    a: &VehicleAnalysis,
    next: &mut NextIds,
) -> Result<WrittenKeys> {
    let mut written = WrittenKeys::default();
    let mut rows = Rows::default();
    if let Some(f) = &a.latest {
        client
            .execute(
                "DELETE FROM fleetctl.latest_fix WHERE vehicle_id = $1",
                &[&f.vehicle_id],
            )
            .map_err(|e| target.failed("write", e))?;
    }
    rows.copy_all(client, target, a.latest.as_slice(), None)?;
    // Ids number a vehicle's rows in detection's order (the key is the vehicle's
    // and the id): equal instants keep their order, as in SQLite.
    written.stops = (next.stops..).take(a.stops.len()).collect();
    rows.copy_all(client, target, &a.stops, Some(next.stops))?;
    written.trips = (next.trips..).take(a.trips.len()).collect();
    rows.copy_all(client, target, &a.trips, Some(next.trips))?;
    written.events = (next.events..).take(a.events.len()).collect();
    rows.copy_all(client, target, &a.events, Some(next.events))?;
    written.visits = a
        .visits
        .iter()
        .map(|v| (v.geofence_id, v.enter_ts))
        .collect();
    rows.copy_all(client, target, &a.visits, None)?;
    written.daily = a.daily.iter().map(|d| d.date.clone()).collect();
    rows.copy_all(client, target, &a.daily, None)?;
    next.stops += a.stops.len() as i64;
    next.trips += a.trips.len() as i64;
    next.events += a.events.len() as i64;
    written.vehicle_id = a
        .latest
        .as_ref()
        .map(|f| f.vehicle_id)
        .or(a.stops.first().map(|s| s.vehicle_id))
        .or(a.trips.first().map(|t| t.vehicle_id))
        .or(a.events.first().map(|e| e.vehicle_id))
        .or(a.visits.first().map(|v| v.vehicle_id))
        .or(a.daily.first().map(|d| d.vehicle_id))
        .unwrap_or(0);
    Ok(written)
}

/// Takes back rows [`append_analysis`] wrote, inside the caller's transaction.
pub fn delete_written(
    client: &mut postgres::Client,
    target: &Target,
    written: &WrittenKeys,
) -> Result<()> {
    let failed = |e| target.failed("write", e);
    let v = &written.vehicle_id;
    for (table, ids) in [
        ("stops", &written.stops),
        ("trips", &written.trips),
        ("events", &written.events),
    ] {
        if !ids.is_empty() {
            client
                .execute(
                    &format!("DELETE FROM fleetctl.{table} WHERE vehicle_id = $1 AND id = ANY($2)"),
                    &[v, ids],
                )
                .map_err(failed)?;
        }
    }
    for (geofence, enter) in &written.visits {
        client
            .execute(
                "DELETE FROM fleetctl.visits WHERE vehicle_id = $1 AND geofence_id = $2 AND enter_ts = $3",
                &[v, geofence, enter],
            )
            .map_err(failed)?;
    }
    for date in &written.daily {
        client
            .execute(
                "DELETE FROM fleetctl.daily WHERE vehicle_id = $1 AND date = CAST($2::text AS date)",
                &[v, date],
            )
            .map_err(failed)?;
    }
    Ok(())
}

/// The transaction that last wrote a vehicle's newest fix row (its `xmin`): every
/// analysis of a vehicle, by any process, rewrites that row, so the same value
/// later means that nobody analysed the vehicle since. `None`: it has no row.
pub fn analysis_stamp(
    client: &mut postgres::Client,
    target: &Target,
    vehicle_id: i64,
) -> Result<Option<i64>> {
    Ok(client
        .query_opt(
            "SELECT CAST(CAST(xmin AS text) AS bigint) FROM fleetctl.latest_fix WHERE vehicle_id = $1",
            &[&vehicle_id],
        )
        .map_err(|e| target.failed("read", e))?
        .map(|row| row.get(0)))
}

/// Waits for a vehicle's analysis lock, held until the caller's transaction ends.
pub fn lock_vehicle(client: &mut postgres::Client, target: &Target, vehicle_id: i64) -> Result<()> {
    client
        .execute(
            "SELECT pg_advisory_xact_lock($1, CAST($2::int8 AS int4))",
            &[&ANALYSIS_LOCK, &vehicle_id],
        )
        .map(drop)
        .map_err(|e| target.failed("lock a vehicle in", e))
}

/// Deletes every derived row of a vehicle, inside the caller's transaction.
pub fn delete_vehicle_rows(
    client: &mut postgres::Client,
    target: &Target,
    vehicle_id: i64,
) -> Result<()> {
    for table in DERIVED_TABLES {
        client
            .execute(
                &format!("DELETE FROM fleetctl.{table} WHERE vehicle_id = $1"),
                &[&vehicle_id],
            )
            .map_err(|e| target.failed("write", e))?;
    }
    Ok(())
}

/// After `analyze` rewrote the derived rows of a fleet (or of its shard):
/// reclaims the rows it replaced and renews the planner's statistics of those
/// tables, on a connection of its own (VACUUM runs outside a transaction). Left
/// to autovacuum, that work came a minute later, while servers were answering
/// from the fleet, and each statistics update it committed made every server's
/// kept answers old (docs/postgres.md). A shard that ends while another
/// analyser of this database (the locks are the server's, every database's)
/// holds a vehicle's lock leaves it to the one that ends last, so that
/// the tables are not read through twice, once while the other still writes.
/// A role that does not own the tables gets PostgreSQL's warning, not an error:
/// the analysis is written either way.
pub fn tidy_derived(target: &Target, sharded: bool) -> Result<()> {
    let mut client = super::open(target)?;
    if sharded {
        let others_at_work: bool = client
            .query_one(
                "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' \
                 AND database = (SELECT oid FROM pg_database WHERE datname = current_database()) \
                 AND classid = CAST($1::int8 AS oid) AND pid <> pg_backend_pid())",
                &[&i64::from(ANALYSIS_LOCK)],
            )
            .map_err(|e| target.failed("read", e))?
            .get(0);
        if others_at_work {
            return Ok(());
        }
    }
    let tables: Vec<String> = DERIVED_TABLES
        .iter()
        .map(|t| format!("fleetctl.{t}"))
        .collect();
    client
        .batch_execute(&format!("VACUUM (ANALYZE) {}", tables.join(", ")))
        .map_err(|e| target.failed("tidy the analysed tables of", e))
}

/// Lines of one table's COPY, sent when [`Rows::copy`] is called.
#[derive(Default)]
struct Rows(String);

impl Rows {
    fn line(&mut self, id: Option<i64>, cells: &[Cell]) {
        if let Some(id) = id {
            let _ = write!(self.0, "{id}\t");
        }
        for (i, cell) in cells.iter().enumerate() {
            if i > 0 {
                self.0.push('\t');
            }
            // Floats are written as the shortest text that reads back as the same
            // number, so a figure is the same in either store.
            let _ = match *cell {
                Cell::Int(v) | Cell::OptInt(Some(v)) => write!(self.0, "{v}"),
                Cell::Real(v) | Cell::OptReal(Some(v)) => write!(self.0, "{v}"),
                Cell::Flag(v) | Cell::OptFlag(Some(v)) => {
                    write!(self.0, "{}", if v { 't' } else { 'f' })
                }
                Cell::Text(ref t) => {
                    escape_into(&mut self.0, t);
                    Ok(())
                }
                Cell::OptText(Some(t)) => {
                    escape_into(&mut self.0, t);
                    Ok(())
                }
                Cell::OptInt(None)
                | Cell::OptReal(None)
                | Cell::OptFlag(None)
                | Cell::OptText(None) => {
                    write!(self.0, "\\N")
                }
            };
        }
        self.0.push('\n');
    }

    /// Copies `rows` into their table, numbered from `first_id` on when the table
    /// is (see [`crate::store::tables::Table::numbered`]).
    fn copy_all<R: Derived>(
        &mut self,
        client: &mut postgres::Client,
        target: &Target,
        rows: &[R],
        first_id: Option<i64>,
    ) -> Result<()> {
        for (k, row) in rows.iter().enumerate() {
            self.line(first_id.map(|f| f + k as i64), &row.cells()?);
        }
        let table = R::TABLE;
        let columns = match first_id {
            Some(_) => format!("id, {}", table.names(None)),
            None => table.names(None),
        };
        self.copy(client, target, table.name, &columns)
    }

    /// Sends the lines into `table`'s `columns` and starts again empty.
    fn copy(
        &mut self,
        client: &mut postgres::Client,
        target: &Target,
        table: &str,
        columns: &str,
    ) -> Result<()> {
        if self.0.is_empty() {
            return Ok(());
        }
        let mut sink = client
            .copy_in(&format!("COPY fleetctl.{table} ({columns}) FROM STDIN"))
            .map_err(|e| target.failed("write", e))?;
        sink.write_all(self.0.as_bytes()).map_err(|e| {
            Error::new(
                crate::error::ErrorCode::DbUnavailable,
                format!("writing {table} to {} failed: {e}", target.display()),
            )
        })?;
        sink.finish().map_err(|e| target.failed("write", e))?;
        self.0.clear();
        Ok(())
    }
}

/// Vehicle `vehicle_id` belongs to shard `index` (1-based) of `count`: a stable hash
/// of the id, so that every machine splits a fleet the same way.
pub fn in_shard(vehicle_id: i64, (index, count): (u32, u32)) -> bool {
    // SplitMix64's finaliser: consecutive ids spread evenly over the shards.
    let mut x = vehicle_id as u64;
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^= x >> 31;
    x % u64::from(count) == u64::from(index - 1)
}

/// Writes `meta` entries (the thresholds an analysis used), each in its own statement.
/// Removes a `meta` entry.
pub fn delete_meta(conn: &PgConn, key: &str) -> Result<()> {
    let target = conn.target().clone();
    conn.with_client(|client| {
        client
            .execute("DELETE FROM fleetctl.meta WHERE key = $1", &[&key])
            .map(drop)
            .map_err(|e| target.failed("write", e))
    })
}

/// Writes `meta` entries (each replaced whole) in one transaction of their own.
pub fn write_meta(conn: &PgConn, entries: &[(&str, String)]) -> Result<()> {
    super::in_transaction(conn, || {
        for (key, value) in entries {
            crate::store::set_meta(conn, key, value)?;
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_split_a_fleet_evenly_and_each_vehicle_once() {
        let ids = 1..=1000i64;
        let counts: Vec<usize> = (1..=3)
            .map(|i| ids.clone().filter(|&id| in_shard(id, (i, 3))).count())
            .collect();
        assert_eq!(counts.iter().sum::<usize>(), 1000);
        assert!(
            counts.iter().all(|&n| (300..=367).contains(&n)),
            "{counts:?}"
        );
        assert!(ids.clone().all(|id| in_shard(id, (1, 1))));
    }

    #[test]
    fn copy_lines_write_nulls_flags_and_exact_floats() {
        let mut rows = Rows::default();
        rows.line(
            Some(7),
            &[
                Cell::Int(-3),
                Cell::OptInt(None),
                Cell::Real(0.1 + 0.2),
                Cell::Flag(true),
                Cell::OptFlag(Some(false)),
                Cell::Text("a\tb".into()),
            ],
        );
        assert_eq!(rows.0, "7\t-3\t\\N\t0.30000000000000004\tt\tf\ta\\tb\n");
    }
}
