//! `fleetctl import` into PostgreSQL: vehicles found or added by plate, and settled
//! rows appended with binary `COPY` by a thread of their own, all inside the
//! import's one transaction.

use crate::error::Result;
use crate::store::import::Staged;
use crate::store::pg::PgConn;
use std::sync::{Arc, mpsc};

/// The advisory lock every writer that adds vehicles (an import, `vehicles add`, a
/// device registering live) takes before choosing a new vehicle's id (the largest
/// plus one) and holds until its transaction ends, so that two never pick the same
/// id; an import that holds it chooses the ids of the vehicles it adds itself.
pub(crate) const NEW_VEHICLE_LOCK: i64 = 0x666c_7476; // "fltv"

/// Appends a vehicle's settled rows (binary COPY, partitions made as needed: in the
/// import's transaction for a fleet it creates, else each in its own).
pub fn insert_all(conn: &PgConn, rows: &[Staged]) -> Result<()> {
    let target = conn.target().clone();
    let partitions = match conn.fleet_is_new() {
        true => super::Partitions::InTransaction,
        false => super::Partitions::Outside,
    };
    conn.with_client(|client| {
        super::copy_fixes(
            client,
            &target,
            partitions,
            rows.iter().map(|s| (&s.fix, s.ts_ms)),
        )
        .map(drop)
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
    super::refuse_standby_client(&mut client, target, "import")?;
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
        if new_zone.is_none() {
            return Err(crate::error::Error::invalid(format!(
                "{} holds no fleet yet, and a new fleet needs its time zone",
                target.display()
            ))
            .with_hint("add --time-zone with an IANA name, e.g. --time-zone Europe/London"));
        }
        super::require_postgis(&mut client, target)?;
        client
            .batch_execute("BEGIN")
            .map_err(|e| target.failed("write", e))?;
        super::create_schema(&mut client, target)?;
    } else {
        client
            .batch_execute("BEGIN")
            .map_err(|e| target.failed("write", e))?;
    }
    client
        .batch_execute("SET LOCAL search_path TO fleetctl, public")
        .map_err(|e| target.failed("write", e))?;
    let conn = PgConn::new(client, target.clone());
    if let (true, Some(zone)) = (created, new_zone) {
        conn.mark_fleet_new();
        crate::store::set_meta(
            &conn,
            "schema_version",
            &crate::store::SCHEMA_VERSION.to_string(),
        )?;
        crate::store::set_meta(&conn, "time_zone", &zone.name)?;
    }
    Ok((conn, created))
}

/// What the import's connection does for it, in the order handed over.
enum Work {
    /// A vehicle's settled rows, appended with `COPY`.
    Copy(Vec<Staged>),
    /// A vehicle this import adds (its id chosen under [`NEW_VEHICLE_LOCK`]).
    AddVehicle { id: i64, plate: String },
    /// A vehicle whose plate is a device's id gets it as its device id, unless it
    /// has one or another vehicle has this one.
    DeviceId { id: i64, device: String },
    /// The rows of a vehicle's analysis made beside the import.
    Analysis(Box<crate::model::VehicleAnalysis>),
}

/// Work handed over and not yet done, at most: a few vehicles' rows in memory.
const WORK_AHEAD: usize = 3;

/// An import's writes, made by a thread of their own in the order handed over:
/// the import reads, checks and settles the next vehicles while the server appends
/// the last ones. Nothing the import does waits for them but a read (the fleet's
/// plates, once, and the positions stored before, for a vehicle that had some):
/// a vehicle's id comes from the plates read at the start, or, for one this import
/// adds, from the largest id under the lock every writer adds vehicles under, which
/// the import holds until it ends once it has taken it. Before, each vehicle's
/// lookup waited for the `COPY` before it, and the server sat idle while the
/// import settled the vehicle's rows.
pub struct CopyBehind {
    conn: Arc<PgConn>,
    work: Option<mpsc::SyncSender<Work>>,
    done: mpsc::Receiver<Result<()>>,
    copier: Option<std::thread::JoinHandle<()>>,
    /// Work handed over whose outcome is not taken yet.
    handed: std::cell::Cell<usize>,
    /// The fleet's vehicles by plate, read at the first lookup.
    plates: std::cell::RefCell<Option<Plates>>,
}

/// The vehicles an import knows, by plate.
struct Plates {
    ids: std::collections::HashMap<String, i64>,
    /// The id the next vehicle added gets, once the import holds the lock.
    next_id: Option<i64>,
}

impl CopyBehind {
    /// Starts the thread that writes to `conn` (inside its transaction).
    pub fn start(conn: Arc<PgConn>) -> Result<CopyBehind> {
        let (work, queue) = mpsc::sync_channel::<Work>(WORK_AHEAD);
        let (done_tx, done) = mpsc::channel();
        let for_copier = Arc::clone(&conn);
        let copier = std::thread::Builder::new()
            .name("import-copy".into())
            .spawn(move || {
                let mut failure: Option<crate::error::Error> = None;
                for item in queue {
                    // After a failure the transaction is lost: the rest is not tried,
                    // and each of it fails as the first did, so that the import
                    // never ends as if it had been written (PostgreSQL answers the
                    // COMMIT of a failed transaction with a rollback, no error).
                    let outcome = match &failure {
                        Some(first) => Err(first.clone()),
                        None => run(&for_copier, item),
                    };
                    if let Err(e) = &outcome {
                        failure.get_or_insert_with(|| e.clone());
                    }
                    if done_tx.send(outcome).is_err() {
                        break;
                    }
                }
            })
            .map_err(|e| {
                crate::error::Error::internal(format!("starting the import's COPY: {e}"))
            })?;
        Ok(CopyBehind {
            conn,
            work: Some(work),
            done,
            copier: Some(copier),
            handed: std::cell::Cell::new(0),
            plates: std::cell::RefCell::new(None),
        })
    }

    /// Hands a vehicle's settled rows over.
    pub fn append(&self, rows: Vec<Staged>) -> Result<()> {
        self.hand(Work::Copy(rows))
    }

    /// Hands the rows of a vehicle's analysis over.
    pub fn write_analysis(&self, a: crate::model::VehicleAnalysis) -> Result<()> {
        self.hand(Work::Analysis(Box::new(a)))
    }

    /// The id of the vehicle with this plate, added (kind `unknown`, no driver)
    /// when the fleet has none; true when it was added. With `device_id`, the plate
    /// is a device's id: the vehicle gets it as its device id, unless it has one or
    /// another vehicle has this one.
    pub fn vehicle_id(&self, plate: &str, device_id: bool) -> Result<(i64, bool)> {
        let mut plates = self.plates.borrow_mut();
        if plates.is_none() {
            *plates = Some(Plates {
                ids: read_plates(self.conn()?)?,
                next_id: None,
            });
        }
        let known = plates.as_mut().expect("read above");
        let found = match known.ids.get(plate) {
            Some(&id) => Some(id),
            None if known.next_id.is_none() => {
                // The first vehicle this import adds: once the lock is held no other
                // writer adds one, so the plates read now stay the fleet's.
                let conn = self.conn()?;
                lock_new_vehicles(conn)?;
                known.ids = read_plates(conn)?;
                known.next_id = Some(known.ids.values().max().map_or(1, |m| m + 1));
                known.ids.get(plate).copied()
            }
            None => None,
        };
        let (id, added) = match found {
            Some(id) => (id, false),
            None => {
                let id = known.next_id.expect("taken above");
                known.next_id = Some(id + 1);
                known.ids.insert(plate.to_string(), id);
                self.hand(Work::AddVehicle {
                    id,
                    plate: plate.to_string(),
                })?;
                (id, true)
            }
        };
        drop(plates);
        if device_id {
            self.hand(Work::DeviceId {
                id,
                device: plate.to_string(),
            })?;
        }
        Ok((id, added))
    }

    /// The connection, once all the work handed over is done (a failure is the
    /// error here).
    pub fn conn(&self) -> Result<&PgConn> {
        while self.handed.get() > 0 {
            self.take_outcome()?;
        }
        Ok(&self.conn)
    }

    fn hand(&self, work: Work) -> Result<()> {
        // A failure already reported is the error now, not at the end.
        while self.handed.get() > 0 {
            match self.done.try_recv() {
                Ok(outcome) => {
                    self.handed.set(self.handed.get() - 1);
                    outcome?;
                }
                Err(mpsc::TryRecvError::Empty) => break,
                Err(mpsc::TryRecvError::Disconnected) => return Err(stopped()),
            }
        }
        let handed = self.work.as_ref().and_then(|w| w.send(work).ok());
        if handed.is_none() {
            return Err(stopped());
        }
        self.handed.set(self.handed.get() + 1);
        Ok(())
    }

    fn take_outcome(&self) -> Result<()> {
        let outcome = self.done.recv().map_err(|_| stopped())?;
        self.handed.set(self.handed.get() - 1);
        outcome
    }
}

impl Drop for CopyBehind {
    /// Waits for the work under way: nothing uses the connection after the import
    /// while it runs.
    fn drop(&mut self) {
        drop(self.work.take());
        if let Some(copier) = self.copier.take() {
            let _ = copier.join();
        }
    }
}

/// Debug builds only: with `FLEETCTL_TEST_IMPORT_PAUSE=FILE`, the import stops after
/// its first appended rows, its transaction open, and says so by making FILE; it
/// goes on once the test has removed FILE (what others may do meanwhile is the
/// test's question).
fn paused_for_a_test() {
    #[cfg(debug_assertions)]
    if let Some(file) = std::env::var_os("FLEETCTL_TEST_IMPORT_PAUSE") {
        static PAUSED: std::sync::Once = std::sync::Once::new();
        PAUSED.call_once(|| {
            let file = std::path::PathBuf::from(file);
            if std::fs::write(&file, b"paused").is_ok() {
                while file.exists() {
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
            }
        });
    }
}

/// Does one piece of an import's work on its connection.
fn run(conn: &PgConn, work: Work) -> Result<()> {
    match work {
        Work::Copy(rows) => insert_all(conn, &rows).map(|()| paused_for_a_test()),
        Work::Analysis(a) => super::write_new_vehicle_analysis(conn, &a),
        Work::AddVehicle { id, plate } => {
            let new = crate::store::NewVehicle {
                id: Some(id),
                ..crate::store::NewVehicle::plate(&plate)
            };
            crate::store::insert_vehicle(conn, &new).map(drop)
        }
        Work::DeviceId { id, device } => {
            let target = conn.target().clone();
            conn.with_client(|client| {
                client
                    .execute(
                        "UPDATE fleetctl.vehicles SET device_id = $1 WHERE id = $2 AND device_id IS NULL \
                         AND NOT EXISTS (SELECT 1 FROM fleetctl.vehicles WHERE device_id = $1)",
                        &[&device, &id],
                    )
                    .map(drop)
                    .map_err(|e| target.failed("write", e))
            })
        }
    }
}

/// The fleet's vehicles by plate.
fn read_plates(conn: &PgConn) -> Result<std::collections::HashMap<String, i64>> {
    let target = conn.target().clone();
    conn.with_client(|client| {
        let rows = client
            .query("SELECT plate, id FROM fleetctl.vehicles", &[])
            .map_err(|e| target.failed("read", e))?;
        Ok(rows
            .iter()
            .map(|r| (r.get::<_, String>(0), r.get::<_, i64>(1)))
            .collect())
    })
}

/// Waits for the lock new vehicles are added under (held until the import ends).
fn lock_new_vehicles(conn: &PgConn) -> Result<()> {
    let target = conn.target().clone();
    conn.with_client(|client| {
        client
            .execute("SELECT pg_advisory_xact_lock($1)", &[&NEW_VEHICLE_LOCK])
            .map(drop)
            .map_err(|e| target.failed("write", e))
    })
}

/// The copying thread ended before its work did (it panicked).
fn stopped() -> crate::error::Error {
    crate::error::Error::internal("the import's COPY thread stopped")
}
