//! fleetctl on PostgreSQL + PostGIS: creating the schema, and every refusal (another
//! application's database, no PostGIS, a refused password, a schema from the
//! future) saying what to do and changing nothing. Each test makes a database of its
//! own on the server `.ci/postgres` starts (FLEETCTL_TEST_PG); without one the suite
//! is skipped, loudly in `make test`, and CI (FLEETCTL_REQUIRE_PG) fails instead.

use crate::harness::{FIXTURE_AHORA, FIXTURE_SEED, McpSession, TempDir, fixture_db, fleetctl, run};
use crate::reports::{answer_json, snapshot_cases};
use postgres::{Client, NoTls};
use std::path::Path;

/// The server's URL (a role that may create databases), or None to skip.
fn server() -> Option<String> {
    match std::env::var("FLEETCTL_TEST_PG") {
        Ok(url) if !url.is_empty() => Some(url),
        _ if std::env::var_os("FLEETCTL_REQUIRE_PG").is_some() => {
            panic!("FLEETCTL_REQUIRE_PG is set but FLEETCTL_TEST_PG is not: .ci/postgres prints it")
        }
        _ => {
            eprintln!(
                "SKIPPED: the PostgreSQL suite (FLEETCTL_TEST_PG is not set; .ci/postgres starts a server)"
            );
            None
        }
    }
}

/// The password in a `postgres://USER:PASSWORD@…` URL.
fn password_of(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let user_info = rest.rsplit_once('@').map_or("", |(u, _)| u);
    user_info.split_once(':').map_or("", |(_, p)| p)
}

/// The demo fleet generated into the database at `url`.
fn generate_demo(url: &str) {
    run(fleetctl(&[
        "--db",
        url,
        "generate",
        "--ahora",
        FIXTURE_AHORA,
    ]))
    .ok();
}

/// A database made for one test, dropped when it ends.
struct TestDb {
    server: String,
    name: String,
}

impl TestDb {
    /// A new database `fleetctl_t_<pid>_<tag>`, from `template` (template1 has PostGIS).
    fn new(server: &str, tag: &str, template: &str) -> TestDb {
        let name = format!("fleetctl_t_{}_{tag}", std::process::id());
        let mut admin = Client::connect(server, NoTls).expect("the test server answers");
        // One statement a call: neither may run inside the implicit transaction of a batch.
        admin
            .batch_execute(&format!("DROP DATABASE IF EXISTS {name}"))
            .unwrap();
        admin
            .batch_execute(&format!("CREATE DATABASE {name} TEMPLATE {template}"))
            .unwrap();
        TestDb {
            server: server.to_string(),
            name,
        }
    }

    /// A new database holding an empty fleet in America/Guatemala, as `fleetctl
    /// init` makes one (a live fleet's start).
    fn empty_fleet(server: &str, tag: &str) -> TestDb {
        let db = TestDb::new(server, tag, "template1");
        run(fleetctl(&[
            "--db",
            &db.url(),
            "init",
            "--time-zone",
            "America/Guatemala",
        ]))
        .ok();
        db
    }

    /// A new database holding the demo fleet (`generate_demo`).
    fn with_demo(server: &str, tag: &str) -> TestDb {
        let db = TestDb::new(server, tag, "template1");
        generate_demo(&db.url());
        db
    }

    fn url(&self) -> String {
        let (base, _) = self.server.rsplit_once('/').unwrap();
        format!("{base}/{}", self.name)
    }

    fn client(&self) -> Client {
        Client::connect(&self.url(), NoTls).unwrap()
    }

    /// The names of fleetctl's tables in it.
    fn fleetctl_tables(&self) -> Vec<String> {
        self.client()
            .query(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = 'fleetctl' ORDER BY 1",
                &[],
            )
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect()
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        if let Ok(mut admin) = Client::connect(&self.server, NoTls) {
            let _ = admin.batch_execute(&format!(
                "DROP DATABASE IF EXISTS {} WITH (FORCE)",
                self.name
            ));
        }
    }
}

#[test]
fn init_makes_positions_partitioned_by_month_and_geofences_spatially_indexed() {
    let Some(server) = server() else { return };
    let db = TestDb::new(&server, "init", "template1");
    let url = db.url();
    let made = run(fleetctl(&[
        "--db",
        &url,
        "init",
        "--time-zone",
        "America/Guatemala",
    ]))
    .ok();
    assert!(made.stdout.contains("America/Guatemala"), "{}", made.stdout);
    assert!(
        !made.stdout.contains(&format!(":{}@", password_of(&url))),
        "the password is never shown"
    );
    let mut client = db.client();
    let kind: String = client
        .query_one(
            "SELECT relkind::text FROM pg_class WHERE oid = 'fleetctl.positions'::regclass",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(kind, "p", "positions is a partitioned table");
    let access: String = client
        .query_one(
            "SELECT am.amname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid \
             JOIN pg_am am ON am.oid = c.relam WHERE c.relname = 'geofences_area'",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(access, "gist");
    let meta: Vec<(String, String)> = client
        .query("SELECT key, value FROM fleetctl.meta ORDER BY key", &[])
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert!(
        meta.contains(&("time_zone".into(), "America/Guatemala".into())),
        "{meta:?}"
    );
    assert!(meta.contains(&(
        "schema_version".into(),
        fleetctl_core::store::SCHEMA_VERSION.to_string()
    )));

    // Months of positions get their partitions as data arrives, and a fix lands in its own.
    let target = fleetctl_core::store::pg::Target::parse(&url).unwrap();
    let nov_29 = 1_795_910_400_000; // 2026-11-29T00:00:00Z
    let made = fleetctl_core::store::pg::ensure_partitions(
        &mut client,
        &target,
        nov_29,
        nov_29 + 5 * 86_400_000,
    )
    .unwrap();
    assert_eq!(made, ["positions_2026_11", "positions_2026_12"]);
    client
        .execute(
            "INSERT INTO fleetctl.positions (vehicle_id, ts_ms, lat_e7, lon_e7, motion) VALUES (1, $1, 146000000, -905000000, 0)",
            &[&(nov_29 + 3 * 86_400_000)],
        )
        .unwrap();
    let month: String = client
        .query_one(
            "SELECT tableoid::regclass::text FROM fleetctl.positions",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(month, "fleetctl.positions_2026_12");

    // Its settings read as those of a SQLite fleet made the same way, line for line.
    let on_postgres = run(fleetctl(&["--db", &url, "settings"])).ok().stdout;
    let dir = crate::harness::TempDir::new("pg-settings");
    let file = dir.join("live.db");
    let file = file.to_str().unwrap();
    run(fleetctl(&[
        "--db",
        file,
        "init",
        "--time-zone",
        "America/Guatemala",
    ]))
    .ok();
    let on_sqlite = run(fleetctl(&["--db", file, "settings"])).ok().stdout;
    let shown = url.replacen(&format!(":{}@", password_of(&url)), ":***@", 1);
    assert_eq!(
        on_postgres.replace(&shown, "DB"),
        on_sqlite.replace(file, "DB")
    );
    assert!(on_postgres.contains("America/Guatemala"), "{on_postgres}");

    // A second init changes nothing; migrate finds it up to date.
    let again = run(fleetctl(&[
        "--db",
        &url,
        "init",
        "--time-zone",
        "Europe/Madrid",
    ]))
    .fails(2);
    assert!(
        again.stderr.contains("holds a fleet already"),
        "{}",
        again.stderr
    );
    let migrated = run(fleetctl(&["--db", &url, "migrate"])).ok();
    assert!(
        migrated.stdout.contains("nothing to do"),
        "{}",
        migrated.stdout
    );
}

#[test]
fn a_database_without_postgis_or_of_another_application_is_refused_untouched() {
    let Some(server) = server() else { return };
    let bare = TestDb::new(&server, "bare", "template0");
    let said = run(fleetctl(&[
        "--db",
        &bare.url(),
        "init",
        "--time-zone",
        "UTC",
    ]))
    .fails(4);
    assert!(
        said.stderr.contains("no PostGIS") && said.stderr.contains("CREATE EXTENSION postgis"),
        "{}",
        said.stderr
    );
    assert!(bare.fleetctl_tables().is_empty(), "nothing created");

    let shop = TestDb::new(&server, "shop", "template1");
    shop.client()
        .batch_execute("CREATE TABLE public.orders (id int PRIMARY KEY)")
        .unwrap();
    let said = run(fleetctl(&[
        "--db",
        &shop.url(),
        "init",
        "--time-zone",
        "UTC",
    ]))
    .fails(4);
    assert!(
        said.stderr.contains("another application") && said.stderr.contains("public.orders"),
        "{}",
        said.stderr
    );
    assert!(shop.fleetctl_tables().is_empty(), "nothing created");
    let said = run(fleetctl(&["--db", &shop.url(), "migrate"])).fails(4);
    assert!(said.stderr.contains("public.orders"), "{}", said.stderr);
}

#[test]
fn a_refused_password_a_future_schema_and_a_command_not_on_postgres_are_said_clearly() {
    let Some(server) = server() else { return };
    let db = TestDb::new(&server, "faults", "template1");
    let url = db.url();
    run(fleetctl(&["--db", &url, "init", "--time-zone", "UTC"])).ok();

    let wrong = url.replacen(&format!(":{}@", password_of(&url)), ":not-the-password@", 1);
    let said = run(fleetctl(&["--db", &wrong, "migrate"])).fails(4);
    assert!(
        said.stderr.contains("password authentication failed")
            && !said.stderr.contains("not-the-password"),
        "{}",
        said.stderr
    );

    let said = run(fleetctl(&["--db", &url, "mcp-config"])).fails(2);
    assert!(
        said.stderr
            .contains("`mcp-config` runs on a SQLite file only"),
        "{}",
        said.stderr
    );

    db.client()
        .execute(
            "UPDATE fleetctl.meta SET value = '99' WHERE key = 'schema_version'",
            &[],
        )
        .unwrap();
    let said = run(fleetctl(&["--db", &url, "migrate"])).fails(4);
    assert!(
        said.stderr.contains("schema version 99, newer"),
        "{}",
        said.stderr
    );

    let said = run(fleetctl(&[
        "--db",
        "postgres://nobody@127.0.0.1:1/x",
        "migrate",
    ]))
    .fails(4);
    assert!(
        said.stderr.contains("is the server running"),
        "{}",
        said.stderr
    );
    let said = run(fleetctl(&[
        "--db",
        &format!("{url}?sslmode=sometimes"),
        "migrate",
    ]))
    .fails(2);
    assert!(said.stderr.contains("\"sometimes\""), "{}", said.stderr);
}

#[test]
fn the_demos_positions_copied_in_bulk_read_back_as_sqlite_keeps_them_and_a_failed_copy_leaves_nothing()
 {
    let Some(server) = server() else { return };
    let db = TestDb::empty_fleet(&server, "copy");
    let url = db.url();
    let sqlite = crate::harness::open(crate::harness::fixture_db());
    let mut fixes: Vec<(fleetctl_core::model::Fix, i64)> = Vec::new();
    fleetctl_core::store::read::all_positions(&sqlite, &mut |f, ms| fixes.push((*f, ms))).unwrap();
    let target = fleetctl_core::store::pg::Target::parse(&url).unwrap();
    let mut client = db.client();
    let mut tx = client.transaction().unwrap();
    let written = fleetctl_core::store::pg::copy_fixes(
        &mut tx,
        &target,
        fleetctl_core::store::pg::Partitions::Outside,
        fixes.iter().map(|(f, ms)| (f, *ms)),
    )
    .unwrap();
    tx.commit().unwrap();
    assert_eq!(written as usize, fixes.len());

    // Row for row, the columns SQLite keeps: key split in two, the rest equal.
    let in_sqlite: Vec<(i64, i64, i64, i64, i64, Option<i64>)> = sqlite
        .prepare(
            "SELECT vehicle_time >> 42, vehicle_time & 4398046511103, lat_e7, lon_e7, motion, odometer_m \
             FROM positions ORDER BY vehicle_time",
        )
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let in_postgres: Vec<(i64, i64, i64, i64, i64, Option<i64>)> = client
        .query(
            "SELECT vehicle_id, ts_ms, lat_e7, lon_e7, motion, odometer_m FROM fleetctl.positions ORDER BY vehicle_id, ts_ms",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| {
            (
                r.get(0),
                r.get(1),
                i64::from(r.get::<_, i32>(2)),
                i64::from(r.get::<_, i32>(3)),
                r.get(4),
                r.get(5),
            )
        })
        .collect();
    assert_eq!(in_postgres.len(), in_sqlite.len());
    assert!(in_postgres == in_sqlite, "every fix as SQLite keeps it");
    let partitions: Vec<String> = client
        .query(
            "SELECT DISTINCT tableoid::regclass::text FROM fleetctl.positions ORDER BY 1",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(
        partitions,
        ["fleetctl.positions_2026_11"],
        "the demo's week is one month"
    );

    // The same fixes again: refused as a whole, nothing half-written.
    let mut tx = client.transaction().unwrap();
    let again = fleetctl_core::store::pg::copy_fixes(
        &mut tx,
        &target,
        fleetctl_core::store::pg::Partitions::Outside,
        fixes.iter().map(|(f, ms)| (f, *ms)),
    );
    assert!(again.is_err());
    drop(tx);
    let count: i64 = client
        .query_one("SELECT count(*) FROM fleetctl.positions", &[])
        .unwrap()
        .get(0);
    assert_eq!(count as usize, fixes.len());
}

#[test]
fn two_writers_needing_the_same_new_month_both_succeed_one_waiting_for_the_other() {
    let Some(server) = server() else { return };
    let db = TestDb::new(&server, "months", "template1");
    let url = db.url();
    run(fleetctl(&["--db", &url, "init", "--time-zone", "UTC"])).ok();
    let target = fleetctl_core::store::pg::Target::parse(&url).unwrap();
    let jan_2027 = 1_798_761_600_000; // 2027-01-01T00:00:00Z

    // The first writer makes January's partition and keeps its transaction open.
    let mut first = db.client();
    let mut first_tx = first.transaction().unwrap();
    fleetctl_core::store::pg::ensure_partitions(&mut first_tx, &target, jan_2027, jan_2027)
        .unwrap();

    // The second needs the same month meanwhile, on a connection of its own.
    let second = {
        let (url, target) = (url.clone(), target.clone());
        std::thread::spawn(move || {
            let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
            let mut tx = client.transaction().unwrap();
            let made =
                fleetctl_core::store::pg::ensure_partitions(&mut tx, &target, jan_2027, jan_2027);
            tx.commit().map(|()| made)
        })
    };
    // Once it waits for the first (a lock not granted: a condition, not a delay), the
    // first commits.
    let mut watcher = db.client();
    wait_for_a_writer_to_wait(
        &mut watcher,
        "the second writer never came to wait for the month",
    );
    first_tx.commit().unwrap();
    let made = second.join().unwrap().unwrap().unwrap();
    assert_eq!(made, ["positions_2027_01"]);
    let partitions: i64 = watcher
        .query_one(
            "SELECT count(*) FROM pg_inherits WHERE inhparent = 'fleetctl.positions'::regclass",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(partitions, 1);
}

/// A unit of work in which a statement failed is never reported as written, even
/// when the error was set aside: PostgreSQL would answer its `COMMIT` with a
/// rollback and no error.
#[test]
fn a_unit_of_work_whose_statement_failed_is_not_reported_written() {
    use fleetctl_core::store::pg;
    let Some(server) = server() else { return };
    let db = TestDb::new(&server, "commitcheck", "template1");
    let url = db.url();
    run(fleetctl(&["--db", &url, "init", "--time-zone", "UTC"])).ok();
    let target = pg::Target::parse(&url).unwrap();
    let conn = fleetctl_core::store::pg::PgConn::new(target.connect().unwrap(), target);
    let outcome = pg::in_transaction(&conn, || {
        pg::execute(
            &conn,
            "INSERT INTO fleetctl.vehicles (id, plate, kind, driver, active, route) \
             VALUES (1, 'P-333CCC', 'van', '', TRUE, NULL)",
        )?;
        let _set_aside = pg::execute(&conn, "SELECT 1 / 0");
        Ok(())
    });
    let e = outcome.expect_err("a failed unit of work reported as committed");
    assert!(e.message.contains("nothing was written"), "{}", e.message);
    let vehicles = || -> i64 {
        db.client()
            .query_one("SELECT count(*) FROM fleetctl.vehicles", &[])
            .unwrap()
            .get(0)
    };
    assert_eq!(vehicles(), 0);
    // A unit of work that did not fail is committed as before.
    pg::in_transaction(&conn, || {
        pg::execute(
            &conn,
            "INSERT INTO fleetctl.vehicles (id, plate, kind, driver, active, route) \
             VALUES (1, 'P-333CCC', 'van', '', TRUE, NULL)",
        )
    })
    .unwrap();
    assert_eq!(vehicles(), 1);
}

/// Returns once a session waits for an advisory lock it was not granted (a
/// condition, not a delay); the bound only turns a hang into a failure.
fn wait_for_a_writer_to_wait(watcher: &mut Client, never: &str) {
    let since = std::time::Instant::now();
    loop {
        let waiting: i64 = watcher
            .query_one(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted",
                &[],
            )
            .unwrap()
            .get(0);
        if waiting > 0 {
            return;
        }
        assert!(
            since.elapsed() < std::time::Duration::from_secs(300),
            "{never}"
        );
        std::thread::yield_now();
    }
}

/// An import picks the ids of the vehicles it adds itself, under the lock every
/// writer adds vehicles under: a vehicle another writer added while the import
/// waited for that lock keeps its id, and its plate in the file is that vehicle's.
#[test]
fn an_import_adding_vehicles_while_another_writer_adds_one_keeps_both() {
    let Some(server) = server() else { return };
    let db = TestDb::new(&server, "importids", "template1");
    let url = db.url();
    run(fleetctl(&["--db", &url, "init", "--time-zone", "UTC"])).ok();
    let dir = TempDir::new("pg-import-ids");
    let (held, fresh) = (dir.join("held.csv"), dir.join("fresh.csv"));
    crate::harness::write_tracker_csv(&held, "P-111AAA");
    crate::harness::write_tracker_csv(&fresh, "P-222BBB");

    // Another writer adds P-111AAA under the lock and keeps its transaction open.
    let mut other = db.client();
    let mut other_tx = other.transaction().unwrap();
    other_tx
        // The lock new vehicles are added under ("fltv", store/pg/import.rs).
        .execute("SELECT pg_advisory_xact_lock(1718383734)", &[])
        .unwrap();
    other_tx
        .execute(
            "INSERT INTO fleetctl.vehicles (id, plate, kind, driver, active, route) \
             VALUES (1, 'P-111AAA', 'van', 'Ana', TRUE, NULL)",
            &[],
        )
        .unwrap();
    let import = {
        let url = url.clone();
        let files = [fresh.clone(), held.clone()];
        std::thread::spawn(move || {
            fleetctl(&[
                "--db",
                &url,
                "import",
                files[0].to_str().unwrap(),
                files[1].to_str().unwrap(),
            ])
            .output()
            .unwrap()
        })
    };
    // Once the import waits for the lock (a condition, not a delay), the other
    // writer commits.
    let mut watcher = db.client();
    wait_for_a_writer_to_wait(&mut watcher, "the import never came to wait for the lock");
    other_tx.commit().unwrap();
    let out = import.join().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let vehicles: Vec<(i64, String, String, i64)> = watcher
        .query(
            "SELECT v.id, v.plate, v.kind, (SELECT count(*) FROM fleetctl.positions p WHERE p.vehicle_id = v.id) \
             FROM fleetctl.vehicles v ORDER BY v.id",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
        .collect();
    assert_eq!(
        vehicles,
        [
            (1, "P-111AAA".to_string(), "van".to_string(), 40),
            (2, "P-222BBB".to_string(), "unknown".to_string(), 40),
        ]
    );
}

#[test]
fn every_report_answers_the_same_on_postgres_as_on_sqlite() {
    let Some(server) = server() else { return };
    let pg = TestDb::new(&server, "snapshots", "template1");
    let url = pg.url();
    let sqlite = fixture_db();
    let seed = FIXTURE_SEED.to_string();
    let generated = run(fleetctl(&[
        "--db",
        &url,
        "generate",
        "--ahora",
        FIXTURE_AHORA,
        "--seed",
        &seed,
    ]))
    .ok();
    assert!(
        generated.stdout.contains("positions  173,"),
        "{}",
        generated.stdout
    );
    assert_same_answers(sqlite, &url);
    // Exports read the same rows: byte-equal files.
    let dirs = [
        TempDir::new("pg-export-sqlite"),
        TempDir::new("pg-export-postgres"),
    ];
    for (dir, db) in dirs.iter().zip([sqlite.to_str().unwrap(), url.as_str()]) {
        for words in [
            &["positions", "-o", "positions.csv"][..],
            &["trips", "-o", "trips.csv"][..],
            &["stops", "-o", "stops.csv"][..],
            &["events", "-o", "events.csv"][..],
            &["daily", "-o", "daily.csv"][..],
            &[
                "positions",
                "--format",
                "parquet",
                "--partition-by",
                "date",
                "-o",
                "dataset",
            ][..],
            &[
                "positions",
                "--plate",
                "P-701JFG",
                "--from",
                "yesterday",
                "--to",
                "yesterday",
                "-o",
                "day.gpx",
            ][..],
        ] {
            let mut all = vec!["--db", db, "export"];
            all.extend_from_slice(words);
            let mut cmd = fleetctl(&all);
            cmd.current_dir(dir.path());
            run(cmd).ok();
        }
    }
    let files = |dir: &Path| {
        let mut found = Vec::new();
        let mut stack = vec![dir.to_path_buf()];
        while let Some(d) = stack.pop() {
            for entry in std::fs::read_dir(&d).unwrap().flatten() {
                let path = entry.path();
                if path.is_dir() {
                    stack.push(path);
                } else {
                    found.push((
                        path.strip_prefix(dir).unwrap().to_path_buf(),
                        std::fs::read(&path).unwrap(),
                    ));
                }
            }
        }
        found.sort();
        found
    };
    let (a, b) = (files(dirs[0].path()), files(dirs[1].path()));
    assert!(a.len() >= 10, "{} files", a.len());
    assert_eq!(a.len(), b.len());
    for ((name, sqlite_bytes), (_, postgres_bytes)) in a.iter().zip(&b) {
        assert!(
            sqlite_bytes == postgres_bytes,
            "{} differs between the backends",
            name.display()
        );
    }
    // Generating again into a database with a fleet is refused unless --force.
    let again = run(fleetctl(&[
        "--db",
        &url,
        "generate",
        "--ahora",
        FIXTURE_AHORA,
    ]))
    .fails(2);
    assert!(
        again.stderr.contains("holds a fleet already"),
        "{}",
        again.stderr
    );
}

#[test]
fn servers_on_one_database_see_each_others_edits_and_survive_a_lost_connection() {
    let Some(server) = server() else { return };
    let pg = TestDb::with_demo(&server, "replicas");
    let url = pg.url();
    let db = Path::new(&url);
    // The first connects as given (`prefer`, to 127.0.0.1: in the clear); the
    // second asks for TLS where the server offers it.
    let offers_tls = pg
        .client()
        .query_one("SHOW ssl", &[])
        .unwrap()
        .get::<_, String>(0)
        == "on";
    let insisting = format!("{url}?sslmode=require");
    let second = if offers_tls {
        Path::new(&insisting)
    } else {
        eprintln!("NOTE: the PostgreSQL server offers no TLS: sslmode=require is not tried");
        db
    };
    let mut replicas = [
        McpSession::initialized(db, "2025-06-18"),
        McpSession::initialized(second, "2025-06-18"),
    ];
    let driver_of = |s: &mut McpSession, plate: &str| -> String {
        let answer = s.call_tool("vehicle_position", serde_json::json!({ "plate": plate }));
        answer["structuredContent"]["driver"]
            .as_str()
            .unwrap_or_else(|| panic!("{answer}"))
            .to_string()
    };
    let plate: String = pg
        .client()
        .query_one(
            "SELECT plate FROM fleetctl.vehicles WHERE active ORDER BY id LIMIT 1",
            &[],
        )
        .unwrap()
        .get(0);
    for replica in &mut replicas {
        assert_ne!(driver_of(replica, &plate), "Ana Relevo");
    }
    let encrypted: Vec<bool> = pg
        .client()
        .query(
            "SELECT s.ssl FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) \
             WHERE a.datname = current_database() AND a.application_name = 'fleetctl' \
             ORDER BY s.ssl",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert!(encrypted.contains(&false), "{encrypted:?}");
    assert_eq!(encrypted.contains(&true), offers_tls, "{encrypted:?}");
    // Another process edits the fleet: both servers answer with it at once.
    pg.client()
        .execute(
            "UPDATE fleetctl.vehicles SET driver = 'Ana Relevo' WHERE plate = $1",
            &[&plate],
        )
        .unwrap();
    for replica in &mut replicas {
        assert_eq!(driver_of(replica, &plate), "Ana Relevo");
    }
    // Another process writes what only the analysis holds (no table a server keeps
    // moves the revision, no newer fix): the same question, asked again, answers
    // with it though the servers keep answers while nothing changed.
    let total = |s: &mut McpSession| {
        let r = s.call_tool("mileage_ranking", serde_json::json!({}));
        r["structuredContent"]["fleet_total_km"]
            .as_f64()
            .unwrap_or_else(|| panic!("{r}"))
    };
    let before: Vec<f64> = replicas.iter_mut().map(&total).collect();
    for (replica, before) in replicas.iter_mut().zip(&before) {
        assert_eq!(
            total(replica),
            *before,
            "the same question, the same database"
        );
    }
    add_1000_km_to_the_last_day(&pg);
    for (replica, before) in replicas.iter_mut().zip(&before) {
        let after = total(replica);
        assert!(after >= before + 999.0, "{before} km, then {after} km");
    }
    // A fix newer than the data clock arrives (another server's ingest): the
    // answers' "now" moves with it, though nothing a server keeps changed.
    pg.client()
        .execute(
            "UPDATE fleetctl.latest_fix SET ts = ts + 7200 WHERE vehicle_id = (SELECT id FROM fleetctl.vehicles WHERE plate = $1)",
            &[&plate],
        )
        .unwrap();
    let newest: i64 = pg
        .client()
        .query_one("SELECT max(ts) FROM fleetctl.latest_fix", &[])
        .unwrap()
        .get(0);
    for replica in &mut replicas {
        let answer = replica.call_tool("vehicle_position", serde_json::json!({ "plate": plate }));
        let now = answer["structuredContent"]["data_now"]
            .as_str()
            .unwrap_or_default();
        let expected = fleetctl::clock::FleetZone::named("America/Guatemala")
            .unwrap()
            .rfc3339(newest);
        assert_eq!(now, expected, "{answer}");
    }
    assert_no_transaction_held(&pg);
    // Every connection of the servers is cut (a restarted database server does the
    // same): the next call connects again and answers.
    pg.client()
        .execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND usename = current_user AND pid <> pg_backend_pid()",
            &[&pg.name],
        )
        .unwrap();
    for replica in &mut replicas {
        assert_eq!(driver_of(replica, &plate), "Ana Relevo");
    }
}

/// Waits until no connection to the test database is inside a transaction with
/// nothing to do: a server whose request is answered holds no snapshot, which
/// would keep the database's vacuum from its dead rows for as long as the server
/// is idle. Fails when one stays so for a minute.
fn assert_no_transaction_held(pg: &TestDb) {
    let mut watcher = pg.client();
    let started = std::time::Instant::now();
    loop {
        let held: i64 = watcher
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() \
                 AND state LIKE 'idle in transaction%'",
                &[],
            )
            .unwrap()
            .get(0);
        if held == 0 {
            return;
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(60),
            "{held} connections stay inside a transaction with no request in hand"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Asserts that every report answers the same (JSON equal) from the SQLite fixture
/// and from the fleet at `url`: the snapshot cases, then the week's ranges and their
/// second pages, each page reached by its own backend's cursor (a cursor is opaque:
/// only the rows it leads to must agree).
fn assert_same_answers(sqlite: &Path, url: &str) {
    let postgres = Path::new(url);
    let scratch = TempDir::new("pg-snapshots");
    for (name, words) in snapshot_cases(sqlite, scratch.path()) {
        assert_answers_equal(postgres, sqlite, &words, &format!("{name} ({words:?})"));
    }
    let week = |v: &[&str]| {
        let mut words: Vec<String> = v.iter().map(|x| x.to_string()).collect();
        words.extend(["--from", "2026-11-19", "--to", "2026-11-25"].map(String::from));
        words
    };
    let ranges = [
        week(&["query", "trips"]),
        week(&["query", "stops"]),
        week(&[
            "query",
            "stops",
            "--min-minutes",
            "5",
            "--geofence",
            "Bodega Mixco",
        ]),
        week(&["query", "events", "--kind", "geofence_enter"]),
        week(&["query", "events", "--geofence", "Bodega Mixco"]),
        week(&["query", "daily"]),
    ];
    let cursor_of = |answer: &serde_json::Value| {
        answer
            .as_object()
            .and_then(|o| o.values().find_map(|v| v.get("next_cursor")))
            .and_then(|c| c.as_str().map(String::from))
    };
    let mut second_pages = 0;
    for words in ranges {
        let (on_sqlite, on_postgres) = (answer_json(sqlite, &words), answer_json(postgres, &words));
        assert_eq!(
            without_cursors(on_postgres.clone()),
            without_cursors(on_sqlite.clone()),
            "{words:?} answers otherwise on PostgreSQL"
        );
        let (Some(a), Some(b)) = (cursor_of(&on_sqlite), cursor_of(&on_postgres)) else {
            continue;
        };
        let next = |cursor: String| {
            let mut more = words.clone();
            more.extend(["--cursor".to_string(), cursor]);
            more
        };
        assert_eq!(
            without_cursors(answer_json(postgres, &next(b))),
            without_cursors(answer_json(sqlite, &next(a))),
            "the second page of {words:?} answers otherwise on PostgreSQL"
        );
        second_pages += 1;
    }
    assert!(
        second_pages >= 3,
        "only {second_pages} ranges had a second page"
    );
}

/// Asserts that `words` (a query) answers the same on PostgreSQL (`postgres`) as on
/// `other`, paging cursors aside (they are opaque); `what` names the case.
fn assert_answers_equal(postgres: &Path, other: &Path, words: &[String], what: &str) {
    let (a, b) = (
        without_cursors(answer_json(postgres, words)),
        without_cursors(answer_json(other, words)),
    );
    assert!(
        a == b,
        "{what} answers otherwise on PostgreSQL: {}",
        first_difference(&a, &b, "")
    );
}

/// An answer with its paging cursors taken out (they are opaque).
fn without_cursors(mut value: serde_json::Value) -> serde_json::Value {
    match &mut value {
        serde_json::Value::Object(map) => {
            map.remove("next_cursor");
            for v in map.values_mut() {
                *v = without_cursors(v.take());
            }
        }
        serde_json::Value::Array(items) => {
            for v in items {
                *v = without_cursors(v.take());
            }
        }
        _ => {}
    }
    value
}

#[test]
fn a_fleet_analysed_in_two_shards_at_once_answers_as_sqlite_does() {
    let Some(server) = server() else { return };
    let pg = TestDb::new(&server, "shards", "template1");
    let url = pg.url();
    let seed = FIXTURE_SEED.to_string();
    run(fleetctl(&[
        "--db",
        &url,
        "generate",
        "--ahora",
        FIXTURE_AHORA,
        "--seed",
        &seed,
    ]))
    .ok();
    // The derived rows are wiped, so only the shards' analysis can bring them back.
    pg.client()
        .batch_execute(
            "TRUNCATE fleetctl.stops, fleetctl.trips, fleetctl.events, fleetctl.visits, \
             fleetctl.daily, fleetctl.latest_fix",
        )
        .unwrap();
    let shard = |which: &str| {
        fleetctl(&["--db", &url, "analyze", "--shard", which])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (first, second) = (shard("1/2"), shard("2/2"));
    let mut vehicles = 0;
    for child in [first, second] {
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        let line = text
            .lines()
            .find(|l| l.trim_start().starts_with("vehicles"))
            .unwrap_or_default();
        vehicles += line
            .split_whitespace()
            .nth(1)
            .and_then(|n| n.parse::<usize>().ok())
            .unwrap_or(0);
    }
    assert_eq!(
        vehicles, 15,
        "the two shards split the 15 vehicles between them"
    );
    assert_same_answers(fixture_db(), &url);
    // Each shard reclaims the rows it replaced and renews the planner's
    // statistics before it ends: autovacuum is left nothing to do a minute later,
    // under the servers' load.
    let tidied: i64 = pg
        .client()
        .query_one(
            "SELECT count(*) FROM pg_stat_user_tables WHERE schemaname = 'fleetctl' \
             AND relname IN ('stops', 'trips', 'events', 'visits', 'daily', 'latest_fix') \
             AND last_vacuum IS NOT NULL AND last_analyze IS NOT NULL",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(tidied, 6, "the derived tables vacuumed and analysed");

    let refused = run(fleetctl(&["--db", &url, "analyze", "--shard", "3/2"])).fails(2);
    assert!(refused.stderr.contains("1 ≤ I ≤ N"), "{}", refused.stderr);
    let on_sqlite = run(fleetctl(&[
        "--db",
        fixture_db().to_str().unwrap(),
        "analyze",
        "--shard",
        "1/2",
    ]))
    .fails(2);
    assert!(
        on_sqlite.stderr.contains("one process at a time"),
        "{}",
        on_sqlite.stderr
    );
}

#[test]
fn real_tracks_imported_into_postgres_answer_as_in_sqlite_and_a_failed_import_leaves_nothing() {
    let Some(server) = server() else { return };
    let dir = TempDir::new("pg-real");
    for (i, (file, sqlite)) in crate::distance::real_databases(&dir)
        .into_iter()
        .enumerate()
    {
        let pg = TestDb::new(&server, &format!("real{i}"), "template1");
        let url = pg.url();
        // The same flags as the SQLite import: its zone, units and plate.
        let flags = crate::distance::real_import_flags(file);
        let path = format!("{}/fixtures/real/{file}", env!("CARGO_MANIFEST_DIR"));
        let mut args = vec!["--db", url.as_str(), "import", &path];
        args.extend_from_slice(flags);
        run(fleetctl(&args)).ok();
        // A second import of the same file adds nothing, as in SQLite.
        let again = run(fleetctl(&args)).ok();
        assert!(
            again.stdout.contains("No fixes added"),
            "{file}: {}",
            again.stdout
        );
        let plate: String = pg
            .client()
            .query_one(
                "SELECT plate FROM fleetctl.vehicles ORDER BY id LIMIT 1",
                &[],
            )
            .unwrap()
            .get(0);
        for words in [
            &["query", "mileage"][..],
            &["query", "daily"],
            &["query", "stopped"],
            &["query", "trips"],
            &["query", "stops"],
            &["query", "events"],
            &["query", "alerts"],
            &["query", "vehicles"],
            &["query", "position", &plate],
            &["query", "trip", &plate],
        ] {
            let words: Vec<String> = words.iter().map(|w| w.to_string()).collect();
            assert_answers_equal(
                Path::new(&url),
                &sqlite,
                &words,
                &format!("{file}: {words:?}"),
            );
        }
    }
    // An import that fails (no zone for a new fleet) creates nothing.
    let pg = TestDb::new(&server, "refused", "template1");
    let gpx = format!(
        "{}/fixtures/real/walk-cerknica-lake.gpx",
        env!("CARGO_MANIFEST_DIR")
    );
    let said = run(fleetctl(&[
        "--db",
        &pg.url(),
        "import",
        &gpx,
        "--plate",
        "WALK",
    ]))
    .fails(2);
    assert!(said.stderr.contains("--time-zone"), "{}", said.stderr);
    assert!(
        pg.fleetctl_tables().is_empty(),
        "{:?}",
        pg.fleetctl_tables()
    );
}

/// Where two answers first differ: the path and both values (short, unlike the
/// whole answers).
fn first_difference(a: &serde_json::Value, b: &serde_json::Value, path: &str) -> String {
    use serde_json::Value;
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for (k, v) in x {
                match y.get(k) {
                    Some(w) if v != w => return first_difference(v, w, &format!("{path}.{k}")),
                    None => return format!("{path}.{k} only on PostgreSQL"),
                    _ => {}
                }
            }
            format!(
                "{path}: keys {:?} against {:?}",
                x.keys().collect::<Vec<_>>(),
                y.keys().collect::<Vec<_>>()
            )
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => x
            .iter()
            .zip(y)
            .enumerate()
            .find(|(_, (v, w))| v != w)
            .map_or(String::new(), |(i, (v, w))| {
                first_difference(v, w, &format!("{path}[{i}]"))
            }),
        _ => {
            let short = |v: &Value| v.to_string().chars().take(300).collect::<String>();
            format!("{path}: {} on PostgreSQL, {} on SQLite", short(a), short(b))
        }
    }
}

#[test]
fn servers_run_under_a_read_only_role_and_a_write_under_it_changes_nothing() {
    let Some(server) = server() else { return };
    let pg = TestDb::with_demo(&server, "reader");
    let url = pg.url();
    // The GRANTs of docs/postgres.md, word for word but for the names.
    let reader = format!("fleetctl_reader_{}", std::process::id());
    let grants = format!(
        "DROP ROLE IF EXISTS {reader}; \
         CREATE ROLE {reader} LOGIN PASSWORD 'change-me'; \
         GRANT CONNECT ON DATABASE {db} TO {reader}; \
         GRANT USAGE ON SCHEMA fleetctl TO {reader}; \
         GRANT SELECT ON ALL TABLES IN SCHEMA fleetctl TO {reader};",
        db = pg.name
    );
    pg.client().batch_execute(&grants).unwrap();
    let (scheme_user, rest) = url.split_once('@').unwrap();
    let (scheme, _) = scheme_user.split_once("//").unwrap();
    let reader_url = format!("{scheme}//{reader}:change-me@{rest}");

    let words: Vec<String> = ["query", "mileage"].map(String::from).to_vec();
    assert_eq!(
        answer_json(Path::new(&reader_url), &words),
        answer_json(Path::new(&url), &words)
    );
    let mut session = McpSession::initialized(Path::new(&reader_url), "2025-06-18");
    let stopped = session.call_tool("stopped_vehicles", serde_json::json!({}));
    assert!(
        stopped["structuredContent"]["vehicles"]["total"].as_u64() > Some(0),
        "{stopped}"
    );
    drop(session);

    let before = answer_json(Path::new(&url), &words);
    let settings_before = run(fleetctl(&["--db", &url, "settings"])).ok().stdout;
    let refused = run(fleetctl(&[
        "--db",
        &reader_url,
        "analyze",
        "--speed-limit",
        "95",
    ]))
    .fails(4);
    assert!(
        refused.stderr.contains("permission denied") && refused.stderr.contains("GRANT"),
        "{}",
        refused.stderr
    );
    assert_eq!(answer_json(Path::new(&url), &words), before);
    let settings = run(fleetctl(&["--db", &url, "settings"])).ok().stdout;
    assert_eq!(settings, settings_before);

    pg.client()
        .batch_execute(&format!(
            "REVOKE ALL ON ALL TABLES IN SCHEMA fleetctl FROM {reader}; \
             REVOKE ALL ON SCHEMA fleetctl FROM {reader}; \
             REVOKE ALL ON DATABASE {db} FROM {reader}; DROP ROLE {reader}",
            db = pg.name
        ))
        .unwrap();
}

/// The editing commands — places, geofences, vehicles and prune — run on
/// PostgreSQL as on SQLite: the same edits on both stores leave the same answers,
/// the same lists and the same archive, and each re-analysis sees its edit.
#[test]
fn places_geofences_vehicles_and_prune_edit_postgres_as_they_edit_sqlite() {
    let Some(server) = server() else { return };
    let db = TestDb::with_demo(&server, "edits");
    let url = db.url();
    let dir = TempDir::new("pg-edits");
    let sqlite = dir.join("fleet.db");
    std::fs::copy(fixture_db(), &sqlite).unwrap();
    let zone = dir.join("zone.geojson");
    std::fs::write(
        &zone,
        r#"{"type":"FeatureCollection","features":[{"type":"Feature",
            "geometry":{"type":"Point","coordinates":[-90.5133,14.6407]},
            "properties":{"name":"Parque Central","kind":"zone","radius_m":250,"speed_limit_kmh":20}}]}"#,
    )
    .unwrap();
    let place = dir.join("place.geojson");
    std::fs::write(
        &place,
        r#"{"type":"FeatureCollection","features":[{"type":"Feature",
            "geometry":{"type":"Point","coordinates":[-90.5133,14.6407]},
            "properties":{"name":"Catedral Metropolitana","kind":"landmark"}}]}"#,
    )
    .unwrap();
    let edits: [&[&str]; 7] = [
        &["geofences", "import", zone.to_str().unwrap()],
        &["geofences", "remove", "Mercado La Terminal"],
        &["places", "import", place.to_str().unwrap()],
        &["places", "remove", "Zona 10 (Zona Viva)"],
        &["vehicles", "add", "P-900NEW", "--device-id", "48241179"],
        &["vehicles", "set", "P-701JFG", "--speed-limit", "45"],
        &["vehicles", "set", "P-884MMV", "--device-id", "77"],
    ];
    for edit in edits {
        let on = |db: &str| {
            let mut words = vec!["--db", db];
            words.extend_from_slice(edit);
            run(fleetctl(&words)).ok().stdout
        };
        let (a, b) = (on(sqlite.to_str().unwrap()), on(&url));
        assert_eq!(a.lines().next(), b.lines().next(), "{edit:?}");
    }
    let taken = run(fleetctl(&[
        "--db",
        &url,
        "vehicles",
        "add",
        "P-901NEW",
        "--device-id",
        "77",
    ]))
    .fails(2);
    assert!(
        taken.stderr.contains("already belongs to P-884MMV"),
        "{}",
        taken.stderr
    );
    for list in ["places", "geofences"] {
        let on = |db: &str| run(fleetctl(&["--db", db, list, "list"])).ok().stdout;
        assert_eq!(on(&url), on(sqlite.to_str().unwrap()), "{list} list");
    }
    let pruned = |db: &str, archive: &Path| {
        run(fleetctl(&[
            "--db",
            db,
            "prune",
            "--older-than",
            "3d",
            "--archive",
            archive.to_str().unwrap(),
        ]))
        .ok()
        .stdout
    };
    let (archive_a, archive_b) = (dir.join("archive-sqlite"), dir.join("archive-postgres"));
    let (a, b) = (
        pruned(sqlite.to_str().unwrap(), &archive_a),
        pruned(&url, &archive_b),
    );
    assert_eq!(
        a.replace(archive_a.to_str().unwrap(), "ARCHIVE"),
        b.replace(archive_b.to_str().unwrap(), "ARCHIVE")
    );
    assert!(a.contains("from before 2026-11-22"), "{a}");
    for day in ["2026-11-19", "2026-11-20", "2026-11-21"] {
        let file = |root: &Path| {
            std::fs::read(root.join(format!("date={day}")).join("part-0.parquet")).unwrap()
        };
        assert!(
            file(&archive_a) == file(&archive_b),
            "{day}'s archive differs"
        );
    }
    // The prune dropped no month still holding positions, and what both stores
    // answer now is the same.
    for words in [
        vec!["query", "stopped"],
        vec![
            "query",
            "alerts",
            "--from",
            "2026-11-22",
            "--to",
            "2026-11-25",
        ],
        vec![
            "query",
            "events",
            "--from",
            "2026-11-22",
            "--to",
            "2026-11-25",
            "--kind",
            "speeding",
        ],
        vec![
            "query",
            "events",
            "--from",
            "2026-11-22",
            "--to",
            "2026-11-25",
            "--geofence",
            "Parque Central",
        ],
        vec![
            "query",
            "daily",
            "--from",
            "2026-11-19",
            "--to",
            "2026-11-25",
        ],
        vec!["query", "position", "P-900NEW"],
        vec!["query", "nearest", "Catedral Metropolitana"],
    ] {
        let words: Vec<String> = words.into_iter().map(String::from).collect();
        assert_answers_equal(Path::new(&url), &sqlite, &words, &format!("{words:?}"));
    }
}

/// Live ingest on PostgreSQL from two servers at once: one vehicle's device pushes
/// to one server, another's to the other, and a third's fixes alternate between
/// them (a load balancer with no stickiness), some sent twice and some late. Once
/// both servers have stopped, every report answers as on the database `generate`
/// built from the same positions.
#[test]
fn a_fleet_pushed_live_to_two_servers_on_postgres_answers_as_the_generated_database() {
    let Some(server) = server() else { return };
    let pg = TestDb::new(&server, "live", "template1");
    let url = pg.url();
    let dir = TempDir::new("pg-live");
    let generated = dir.join("generated.db");
    let fleet = [
        "--ahora",
        "2026-11-25T15:30",
        "--seed",
        "5",
        "--vehicles",
        "4",
        "--days",
        "2",
    ];
    crate::harness::generate(&generated, &fleet).ok();
    let mut words = vec!["--db", url.as_str(), "generate"];
    words.extend_from_slice(&fleet);
    run(fleetctl(&words)).ok();
    let fixes: Vec<(String, String)> = {
        let conn = rusqlite::Connection::open(&generated).unwrap();
        let mut st = conn
            .prepare(
                "SELECT v.plate, p.ts, p.lat, p.lon, p.speed_kmh, p.heading_deg, p.ignition, p.odometer_km \
                 FROM fixes p JOIN vehicles v ON v.id = p.vehicle_id ORDER BY p.vehicle_id, p.ts",
            )
            .unwrap();
        st.query_map([], |r| {
            let plate: String = r.get(0)?;
            let mut q = format!(
                "/ingest/osmand?id={plate}&timestamp={}&lat={}&lon={}&speed={}",
                r.get::<_, i64>(1)?,
                r.get::<_, f64>(2)?,
                r.get::<_, f64>(3)?,
                r.get::<_, f64>(4)?
            );
            if let Some(h) = r.get::<_, Option<f64>>(5)? {
                q += &format!("&bearing={h}");
            }
            if let Some(i) = r.get::<_, Option<bool>>(6)? {
                q += &format!("&ignition={i}");
            }
            if let Some(km) = r.get::<_, Option<f64>>(7)? {
                q += &format!("&odometer={}", km * 1000.0);
            }
            Ok((plate, q))
        })
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap()
    };
    pg.client()
        .batch_execute(
            "DELETE FROM fleetctl.positions; DELETE FROM fleetctl.stops; DELETE FROM fleetctl.trips; \
             DELETE FROM fleetctl.events; DELETE FROM fleetctl.visits; DELETE FROM fleetctl.daily; \
             DELETE FROM fleetctl.latest_fix; UPDATE fleetctl.vehicles SET device_id = plate;",
        )
        .unwrap();
    let token = "ingest-token-0123456789abcdef";
    let spawn = || {
        let (child, stderr, base, _) = crate::http::spawn_server_on(
            Path::new(&url),
            &["--ingest", "--osmand-speed-unit", "kmh"],
            &[("FLEETCTL_INGEST_TOKEN", token)],
        );
        // The log is read as it comes, so that a full pipe never stops a server.
        (child, crate::http::log_lines(stderr), base)
    };
    let mut servers = [spawn(), spawn()];
    let bases: Vec<String> = servers.iter().map(|s| s.2.clone()).collect();
    let mut by_plate: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for (plate, path) in fixes {
        by_plate.entry(plate).or_default().push(path);
    }
    assert!(by_plate.len() >= 3, "{} vehicles drove", by_plate.len());
    let auth = format!("Bearer {token}");
    std::thread::scope(|scope| {
        for (n, paths) in by_plate.values().enumerate() {
            let (bases, auth) = (&bases, &auth);
            scope.spawn(move || {
                // Vehicle 0 pushes to the first server, 1 to the second, 2 to each
                // in turn.
                let base_for = |k: usize| &bases[if n == 2 { k % 2 } else { n % 2 }];
                let send = |k: usize, path: &String| {
                    let (status, body) = crate::live::send_to(
                        base_for(k),
                        "POST",
                        path,
                        &[("Authorization", auth)],
                        "",
                    );
                    assert_eq!(status, 200, "{path}: {body}");
                };
                let held_back = |k: usize| k % 53 == 52 && k + 100 < paths.len();
                for (k, path) in paths.iter().enumerate() {
                    if !held_back(k) {
                        send(k, path);
                        if k % 37 == 36 {
                            // The retry reaches the other server.
                            send(k + 1, path);
                        }
                    }
                    if k >= 100 && held_back(k - 100) {
                        send(k, &paths[k - 100]);
                    }
                }
            });
        }
    });
    // A stopped server has analysed every fix it acknowledged.
    for s in &mut servers {
        let status = crate::harness::sigterm_and_wait(&mut s.0);
        assert!(status.success(), "{status:?}");
        // Neither server's analysis failed on the way (two analysers writing one
        // vehicle's rows over each other would).
        let failed: Vec<String> = s.1.try_iter().filter(|l| l.contains("failed")).collect();
        assert!(failed.is_empty(), "{failed:#?}");
    }
    let cases = crate::live::fed_fleet_cases(&generated, &dir, by_plate.keys());
    for (name, words) in cases {
        assert_answers_equal(
            Path::new(&url),
            &generated,
            &words,
            &format!("{name} ({words:?})"),
        );
    }
}

/// `--auto-register` on two servers at once: a new device's first fixes reach both
/// together, both are taken, and the fleet gains one vehicle for it, not two, nor a
/// refused push.
#[test]
fn a_new_device_pushing_to_two_servers_at_once_becomes_one_vehicle() {
    let Some(server) = server() else { return };
    let pg = TestDb::empty_fleet(&server, "register");
    let url = pg.url();
    let token = "ingest-token-0123456789abcdef";
    let spawn = || {
        let (child, stderr, base, _) = crate::http::spawn_server_on(
            Path::new(&url),
            &["--ingest", "--auto-register"],
            &[("FLEETCTL_INGEST_TOKEN", token)],
        );
        (child, crate::http::log_lines(stderr), base)
    };
    let mut servers = [spawn(), spawn()];
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    for round in 0..5i64 {
        let device = format!("phone-{round}");
        let barrier = std::sync::Barrier::new(2);
        std::thread::scope(|scope| {
            for (k, s) in servers.iter().enumerate() {
                let (barrier, device, base) = (&barrier, &device, &s.2);
                scope.spawn(move || {
                    let path = format!(
                        "/ingest/osmand?id={device}&timestamp={}&lat=14.63&lon=-90.50&speed=0&token={token}",
                        now - 60 + k as i64
                    );
                    barrier.wait();
                    let (status, body) = crate::live::send_to(base, "GET", &path, &[], "");
                    assert_eq!(status, 200, "{device} on server {k}: {body}");
                });
            }
        });
        let vehicles: i64 = pg
            .client()
            .query_one(
                "SELECT count(*) FROM fleetctl.vehicles WHERE device_id = $1",
                &[&device],
            )
            .unwrap()
            .get(0);
        assert_eq!(vehicles, 1, "{device}");
    }
    for s in &mut servers {
        let status = crate::harness::sigterm_and_wait(&mut s.0);
        assert!(status.success(), "{status:?}");
    }
    let fixes: i64 = pg
        .client()
        .query_one("SELECT count(*) FROM fleetctl.positions", &[])
        .unwrap()
        .get(0);
    assert_eq!(fixes, 10);
}

/// Under TimescaleDB positions is a hypertable, which makes its chunks itself:
/// fleetctl then makes no month partition, and an import lands in the one table.
/// TimescaleDB is not installed here, so a do-nothing `create_hypertable` stands in
/// for its own; what is tested is fleetctl's side of the layout.
#[test]
fn a_fleet_whose_positions_are_not_partitioned_gets_no_month_partitions() {
    let Some(server) = server() else { return };
    let db = TestDb::new(&server, "hypertable", "template1");
    let mut client = db.client();
    client
        .batch_execute(
            "CREATE FUNCTION public.create_hypertable(regclass, name, chunk_time_interval bigint) \
             RETURNS void LANGUAGE sql AS ''",
        )
        .unwrap();
    let schema = fleetctl_core::store::pg::Layout::Hypertable
        .schema()
        .unwrap();
    client
        .batch_execute(&format!(
            "BEGIN; {schema} INSERT INTO fleetctl.meta (key, value) VALUES \
             ('schema_version', '{}'), ('time_zone', 'America/Guatemala'); COMMIT;",
            fleetctl_core::store::SCHEMA_VERSION
        ))
        .unwrap();
    let dir = TempDir::new("pg-hypertable");
    let csv = dir.join("fixes.csv");
    crate::harness::write_tracker_csv(&csv, "P-321HYP");
    run(fleetctl(&[
        "--db",
        &db.url(),
        "import",
        csv.to_str().unwrap(),
    ]))
    .ok();
    let (fixes, months): (i64, i64) = client
        .query_one(
            "SELECT (SELECT count(*) FROM fleetctl.positions), \
             (SELECT count(*) FROM pg_class WHERE relname ~ '^positions_[0-9]{4}_[0-9]{2}$')",
            &[],
        )
        .map(|r| (r.get(0), r.get(1)))
        .unwrap();
    assert_eq!((fixes, months), (40, 0));
    let position = run(fleetctl(&[
        "--db",
        &db.url(),
        "query",
        "position",
        "P-321HYP",
    ]))
    .ok()
    .stdout;
    assert!(position.contains("P-321HYP"), "{position}");
}

#[test]
fn an_http_servers_workers_share_answers_and_none_outlives_a_commit() {
    // On PostgreSQL the workers of one `serve --http` keep answers together; a
    // change of only analysed rows (no vehicle, setting or newer fix) made by
    // another process is in the next answer of every worker.
    let Some(server) = server() else { return };
    let pg = TestDb::with_demo(&server, "sharedanswers");
    let url = pg.url();
    let (mut child, stderr, base, said) =
        crate::http::spawn_server_on(Path::new(&url), &["--workers", "4"], &[]);
    let _log = crate::http::log_lines(stderr);
    // Before it listens, each worker has run the reports once (statements
    // prepared, the fleet-wide answers of this version kept), and holds nothing
    // open since.
    assert!(said.contains("4 workers ready ("), "{said}");
    assert_no_transaction_held(&pg);
    let auth = format!("Bearer {}", crate::http::TOKEN);
    let total = || {
        let (status, body) = crate::live::send_to(
            &base,
            "POST",
            "/api/v1/tools/mileage_ranking",
            &[
                ("Authorization", &auth),
                ("Content-Type", "application/json"),
            ],
            "{}",
        );
        assert_eq!(status, 200, "{body}");
        let answer: serde_json::Value = serde_json::from_str(&body).unwrap();
        answer["fleet_total_km"]
            .as_f64()
            .unwrap_or_else(|| panic!("{answer}"))
    };
    let before = total();
    for _ in 0..8 {
        assert_eq!(total(), before, "the same question, the same database");
    }
    add_1000_km_to_the_last_day(&pg);
    for _ in 0..8 {
        let after = total();
        assert!(after >= before + 999.0, "{before} km, then {after} km");
    }
    assert_no_transaction_held(&pg);
    let _ = child.kill();
    let _ = child.wait();
}

/// Another process adds 1,000 km to one vehicle's last day in `daily` alone: what
/// only an analysis writes, with no vehicle, setting or newer fix changed.
fn add_1000_km_to_the_last_day(pg: &TestDb) {
    let changed = pg
        .client()
        .execute(
            "UPDATE fleetctl.daily SET gps_distance_km = gps_distance_km + 1000, \
             odometer_distance_km = odometer_distance_km + 1000 \
             WHERE date = (SELECT max(date) FROM fleetctl.daily) \
             AND vehicle_id = (SELECT min(vehicle_id) FROM fleetctl.daily \
             WHERE date = (SELECT max(date) FROM fleetctl.daily))",
            &[],
        )
        .unwrap();
    assert_eq!(changed, 1);
}

/// A PostgreSQL password is printed nowhere, whatever form it came in (`user:pass@`,
/// `?password=`, raw `/ @ ? #`, `key=value`, PGPASSWORD) and whichever way the
/// command fails (a refused password, an unreachable server, a URL that does not
/// parse, a database that is not a fleet) or succeeds.
#[test]
fn regression_a_password_is_never_printed_whatever_form_it_came_in() {
    let Some(server) = server() else { return };
    let db = TestDb::new(&server, "secrets", "template1");
    let url = db.url();
    let real = password_of(&url).to_string();
    let rest = url.split_once('@').unwrap().1; // HOST:PORT/DB
    let (host_port, name) = rest.split_once('/').unwrap();
    let (host, port) = host_port.split_once(':').unwrap();
    let wrong = "Wr0ng-Hush-4271";
    let raw = "S3C/R@E?T#pw-9";
    let forms: Vec<(String, Option<&str>, &str)> = vec![
        (
            format!("postgres://fleetctl_test:{wrong}@{rest}"),
            None,
            wrong,
        ),
        (
            format!("postgres://fleetctl_test@{rest}?password={wrong}"),
            None,
            wrong,
        ),
        (format!("postgres://fleetctl_test:{raw}@{rest}"), None, raw),
        (
            format!("postgres://fleetctl_test@{rest}"),
            Some(wrong),
            wrong,
        ),
        (
            format!("host={host} port={port} user=fleetctl_test password={wrong} dbname={name}"),
            None,
            wrong,
        ),
        (
            format!("postgres://fleetctl_test:{wrong}@127.0.0.1:1/{name}"),
            None,
            wrong,
        ),
        // The right password: the commands then succeed or refuse an empty database.
        (url.clone(), None, real.as_str()),
        (
            format!("host={host} port={port} user=fleetctl_test password={real} dbname={name}"),
            None,
            real.as_str(),
        ),
    ];
    let commands: [&[&str]; 7] = [
        &["settings"],
        &["analyze"],
        &["migrate"],
        &["query", "stopped"],
        &["query", "stopped", "--format", "json"],
        &["vehicles", "list"],
        &["serve", "--http", "127.0.0.1:0", "--ingest"],
    ];
    let dir = TempDir::new("secrets");
    for (db_arg, env_password, secret) in &forms {
        for words in commands {
            let mut args = vec!["--db", db_arg.as_str()];
            args.extend_from_slice(words);
            let mut cmd = fleetctl(&args);
            cmd.current_dir(dir.path())
                .env("FLEETCTL_TOKEN", "token-0123456789abcdef")
                .env("FLEETCTL_INGEST_TOKEN", "ingest-0123456789abcdef")
                .env_remove("PGPASSWORD");
            if let Some(p) = env_password {
                cmd.env("PGPASSWORD", p);
            }
            let r = run(cmd);
            let said = format!("{}{}", r.stdout, r.stderr);
            assert!(
                !said.contains(*secret),
                "{words:?} on {db_arg} printed the password:\n{said}"
            );
            assert_ne!(
                r.code, 0,
                "{words:?} on {db_arg}: an empty database is no fleet\n{said}"
            );
        }
    }
    // Nothing was made on disk under any of those names.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

/// The hot standby's base URL (`.ci/postgres-standby`), or None to skip.
fn standby() -> Option<String> {
    match std::env::var("FLEETCTL_TEST_PG_STANDBY") {
        Ok(url) if !url.is_empty() => Some(url),
        _ if std::env::var_os("FLEETCTL_REQUIRE_PG").is_some() => {
            panic!(
                "FLEETCTL_REQUIRE_PG is set but FLEETCTL_TEST_PG_STANDBY is not: .ci/postgres-standby prints it"
            )
        }
        _ => {
            eprintln!("SKIPPED: the standby tests (FLEETCTL_TEST_PG_STANDBY is not set)");
            None
        }
    }
}

/// On a hot standby, the writers refuse at once with a clear message (before, they
/// started and then failed every request); reads answer as on the primary.
#[test]
fn a_standby_refuses_writers_at_start_and_answers_reads() {
    let Some(server) = server() else { return };
    let Some(standby) = standby() else { return };
    let db = TestDb::new(&server, "standby", "template1");
    let primary = db.url();
    run(fleetctl(&[
        "--db",
        &primary,
        "generate",
        "--vehicles",
        "2",
        "--days",
        "1",
        "--ahora",
        FIXTURE_AHORA,
    ]))
    .ok();
    // Wait for the standby to have replayed the primary's WAL up to now (a bound
    // turns a stuck replica into a failure).
    let lsn: String = db
        .client()
        .query_one("SELECT pg_current_wal_lsn()::text", &[])
        .unwrap()
        .get(0);
    let replica = format!("{}/{}", standby.rsplit_once('/').unwrap().0, db.name);
    let mut watch = Client::connect(&standby, NoTls).expect("the standby answers");
    let caught_up = (0..6000).any(|_| {
        let done: bool = watch
            .query_one(
                "SELECT pg_last_wal_replay_lsn() >= $1::text::pg_lsn",
                &[&lsn],
            )
            .unwrap()
            .get(0);
        if !done {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        done
    });
    assert!(caught_up, "the standby never replayed {lsn}");
    let on_primary = run(fleetctl(&[
        "--db", &primary, "query", "stopped", "--format", "json",
    ]))
    .ok()
    .stdout;
    let on_replica = run(fleetctl(&[
        "--db", &replica, "query", "stopped", "--format", "json",
    ]))
    .ok()
    .stdout;
    assert_eq!(on_primary, on_replica);
    let dir = TempDir::new("standby");
    let csv = dir.join("feed.csv");
    crate::harness::write_tracker_csv(&csv, "P-001AAA");
    for (words, doing) in [
        (vec!["analyze"], "analyze needs the primary"),
        (
            vec!["import", csv.to_str().unwrap()],
            "import needs the primary",
        ),
        (
            vec!["serve", "--http", "127.0.0.1:0", "--ingest"],
            "taking pushes (--ingest) needs the primary",
        ),
    ] {
        let mut args = vec!["--db", replica.as_str()];
        args.extend_from_slice(&words);
        let mut cmd = fleetctl(&args);
        cmd.env("FLEETCTL_TOKEN", "token-0123456789abcdef")
            .env("FLEETCTL_INGEST_TOKEN", "ingest-0123456789abcdef");
        let r = run(cmd).fails(4);
        assert!(
            r.stderr.contains("is a standby") && r.stderr.contains(doing),
            "{words:?}: {}",
            r.stderr
        );
    }
}

/// An ingest server whose connections the database drops (a restart, a failover,
/// a proxy) reconnects by itself: meanwhile pushes get 503 with Retry-After, never
/// 500 nor a silent loss, and the fixes acknowledged before and after the drop are
/// all analysed.
#[test]
fn an_ingest_server_reconnects_after_its_connections_are_dropped() {
    let Some(server) = server() else { return };
    let (pg, mut child, base, _log) = small_live_fleet(&server, "reconnect");
    let token = LIVE_TOKEN;
    let auth = format!("Bearer {token}");
    // 2026-11-25T21:00Z on: a fix a minute.
    let push = |k: i64| {
        let path = format!(
            "/ingest/osmand?id=48241179&lat={}&lon=-90.5&speed=20&timestamp={}",
            14.6 + k as f64 * 1e-3,
            1_795_640_400 + 60 * k
        );
        crate::live::send_to(&base, "POST", &path, &[("Authorization", &auth)], "")
    };
    assert_eq!(push(0).0, 200);
    let dropped: i64 = pg
        .client()
        .query_one(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
             WHERE datname = current_database() AND application_name = 'fleetctl' AND pid <> pg_backend_pid()",
            &[],
        )
        .unwrap()
        .get(0);
    assert!(dropped >= 2, "the server's connections: {dropped}");
    // Each push after the drop is refused as busy or stored; within a few the
    // writer is back.
    let mut k = 1;
    loop {
        let (status, body) = push(k);
        match status {
            200 => break,
            503 => assert!(body.contains("retry"), "{body}"),
            _ => panic!("push {k}: {status} {body}"),
        }
        k += 1;
        assert!(k < 50, "the writer never reconnected");
    }
    assert_eq!(push(k + 1).0, 200);
    // Every stored fix is analysed: the newest one is the vehicle's latest.
    let newest = 1_795_640_400 + 60 * (k + 1);
    let analysed = (0..6000).any(|_| {
        let ts: Option<i64> = pg
            .client()
            .query_one(
                "SELECT max(f.ts) FROM fleetctl.latest_fix f JOIN fleetctl.vehicles v ON v.id = f.vehicle_id WHERE v.plate = 'P-900LIV'",
                &[],
            )
            .unwrap()
            .get(0);
        if ts != Some(newest) {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        ts == Some(newest)
    });
    assert!(analysed, "the analysis never caught up after the reconnect");
    let status = crate::harness::sigterm_and_wait(&mut child);
    assert!(status.success(), "{status:?}");
}

/// On PostgreSQL a server's statements give up on a lock after 5 s: with
/// `positions` locked by another session, a push gets 503 (retried by its device)
/// and a tool call a clear error, instead of waiting as long as the lock is held;
/// both answer again once it is released.
#[test]
fn a_locked_table_makes_the_server_answer_busy_not_hang() {
    let Some(server) = server() else { return };
    let (pg, mut child, base, _log) = small_live_fleet(&server, "deadlines");
    let token = LIVE_TOKEN;
    let auth = format!("Bearer {token}");
    let push = |k: i64| {
        let path = format!(
            "/ingest/osmand?id=48241179&lat=14.6&lon=-90.5&timestamp={}",
            1_795_640_400 + 60 * k
        );
        crate::live::send_to(&base, "POST", &path, &[("Authorization", &auth)], "")
    };
    let bearer = format!("Bearer {}", crate::http::TOKEN);
    // A tool that reads the day's positions (the speed chart).
    let tool = || {
        crate::live::send_to(
            &base,
            "POST",
            "/api/v1/tools/speed_chart",
            &[
                ("Authorization", &bearer),
                ("Content-Type", "application/json"),
            ],
            r#"{"plate":"P-900LIV","date":"2026-11-25"}"#,
        )
    };
    assert_eq!(push(0).0, 200);
    let mut holder = pg.client();
    holder
        .batch_execute("BEGIN; LOCK TABLE fleetctl.positions IN ACCESS EXCLUSIVE MODE")
        .unwrap();
    let (status, body) = push(1);
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("lock"), "{body}");
    let (status, body) = tool();
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("lock timeout"), "{body}");
    holder.batch_execute("ROLLBACK").unwrap();
    assert_eq!(push(2).0, 200);
    let (status, body) = tool();
    assert_eq!(status, 200, "{body}");
    let status = crate::harness::sigterm_and_wait(&mut child);
    assert!(status.success(), "{status:?}");
}

/// An import into a month that has no partition yet makes it in a short
/// transaction of its own: while the import's own transaction is still open, no one
/// holds an exclusive lock on `positions`, pushes into that month are stored and the
/// reports answer (before, the partition was made inside the import's transaction,
/// and every reader and writer of positions waited for the import to commit).
#[test]
fn an_import_into_a_new_month_never_holds_positions_locked() {
    let Some(server) = server() else { return };
    let (pg, mut server_child, base, _log) = small_live_fleet(&server, "partition_ahead");
    let url = pg.url();
    let token = LIVE_TOKEN;
    let dir = TempDir::new("partition-ahead");
    // Two trackers' months that no partition holds yet (the fleet's is November):
    // a new vehicle's night from September 30 into October 1, and a vehicle of the
    // fleet's (whose stored positions the import reads first) in August. Every
    // partition after the first is made while the import's own transaction holds
    // locks on positions, which must not hold it up.
    let known: String = pg
        .client()
        .query_one(
            "SELECT plate FROM fleetctl.vehicles ORDER BY id LIMIT 1",
            &[],
        )
        .unwrap()
        .get(0);
    let csv = dir.join("autumn.csv");
    let track = |plate: &str, first_ts: i64| -> String {
        (0..200)
            .map(|k| {
                format!(
                    "{plate},{},{:.5},-90.55,30.0\n",
                    first_ts + k * 15,
                    14.60 + k as f64 * 0.0008
                )
            })
            .collect()
    };
    let rows = track("P-777IMP", 1_790_812_800 - 1_500) + &track(&known, 1_786_000_000);
    std::fs::write(&csv, format!("plate,timestamp,lat,lon,speed_kmh\n{rows}")).unwrap();
    let pause = dir.join("import-paused");
    let mut import = fleetctl(&["--db", &url, "import", csv.to_str().unwrap()]);
    import
        .env("FLEETCTL_TEST_IMPORT_PAUSE", &pause)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let import = import.spawn().unwrap();
    // The import has appended its first rows and holds its transaction open.
    let paused = (0..6000).any(|_| {
        let there = pause.exists();
        if !there {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        there
    });
    assert!(paused, "the import never reached its pause");
    let exclusive: i64 = pg
        .client()
        .query_one(
            "SELECT count(*) FROM pg_locks WHERE granted AND mode = 'AccessExclusiveLock' \
             AND relation = 'fleetctl.positions'::regclass",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(exclusive, 0, "positions is locked while the import runs");
    let auth = format!("Bearer {token}");
    let path = "/ingest/osmand?id=48241179&lat=14.6&lon=-90.5&timestamp=1790812900";
    let (status, body) = crate::live::send_to(&base, "POST", path, &[("Authorization", &auth)], "");
    assert_eq!(status, 200, "a push into the import's month: {body}");
    let bearer = format!("Bearer {}", crate::http::TOKEN);
    let (status, body) = crate::live::send_to(
        &base,
        "POST",
        "/api/v1/tools/vehicle_position",
        &[
            ("Authorization", &bearer),
            ("Content-Type", "application/json"),
        ],
        r#"{"plate":"P-900LIV"}"#,
    );
    assert_eq!(status, 200, "{body}");
    std::fs::remove_file(&pause).unwrap();
    let out = import.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let months: i64 = pg
        .client()
        .query_one(
            "SELECT count(*) FROM fleetctl.positions WHERE ts_ms < 1793491200000",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(months, 401, "both tracks and the push");
    let status = crate::harness::sigterm_and_wait(&mut server_child);
    assert!(status.success(), "{status:?}");
}

/// A shard whose analysis did not complete leaves the fleet mixing the rows of old
/// and new thresholds: `settings` says so, naming the shard to run again, until it
/// completes.
#[test]
fn an_interrupted_shard_is_said_until_it_completes() {
    let Some(server) = server() else { return };
    let pg = TestDb::new(&server, "shard_under_way", "template1");
    let url = pg.url();
    run(fleetctl(&[
        "--db",
        &url,
        "generate",
        "--vehicles",
        "3",
        "--days",
        "1",
        "--ahora",
        FIXTURE_AHORA,
    ]))
    .ok();
    let settings = || run(fleetctl(&["--db", &url, "settings"])).ok().stdout;
    assert!(!settings().contains("NOTE"), "{}", settings());
    let mut failing = fleetctl(&[
        "--db",
        &url,
        "analyze",
        "--shard",
        "2/3",
        "--speed-limit",
        "70",
    ]);
    failing.env("FLEETCTL_TEST_FAIL_SHARD", "1");
    assert_ne!(run(failing).code, 0);
    let said = settings();
    assert!(
        said.contains("analyze --shard 2/3 began at")
            && said.contains("run `fleetctl analyze --shard 2/3` again"),
        "{said}"
    );
    run(fleetctl(&[
        "--db",
        &url,
        "analyze",
        "--shard",
        "2/3",
        "--speed-limit",
        "70",
    ]))
    .ok();
    assert!(!settings().contains("NOTE"), "{}", settings());
}

/// The ingest token of [`small_live_fleet`]'s server.
const LIVE_TOKEN: &str = "ingest-token-0123456789abcdef";

/// A small fleet on a database of its own (two vehicles, a day), P-900LIV's
/// tracker known as device 48241179.
fn small_fleet(server: &str, tag: &str) -> TestDb {
    let pg = TestDb::new(server, tag, "template1");
    let url = pg.url();
    let words = ["--vehicles", "2", "--days", "1", "--ahora", FIXTURE_AHORA];
    run(fleetctl(
        &[&["--db", url.as_str(), "generate"][..], &words].concat(),
    ))
    .ok();
    run(fleetctl(&[
        "--db",
        &url,
        "vehicles",
        "add",
        "P-900LIV",
        "--device-id",
        "48241179",
    ]))
    .ok();
    pg
}

/// [`small_fleet`] and a server taking pushes for it: the database, the server,
/// its base URL and its log.
fn small_live_fleet(
    server: &str,
    tag: &str,
) -> (
    TestDb,
    std::process::Child,
    String,
    std::sync::mpsc::Receiver<String>,
) {
    let pg = small_fleet(server, tag);
    let (child, stderr, base, _) = crate::http::spawn_server_on(
        Path::new(&pg.url()),
        &["--ingest"],
        &[("FLEETCTL_INGEST_TOKEN", LIVE_TOKEN)],
    );
    (pg, child, base, crate::http::log_lines(stderr))
}

/// On PostgreSQL several servers share the alert outbox: an alert found by one is
/// queued with its event's rows, claimed by one server's webhook thread and posted
/// once, and the outbox is empty after.
#[test]
fn two_servers_post_a_shared_alert_once() {
    let Some(server) = server() else { return };
    let (url_hook, posts) = crate::live::webhook_receiver(200);
    let pg = small_fleet(&server, "outbox");
    let url = pg.url();
    let spawn = || {
        let (child, stderr, base, _) = crate::http::spawn_server_on(
            Path::new(&url),
            &["--ingest", "--alert-webhook", &url_hook],
            &[("FLEETCTL_INGEST_TOKEN", LIVE_TOKEN)],
        );
        (child, base, crate::http::log_lines(stderr))
    };
    let (mut first, base, log1) = spawn();
    let (mut second, _, log2) = spawn();
    crate::live::push_speeding_to(&base, LIVE_TOKEN);
    let (_, body) = posts
        .recv_timeout(std::time::Duration::from_secs(120))
        .expect("the alert was not posted");
    let alert: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        (alert["alert"].as_str(), alert["plate"].as_str()),
        (Some("speeding"), Some("P-900LIV")),
        "{alert}"
    );
    let left = |pg: &TestDb| -> i64 {
        pg.client()
            .query_one("SELECT count(*) FROM fleetctl.alert_outbox", &[])
            .unwrap()
            .get(0)
    };
    let emptied = (0..6000).any(|_| {
        let n = left(&pg);
        if n > 0 {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        n == 0
    });
    assert!(emptied, "the posted alert stayed queued");
    for (child, log) in [(&mut first, log1), (&mut second, log2)] {
        let status = crate::harness::sigterm_and_wait(child);
        let said: Vec<String> = log.iter().collect();
        assert!(status.success(), "{status:?}: {said:#?}");
    }
    assert!(posts.try_recv().is_err(), "the alert was posted twice");
}
