//! `fleetctl generate`: the database it writes, the anomalies it plants, and how it
//! refuses bad input and protects existing files.

use crate::harness::{FIXTURE_AHORA, TempDir, fixture_db, fleetctl, generate, open, run, seed_db};
use fleetctl::geo::{self, LatLon, atlas};
use rusqlite::Connection;
use std::collections::HashMap;
use std::path::Path;

#[derive(Debug, Clone, Copy)]
struct Row {
    vehicle_id: i64,
    ts: i64,
    lat: f64,
    lon: f64,
    speed_kmh: f64,
    ignition: bool,
}

fn positions(conn: &Connection) -> HashMap<i64, Vec<Row>> {
    let mut st = conn
        .prepare("SELECT vehicle_id, ts, lat, lon, speed_kmh, ignition FROM fixes ORDER BY vehicle_id, ts")
        .unwrap();
    let mut by_vehicle: HashMap<i64, Vec<Row>> = HashMap::new();
    let rows = st
        .query_map([], |r| {
            Ok(Row {
                vehicle_id: r.get(0)?,
                ts: r.get(1)?,
                lat: r.get(2)?,
                lon: r.get(3)?,
                speed_kmh: r.get(4)?,
                ignition: r.get(5)?,
            })
        })
        .unwrap();
    for row in rows {
        let row = row.unwrap();
        by_vehicle.entry(row.vehicle_id).or_default().push(row);
    }
    by_vehicle
}

#[derive(Debug)]
struct Truth {
    vehicle_id: i64,
    kind: String,
    start_ts: i64,
    end_ts: i64,
    detail: serde_json::Value,
}

fn truth(conn: &Connection) -> Vec<Truth> {
    let mut st = conn
        .prepare(
            "SELECT vehicle_id, kind, start_ts, end_ts, detail FROM injected_events ORDER BY id",
        )
        .unwrap();
    st.query_map([], |r| {
        Ok(Truth {
            vehicle_id: r.get(0)?,
            kind: r.get(1)?,
            start_ts: r.get(2)?,
            end_ts: r.get(3)?,
            detail: serde_json::from_str(&r.get::<_, String>(4)?).unwrap(),
        })
    })
    .unwrap()
    .map(Result::unwrap)
    .collect()
}

fn meta(conn: &Connection, key: &str) -> String {
    conn.query_row("SELECT value FROM meta WHERE key = ?1", [key], |r| r.get(0))
        .unwrap()
}

fn count(conn: &Connection, sql: &str) -> i64 {
    conn.query_row(sql, [], |r| r.get(0)).unwrap()
}

/// Whether `ts` falls inside any planted window of `kind` for the vehicle.
fn inside(truths: &[Truth], vehicle_id: i64, kind: &str, ts: i64, slack_s: i64) -> bool {
    truths.iter().any(|t| {
        t.vehicle_id == vehicle_id
            && t.kind == kind
            && ts >= t.start_ts - slack_s
            && ts <= t.end_ts + slack_s
    })
}

fn meters_between(a: &Row, b: &Row) -> f64 {
    geo::haversine_m(LatLon::new(a.lat, a.lon), LatLon::new(b.lat, b.lon))
}

/// Asserts that `dir` holds `fleet.db` and nothing else (no temporary file left).
fn assert_only_the_database_in(dir: &Path) {
    let names: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(
        names,
        vec![std::ffi::OsString::from("fleet.db")],
        "no temporary file left"
    );
}

#[test]
fn the_fixture_has_the_promised_fleet_and_time_span() {
    let conn = open(fixture_db());
    assert_eq!(count(&conn, "SELECT COUNT(*) FROM vehicles"), 15);
    assert_eq!(
        count(&conn, "SELECT COUNT(*) FROM vehicles WHERE active = 0"),
        1
    );
    let inactive_rows = count(
        &conn,
        "SELECT COUNT(*) FROM fixes WHERE vehicle_id IN (SELECT id FROM vehicles WHERE active = 0)",
    );
    assert_eq!(inactive_rows, 0, "the inactive vehicle has no positions");
    let plates: Vec<String> = conn
        .prepare("SELECT plate FROM vehicles")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    for plate in &plates {
        let b = plate.as_bytes();
        assert!(
            plate.len() == 8
                && plate.starts_with("P-")
                && b[2..5].iter().all(u8::is_ascii_digit)
                && b[5..].iter().all(u8::is_ascii_uppercase),
            "{plate}"
        );
    }
    let kinds = count(&conn, "SELECT COUNT(DISTINCT kind) FROM vehicles");
    assert!(kinds >= 3, "a mix of vehicle kinds");

    let zone = fleetctl::clock::FleetZone::default();
    let now = zone.parse_local_minute(FIXTURE_AHORA).unwrap();
    assert_eq!(meta(&conn, "data_now"), now.to_string());
    let first_day = zone.day_start(zone.local_date(now).add_days(-6));
    let (min_ts, max_ts) = conn
        .query_row("SELECT MIN(ts), MAX(ts) FROM fixes", [], |r| {
            Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?))
        })
        .unwrap();
    assert!(
        min_ts >= first_day && min_ts < first_day + 86_400,
        "data starts on the first day"
    );
    assert!(
        max_ts <= now && max_ts > now - 60,
        "data runs up to the data clock"
    );
    let rows = count(&conn, "SELECT COUNT(*) FROM positions");
    assert!((120_000..400_000).contains(&rows), "{rows} positions");
    // Every active vehicle works on most days.
    let worked = count(
        &conn,
        "SELECT COUNT(DISTINCT vehicle_id || '-' || ((ts - 21600) / 86400)) FROM fixes",
    );
    assert!(worked >= 14 * 5, "{worked} vehicle-days");
}

#[test]
fn meta_describes_the_database() {
    let conn = open(fixture_db());
    assert_eq!(
        meta(&conn, "schema_version"),
        fleetctl::store::SCHEMA_VERSION.to_string()
    );
    assert_eq!(meta(&conn, "time_zone"), "America/Guatemala");
    assert_eq!(meta(&conn, "seed"), "7");
    assert_eq!(meta(&conn, "generator_version"), env!("CARGO_PKG_VERSION"));
    assert_eq!(meta(&conn, "first_date"), "2026-11-19");
    assert_eq!(meta(&conn, "last_date"), "2026-11-25");
    let geofences = count(&conn, "SELECT COUNT(*) FROM geofences");
    assert_eq!(geofences as usize, atlas::geofences().len());
}

#[test]
fn every_planted_anomaly_is_visible_in_the_positions() {
    let conn = open(fixture_db());
    let truths = truth(&conn);
    let by_vehicle = positions(&conn);
    let count_of = |k: &str| truths.iter().filter(|t| t.kind == k).count();
    assert!(count_of("speeding") >= 12, "{}", count_of("speeding"));
    assert!(count_of("long_stop") >= 8);
    assert!(count_of("signal_loss") >= 5);
    assert_eq!(count_of("stopped_now"), 3);
    let now: i64 = meta(&conn, "data_now").parse().unwrap();
    for t in &truths {
        let fixes = &by_vehicle[&t.vehicle_id];
        let within: Vec<&Row> = fixes
            .iter()
            .filter(|f| f.ts >= t.start_ts && f.ts <= t.end_ts)
            .collect();
        match t.kind.as_str() {
            "speeding" => {
                let fast = within.iter().filter(|f| f.speed_kmh > 85.0).count();
                assert!(fast >= 2, "{t:?}: {fast} fixes above 85 km/h");
                let d = t.end_ts - t.start_ts;
                assert!((60..=180).contains(&d), "{t:?}");
                let max = t.detail["max_speed_kmh"].as_f64().unwrap();
                assert!((85.0..=110.5).contains(&max), "{t:?}");
            }
            "signal_loss" => {
                let d = t.end_ts - t.start_ts;
                assert!((6 * 60..=14 * 60).contains(&d), "{t:?}");
                assert_eq!(within.len(), 2, "only the fixes bounding the gap: {t:?}");
                assert!(within[0].ignition, "on shift before the gap");
            }
            "long_stop" | "stopped_now" => {
                let d = t.end_ts - t.start_ts;
                if t.kind == "long_stop" {
                    assert!((45 * 60..=110 * 60 + 15).contains(&d), "{t:?}");
                } else {
                    assert_eq!(t.end_ts, now);
                    let minutes = t.detail["minutes_stopped"].as_f64().unwrap();
                    assert!(
                        [35.0, 52.0, 95.0]
                            .iter()
                            .any(|m| (minutes - m).abs() <= 1.0),
                        "{t:?}"
                    );
                    assert!(within.iter().all(|f| f.ignition), "engine on: {t:?}");
                }
                assert!(
                    within.len() as i64 >= d / 15 - 1,
                    "a fix every 15 s while stopped"
                );
                let center = within[within.len() / 2];
                let far = within
                    .iter()
                    .map(|f| meters_between(f, center))
                    .fold(0.0, f64::max);
                assert!(far < 50.0, "a stationary cluster: {far:.0} m in {t:?}");
                assert!(within.iter().all(|f| f.speed_kmh == 0.0));
            }
            other => panic!("unexpected planted kind {other}"),
        }
    }
    let minutes: Vec<i64> = truths
        .iter()
        .filter(|t| t.kind == "stopped_now")
        .map(|t| (t.end_ts - t.start_ts + 30) / 60)
        .collect();
    let mut sorted = minutes.clone();
    sorted.sort();
    assert_eq!(sorted, vec![35, 52, 95]);
}

/// Checks the normal-driving margins of docs/definitions.md on one database: no speed above
/// 75 km/h outside a planted episode, no gap over 30 s on shift outside a planted
/// signal loss, and no stationary spell of more than 35 minutes that was not planted.
fn assert_normal_driving_within_margins(path: &Path) {
    let conn = open(path);
    let truths = truth(&conn);
    for (vehicle_id, fixes) in positions(&conn) {
        for f in &fixes {
            if f.speed_kmh > 75.0 {
                // The ramps into and out of a planted episode belong to it.
                assert!(
                    inside(&truths, vehicle_id, "speeding", f.ts, 30),
                    "{f:?} is fast but not planted"
                );
            }
        }
        for w in fixes.windows(2) {
            let gap = w[1].ts - w[0].ts;
            if gap > 30 && w[0].ignition {
                assert!(
                    truths.iter().any(|t| t.vehicle_id == vehicle_id
                        && t.kind == "signal_loss"
                        && t.start_ts == w[0].ts),
                    "unplanted gap of {gap} s after {:?}",
                    w[0]
                );
            }
        }
        // Stationary spells: fixes staying within 200 m of where the spell began.
        let mut i = 0;
        while i < fixes.len() {
            let mut j = i;
            while j + 1 < fixes.len()
                && meters_between(&fixes[i], &fixes[j + 1]) <= 200.0
                && fixes[j + 1].ts - fixes[j].ts <= 3600
            {
                j += 1;
            }
            let minutes = (fixes[j].ts - fixes[i].ts) / 60;
            if minutes > 35 {
                let planted = ["long_stop", "stopped_now"]
                    .iter()
                    .any(|k| inside(&truths, vehicle_id, k, fixes[i].ts, 120));
                assert!(
                    planted,
                    "vehicle {vehicle_id} stood {minutes} min from {:?} unplanted",
                    fixes[i]
                );
            }
            i = j + 1;
        }
    }
}

#[test]
fn normal_driving_stays_inside_the_margins_for_five_seeds() {
    assert_normal_driving_within_margins(fixture_db());
    for seed in 1..=4 {
        assert_normal_driving_within_margins(&seed_db(seed));
    }
}

/// Cross-track distance from a point to a polyline, metres.
fn distance_to_path(p: LatLon, path: &[LatLon]) -> f64 {
    path.windows(2)
        .map(|w| {
            let (ax, ay) = geo::local_xy_m(p, w[0]);
            let (bx, by) = geo::local_xy_m(p, w[1]);
            let (dx, dy) = (bx - ax, by - ay);
            let len2 = dx * dx + dy * dy;
            let t = if len2 > 0.0 {
                (-(ax * dx + ay * dy) / len2).clamp(0.0, 1.0)
            } else {
                0.0
            };
            (ax + t * dx).hypot(ay + t * dy)
        })
        .fold(f64::INFINITY, f64::min)
}

#[test]
fn gps_noise_sigma_is_about_five_metres() {
    let conn = open(fixture_db());
    let route_of: HashMap<i64, String> = conn
        .prepare("SELECT id, route FROM vehicles WHERE active = 1")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let paths: HashMap<&str, Vec<LatLon>> = atlas::routes()
        .iter()
        .map(|r| (r.slug.as_str(), geo::decode_polyline(&r.polyline).unwrap()))
        .collect();
    // Moving fixes scatter across the road with the noise's σ: the cross-track
    // component of an isotropic 2-D Gaussian is a 1-D Gaussian of the same σ.
    let mut sum2 = 0.0;
    let mut n = 0usize;
    for (vehicle_id, fixes) in positions(&conn) {
        let path = &paths[route_of[&vehicle_id].as_str()];
        for f in fixes.iter().filter(|f| f.speed_kmh > 20.0).step_by(10) {
            let d = distance_to_path(LatLon::new(f.lat, f.lon), path);
            if d < 30.0 {
                sum2 += d * d;
                n += 1;
            }
        }
    }
    let sigma = (sum2 / n as f64).sqrt();
    assert!(n > 3000, "{n} samples");
    assert!((4.0..=6.0).contains(&sigma), "cross-track σ = {sigma:.2} m");
}

#[test]
fn the_same_seed_and_clock_give_identical_rows() {
    let dir = TempDir::new("determinism");
    let (a, b) = (dir.join("a.db"), dir.join("b.db"));
    for p in [&a, &b] {
        generate(
            p,
            &[
                "--ahora",
                "2026-11-25T15:30",
                "--seed",
                "11",
                "--vehicles",
                "6",
                "--days",
                "3",
            ],
        )
        .ok();
    }
    let dump = |p: &Path| -> Vec<String> {
        let conn = open(p);
        let mut out = Vec::new();
        for table in [
            "vehicles",
            "positions",
            "geofences",
            "injected_events",
            "meta",
        ] {
            out.extend(crate::harness::table_rows(&conn, table, "1, 2"));
        }
        out
    };
    let (da, db) = (dump(&a), dump(&b));
    assert!(da.len() > 10_000);
    assert!(da == db, "two runs differ");
    // A different seed is a different fleet.
    let c = dir.join("c.db");
    generate(
        &c,
        &[
            "--ahora",
            "2026-11-25T15:30",
            "--seed",
            "12",
            "--vehicles",
            "6",
            "--days",
            "3",
        ],
    )
    .ok();
    assert!(dump(&c) != da);
}

#[test]
fn an_existing_database_is_kept_unless_forced() {
    let dir = TempDir::new("overwrite");
    let path = dir.join("fleet.db");
    let small = [
        "--ahora",
        "2026-11-25T15:30",
        "--vehicles",
        "2",
        "--days",
        "1",
    ];
    let first = generate(&path, &small).ok();
    assert!(first.stdout.contains("positions"), "{}", first.stdout);
    let before = std::fs::read(&path).unwrap();
    let refused = generate(&path, &small).fails(2);
    assert!(
        refused.stderr.starts_with("fleetctl: invalid_argument: "),
        "{}",
        refused.stderr
    );
    assert!(
        refused.stderr.contains("already exists") && refused.stderr.contains("--force"),
        "{}",
        refused.stderr
    );
    assert_eq!(std::fs::read(&path).unwrap(), before, "untouched");
    let mut forced = small.to_vec();
    forced.extend(["--force", "--seed", "9"]);
    generate(&path, &forced).ok();
    assert_ne!(std::fs::read(&path).unwrap(), before, "replaced");
    assert_only_the_database_in(dir.path());
}

#[test]
fn a_file_that_is_not_ours_is_never_replaced() {
    let dir = TempDir::new("foreign");
    let text = dir.join("notes.txt");
    std::fs::write(&text, "my notes").unwrap();
    let other = dir.join("other.sqlite");
    Connection::open(&other)
        .unwrap()
        .execute_batch(include_str!("../../fixtures/foreign.sql"))
        .unwrap();
    let other_before = std::fs::read(&other).unwrap();
    for (path, before) in [(&text, b"my notes".to_vec()), (&other, other_before)] {
        let r = generate(
            path,
            &[
                "--ahora",
                "2026-11-25T15:30",
                "--vehicles",
                "2",
                "--days",
                "1",
                "--force",
            ],
        )
        .fails(2);
        assert!(
            r.stderr.contains("is not a fleetctl database"),
            "{}",
            r.stderr
        );
        assert_eq!(std::fs::read(path).unwrap(), before);
    }
}

#[test]
fn an_interrupted_run_leaves_the_previous_database_intact() {
    let dir = TempDir::new("interrupt");
    let path = dir.join("fleet.db");
    generate(
        &path,
        &[
            "--ahora",
            "2026-11-25T15:30",
            "--vehicles",
            "2",
            "--days",
            "1",
        ],
    )
    .ok();
    let before = std::fs::read(&path).unwrap();
    let mut child = fleetctl(&[
        "--db",
        path.to_str().unwrap(),
        "generate",
        "--force",
        "--vehicles",
        "3000",
        "--days",
        "30",
    ])
    .stdout(std::process::Stdio::null())
    .stderr(std::process::Stdio::null())
    .spawn()
    .unwrap();
    // Kill it once its temporary file holds data (a condition, not a delay).
    let started = std::time::Instant::now();
    while !std::fs::read_dir(dir.path()).unwrap().any(|e| {
        let e = e.unwrap();
        e.file_name()
            .to_string_lossy()
            .starts_with(".fleet.db.tmp-")
            && e.metadata().is_ok_and(|m| m.len() > 0)
    }) {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(60),
            "no temporary file appeared"
        );
        std::thread::yield_now();
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(
        std::fs::read(&path).unwrap(),
        before,
        "the previous database is intact"
    );
    // And it is still a working fleet database.
    assert_eq!(count(&open(&path), "SELECT COUNT(*) FROM vehicles"), 2);
    // The next run clears what the killed one left behind.
    generate(
        &path,
        &[
            "--ahora",
            "2026-11-25T15:30",
            "--vehicles",
            "2",
            "--days",
            "1",
            "--force",
        ],
    )
    .ok();
    assert_only_the_database_in(dir.path());
}

#[test]
fn bad_input_is_refused_with_one_clear_line_and_nothing_written() {
    let dir = TempDir::new("bad");
    let path = dir.join("fleet.db");
    let db = path.to_str().unwrap();
    let cases: &[(&[&str], i32, &str)] = &[
        (
            &["--ahora", "25/11/2026"],
            2,
            "\"25/11/2026\" is not a local date and time",
        ),
        (&["--ahora", "2026-11-31T10:00"], 2, "2026-11-31T10:00"),
        (&["--now", "2026-11-25T25:00"], 2, "2026-11-25T25:00"),
        (&["--vehicles", "0"], 2, "--vehicles 0 is out of range"),
        (
            &["--vehicles", "5001"],
            2,
            "--vehicles 5001 is out of range",
        ),
        (&["--days", "0"], 2, "--days 0 is out of range"),
        (&["--days", "367"], 2, "--days 367 is out of range"),
        (&["--vehicles", "many"], 2, "many"),
        (&["--ahora", "2026-11-0€2:30"], 2, "2026-11-0€2:30"),
    ];
    for (args, code, needle) in cases {
        let mut all = vec!["--db", db, "generate"];
        all.extend_from_slice(args);
        let r = run(fleetctl(&all)).fails(*code);
        let first = r.stderr.lines().next().unwrap_or_default();
        assert!(
            first.starts_with("fleetctl: invalid_argument: ") && first.contains(needle),
            "{args:?}: {}",
            r.stderr
        );
        assert!(r.stdout.is_empty());
        assert!(!path.exists(), "nothing written for {args:?}");
    }
    // A path that cannot be written.
    let blocker = dir.join("a-file");
    std::fs::write(&blocker, "x").unwrap();
    let inside_file = blocker.join("fleet.db");
    let r = generate(&inside_file, &["--vehicles", "1", "--days", "1"]).fails(5);
    assert!(
        r.stderr.starts_with("fleetctl: io: ") && r.stderr.contains("a-file"),
        "{}",
        r.stderr
    );
}

#[test]
fn the_default_location_is_in_the_data_directory() {
    let dir = TempDir::new("default-path");
    let mut cmd = fleetctl(&[
        "generate",
        "--ahora",
        "2026-11-25T15:30",
        "--vehicles",
        "2",
        "--days",
        "1",
    ]);
    cmd.env("XDG_DATA_HOME", dir.path());
    let r = run(cmd).ok();
    let expected = dir.join("fleetctl/fleet.db");
    assert!(expected.exists());
    assert!(
        r.stdout.contains(expected.to_str().unwrap()),
        "the path is printed: {}",
        r.stdout
    );
}

#[test]
fn a_data_clock_before_the_shifts_still_has_three_vehicles_stopped_now() {
    let dir = TempDir::new("early");
    let path = dir.join("early.db");
    let r = generate(&path, &["--ahora", "2026-11-25T05:00"]).ok();
    assert_eq!(
        r.stdout.matches("shift was moved to begin at").count(),
        3,
        "the summary says where: {}",
        r.stdout
    );
    let conn = open(&path);
    let now: i64 = meta(&conn, "data_now").parse().unwrap();
    let stopped: Vec<(i64, i64)> = truth(&conn)
        .iter()
        .filter(|t| t.kind == "stopped_now")
        .map(|t| (t.start_ts, t.end_ts))
        .collect();
    assert_eq!(stopped.len(), 3);
    let mut minutes: Vec<i64> = stopped.iter().map(|(a, b)| (b - a + 30) / 60).collect();
    minutes.sort();
    assert_eq!(minutes, vec![35, 52, 95]);
    assert!(stopped.iter().all(|(_, end)| *end == now));
}

#[test]
fn if_missing_keeps_a_current_database_and_replaces_an_outdated_one() {
    let dir = TempDir::new("if-missing");
    let path = dir.join("fleet.db");
    let small = [
        "--ahora",
        "2026-11-25T15:30",
        "--vehicles",
        "2",
        "--days",
        "1",
        "--if-missing",
    ];
    generate(&path, &small).ok();
    let before = std::fs::read(&path).unwrap();
    let r = generate(&path, &small).ok();
    assert!(r.stdout.contains("already exists; kept it"), "{}", r.stdout);
    assert_eq!(std::fs::read(&path).unwrap(), before);
    Connection::open(&path)
        .unwrap()
        .execute(
            "UPDATE meta SET value = '1' WHERE key = 'schema_version'",
            [],
        )
        .unwrap();
    let r = generate(&path, &small).ok();
    assert!(
        r.stderr.contains("schema version 1; regenerating"),
        "{}",
        r.stderr
    );
    assert_eq!(
        meta(&open(&path), "schema_version"),
        fleetctl::store::SCHEMA_VERSION.to_string()
    );
}

#[test]
fn a_version_7_database_migrates_keeping_every_position_and_answer_in_fewer_bytes() {
    // Version 7: floating-point positions under a (vehicle_id, ts, ts_ms) key.
    migrates_keeping_every_position_and_answer(
        7,
        &(crate::harness::POSITIONS_AS_VERSION_7.to_string()
            + crate::harness::TRIPS_AND_EVENTS_BEFORE_9),
        0.7,
    );
}

#[test]
fn a_version_8_database_migrates_keeping_every_position_and_answer_in_fewer_bytes() {
    // Version 8: today's key, speed, heading and ignition in columns of their own.
    migrates_keeping_every_position_and_answer(
        8,
        &(crate::harness::POSITIONS_AS_VERSION_8.to_string()
            + crate::harness::TRIPS_AND_EVENTS_BEFORE_9),
        0.95,
    );
}

/// Puts the demo back in an earlier version's layout with `as_before`, then migrates
/// it: every position, derived row and answer as before, and the file at most
/// `at_most` of its earlier size.
fn migrates_keeping_every_position_and_answer(version: i64, as_before: &str, at_most: f64) {
    let dir = TempDir::new(&format!("migrate-v{version}"));
    let db = dir.join(&format!("v{version}.db"));
    std::fs::copy(fixture_db(), &db).unwrap();
    let db_arg = db.to_str().unwrap();
    let derived = |conn: &Connection| {
        [
            ("stops", "vehicle_id, start_ts"),
            ("trips", "vehicle_id, start_ts"),
            ("events", "vehicle_id, start_ts, kind"),
            ("daily", "vehicle_id, date"),
            ("latest_fix", "vehicle_id"),
            ("visits", "vehicle_id, geofence_id, enter_ts"),
        ]
        .map(|(table, order)| crate::harness::table_rows(conn, table, order))
    };
    let fixes =
        |conn: &Connection| crate::harness::table_rows(conn, "fixes", "vehicle_id, ts, ts_ms");
    let (rows_before, fixes_before) = {
        let conn = open(fixture_db());
        (derived(&conn), fixes(&conn))
    };
    let answer =
        |path: &Path| ["mileage", "stopped"].map(|q| crate::harness::query_json(path, &[q]));
    let answers_before = answer(fixture_db());
    // Nor had the revision counter, its triggers and the newest fix's index.
    let no_revision = without_revision();
    Connection::open(&db)
        .unwrap()
        .execute_batch(&format!(
            "{as_before}{no_revision}UPDATE meta SET value = '{version}' WHERE key = 'schema_version'; VACUUM;"
        ))
        .unwrap();
    let bytes_before = std::fs::metadata(&db).unwrap().len();

    let refused = run(fleetctl(&["--db", db_arg, "query", "mileage"])).fails(4);
    assert!(
        refused
            .stderr
            .contains(&format!("fleetctl --db {db_arg} migrate")),
        "{}",
        refused.stderr
    );
    let migrated = run(fleetctl(&["--db", db_arg, "migrate"])).ok();
    assert!(
        migrated
            .stdout
            .contains(&format!("schema version {version} → 9"))
            && migrated
                .stdout
                .contains(&format!("{} positions", fixes_before.len())),
        "{}",
        migrated.stdout
    );
    let conn = open(&db);
    assert_eq!(
        fixes(&conn),
        fixes_before,
        "every position kept, value for value"
    );
    assert_eq!(derived(&conn), rows_before, "every derived row the same");
    assert_eq!(answer(&db), answers_before);
    let bytes_after = std::fs::metadata(&db).unwrap().len();
    assert!(
        (bytes_after as f64) < bytes_before as f64 * at_most,
        "{bytes_after} bytes after, {bytes_before} before"
    );
    let again = run(fleetctl(&["--db", db_arg, "migrate"])).ok();
    assert!(again.stdout.contains("nothing to do"), "{}", again.stdout); // The counter a server reads instead of the small tables, moved by their changes.
    let revision = |conn: &Connection| -> i64 {
        conn.query_row("SELECT n FROM revision", [], |r| r.get(0))
            .unwrap()
    };
    let conn = Connection::open(&db).unwrap();
    let before = revision(&conn);
    conn.execute("UPDATE vehicles SET driver = driver || '.'", [])
        .unwrap();
    assert!(
        revision(&conn) > before,
        "a vehicle's change moves the revision"
    );
}

/// SQL that takes from a file what versions 9 and older lacked until 2026-12-06:
/// the revision counter, its triggers and the newest fix's index.
fn without_revision() -> String {
    let triggers: String = ["meta", "vehicles", "geofences", "places"]
        .iter()
        .flat_map(|t| {
            ["insert", "update", "delete"].map(|op| format!("DROP TRIGGER {t}_{op}_revision; "))
        })
        .collect();
    format!("{triggers}DROP TABLE revision; DROP INDEX latest_fix_ts; ")
}

/// A file of this schema version made before the revision counter existed: a
/// server reads its small tables again at every change until `migrate` adds it.
#[test]
fn migrate_adds_the_revision_counter_to_a_file_made_before_it() {
    let dir = TempDir::new("migrate-revision");
    let db = dir.join("before.db");
    std::fs::copy(fixture_db(), &db).unwrap();
    Connection::open(&db)
        .unwrap()
        .execute_batch(&without_revision())
        .unwrap();
    let db_arg = db.to_str().unwrap();
    let added = run(fleetctl(&["--db", db_arg, "migrate"])).ok();
    assert!(
        added.stdout.contains("added the revision counter"),
        "{}",
        added.stdout
    );
    let (triggers, index): (i64, i64) = open(&db)
        .query_row(
            "SELECT (SELECT count(*) FROM sqlite_master WHERE type = 'trigger' AND name LIKE '%_revision'), \
             (SELECT count(*) FROM sqlite_master WHERE name = 'latest_fix_ts')",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!((triggers, index), (12, 1));
    let again = run(fleetctl(&["--db", db_arg, "migrate"])).ok();
    assert!(again.stdout.contains("nothing to do"), "{}", again.stdout);
}
