//! Detection scored against the generator's ground truth: every planted anomaly
//! found (recall), nothing else flagged (precision), one detection per plant with its
//! start and end within 30 s, on the fixture database and five other seeds.

use crate::harness::{fixture_db, open, query_json, seed_db};
use rusqlite::Connection;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone)]
struct Interval {
    vehicle_id: i64,
    kind: String,
    start_ts: i64,
    end_ts: i64,
}

fn intervals(conn: &Connection, table: &str) -> Vec<Interval> {
    // Detected events keep their kind as a code; the ground truth by name.
    let kind = if table == "events" {
        "(SELECT name FROM event_kinds WHERE code = kind)"
    } else {
        "kind"
    };
    let sql = format!(
        "SELECT vehicle_id, {kind}, start_ts, end_ts FROM {table} ORDER BY vehicle_id, start_ts"
    );
    let mut st = conn.prepare(&sql).unwrap();
    st.query_map([], |r| {
        Ok(Interval {
            vehicle_id: r.get(0)?,
            kind: r.get(1)?,
            start_ts: r.get(2)?,
            end_ts: r.get(3)?,
        })
    })
    .unwrap()
    .map(Result::unwrap)
    .collect()
}

fn databases() -> Vec<PathBuf> {
    let mut dbs = vec![fixture_db().to_path_buf()];
    dbs.extend((1..=5).map(seed_db));
    dbs
}

fn score(path: &Path) {
    let conn = open(path);
    let truth = intervals(&conn, "injected_events");
    let found = intervals(&conn, "events");
    let long_stop_min: f64 = conn
        .query_row(
            "SELECT value FROM meta WHERE key = 'long_stop_min'",
            [],
            |r| r.get::<_, String>(0),
        )
        .unwrap()
        .parse()
        .unwrap();
    for kind in ["speeding", "long_stop", "signal_loss"] {
        // A stop "now" that has lasted past the threshold is a long stop too.
        let expected: Vec<&Interval> = truth
            .iter()
            .filter(|t| {
                t.kind == kind
                    || (kind == "long_stop"
                        && t.kind == "stopped_now"
                        && (t.end_ts - t.start_ts) as f64 >= long_stop_min * 60.0)
            })
            .collect();
        let detected: Vec<&Interval> = found.iter().filter(|e| e.kind == kind).collect();
        // One to one: each planted anomaly claims the closest unclaimed detection of its
        // vehicle whose start and end are both within 30 s of its own.
        let gap = |a: &Interval, b: &Interval| {
            (a.start_ts - b.start_ts)
                .abs()
                .max((a.end_ts - b.end_ts).abs())
        };
        let mut claimed = vec![false; detected.len()];
        for t in &expected {
            let best = detected
                .iter()
                .enumerate()
                .filter(|(i, e)| !claimed[*i] && e.vehicle_id == t.vehicle_id && gap(e, t) <= 30)
                .min_by_key(|(_, e)| gap(e, t))
                .map(|(i, _)| i);
            match best {
                Some(i) => claimed[i] = true,
                None => panic!(
                    "{}: planted {kind} not found with its start and end within 30 s: {t:?}; detected: {:?}",
                    path.display(),
                    detected
                        .iter()
                        .filter(|e| e.vehicle_id == t.vehicle_id)
                        .collect::<Vec<_>>()
                ),
            }
        }
        let unclaimed: Vec<&&Interval> = detected
            .iter()
            .zip(&claimed)
            .filter(|(_, c)| !**c)
            .map(|(e, _)| e)
            .collect();
        assert!(
            unclaimed.is_empty(),
            "{}: {kind} detected but not planted (or a second detection of one): {unclaimed:?}",
            path.display()
        );
        assert!(!expected.is_empty(), "{kind} planted in {}", path.display());
    }
}

#[test]
fn every_planted_anomaly_is_found_and_nothing_else_on_six_databases() {
    for db in databases() {
        score(&db);
    }
}

#[test]
fn stopped_now_vehicles_are_reported_with_the_right_minutes() {
    for db in databases() {
        let conn = open(&db);
        let report = query_json(&db, &["stopped", "--min-minutes", "30"]);
        let rows = report["vehicles"]["items"].as_array().unwrap();
        let truth = intervals(&conn, "injected_events");
        for t in truth.iter().filter(|t| t.kind == "stopped_now") {
            let plate: String = conn
                .query_row(
                    "SELECT plate FROM vehicles WHERE id = ?1",
                    [t.vehicle_id],
                    |r| r.get(0),
                )
                .unwrap();
            let row = rows
                .iter()
                .find(|r| r["plate"] == plate.as_str())
                .unwrap_or_else(|| panic!("{plate} not reported stopped: {report}"));
            let minutes = row["minutes"].as_f64().unwrap();
            let expected = (t.end_ts - t.start_ts) as f64 / 60.0;
            assert!(
                (minutes - expected).abs() <= 1.0,
                "{plate}: {minutes} min reported, {expected} planted"
            );
            assert_eq!(row["engine_on"], true);
            assert_eq!(row["offline"], false);
        }
    }
}

#[test]
fn distance_from_fixes_is_within_three_percent_of_the_odometer() {
    for db in databases() {
        let conn = open(&db);
        // The odometer also counts what the vehicle drove unseen (signal losses);
        // the fixes set that apart as gap_km, a straight line.
        let mut st = conn.prepare("SELECT vehicle_id, date, gps_distance_km + gap_km, odometer_distance_km FROM daily WHERE odometer_distance_km > 5").unwrap();
        let rows: Vec<(i64, String, f64, f64)> = st
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert!(rows.len() > 50);
        for (v, date, gps, odo) in rows {
            let err = (gps - odo).abs() / odo;
            assert!(
                err <= 0.03,
                "{}: vehicle {v} on {date}: gps {gps:.2} km vs odometer {odo:.2} km",
                db.display()
            );
        }
    }
}

#[test]
fn shifts_start_and_end_inside_the_depot_of_their_route() {
    let db = fixture_db();
    let conn = open(db);
    let depots: Vec<(i64, String)> = conn
        .prepare("SELECT id, name FROM geofences WHERE kind IN ('depot', 'distribution_center')")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let last_date: String = conn
        .query_row("SELECT value FROM meta WHERE key = 'last_date'", [], |r| {
            r.get(0)
        })
        .unwrap();
    let mut st = conn
        .prepare("SELECT vehicle_id, date, first_ts, last_ts FROM daily WHERE date < ?1")
        .unwrap();
    let days: Vec<(i64, String, i64, i64)> = st
        .query_map([&last_date], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
        })
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert!(days.len() > 60);
    for (v, date, first, last) in days {
        let route: String = conn
            .query_row("SELECT route FROM vehicles WHERE id = ?1", [v], |r| {
                r.get(0)
            })
            .unwrap();
        let depot_name = &fleetctl::geo::atlas::routes()
            .iter()
            .find(|r| r.slug == route)
            .unwrap()
            .depot;
        let depot_id = depots.iter().find(|(_, n)| n == depot_name).unwrap().0;
        let inside_at = |ts: i64| -> bool {
            conn.query_row(
                "SELECT COUNT(*) FROM visits WHERE vehicle_id = ?1 AND geofence_id = ?2 AND enter_ts <= ?3 AND (exit_ts IS NULL OR exit_ts > ?3)",
                rusqlite::params![v, depot_id, ts],
                |r| r.get::<_, i64>(0),
            )
            .unwrap()
                > 0
        };
        assert!(
            inside_at(first),
            "vehicle {v} starts {date} in {depot_name}"
        );
        assert!(inside_at(last), "vehicle {v} ends {date} in {depot_name}");
    }
}

/// Every derived row of a database, table by table, in id order.
fn derived_rows(db: &Path) -> Vec<String> {
    let conn = open(db);
    let mut out = Vec::new();
    for table in ["stops", "trips", "events", "visits", "daily", "latest_fix"] {
        let rows = crate::harness::table_rows(&conn, table, "1, 2, 3");
        out.extend(rows.into_iter().map(|r| format!("{table}|{r}")));
    }
    out
}

/// A vehicle with more fixes than a window is analysed a window at a time (bounded
/// memory, `analyze::window`). With windows of 300 fixes — every vehicle of the demo
/// fleet and of the real tracks cut many times — `analyze` writes exactly the rows
/// it writes holding each vehicle whole.
#[test]
fn analysing_a_window_at_a_time_writes_the_rows_one_pass_writes() {
    let dir = crate::harness::TempDir::new("windows");
    let mut dbs = vec![("demo".to_string(), fixture_db().to_path_buf())];
    dbs.extend(
        crate::distance::real_databases(&dir)
            .into_iter()
            .map(|(name, db)| (name.to_string(), db)),
    );
    for (name, db) in dbs {
        let rows_of = |window: Option<&str>| {
            let copy = dir.join(&format!("{name}-{}.db", window.unwrap_or("whole")));
            std::fs::copy(&db, &copy).unwrap();
            let mut cmd = crate::harness::fleetctl(&["--db", copy.to_str().unwrap(), "analyze"]);
            if let Some(n) = window {
                cmd.env("FLEETCTL_WINDOW_FIXES", n);
            }
            crate::harness::run(cmd).ok();
            derived_rows(&copy)
        };
        let whole = rows_of(None);
        assert!(whole.iter().any(|r| r.starts_with("daily|")), "{name}");
        let windowed = rows_of(Some("300"));
        assert_eq!(whole.len(), windowed.len(), "{name}");
        for (a, b) in whole.iter().zip(&windowed) {
            assert_eq!(a, b, "{name}");
        }
    }
}
