//! PostgreSQL's connection for the store: its statements prepared once, the
//! dialect's marks and casts, and the rows it reads through the `Sql` seam.

use crate::error::{Error, ErrorCode, Result};
use crate::store::sql::{Arg, Dialect, Row, Sql};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};

/// A PostgreSQL connection for the store's reads, its statements prepared once.
pub struct PgConn {
    client: Mutex<postgres::Client>,
    statements: Mutex<HashMap<String, postgres::Statement>>,
    target: super::Target,
    /// The months whose partition of positions this connection saw exist.
    months: Mutex<std::collections::HashSet<i64>>,
    /// Whether the fleet has the `revision` table (see [`PgConn::freshness`]).
    has_revision: OnceLock<bool>,
    /// A read transaction [`PgConn::begin_read_with_freshness`] began is open.
    held_read: AtomicBool,
    /// The fleet's schema is being created in this connection's transaction (an
    /// import into an empty database): nobody else sees its tables yet.
    fleet_new: AtomicBool,
    /// The months of [`PgConn::known_months`] made inside a transaction of this
    /// connection's (which a rollback takes back).
    made_inside: Mutex<std::collections::HashSet<i64>>,
}

impl PgConn {
    /// Wraps a connection to a fleetctl database (`pg::open`'s).
    pub fn new(client: postgres::Client, target: super::Target) -> PgConn {
        PgConn {
            client: Mutex::new(client),
            statements: Mutex::new(HashMap::new()),
            target,
            months: Mutex::default(),
            has_revision: OnceLock::new(),
            held_read: AtomicBool::new(false),
            fleet_new: AtomicBool::new(false),
            made_inside: Mutex::default(),
        }
    }

    /// See the field `made_inside`.
    pub(crate) fn months_made_inside(&self) -> MutexGuard<'_, std::collections::HashSet<i64>> {
        self.made_inside.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Says that this connection's transaction creates the fleet's schema.
    pub(crate) fn mark_fleet_new(&self) {
        self.fleet_new
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// Whether this connection's transaction creates the fleet's schema.
    pub(crate) fn fleet_is_new(&self) -> bool {
        self.fleet_new.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Runs `f` on the connection itself (the store's PostgreSQL writers: COPY,
    /// transactions, locks).
    pub(crate) fn with_client<T>(
        &self,
        f: impl FnOnce(&mut postgres::Client) -> Result<T>,
    ) -> Result<T> {
        f(&mut self.client())
    }

    /// The connection, for one statement or one unit of work. A lock, not a
    /// `RefCell`, so that an import may hand its `COPY` to a thread of its own
    /// (`pg::import::CopyBehind`); nothing else uses a connection from two threads.
    fn client(&self) -> MutexGuard<'_, postgres::Client> {
        self.client.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether the server closed this connection (a restart, a failover, a proxy
    /// dropping it): every statement on it fails from then on.
    pub fn is_closed(&self) -> bool {
        self.client().is_closed()
    }

    /// The months (`YYYYMM`) whose partition this connection knows to exist: a
    /// writer of single fixes asks the server once a month, not once a fix.
    pub(crate) fn known_months(&self) -> MutexGuard<'_, std::collections::HashSet<i64>> {
        self.months.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Where this connection goes, for messages (the password masked).
    pub fn target(&self) -> &super::Target {
        &self.target
    }

    /// `?N` marks as `$N`, each cast to its argument's type (a NULL or a mark
    /// compared with nothing typed still has one).
    fn dialect_sql(sql: &str, args: &[Arg]) -> String {
        let mut out = String::with_capacity(sql.len() + 16 * args.len());
        let mut chars = sql.char_indices().peekable();
        let mut quoted = false;
        while let Some((_, c)) = chars.next() {
            if c == '\'' {
                quoted = !quoted;
            }
            if c != '?' || quoted {
                out.push(c);
                continue;
            }
            let mut n = 0usize;
            while let Some(&(_, d)) = chars.peek() {
                let Some(digit) = d.to_digit(10) else { break };
                n = n * 10 + digit as usize;
                chars.next();
            }
            let cast = match args.get(n.wrapping_sub(1)) {
                Some(Arg::Int(_)) | None => "bigint",
                Some(Arg::Real(_)) => "double precision",
                Some(Arg::Text(_)) => "text",
                Some(Arg::Date(_)) => "date",
            };
            if matches!(args.get(n.wrapping_sub(1)), Some(Arg::Date(_))) {
                out.push_str(&format!("CAST(CAST(${n} AS text) AS date)"));
            } else {
                out.push_str(&format!("CAST(${n} AS {cast})"));
            }
        }
        out
    }
}

impl PgConn {
    /// Prepares `sql` once (the cache is the connection's) and runs it with `args`
    /// through `call` (a query or an execute); `doing` names the work in errors.
    fn run<T>(
        &self,
        sql: &str,
        args: &[Arg],
        doing: &str,
        call: impl FnOnce(
            &mut postgres::Client,
            &postgres::Statement,
            &[&(dyn postgres::types::ToSql + Sync)],
        ) -> std::result::Result<T, postgres::Error>,
    ) -> Result<T> {
        use postgres::types::ToSql;
        let text = Self::dialect_sql(sql, args);
        let mut client = self.client();
        let statement = {
            let mut cache = self.statements.lock().unwrap_or_else(|e| e.into_inner());
            match cache.get(&text) {
                Some(st) => st.clone(),
                None => {
                    let st = client
                        .prepare(&text)
                        .map_err(|e| self.target.failed(doing, e))?;
                    cache.insert(text, st.clone());
                    st
                }
            }
        };
        let owned: Vec<Box<dyn ToSql + Sync>> = args
            .iter()
            .map(|a| -> Box<dyn ToSql + Sync> {
                match *a {
                    Arg::Int(v) => Box::new(v),
                    Arg::Real(v) => Box::new(v),
                    Arg::Text(v) | Arg::Date(v) => Box::new(v.to_string()),
                }
            })
            .collect();
        let params: Vec<&(dyn ToSql + Sync)> = owned.iter().map(|b| b.as_ref()).collect();
        call(&mut client, &statement, &params).map_err(|e| self.target.failed(doing, e))
    }

    fn first<T>(
        &self,
        sql: &str,
        args: &[Arg],
        map: impl FnMut(&dyn Row) -> Result<T>,
    ) -> Result<Option<T>> {
        (self as &dyn Sql).first(sql, args, map)
    }
}

impl Sql for PgConn {
    fn dialect(&self) -> Dialect {
        Dialect::Postgres
    }

    fn as_postgres(&self) -> Option<&PgConn> {
        Some(self)
    }

    fn each(
        &self,
        sql: &str,
        args: &[Arg],
        each: &mut dyn FnMut(&dyn Row) -> Result<()>,
    ) -> Result<()> {
        let rows = self.run(sql, args, "read", |client, st, params| {
            client.query(st, params)
        })?;
        for row in &rows {
            each(&PgRow(row))?;
        }
        Ok(())
    }

    fn execute(&self, sql: &str, args: &[Arg]) -> Result<u64> {
        self.run(sql, args, "write", |client, st, params| {
            client.execute(st, params)
        })
    }

    fn begin_read(&self) -> Result<bool> {
        if self.held_read.load(Ordering::Relaxed) {
            return Ok(false);
        }
        self.client()
            .batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            .map_err(|e| self.target.failed("read", e))?;
        Ok(true)
    }

    fn end_read(&self) {
        let _ = self.client().batch_execute("COMMIT");
    }

    fn change_counter(&self) -> Result<Option<i64>> {
        // No counter of other connections' commits: `freshness` reads the revision.
        Ok(None)
    }
}

impl PgConn {
    /// What a reader keeps between requests, in one round trip: a number that
    /// moves with every change of meta, vehicles, geofences and places (the
    /// `revision` their triggers move), the newest fix's time, and the commits the
    /// read saw (its snapshot). Other processes write the database and PostgreSQL
    /// has no counter of their commits; a fleet made before `revision` existed gets
    /// a digest of those tables instead.
    pub fn freshness(&self) -> Result<crate::store::read::Freshness> {
        let sql = self.freshness_sql()?;
        let (revision, newest_fix_ts, snapshot) = self
            .first(&sql, &[], |r| Ok((r.text(0)?, r.opt_int(1)?, r.text(2)?)))?
            .unwrap_or_default();
        Ok(Self::freshness_of(&revision, newest_fix_ts, snapshot))
    }

    /// [`PgConn::freshness`] read as the first statement of a read transaction
    /// begun with it, in the same round trip (the one still held is ended in it
    /// too): the request's reports then run in that transaction (`begin_read`
    /// finds it open) and see the state the freshness names. It is held until
    /// [`PgConn::end_held_read`] or the next call, so that a server busy with the
    /// next request pays no round trip to end it.
    pub fn begin_read_with_freshness(&self) -> Result<crate::store::read::Freshness> {
        let sql = format!(
            "{}BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; {}",
            // Held from here whatever happens: a statement that fails leaves an
            // aborted transaction, which the next COMMIT rolls back.
            if self.held_read.swap(true, Ordering::Relaxed) {
                "COMMIT; "
            } else {
                ""
            },
            self.freshness_sql()?
        );
        let messages = self
            .client()
            .simple_query(&sql)
            .map_err(|e| self.target.failed("read", e))?;
        let row = messages.iter().find_map(|m| match m {
            postgres::SimpleQueryMessage::Row(row) => Some(row),
            _ => None,
        });
        let column = |i| row.and_then(|r| r.get(i)).map(str::to_owned);
        let newest_fix_ts = match column(1) {
            Some(ts) => Some(ts.parse().map_err(|_| {
                Error::new(
                    ErrorCode::DbSchema,
                    format!("the newest fix's time reads {ts:?}, not epoch seconds"),
                )
            })?),
            None => None,
        };
        Ok(Self::freshness_of(
            &column(0).unwrap_or_default(),
            newest_fix_ts,
            column(2).unwrap_or_default(),
        ))
    }

    /// Ends the read transaction [`PgConn::begin_read_with_freshness`] left open,
    /// if one is (a server does when it has nothing else to do).
    pub fn end_held_read(&self) {
        if self.held_read.swap(false, Ordering::Relaxed) {
            let _ = self.client().batch_execute("COMMIT");
        }
    }

    /// The freshness query: the revision (or the digest standing for it) as text,
    /// the newest fix's time, the snapshot as text.
    fn freshness_sql(&self) -> Result<String> {
        let has_revision = match self.has_revision.get() {
            Some(&known) => known,
            None => {
                let known = self
                    .first(
                        "SELECT to_regclass('fleetctl.revision') IS NOT NULL",
                        &[],
                        |r| r.flag(0),
                    )?
                    .unwrap_or(false);
                let _ = self.has_revision.set(known);
                known
            }
        };
        let revision = if has_revision {
            "(SELECT n FROM revision)"
        } else {
            "md5(concat_ws('|', \
             (SELECT md5(string_agg(key || '=' || value, ',' ORDER BY key)) FROM meta), \
             (SELECT md5(string_agg(v::text, ',' ORDER BY id)) FROM vehicles v), \
             (SELECT md5(string_agg(concat_ws(';', id, name, kind, wkt, quote_nullable(radius_m), quote_nullable(speed_limit_kmh)), ',' ORDER BY id)) FROM geofences), \
             (SELECT md5(string_agg(p::text, ',' ORDER BY id)) FROM places p)))"
        };
        Ok(format!(
            "SELECT {revision}::text, (SELECT MAX(ts) FROM latest_fix), pg_current_snapshot()::text"
        ))
    }

    fn freshness_of(
        revision: &str,
        newest_fix_ts: Option<i64>,
        snapshot: String,
    ) -> crate::store::read::Freshness {
        let revision = match revision.parse() {
            Ok(n) => n,
            Err(_) => {
                let mut hasher = std::collections::hash_map::DefaultHasher::new();
                std::hash::Hash::hash(&revision, &mut hasher);
                std::hash::Hasher::finish(&hasher) as i64
            }
        };
        crate::store::read::Freshness {
            revision,
            newest_fix_ts,
            commits_seen: Some(snapshot),
        }
    }
}

struct PgRow<'r>(&'r postgres::Row);

impl PgRow<'_> {
    fn read<'a, T: postgres::types::FromSql<'a>>(&'a self, i: usize) -> Result<T> {
        self.0.try_get(i).map_err(|e| {
            Error::new(
                ErrorCode::DbSchema,
                format!(
                    "column {i} ({}) of a stored row cannot be read: {e}",
                    self.0.columns().get(i).map_or("?", |c| c.name())
                ),
            )
        })
    }

    fn kind(&self, i: usize) -> postgres::types::Type {
        self.0
            .columns()
            .get(i)
            .map_or(postgres::types::Type::UNKNOWN, |c| c.type_().clone())
    }
}

impl Row for PgRow<'_> {
    fn opt_int(&self, i: usize) -> Result<Option<i64>> {
        use postgres::types::Type;
        Ok(match self.kind(i) {
            Type::INT2 => self.read::<Option<i16>>(i)?.map(i64::from),
            Type::INT4 => self.read::<Option<i32>>(i)?.map(i64::from),
            Type::BOOL => self.read::<Option<bool>>(i)?.map(i64::from),
            _ => self.read::<Option<i64>>(i)?,
        })
    }

    fn opt_real(&self, i: usize) -> Result<Option<f64>> {
        use postgres::types::Type;
        Ok(match self.kind(i) {
            Type::FLOAT4 => self.read::<Option<f32>>(i)?.map(f64::from),
            Type::INT2 | Type::INT4 | Type::INT8 => self.opt_int(i)?.map(|v| v as f64),
            _ => self.read::<Option<f64>>(i)?,
        })
    }

    fn opt_text(&self, i: usize) -> Result<Option<String>> {
        Ok(self.read::<Option<PgText>>(i)?.map(|t| t.0))
    }
}

/// Text, a date as `YYYY-MM-DD` or JSON as its text: what SQLite keeps as text.
struct PgText(String);

impl<'a> postgres::types::FromSql<'a> for PgText {
    fn from_sql(
        ty: &postgres::types::Type,
        raw: &'a [u8],
    ) -> std::result::Result<PgText, Box<dyn std::error::Error + Sync + Send>> {
        use postgres::types::Type;
        match *ty {
            Type::DATE => {
                let days = i32::from_sql(ty, raw)?;
                // PostgreSQL counts days from 2000-01-01, 10,957 days after 1970-01-01.
                let date = crate::clock::Date::from_days_since_epoch(i64::from(days) + 10_957);
                Ok(PgText(date.to_string()))
            }
            Type::JSONB => match raw.split_first() {
                Some((1, json)) => Ok(PgText(std::str::from_utf8(json)?.to_string())),
                _ => Err("a jsonb value of an unknown version".into()),
            },
            _ => Ok(PgText(std::str::from_utf8(raw)?.to_string())),
        }
    }

    fn accepts(ty: &postgres::types::Type) -> bool {
        use postgres::types::Type;
        matches!(
            *ty,
            Type::TEXT
                | Type::VARCHAR
                | Type::BPCHAR
                | Type::NAME
                | Type::DATE
                | Type::JSON
                | Type::JSONB
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_become_numbered_parameters_cast_to_their_arguments_types() {
        let sql = PgConn::dialect_sql(
            "a = ?1 AND b >= ?2 AND ?3 IS NULL AND d <= ?4 AND e = '?' AND f = ?10",
            &[
                Arg::Int(Some(1)),
                Arg::Real(0.5),
                Arg::Int(None),
                Arg::Date("2026-11-25"),
            ],
        );
        assert_eq!(
            sql,
            "a = CAST($1 AS bigint) AND b >= CAST($2 AS double precision) AND CAST($3 AS bigint) IS NULL \
             AND d <= CAST(CAST($4 AS text) AS date) AND e = '?' AND f = CAST($10 AS bigint)"
        );
    }
}
