//! The PostgreSQL + PostGIS store (`--db postgres://…`): connecting (libpq's URL,
//! `PG*` variables and `sslmode`, TLS through rustls), telling a fleetctl database
//! from an empty one or another application's, and creating the schema
//! (`schema.sql` beside this file: positions partitioned by month, or in the
//! layout TimescaleDB or Citus call for (`layout.rs`), geofences with a spatial
//! index). Every failure names what to do, and a refused check changes
//! nothing: the schema is created in one transaction, after the checks.

mod conn;
mod connect;
mod copy;
mod derived;
pub(crate) mod import;
mod layout;
mod load;

use crate::clock::{Date, FleetZone};
use crate::error::{Error, ErrorCode, Result};
pub use conn::PgConn;
pub use connect::{Target, is_url};
pub use copy::{Partitions, copy_fixes, copy_positions_out};
pub(crate) use derived::ANALYSIS_LOCK;
pub use derived::{
    NextIds, WrittenKeys, analyse_vehicle, analyse_vehicle_in, analysis_stamp, append_analysis,
    delete_meta, delete_vehicle_rows, delete_written, in_shard, lock_vehicle, tidy_derived,
    write_meta, write_new_vehicle_analysis,
};
pub use layout::Layout;
pub use load::{Loaded, load_fleet};

/// The Postgres schema, run in one transaction by [`init`].
pub(crate) const SCHEMA_SQL: &str = include_str!("schema.sql");

/// What a database holds, as far as fleetctl is concerned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    /// No tables of anyone's: fleetctl may create its own.
    Empty,
    /// A fleetctl database.
    Fleet {
        /// Its schema version.
        schema_version: i64,
    },
    /// Tables of another application, and none of fleetctl's.
    Other {
        /// A few of their names, `schema.table`.
        tables: Vec<String>,
    },
}

/// Looks at what the database holds, without changing anything.
pub fn probe(client: &mut postgres::Client, target: &Target) -> Result<Found> {
    let ours = client
        .query_opt(
            "SELECT 1 FROM information_schema.tables WHERE table_schema = 'fleetctl' AND table_name = 'meta'",
            &[],
        )
        .map_err(|e| target.failed("read", e))?;
    if ours.is_some() {
        let version = client
            .query_opt(
                "SELECT value FROM fleetctl.meta WHERE key = 'schema_version'",
                &[],
            )
            .map_err(|e| target.failed("read", e))?
            .map(|row| row.get::<_, String>(0));
        let schema_version = version
            .as_deref()
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| {
                Error::new(
                    ErrorCode::DbSchema,
                    format!(
                        "{} has a fleetctl schema without a readable schema_version ({version:?})",
                        target.display()
                    ),
                )
            })?;
        return Ok(Found::Fleet { schema_version });
    }
    // Anyone's tables but PostGIS's own (spatial_ref_sys; its views are not tables)
    // make it another application's.
    let tables: Vec<String> = client
        .query(
            "SELECT table_schema || '.' || table_name FROM information_schema.tables \
             WHERE table_type = 'BASE TABLE' \
             AND table_schema NOT IN ('pg_catalog', 'information_schema', 'topology', 'tiger', 'tiger_data') \
             AND table_name <> 'spatial_ref_sys' ORDER BY 1 LIMIT 5",
            &[],
        )
        .map_err(|e| target.failed("read", e))?
        .into_iter()
        .map(|row| row.get(0))
        .collect();
    Ok(if tables.is_empty() {
        Found::Empty
    } else {
        Found::Other { tables }
    })
}

/// Refuses a database without PostGIS, saying how to add it.
fn require_postgis(client: &mut postgres::Client, target: &Target) -> Result<()> {
    let installed = client
        .query_opt(
            "SELECT extversion FROM pg_extension WHERE extname = 'postgis'",
            &[],
        )
        .map_err(|e| target.failed("read", e))?;
    if installed.is_some() {
        return Ok(());
    }
    let available = client
        .query_opt(
            "SELECT 1 FROM pg_available_extensions WHERE name = 'postgis'",
            &[],
        )
        .map_err(|e| target.failed("read", e))?
        .is_some();
    let hint = if available {
        format!(
            "as a superuser: psql -d {} -c 'CREATE EXTENSION postgis'",
            target.database()
        )
    } else {
        "install PostGIS on the server (Debian: apt-get install postgresql-15-postgis-3), then CREATE EXTENSION postgis in the database".to_string()
    };
    Err(Error::new(
        ErrorCode::DbSchema,
        format!(
            "{} has no PostGIS extension, which fleetctl's geofences need",
            target.display()
        ),
    )
    .with_hint(hint))
}

/// Creates an empty fleetctl database in `target` for a fleet in `zone`, fed live
/// (its clock: the wall clock). Refuses, changing nothing, a database that holds a
/// fleet already, another application's tables, or no PostGIS.
pub fn init(target: &Target, zone: &FleetZone) -> Result<()> {
    let mut client = target.connect()?;
    match probe(&mut client, target)? {
        Found::Empty => {}
        Found::Fleet { schema_version } => {
            return Err(holds_a_fleet(
                target,
                schema_version,
                "use it as it is, or create another database for a new fleet (createdb NAME)",
            ));
        }
        Found::Other { tables } => return Err(other_application(target, &tables)),
    }
    require_postgis(&mut client, target)?;
    client
        .batch_execute("BEGIN")
        .map_err(|e| target.failed("write", e))?;
    create_schema(&mut client, target)?;
    client
        .batch_execute("SET LOCAL search_path TO fleetctl, public")
        .map_err(|e| target.failed("write", e))?;
    let conn = PgConn::new(client, target.clone());
    for (key, value) in [
        ("schema_version", super::SCHEMA_VERSION.to_string()),
        ("time_zone", zone.name.clone()),
        (
            super::live::CLOCK_META.0,
            super::live::CLOCK_META.1.to_string(),
        ),
    ] {
        super::set_meta(&conn, key, &value)?;
    }
    commit(&conn)
}

/// Creates the schema inside the caller's transaction, in the layout the
/// database's extensions call for ([`Layout`]).
fn create_schema(client: &mut impl postgres::GenericClient, target: &Target) -> Result<()> {
    let layout = Layout::of(client, target)?;
    client
        .batch_execute(&layout.schema()?)
        .map_err(|e| target.failed("create the schema in", e))
}

/// The refusal to make a fleet where one is: `hint` says what to do instead.
pub fn holds_a_fleet(target: &Target, schema_version: i64, hint: &str) -> Error {
    Error::new(
        ErrorCode::InvalidArgument,
        format!(
            "{} holds a fleet already (schema version {schema_version})",
            target.display()
        ),
    )
    .with_hint(hint)
}

/// The hint of a command that replaces a fleet with `--force`.
pub const FORCE_HINT: &str = "pass --force to replace it, or give another database (createdb NAME)";

/// Opens a fleetctl database at this binary's schema version, or says why not: an
/// empty database (which `init` fills), another application's, or another version.
pub fn open(target: &Target) -> Result<postgres::Client> {
    let mut client = target.connect()?;
    match probe(&mut client, target)? {
        Found::Fleet { schema_version } if schema_version == super::SCHEMA_VERSION => Ok(client),
        Found::Fleet { schema_version } if schema_version > super::SCHEMA_VERSION => {
            Err(Error::new(
                ErrorCode::DbSchema,
                format!(
                    "{} has schema version {schema_version}, newer than this fleetctl's {}",
                    target.display(),
                    super::SCHEMA_VERSION
                ),
            )
            .with_hint("use the fleetctl that wrote it, or a newer one"))
        }
        Found::Fleet { schema_version } => Err(Error::new(
            ErrorCode::DbSchema,
            format!(
                "{} has schema version {schema_version}; this fleetctl reads version {}",
                target.display(),
                super::SCHEMA_VERSION
            ),
        )),
        Found::Empty => Err(Error::new(
            ErrorCode::DbUnavailable,
            format!("{} holds no fleet yet", target.display()),
        )
        .with_hint("create one: fleetctl --db URL init --time-zone ZONE")),
        Found::Other { tables } => Err(other_application(target, &tables)),
    }
}

/// Opens a fleetctl database for the store's reads ([`super::pg::PgConn`]), its
/// schema first on the search path.
pub fn open_reader(target: &Target) -> Result<super::pg::PgConn> {
    let mut client = open(target)?;
    let deadlines = match *DEADLINES.lock().unwrap_or_else(|p| p.into_inner()) {
        Some(d) => format!(
            "; SET lock_timeout = {}; SET statement_timeout = {}",
            d.lock.as_millis().max(1),
            d.statement.as_millis().max(1)
        ),
        None => String::new(),
    };
    client
        .batch_execute(&format!("SET search_path TO fleetctl, public{deadlines}"))
        .map_err(|e| target.failed("read", e))?;
    Ok(super::pg::PgConn::new(client, target.clone()))
}

/// A connection for the reports (`report::Db`): [`open_reader`]'s, with each
/// prepared statement planned once for any arguments (`plan_cache_mode =
/// force_generic_plan`, where the server has it). The reports' statements are
/// look-ups and ranges on indexed keys, whose plan does not change with their
/// values; left to choose, PostgreSQL plans each one anew for its first five runs
/// on every connection, which a server's fresh connections all pay at once when
/// many clients come (docs/postgres.md: 50 clients on 2 replicas, the worst
/// tool's p99 55–68 ms, then 45–47).
pub fn open_for_reports(target: &Target) -> Result<super::pg::PgConn> {
    let conn = open_reader(target)?;
    conn.with_client(|client| {
        client
            .batch_execute(
                "SELECT set_config(name, 'force_generic_plan', false) FROM pg_settings \
                 WHERE name = 'plan_cache_mode'",
            )
            .map_err(|e| target.failed("read", e))
    })?;
    Ok(conn)
}

/// Makes a commit on `conn` durable before it returns: on the server's disk, and on
/// a synchronous standby's where the server has one (`synchronous_commit = on`),
/// whatever the server's default; a stricter setting (`remote_apply`) is kept.
pub fn durable_commits(conn: &super::pg::PgConn) -> Result<()> {
    let target = conn.target().clone();
    let setting: String = conn.with_client(|c| {
        c.query_one("SHOW synchronous_commit", &[])
            .and_then(|row| row.try_get(0))
            .map_err(|e| target.failed("read", e))
    })?;
    if matches!(setting.as_str(), "off" | "local" | "remote_write") {
        execute(conn, "SET synchronous_commit = on")?;
    }
    Ok(())
}

/// How long a statement may wait for a lock, and run, on the connections this
/// process opens from now on.
#[derive(Debug, Clone, Copy)]
pub struct Deadlines {
    /// `lock_timeout`.
    pub lock: std::time::Duration,
    /// `statement_timeout`.
    pub statement: std::time::Duration,
}

static DEADLINES: std::sync::Mutex<Option<Deadlines>> = std::sync::Mutex::new(None);

/// Sets the deadlines of every connection opened from now on (`serve` sets them,
/// so that a tool call or a push answers a timeout instead of waiting behind a
/// lock or a runaway statement; `import`, `analyze` and the other commands keep the
/// server's defaults).
pub fn set_deadlines(deadlines: Deadlines) {
    *DEADLINES.lock().unwrap_or_else(|p| p.into_inner()) = Some(deadlines);
}

/// Refuses to `what` (take pushes, import, analyse) on a hot standby: a replica
/// takes no writes, and a writer started there would fail every request instead of
/// refusing at once. Reads are welcome on a standby.
pub fn refuse_standby(conn: &super::pg::PgConn, what: &str) -> Result<()> {
    let target = conn.target().clone();
    conn.with_client(|c| refuse_standby_client(c, &target, what))
}

/// [`refuse_standby`] on a client of its own.
pub fn refuse_standby_client(
    client: &mut postgres::Client,
    target: &Target,
    what: &str,
) -> Result<()> {
    let standby = client
        .query_one("SELECT pg_is_in_recovery()", &[])
        .and_then(|row| row.try_get::<_, bool>(0))
        .map_err(|e| target.failed("read", e))?;
    if !standby {
        return Ok(());
    }
    Err(Error::new(
        ErrorCode::DbUnavailable,
        format!(
            "{} is a standby (a read-only replica): {what} needs the primary",
            target.display()
        ),
    )
    .with_hint("point --db at the primary for writes; queries and `serve` without --ingest may use the standby"))
}

/// Runs `sql`, statements that return no rows (a savepoint, a setting, a commit),
/// on `conn`.
pub fn execute(conn: &super::pg::PgConn, sql: &str) -> Result<()> {
    conn.with_client(|client| {
        client
            .batch_execute(sql)
            .map_err(|e| conn.target().failed("write", e))
    })
}

/// Commits the transaction under way on `conn`, or fails when a statement in it
/// failed before: PostgreSQL answers the `COMMIT` of such a transaction with a
/// rollback and no error, and a caller that had set that error aside would report
/// as written what was not. The check is a statement sent with the `COMMIT`, which
/// the server refuses in a failed transaction (and then does not commit).
pub fn commit(conn: &super::pg::PgConn) -> Result<()> {
    conn.with_client(|client| match client.batch_execute("SELECT 1; COMMIT") {
        Ok(()) => Ok(()),
        Err(e) => {
            let failed_before =
                e.code() == Some(&postgres::error::SqlState::IN_FAILED_SQL_TRANSACTION);
            let _ = client.batch_execute("ROLLBACK");
            if failed_before {
                Err(crate::error::Error::new(
                    crate::error::ErrorCode::Io,
                    format!(
                        "nothing was written to {}: a statement of this unit of work failed, and the server rolled it back",
                        conn.target().display()
                    ),
                )
                .with_hint("run the command again; if it fails again, its error says why"))
            } else {
                Err(conn.target().failed("write", e))
            }
        }
    })
}

/// Runs `f` in one transaction on `conn`: committed when it succeeds, rolled back
/// when it fails (a lost connection rolls back on the server by itself).
pub fn in_transaction<T>(conn: &super::pg::PgConn, f: impl FnOnce() -> Result<T>) -> Result<T> {
    execute(conn, "BEGIN")?;
    match f() {
        Ok(out) => commit(conn).map(|()| out),
        Err(e) => {
            let _ = execute(conn, "ROLLBACK");
            Err(e)
        }
    }
}

/// Every `meta` entry of the fleet at `target` (its zone, thresholds, clock).
pub fn read_meta(target: &Target) -> Result<std::collections::HashMap<String, String>> {
    let mut client = open(target)?;
    let rows = client
        .query("SELECT key, value FROM fleetctl.meta", &[])
        .map_err(|e| target.failed("read", e))?;
    Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
}

fn other_application(target: &Target, tables: &[String]) -> Error {
    Error::new(
        ErrorCode::DbSchema,
        format!(
            "{} holds another application's tables ({}), not a fleet",
            target.display(),
            tables.join(", ")
        ),
    )
    .with_hint(
        "give fleetctl a database of its own: createdb fleet, then --db postgres://USER@HOST/fleet",
    )
}

/// The monthly partitions of positions that hold `[from_ms, to_ms]`, created when
/// missing, each named `positions_YYYY_MM` (UTC months), inside the caller's
/// transaction. Writers on several connections may need the same new month at once:
/// the one that creates it holds a lock on that month until its transaction ends,
/// and the others wait for it and then find the partition made (without the lock,
/// the second `CREATE … IF NOT EXISTS` would fail on the first's uncommitted one).
/// A month that exists already takes no lock.
pub fn ensure_partitions(
    client: &mut impl postgres::GenericClient,
    target: &Target,
    from_ms: i64,
    to_ms: i64,
) -> Result<Vec<String>> {
    let mut made = Vec::new();
    let mut month = month_of(from_ms)?;
    let last = month_of(to_ms)?;
    loop {
        let name = format!("positions_{:04}_{:02}", month.0, month.1);
        // A hypertable (TimescaleDB) makes its chunks itself.
        let exists = client
            .query_one(
                "SELECT to_regclass('fleetctl.' || $1) IS NOT NULL \
                 OR (SELECT relkind FROM pg_class WHERE oid = to_regclass('fleetctl.positions')) <> 'p'",
                &[&name],
            )
            .map_err(|e| target.failed("read", e))?
            .get::<_, bool>(0);
        if !exists {
            let (start, end) = (month_start_ms(month)?, month_start_ms(next_month(month))?);
            // Made apart and then attached: `ATTACH PARTITION` locks `positions`
            // in SHARE UPDATE EXCLUSIVE mode, which no reader or writer of
            // positions conflicts with (`CREATE TABLE … PARTITION OF` takes it
            // exclusively: every reader and writer, and any transaction that has
            // read or written positions, an import's own among them, holds it up).
            // The new table is empty: attaching it checks nothing, and the parent's
            // indexes are made on it.
            client
                .batch_execute(&format!(
                    "SELECT pg_advisory_xact_lock({PARTITION_LOCK}, {}); \
                     DO $$ BEGIN \
                       IF to_regclass('fleetctl.{name}') IS NULL THEN \
                         CREATE TABLE fleetctl.{name} (LIKE fleetctl.positions INCLUDING DEFAULTS INCLUDING CONSTRAINTS); \
                         ALTER TABLE fleetctl.positions ATTACH PARTITION fleetctl.{name} \
                           FOR VALUES FROM ({start}) TO ({end}); \
                       END IF; \
                     END $$",
                    month.0 * 100 + month.1 as i32
                ))
                .map_err(|e| target.failed("write", e))?;
        }
        made.push(name);
        if month == last {
            return Ok(made);
        }
        month = next_month(month);
    }
}

/// Deletes every position before `before_ts` (UTC epoch seconds) inside the
/// caller's transaction; how many went, and from which vehicles (to analyse again).
/// Readers go on meanwhile: a delete locks rows, not the table.
pub fn delete_positions_before(
    conn: &super::pg::PgConn,
    before_ts: i64,
) -> Result<(usize, Vec<i64>)> {
    use super::sql::{Arg, Sql};
    let sql: &dyn Sql = conn;
    let gone = sql.rows(
        "WITH gone AS (DELETE FROM positions WHERE ts_ms < ?1 RETURNING vehicle_id) \
         SELECT vehicle_id, COUNT(*) FROM gone GROUP BY vehicle_id ORDER BY vehicle_id",
        &[Arg::Int(Some(before_ts.saturating_mul(1000)))],
        |r| Ok((r.int(0)?, r.int(1)? as usize)),
    )?;
    Ok((
        gone.iter().map(|(_, n)| n).sum(),
        gone.into_iter().map(|(v, _)| v).collect(),
    ))
}

/// Drops the monthly partitions wholly before `before_ts` that hold no position (a
/// prune emptied them), each in a transaction of its own, so their space goes back
/// to the disk; the names dropped.
pub fn drop_empty_months_before(conn: &super::pg::PgConn, before_ts: i64) -> Result<Vec<String>> {
    use super::sql::Sql;
    let sql: &dyn Sql = conn;
    let months = sql.rows(
        "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid \
         WHERE i.inhparent = CAST('fleetctl.positions' AS regclass) ORDER BY c.relname",
        &[],
        |r| r.text(0),
    )?;
    let mut dropped = Vec::new();
    for name in months {
        let Some(month) = month_of_partition(&name) else {
            continue;
        };
        if month_start_ms(next_month(month))? > before_ts.saturating_mul(1000) {
            continue;
        }
        in_transaction(conn, || {
            let empty = sql
                .first(
                    &format!("SELECT 1 FROM fleetctl.{name} LIMIT 1"),
                    &[],
                    |_| Ok(()),
                )?
                .is_none();
            if empty {
                sql.execute(&format!("DROP TABLE fleetctl.{name}"), &[])?;
                dropped.push(name.clone());
            }
            Ok(())
        })?;
    }
    Ok(dropped)
}

/// The (year, month) of a partition named `positions_YYYY_MM`.
fn month_of_partition(name: &str) -> Option<(i32, u32)> {
    let (year, month) = name.strip_prefix("positions_")?.split_once('_')?;
    let month: u32 = month.parse().ok().filter(|m| (1..=12).contains(m))?;
    Some((year.parse().ok()?, month))
}

/// Makes the partition of the month of `ms` (UTC epoch milliseconds) if missing,
/// inside the caller's transaction, asking the server once per month and
/// connection. A failed transaction may have taken a new partition with it: the
/// caller then calls [`forget_months`].
pub fn ensure_partition_of(conn: &super::pg::PgConn, ms: i64) -> Result<()> {
    let (year, month) = month_of(ms)?;
    let key = i64::from(year) * 100 + i64::from(month);
    if conn.known_months().contains(&key) {
        return Ok(());
    }
    // Inside the caller's (short) transaction: a month other than the clock's, met
    // rarely (a device's old buffer); the clock's month and the next are made
    // ahead, outside it, by [`make_months_ahead`].
    let target = conn.target().clone();
    conn.with_client(|client| ensure_partitions(client, &target, ms, ms))?;
    conn.known_months().insert(key);
    conn.months_made_inside().insert(key);
    Ok(())
}

/// Makes the partitions of the month of `now` (UTC epoch seconds) and of the next
/// month, outside any transaction of `conn`'s, unless `conn` made them already: the
/// live writer calls it before its groups, so that the first fix of a new month
/// finds its partition there and no group waits on `CREATE TABLE` behind a reader.
/// One try of half a second: another transaction that wrote positions (an import)
/// blocks any new partition until it ends, and the writer must not wait on it (it
/// tries again later; see `live::postgres`).
pub fn make_months_ahead(conn: &super::pg::PgConn, now: i64) -> Result<()> {
    let ms = now.saturating_mul(1000);
    let (year, month) = month_of(ms)?;
    let next = next_month((year, month));
    let keys = [
        i64::from(year) * 100 + i64::from(month),
        i64::from(next.0) * 100 + i64::from(next.1),
    ];
    if keys.iter().all(|k| conn.known_months().contains(k)) {
        return Ok(());
    }
    make_partitions_trying(conn.target(), ms, month_start_ms(next)?, 1)?;
    conn.known_months().extend(keys);
    Ok(())
}

/// How long making a partition may wait for the lock on `positions` before it gives
/// up and tries again, and how many tries it makes: `CREATE TABLE … PARTITION OF`
/// takes an exclusive lock on the parent, and while it waits every reader and writer
/// of positions queues behind it, so it waits a little at a time.
const PARTITION_LOCK_WAIT_MS: u64 = 500;
const PARTITION_TRIES: u32 = 40;

/// Makes the partitions of the months from `from_ms` to `to_ms` on a connection of
/// its own, each in a short transaction of its own: never inside a caller's, where
/// the exclusive lock on `positions` would be held until that caller commits (an
/// import of millions of rows held every push and report for its whole run).
pub fn make_partitions_outside(target: &Target, from_ms: i64, to_ms: i64) -> Result<()> {
    make_partitions_trying(target, from_ms, to_ms, PARTITION_TRIES)
}

fn make_partitions_trying(
    target: &Target,
    from_ms: i64,
    to_ms: i64,
    tries_at_most: u32,
) -> Result<()> {
    let mut client = open(target)?;
    client
        .batch_execute(&format!("SET lock_timeout = {PARTITION_LOCK_WAIT_MS}"))
        .map_err(|e| target.failed("write", e))?;
    let mut tries = 0;
    loop {
        match ensure_partitions(&mut client, target, from_ms, to_ms) {
            Ok(_) => return Ok(()),
            Err(e) if e.code == ErrorCode::Busy && tries + 1 < tries_at_most => tries += 1,
            Err(e) => return Err(e),
        }
    }
}

/// Forgets which partitions exist (after a rollback, or a prune that dropped some).
pub fn forget_months(conn: &super::pg::PgConn) {
    conn.known_months().clear();
}

/// Forgets the months whose partition `conn` made inside its current transaction
/// (rolled back with it), keeping those made ahead in transactions of their own.
pub fn forget_months_made_inside(conn: &super::pg::PgConn) {
    let inside: Vec<i64> = conn.months_made_inside().drain().collect();
    let mut known = conn.known_months();
    for month in inside {
        known.remove(&month);
    }
}

/// The first half of the advisory lock on a month's partition (the second: YYYYMM).
const PARTITION_LOCK: i32 = 0x666c_7470; // "fltp"

const DAY_MS: i64 = 86_400_000;

/// The UTC (year, month) of an instant in epoch milliseconds.
fn month_of(ms: i64) -> Result<(i32, u32)> {
    let date = Date::from_days_since_epoch(ms.div_euclid(DAY_MS));
    Ok((date.year, date.month))
}

fn next_month((year, month): (i32, u32)) -> (i32, u32) {
    if month == 12 {
        (year + 1, 1)
    } else {
        (year, month + 1)
    }
}

fn month_start_ms((year, month): (i32, u32)) -> Result<i64> {
    let first = Date {
        year,
        month,
        day: 1,
    };
    Ok(first.days_since_epoch() * DAY_MS)
}

/// A geofence's PostGIS area (for the spatial index) from the SQL expressions of
/// its WKT and radius: a polygon as given, a circle as the buffer of its centre, on
/// the spheroid. Containment stays the project's own test of the WKT.
pub(crate) fn area_of(wkt: &str, radius_m: &str) -> String {
    format!(
        "CASE WHEN {radius_m} IS NULL THEN ST_GeomFromText({wkt}, 4326) \
         ELSE ST_Buffer(ST_GeomFromText({wkt}, 4326)::geography, {radius_m})::geometry END"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn months_are_utc_and_roll_over_the_year() {
        let nov_30_2026_late = 1_796_083_199_000; // 2026-11-30T23:59:59Z
        assert_eq!(month_of(nov_30_2026_late).unwrap(), (2026, 11));
        assert_eq!(month_of(nov_30_2026_late + 1000).unwrap(), (2026, 12));
        assert_eq!(next_month((2026, 12)), (2027, 1));
        assert_eq!(month_start_ms((2026, 12)).unwrap(), nov_30_2026_late + 1000);
    }
}
