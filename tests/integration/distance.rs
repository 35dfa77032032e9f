//! One distance: for every vehicle-day of the demo fleet and of every real track in
//! `fixtures/real/`, `route_map`, `trip_summary`, `daily_summary`, `mileage_ranking`
//! and the daily export give the same km; on the real tracks that km is within 3 %
//! of the driven path (walkers and buses included), and an odometer that goes down
//! is not believed.

use crate::harness::{TempDir, fixture_db, fleetctl, open, run};
use fleetctl::report::{self, Db};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

const REAL: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/real");

/// Every real fixture and the flags it is imported with: its own zone, units, plate.
pub(crate) const REAL_FILES: [(&str, &[&str]); 6] = [
    (
        "bus-austin-capmetro-2015-03-08.csv",
        &["--time-zone", "America/Chicago", "--speed-unit", "mph"],
    ),
    (
        "bus-minneapolis-metrotransit-avl.csv",
        &["--time-zone", "America/Chicago", "--speed-unit", "mps"],
    ),
    (
        "car-visnjan-etrex20x.gpx",
        &["--time-zone", "Europe/Zagreb", "--plate", "CAR"],
    ),
    (
        "walk-cerknica-lake.gpx",
        &["--time-zone", "Europe/Ljubljana", "--plate", "WALK"],
    ),
    (
        "run-los-gatos-garmin.gpx",
        &["--time-zone", "America/Los_Angeles", "--plate", "RUN"],
    ),
    (
        "walk-sparse-tower-collector.gpx",
        &["--time-zone", "Europe/Berlin", "--plate", "TOWER"],
    ),
];

/// The import flags of a real fixture.
pub(crate) fn real_import_flags(file: &str) -> &'static [&'static str] {
    REAL_FILES
        .iter()
        .find(|(f, _)| *f == file)
        .map_or(&[], |(_, flags)| flags)
}

/// Every real fixture, imported as a fleet operator would, with its own zone.
pub(crate) fn real_databases(dir: &TempDir) -> Vec<(&'static str, PathBuf)> {
    let files = REAL_FILES;
    files
        .into_iter()
        .map(|(file, flags)| {
            let db = dir.join(&format!("{file}.db"));
            let path = format!("{REAL}/{file}");
            let mut args = vec!["--db", db.to_str().unwrap(), "import", &path];
            args.extend_from_slice(flags);
            run(fleetctl(&args)).ok();
            (file, db)
        })
        .collect()
}

fn answer(db: &Db, tool: &str, args: Value) -> Value {
    let Value::Object(args) = args else {
        unreachable!()
    };
    let spec = report::find(tool).unwrap();
    report::call(db, spec, &args)
        .unwrap_or_else(|e| panic!("{tool} {args:?}: {e:?}"))
        .value
}

/// The daily export's km by (date, plate).
fn exported_daily_km(db: &Path, dir: &TempDir, name: &str) -> HashMap<(String, String), f64> {
    let out = dir.join(&format!("{name}-daily.csv"));
    run(fleetctl(&[
        "--db",
        db.to_str().unwrap(),
        "export",
        "daily",
        "-o",
        out.to_str().unwrap(),
    ]))
    .ok();
    let text = std::fs::read_to_string(&out).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |n: &str| header.iter().position(|h| *h == n).unwrap();
    let (date, plate, km) = (col("date"), col("plate"), col("distance_km"));
    lines
        .map(|l| {
            // Plates and dates hold no commas; later cells may (quoted), but come after.
            let cells: Vec<&str> = l.split(',').collect();
            (
                (cells[date].to_string(), cells[plate].to_string()),
                cells[km].parse().unwrap(),
            )
        })
        .collect()
}

/// Compares every command's km for every vehicle-day of one database; returns the
/// number of vehicle-days compared and the km of all of them.
fn compare_every_vehicle_day(name: &str, path: &Path, dir: &TempDir) -> (usize, f64) {
    let exported = exported_daily_km(path, dir, name);
    let db = Db::open(&fleetctl::store::Location::File(path.to_path_buf())).unwrap();
    let days: Vec<(String, String)> = {
        let conn = open(path);
        let mut st = conn
            .prepare("SELECT v.plate, d.date FROM daily d JOIN vehicles v ON v.id = d.vehicle_id ORDER BY 1, 2")
            .unwrap();
        st.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    };
    assert!(!days.is_empty(), "{name}: no vehicle-days");
    let mut total = 0.0;
    let mut mileage_by_date: HashMap<String, Value> = HashMap::new();
    for (plate, date) in &days {
        let trip = answer(&db, "trip_summary", json!({"plate": plate, "date": date}));
        let km = trip["distance_km"].as_f64().unwrap();
        let map = answer(&db, "route_map", json!({"plate": plate, "date": date}));
        let daily = answer(
            &db,
            "daily_summary",
            json!({"plate": plate, "from": date, "to": date}),
        );
        let mileage = mileage_by_date
            .entry(date.clone())
            .or_insert_with(|| answer(&db, "mileage_ranking", json!({"from": date, "to": date})));
        let ranked = mileage["vehicles"]["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["plate"] == plate.as_str())
            .map(|r| r["distance_km"].as_f64().unwrap());
        let what = format!("{name} {plate} {date}");
        assert_eq!(map["distance_km"].as_f64(), Some(km), "{what}: map vs trip");
        assert_eq!(
            map["distance_source"], trip["distance_source"],
            "{what}: sources"
        );
        assert_eq!(
            daily["days"]["items"][0]["distance_km"].as_f64(),
            Some(km),
            "{what}: daily vs trip"
        );
        // The ranking lists 200 vehicles at most (the Minneapolis extract has 391).
        if mileage["vehicles"]["truncated"] == false {
            assert_eq!(ranked, Some(km), "{what}: mileage vs trip");
        }
        assert_eq!(
            exported.get(&(date.clone(), plate.clone())),
            Some(&km),
            "{what}: export vs trip"
        );
        total += km;
    }
    (days.len(), total)
}

/// The driven path of a database's stored fixes, km: the sum of the steps between a
/// vehicle's consecutive fixes at most 5 minutes apart, a fix implying more than
/// 250 km/h from the last one kept left out (a GPS jump is not driven).
fn driven_path_km(path: &Path) -> f64 {
    let conn = open(path);
    let mut st = conn
        .prepare("SELECT vehicle_id, ts, lat, lon FROM fixes ORDER BY vehicle_id, ts")
        .unwrap();
    let rows: Vec<(i64, i64, f64, f64)> = st
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let mut km = 0.0;
    let mut kept: Option<(i64, i64, f64, f64)> = None;
    for row in rows {
        if let Some(k) = kept.filter(|k| k.0 == row.0) {
            let m = fleetctl::geo::haversine_m(
                fleetctl::geo::LatLon::new(k.2, k.3),
                fleetctl::geo::LatLon::new(row.2, row.3),
            );
            let dt = (row.1 - k.1).max(1) as f64;
            if m / dt * 3.6 > 250.0 {
                continue;
            }
            if row.1 - k.1 <= 300 {
                km += m / 1000.0;
            }
        }
        kept = Some(row);
    }
    km
}

#[test]
fn one_km_for_one_vehicle_and_day_whichever_command_asks() {
    let dir = TempDir::new("one-distance");
    let (days, _) = compare_every_vehicle_day("demo", fixture_db(), &dir);
    assert!(days >= 80, "the demo fleet has {days} vehicle-days");
    for (name, db) in real_databases(&dir) {
        let (days, km) = compare_every_vehicle_day(name, &db, &dir);
        let path = driven_path_km(&db);
        let off = (km - path) / path;
        assert!(
            off.abs() < 0.03,
            "{name}: {km:.3} km over {days} vehicle-days against a driven path of {path:.3} km ({:+.1} %)",
            off * 100.0
        );
    }
}

#[test]
fn an_odometer_that_goes_down_is_not_believed() {
    let dir = TempDir::new("odometer-down");
    let db = dir.join("fleet.db");
    let csv = format!("{REAL}/bus-minneapolis-metrotransit-avl.csv");
    run(fleetctl(&[
        "--db",
        db.to_str().unwrap(),
        "import",
        &csv,
        "--time-zone",
        "America/Chicago",
        "--speed-unit",
        "mps",
    ]))
    .ok();
    let fleet = Db::open(&fleetctl::store::Location::File(db.clone())).unwrap();
    let mileage = answer(
        &fleet,
        "mileage_ranking",
        json!({"from": "2022-09-20", "to": "2022-09-20"}),
    );
    // The extract's buses moved 59 km between them; believed, their odometers
    // (one of them stepping down by 7,081) made it thousands.
    let total = mileage["fleet_total_km"].as_f64().unwrap();
    assert!(total < 70.0, "{total} km");
    let rejected: Vec<&Value> = mileage["vehicles"]["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["odometer_rejected"] == "decreasing")
        .collect();
    assert!(!rejected.is_empty(), "{mileage}");
    for r in rejected {
        assert_ne!(r["distance_source"], "odometer", "{r}");
    }
}

#[test]
fn a_database_of_the_previous_schema_is_brought_up_to_date_by_analyze() {
    let dir = TempDir::new("schema-4");
    let db = dir.join("fleet.db");
    let gpx = format!("{REAL}/car-visnjan-etrex20x.gpx");
    let db_arg = db.to_str().unwrap();
    run(fleetctl(&[
        "--db",
        db_arg,
        "import",
        "--time-zone",
        "Europe/Zagreb",
        "--plate",
        "CAR",
        &gpx,
    ]))
    .ok();
    let before = crate::harness::query_json(&db, &["trip", "CAR", "--date", "2020-12-18"]);
    // Version 5 lacked the daily event count; its analyze adds it.
    let v5 = dir.join("v5.db");
    std::fs::copy(&db, &v5).unwrap();
    rusqlite::Connection::open(&v5)
        .unwrap()
        .execute_batch(
            &(crate::harness::POSITIONS_AS_VERSION_7.to_string()
                + crate::harness::TRIPS_AND_EVENTS_BEFORE_9
                + "DROP INDEX daily_date_counts; CREATE INDEX daily_date ON daily (date); \
             ALTER TABLE daily DROP COLUMN events; \
             DROP INDEX vehicles_device_id; ALTER TABLE vehicles DROP COLUMN device_id; \
             UPDATE meta SET value = '5' WHERE key = 'schema_version';"),
        )
        .unwrap();
    run(fleetctl(&[
        "--db",
        v5.to_str().unwrap(),
        "query",
        "trip",
        "CAR",
    ]))
    .fails(4);
    run(fleetctl(&["--db", v5.to_str().unwrap(), "analyze"])).ok();
    let daily_indexes: Vec<String> = open(&v5)
        .prepare("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'daily' AND sql IS NOT NULL")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap();
    assert_eq!(
        daily_indexes,
        ["daily_date_counts"],
        "the former index replaced"
    );
    assert_eq!(
        crate::harness::query_json(&v5, &["trip", "CAR", "--date", "2020-12-18"]),
        before
    );
    // Version 4 lacked the odometer verdict's two columns as well.
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute_batch(
            &(crate::harness::POSITIONS_AS_VERSION_7.to_string()
                + crate::harness::TRIPS_AND_EVENTS_BEFORE_9
                + "DROP INDEX daily_date_counts; CREATE INDEX daily_date ON daily (date); \
             ALTER TABLE trips DROP COLUMN odometer_km; \
             ALTER TABLE daily DROP COLUMN odometer_rejected; \
             ALTER TABLE daily DROP COLUMN events; \
             DROP INDEX vehicles_device_id; ALTER TABLE vehicles DROP COLUMN device_id; \
             UPDATE meta SET value = '4' WHERE key = 'schema_version';"),
        )
        .unwrap();
    let refused = run(fleetctl(&["--db", db_arg, "query", "trip", "CAR"])).fails(4);
    let said = format!("{}{}", refused.stdout, refused.stderr);
    assert!(
        said.contains("schema version 4")
            && said.contains(&format!("fleetctl --db {db_arg} migrate")),
        "{said}"
    );
    // `generate --if-missing` (what `make run` does) keeps such a fleet: it brings it
    // up to date rather than replacing it with the demo.
    let copy = dir.join("copy.db");
    std::fs::copy(&db, &copy).unwrap();
    let copy_arg = copy.to_str().unwrap();
    let kept = run(fleetctl(&[
        "--db",
        copy_arg,
        "generate",
        "--if-missing",
        "--ahora",
        "2026-11-25T15:30",
    ]))
    .ok();
    assert!(kept.stdout.contains("kept it"), "{}", kept.stdout);
    assert_eq!(
        crate::harness::query_json(&copy, &["trip", "CAR", "--date", "2020-12-18"]),
        before
    );
    // An analysis that fails (a limit out of range) leaves version 4 whole.
    run(fleetctl(&[
        "--db",
        db_arg,
        "analyze",
        "--speed-limit",
        "300",
    ]))
    .fails(2);
    let still_old = run(fleetctl(&["--db", db_arg, "query", "trip", "CAR"])).fails(4);
    assert!(
        still_old.stdout.contains("schema version 4"),
        "{}",
        still_old.stdout
    );
    run(fleetctl(&["--db", db_arg, "analyze"])).ok();
    let after = crate::harness::query_json(&db, &["trip", "CAR", "--date", "2020-12-18"]);
    assert_eq!(before, after);
    let positions: i64 = open(&db)
        .query_row("SELECT COUNT(*) FROM positions", [], |r| r.get(0))
        .unwrap();
    assert_eq!(positions, 104, "positions are kept");
}

/// The range reports' totals are summed from the daily rollups' counts: on the demo
/// fleet and every real fixture, those counts hold every trip, stop and event (each
/// begins at a fix, so on a day with data).
#[test]
fn the_daily_rollups_count_every_trip_stop_and_event() {
    let dir = TempDir::new("daily-counts");
    let mut databases = real_databases(&dir);
    databases.push(("demo fleet", crate::harness::fixture_db().to_path_buf()));
    for (name, db) in databases {
        let conn = rusqlite::Connection::open(&db).unwrap();
        for (table, column) in [("trips", "trips"), ("stops", "stops"), ("events", "events")] {
            let (rows, summed): (i64, i64) = conn
                .query_row(
                    &format!("SELECT (SELECT COUNT(*) FROM {table}), (SELECT COALESCE(SUM({column}), 0) FROM daily)"),
                    [],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .unwrap();
            assert_eq!(summed, rows, "{name}: {table}");
        }
    }
}
