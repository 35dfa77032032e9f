//! `fleetctl import` into PostgreSQL: vehicles found or added by plate, and settled
//! rows appended with binary `COPY`, all inside the import's one transaction.

use crate::error::Result;
use crate::store::import::Staged;
use crate::store::sql::PgConn;
use std::sync::{Arc, mpsc};

/// The advisory lock taken before a new vehicle's id is chosen (the largest plus
/// one), so that two imports adding vehicles at once never pick the same id.
pub(crate) const NEW_VEHICLE_LOCK: i64 = 0x666c_7476; // "fltv"

/// The id of the vehicle with this plate, added (kind `unknown`, no driver) when the
/// fleet has none; true when it was added. With `device_id`, the plate is a device's
/// id: the vehicle gets it as its device id, unless it has one or another vehicle
/// has this one.
pub fn vehicle_id(conn: &PgConn, plate: &str, device_id: bool) -> Result<(i64, bool)> {
    let target = conn.target().clone();
    conn.with_client(|client| {
        let failed = |e| target.failed("write", e);
        let found = client
            .query_opt("SELECT id FROM fleetctl.vehicles WHERE plate = $1", &[&plate])
            .map_err(|e| target.failed("read", e))?;
        let (id, added) = match found {
            Some(row) => (row.get::<_, i64>(0), false),
            None => {
                client
                    .execute("SELECT pg_advisory_xact_lock($1)", &[&NEW_VEHICLE_LOCK])
                    .map_err(failed)?;
                let row = client
                    .query_one(
                        "INSERT INTO fleetctl.vehicles (id, plate, kind, driver, active, route) \
                         SELECT COALESCE(MAX(id), 0) + 1, $1, 'unknown', '', TRUE, NULL FROM fleetctl.vehicles \
                         RETURNING id",
                        &[&plate],
                    )
                    .map_err(failed)?;
                (row.get::<_, i64>(0), true)
            }
        };
        if device_id {
            client
                .execute(
                    "UPDATE fleetctl.vehicles SET device_id = $1 WHERE id = $2 AND device_id IS NULL \
                     AND NOT EXISTS (SELECT 1 FROM fleetctl.vehicles WHERE device_id = $1)",
                    &[&plate, &id],
                )
                .map_err(failed)?;
        }
        Ok((id, added))
    })
}

/// Appends a vehicle's settled rows (binary COPY, partitions made as needed).
pub fn insert_all(conn: &PgConn, rows: &[Staged]) -> Result<()> {
    let target = conn.target().clone();
    conn.with_client(|client| {
        super::copy_fixes(client, &target, rows.iter().map(|s| (&s.fix, s.ts_ms))).map(drop)
    })
}

/// Opens the fleet at `target` for an import and begins its one transaction: a
/// fleet of this schema version, or an empty database, whose schema is then created
/// in the same transaction for a fleet in `new_zone` (so a failed import leaves no
/// half-made fleet behind). Returns the connection and whether the fleet is new.
pub fn begin(
    target: &super::Target,
    new_zone: Option<&crate::clock::FleetZone>,
) -> Result<(PgConn, bool)> {
    let mut client = target.connect()?;
    let created = match super::probe(&mut client, target)? {
        super::Found::Empty => true,
        _ => {
            // The refusals `open` gives: another version, another application.
            drop(client);
            client = super::open(target)?;
            false
        }
    };
    if created {
        let Some(zone) = new_zone else {
            return Err(crate::error::Error::invalid(format!(
                "{} holds no fleet yet, and a new fleet needs its time zone",
                target.display()
            ))
            .with_hint("add --time-zone with an IANA name, e.g. --time-zone Europe/London"));
        };
        super::require_postgis(&mut client, target)?;
        client
            .batch_execute("BEGIN")
            .map_err(|e| target.failed("write", e))?;
        super::create_schema(&mut client, target)?;
        for (key, value) in [
            ("schema_version", crate::store::SCHEMA_VERSION.to_string()),
            ("time_zone", zone.name.clone()),
        ] {
            client
                .execute(
                    "INSERT INTO fleetctl.meta (key, value) VALUES ($1, $2)",
                    &[&key, &value],
                )
                .map_err(|e| target.failed("write", e))?;
        }
    } else {
        client
            .batch_execute("BEGIN")
            .map_err(|e| target.failed("write", e))?;
    }
    client
        .batch_execute("SET LOCAL search_path TO fleetctl, public")
        .map_err(|e| target.failed("write", e))?;
    Ok((PgConn::new(client, target.clone()), created))
}

/// An import's positions, appended by a thread of their own: a vehicle's `COPY`
/// runs while the import reads and checks the next vehicle's rows. The import used
/// the connection and the server in turns before, each waiting for the other.
/// Everything else the import does on the connection waits for the `COPY` first
/// ([`CopyBehind::conn`]), so its statements see every row appended before them.
pub struct CopyBehind {
    conn: Arc<PgConn>,
    rows: Option<mpsc::SyncSender<Vec<Staged>>>,
    acks: mpsc::Receiver<Result<()>>,
    copier: Option<std::thread::JoinHandle<()>>,
    /// A `COPY` was handed over and its outcome not taken yet.
    pending: std::cell::Cell<bool>,
}

impl CopyBehind {
    /// Starts the thread that appends to `conn` (inside its transaction).
    pub fn start(conn: Arc<PgConn>) -> Result<CopyBehind> {
        let (rows, queue) = mpsc::sync_channel::<Vec<Staged>>(0);
        let (done, acks) = mpsc::channel();
        let for_copier = Arc::clone(&conn);
        let copier = std::thread::Builder::new()
            .name("import-copy".into())
            .spawn(move || {
                for batch in queue {
                    if done.send(insert_all(&for_copier, &batch)).is_err() {
                        break;
                    }
                }
            })
            .map_err(|e| {
                crate::error::Error::internal(format!("starting the import's COPY: {e}"))
            })?;
        Ok(CopyBehind {
            conn,
            rows: Some(rows),
            acks,
            copier: Some(copier),
            pending: std::cell::Cell::new(false),
        })
    }

    /// Hands a vehicle's settled rows over, once the previous `COPY` is done.
    pub fn append(&self, rows: Vec<Staged>) -> Result<()> {
        self.wait()?;
        let handed = self.rows.as_ref().and_then(|r| r.send(rows).ok());
        if handed.is_none() {
            return Err(stopped());
        }
        self.pending.set(true);
        Ok(())
    }

    /// The connection, once every row handed over is appended (a failed `COPY`
    /// is the error here).
    pub fn conn(&self) -> Result<&PgConn> {
        self.wait()?;
        Ok(&self.conn)
    }

    fn wait(&self) -> Result<()> {
        if self.pending.replace(false) {
            return self.acks.recv().map_err(|_| stopped())?;
        }
        Ok(())
    }
}

impl Drop for CopyBehind {
    /// Waits for the `COPY` under way: nothing uses the connection after the import
    /// while it runs.
    fn drop(&mut self) {
        drop(self.rows.take());
        if let Some(copier) = self.copier.take() {
            let _ = copier.join();
        }
    }
}

/// The copying thread ended before its work did (it panicked).
fn stopped() -> crate::error::Error {
    crate::error::Error::internal("the import's COPY thread stopped")
}
