//! The reports through the CLI: a snapshot of every report's JSON on the fixture
//! database, and each anchor and bad-input rule with its message and exit code.

use crate::harness::{TempDir, fixture_db, fleetctl, open, plant_school_zone, query_json, run};
use serde_json::Value;
use std::path::Path;

/// A vehicle of the fixture: the one stopped longest "now".
fn stopped_longest(db: &Path) -> String {
    open(db)
        .query_row(
            "SELECT plate FROM vehicles JOIN injected_events e ON e.vehicle_id = vehicles.id \
             WHERE e.kind = 'stopped_now' ORDER BY e.start_ts LIMIT 1",
            [],
            |r| r.get(0),
        )
        .unwrap()
}

/// The depot a vehicle's route starts from.
fn depot_of(db: &Path, plate: &str) -> String {
    let slug: String = open(db)
        .query_row(
            "SELECT route FROM vehicles WHERE plate = ?1",
            [plate],
            |r| r.get(0),
        )
        .unwrap();
    fleetctl::geo::atlas::routes()
        .iter()
        .find(|r| r.slug == slug)
        .unwrap()
        .depot
        .clone()
}

/// The command line each snapshot is made with (every report appears): the
/// words after `fleetctl --db DB`, without `--format json`.
pub(crate) fn snapshot_cases(db: &Path, scratch: &Path) -> Vec<(&'static str, Vec<String>)> {
    let plate = stopped_longest(db);
    let depot = depot_of(db, &plate);
    let png = scratch.join("golden.png").to_str().unwrap().to_string();
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    vec![
        ("vehicle_position", s(&["query", "position", &plate])),
        ("stopped_vehicles", s(&["query", "stopped"])),
        (
            "trip_summary",
            s(&["query", "trip", &plate, "--date", "yesterday"]),
        ),
        (
            "trips",
            s(&[
                "query",
                "trips",
                "--plate",
                &plate,
                "--from",
                "yesterday",
                "--to",
                "yesterday",
            ]),
        ),
        (
            "stops",
            s(&[
                "query",
                "stops",
                "--min-minutes",
                "20",
                "--geofence",
                &depot,
            ]),
        ),
        ("daily_summary", s(&["query", "daily", "--plate", &plate])),
        ("events", s(&["query", "events", "--kind", "speeding"])),
        ("alerts", s(&["query", "alerts"])),
        (
            "geofence_report",
            s(&["query", "geofence-report", &depot, "--from", "yesterday"]),
        ),
        (
            "geofence_visits",
            s(&["query", "geofence", &plate, &depot, "--date", "yesterday"]),
        ),
        ("mileage_ranking", s(&["query", "mileage"])),
        ("list_vehicles", s(&["query", "vehicles"])),
        ("list_geofences", s(&["query", "geofences"])),
        ("nearest_vehicles", s(&["query", "nearest", "Bodega Mixco"])),
        (
            "route_map",
            s(&["map", &plate, "--date", "yesterday", "-o", &png]),
        ),
        (
            "speed_chart",
            s(&["chart", &plate, "--date", "yesterday", "-o", &png]),
        ),
        ("fleet_map", s(&["map", "--fleet", "-o", &png])),
    ]
}

/// Runs `fleetctl --db DB WORDS… --format json` and parses the answer.
pub(crate) fn answer_json(db: &Path, words: &[String]) -> Value {
    let mut all = vec!["--db".to_string(), db.to_str().unwrap().to_string()];
    all.extend(words.iter().cloned());
    all.extend(["--format".to_string(), "json".to_string()]);
    let r = run(fleetctl(
        &all.iter().map(String::as_str).collect::<Vec<_>>(),
    ))
    .ok();
    serde_json::from_str(&r.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {}", r.stdout))
}

/// Checks `actual` against the snapshot `NAME` (tests/integration/snapshots/), shown
/// as a diff when it differs; `cargo insta review` accepts a deliberate change.
/// Fields that change with an image or font library, not with the data (a PNG's size,
/// the map's zoom), are checked for sanity here and redacted from the snapshot.
pub fn assert_snapshot(name: &str, actual: &Value) {
    let mut shown = actual.clone();
    if let Some(map) = shown.as_object_mut() {
        if let Some(bytes) = map.get_mut("png_bytes") {
            assert!(
                bytes.as_u64().is_some_and(|n| n > 1000),
                "{name}: png_bytes {bytes}"
            );
            *bytes = Value::String("[redacted: PNG size]".into());
        }
        if let Some(zoom) = map.get_mut("zoom") {
            assert!(
                zoom.as_f64().is_some_and(|z| (1.0..=22.0).contains(&z)),
                "{name}: zoom {zoom}"
            );
            *zoom = Value::String("[redacted: zoom]".into());
        }
    }
    insta::assert_json_snapshot!(name, shown);
}

#[test]
fn every_report_matches_its_snapshot() {
    let db = fixture_db();
    let scratch = TempDir::new("snapshots");
    let cases = snapshot_cases(db, scratch.path());
    let covered: Vec<&str> = cases.iter().map(|(name, _)| *name).collect();
    for spec in fleetctl::report::registry() {
        assert!(
            covered.contains(&spec.tool),
            "no snapshot case for {}",
            spec.tool
        );
    }
    for (name, words) in cases {
        let answer = answer_json(db, &words);
        let spec = fleetctl::report::find(name).unwrap();
        fleetctl::report::schema::check(&(spec.output_schema)(), &answer)
            .unwrap_or_else(|e| panic!("{name} breaks its outputSchema: {e}"));
        assert_snapshot(name, &answer);
    }
}

/// Runs a query expected to fail; returns stderr's first line and the JSON error.
fn query_fails(db: &Path, args: &[&str], code: i32) -> (String, Value) {
    let mut all = vec!["--db", db.to_str().unwrap(), "query"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--format", "json"]);
    let r = run(fleetctl(&all)).fails(code);
    let json: Value = serde_json::from_str(&r.stdout).unwrap_or(Value::Null);
    (
        r.stderr.lines().next().unwrap_or_default().to_string(),
        json,
    )
}

#[test]
fn plates_are_matched_forgivingly() {
    let db = fixture_db();
    let plate = stopped_longest(db);
    let loose = plate.replace('-', " ").to_lowercase();
    let digits_and_letters = plate[2..].to_string();
    for variant in [plate.to_lowercase(), loose, digits_and_letters] {
        let r = query_json(db, &["position", &variant]);
        assert_eq!(r["plate"], plate.as_str(), "{variant}");
    }
}

#[test]
fn bad_anchors_are_refused_with_what_would_be_accepted() {
    let db = fixture_db();
    let (line, json) = query_fails(db, &["position", "P-000XXX"], 3);
    assert!(
        line.starts_with("fleetctl: not_found: no vehicle with plate \"P-000XXX\""),
        "{line}"
    );
    assert!(
        json["error"]["hint"]
            .as_str()
            .unwrap()
            .starts_with("valid plates: P-"),
        "{json}"
    );

    // "P-" followed by a single digit matches several plates: the candidates come back.
    let (line, json) = query_fails(db, &["position", "P"], 3);
    assert!(
        line.starts_with("fleetctl: not_found") || line.starts_with("fleetctl: ambiguous"),
        "{line}"
    );
    let _ = json;

    let plate = stopped_longest(db);
    let (line, json) = query_fails(db, &["geofence", &plate, "Bodega Petén"], 3);
    assert!(
        line.contains("no geofence named \"Bodega Petén\""),
        "{line}"
    );
    assert!(
        json["error"]["hint"]
            .as_str()
            .unwrap()
            .contains("Bodega Mixco")
    );

    let (line, json) = query_fails(db, &["geofence", &plate, "bodega"], 3);
    assert!(line.starts_with("fleetctl: ambiguous: "), "{line}");
    assert!(
        json["error"]["hint"]
            .as_str()
            .unwrap()
            .starts_with("candidates: "),
        "{json}"
    );

    let (line, _) = query_fails(db, &["nearest", "--lat", "14.6"], 2);
    assert!(line.contains("`lat` needs `lon`"), "{line}");
    let (line, _) = query_fails(
        db,
        &["nearest", "Zona 10", "--lat", "14.6", "--lon", "-90.5"],
        2,
    );
    assert!(line.contains("cannot be given together"), "{line}");
    let (line, _) = query_fails(db, &["nearest", "Atlantis"], 3);
    assert!(line.contains("no place named \"Atlantis\""), "{line}");
}

#[test]
fn bad_dates_and_ranges_are_refused() {
    let db = fixture_db();
    let (line, _) = query_fails(
        db,
        &["alerts", "--from", "2026-11-25", "--to", "2026-11-20"],
        2,
    );
    assert_eq!(
        line,
        "fleetctl: invalid_argument: from 2026-11-25 is after to 2026-11-20"
    );
    let (line, json) = query_fails(
        db,
        &["mileage", "--from", "2026-01-01", "--to", "2026-11-25"],
        2,
    );
    assert!(line.contains("spans 329 days"), "{line}");
    assert!(json["error"]["hint"].as_str().unwrap().contains("92 days"));
    let (line, json) = query_fails(db, &["trip", "P-000XXX", "--date", "tomorrow"], 2);
    assert!(
        line.contains("`date` = \"tomorrow\" is not accepted"),
        "{line}"
    );
    assert_eq!(
        json["error"]["hint"],
        "date: YYYY-MM-DD, today or yesterday"
    );
    let (line, _) = query_fails(db, &["stopped", "--min-minutes", "-5"], 2);
    assert!(line.contains("`min_minutes` = -5"), "{line}");
    let (line, _) = query_fails(db, &["alerts", "--type", "speedin"], 2);
    assert!(line.contains("speedin"), "{line}");
}

#[test]
fn dates_are_resolved_on_the_data_clock_and_echoed() {
    let db = fixture_db();
    let plate = stopped_longest(db);
    assert_eq!(query_json(db, &["trip", &plate])["date"], "2026-11-25");
    assert_eq!(
        query_json(db, &["trip", &plate, "--date", "yesterday"])["date"],
        "2026-11-24"
    );
    let m = query_json(db, &["mileage"]);
    assert_eq!(
        (m["from"].as_str(), m["to"].as_str()),
        (Some("2026-11-19"), Some("2026-11-25"))
    );
}

#[test]
fn a_day_without_data_is_an_empty_report_and_an_inactive_vehicle_explains_itself() {
    let db = fixture_db();
    let plate = stopped_longest(db);
    let r = query_json(db, &["trip", &plate, "--date", "2026-10-01"]);
    assert_eq!(r["has_data"], false);
    assert_eq!(r["distance_km"], 0.0);
    assert_eq!(r["stops"]["total"], 0);
    let inactive: String = open(db)
        .query_row("SELECT plate FROM vehicles WHERE active = 0", [], |r| {
            r.get(0)
        })
        .unwrap();
    let r = query_json(db, &["position", &inactive]);
    assert_eq!(r["state"], "inactive");
    assert!(
        r["note"].as_str().unwrap().contains("out of service"),
        "{r}"
    );
    assert_eq!(r["lat"], Value::Null);
}

#[test]
fn range_reports_page_with_an_exact_total_and_every_row_once() {
    let db = fixture_db();
    // (the query, its paged list, the fields that name a row, the fields it is ordered
    // by: a time, then for days the plate; rows of one second come in vehicle order)
    type Case<'a> = (&'a [&'a str], &'a str, &'a [&'a str], &'a [&'a str]);
    let cases: [Case; 6] = [
        (&["stops"], "stops", &["plate", "start"], &["start"]),
        (
            &["stops", "--geofence", "Bodega Mixco"],
            "stops",
            &["plate", "start"],
            &["start"],
        ),
        (&["trips"], "trips", &["plate", "start"], &["start"]),
        (
            &["events"],
            "events",
            &["plate", "kind", "at", "detail"],
            &["at"],
        ),
        (&["daily"], "days", &["plate", "date"], &["date", "plate"]),
        (
            &["geofence-report", "Bodega Mixco"],
            "visits",
            &["plate", "entered_at"],
            &["entered_at"],
        ),
    ];
    for (query, list, names, order) in cases {
        let mut cursor: Option<String> = None;
        let (mut seen, mut keys) = (Vec::new(), Vec::new());
        let mut total = None;
        let mut pages = 0;
        loop {
            let mut words = vec!["query".to_string()];
            words.extend(query.iter().map(|w| w.to_string()));
            if let Some(c) = &cursor {
                words.extend(["--cursor".to_string(), c.clone()]);
            }
            let answer = answer_json(db, &words);
            let page = &answer[list];
            pages += 1;
            assert!(page["items"].as_array().unwrap().len() <= 200);
            assert_eq!(*total.get_or_insert(page["total"].clone()), page["total"]);
            for row in page["items"].as_array().unwrap() {
                let field = |f: &&str| row[*f].to_string();
                seen.push(names.iter().map(field).collect::<Vec<_>>().join(" "));
                keys.push(order.iter().map(field).collect::<Vec<_>>());
            }
            match page["next_cursor"].as_str() {
                Some(next) => cursor = Some(next.to_string()),
                None => break,
            }
        }
        let total = total.unwrap().as_u64().unwrap() as usize;
        assert!(total > 0, "{query:?}: the fixture has rows");
        assert_eq!(seen.len(), total, "{query:?}: every row on a page");
        let mut unique = seen.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), total, "{query:?}: no row on two pages");
        assert!(
            keys.is_sorted(),
            "{query:?}: rows in their order across pages"
        );
        if query == ["stops"] {
            assert!(pages > 2, "the fixture has several pages of stops: {total}");
        }
    }
    let (_, err) = query_fails(db, &["trips", "--cursor", "next"], 2);
    assert!(
        err["error"]["message"]
            .as_str()
            .unwrap()
            .contains("\"next\""),
        "{err}"
    );
}

#[test]
fn range_reports_agree_with_the_day_reports() {
    let db = fixture_db();
    let plate = stopped_longest(db);
    let day = answer_json(
        db,
        &["query", "trip", &plate, "--date", "yesterday"].map(String::from),
    );
    let daily = answer_json(
        db,
        &[
            "query",
            "daily",
            "--plate",
            &plate,
            "--from",
            "yesterday",
            "--to",
            "yesterday",
        ]
        .map(String::from),
    );
    let row = &daily["days"]["items"][0];
    assert_eq!(row["distance_km"], day["distance_km"]);
    assert_eq!(row["first_departure"], day["departure_at"]);
    assert_eq!(row["last_return"], day["return_at"]);
    assert_eq!(row["max_speed_kmh"], day["max_speed_kmh"]);
    let trips = answer_json(
        db,
        &[
            "query",
            "trips",
            "--plate",
            &plate,
            "--from",
            "yesterday",
            "--to",
            "yesterday",
        ]
        .map(String::from),
    );
    assert_eq!(trips["trips"]["total"], day["trips"]);
    let gps: f64 = day["gps_distance_km"].as_f64().unwrap();
    let summed: f64 = trips["page_distance_km"].as_f64().unwrap();
    // The day holds its trips and what moved outside them (the last metres into
    // each stop's radius, moves too short to be trips): never less, and within 2 %.
    assert!(
        summed <= gps && gps - summed < 0.02 * gps,
        "trips {summed} km, the day {gps} km"
    );
    let speeding = answer_json(
        db,
        &["query", "events", "--kind", "speeding", "--plate", &plate].map(String::from),
    );
    let alerts = answer_json(
        db,
        &["query", "alerts", "--type", "speeding", "--plate", &plate].map(String::from),
    );
    assert_eq!(speeding["events"]["total"], alerts["total"]);
}

#[test]
fn lists_say_total_and_truncated() {
    let r = query_json(fixture_db(), &["vehicles"]);
    assert_eq!(r["vehicles"]["total"], 15);
    assert_eq!(r["vehicles"]["truncated"], false);
    assert_eq!(r["vehicles"]["items"].as_array().unwrap().len(), 15);
}

#[test]
fn a_missing_or_foreign_database_says_what_to_do() {
    let dir = TempDir::new("nodb");
    let missing = dir.join("none.db");
    let (line, json) = query_fails(&missing, &["vehicles"], 4);
    assert!(
        line.starts_with("fleetctl: db_unavailable: no database at "),
        "{line}"
    );
    assert!(
        json["error"]["hint"]
            .as_str()
            .unwrap()
            .contains("fleetctl generate")
    );

    let old = dir.join("old.db");
    std::fs::copy(fixture_db(), &old).unwrap();
    let conn = rusqlite::Connection::open(&old).unwrap();
    conn.execute(
        "UPDATE meta SET value = '0' WHERE key = 'schema_version'",
        [],
    )
    .unwrap();
    drop(conn);
    let (line, _) = query_fails(&old, &["vehicles"], 4);
    assert!(line.starts_with("fleetctl: db_schema: "), "{line}");
}

#[test]
fn reports_open_the_database_read_only() {
    let dir = TempDir::new("readonly");
    let db = dir.join("fleet.db");
    std::fs::copy(fixture_db(), &db).unwrap();
    let mut perms = std::fs::metadata(&db).unwrap().permissions();
    perms.set_readonly(true);
    std::fs::set_permissions(&db, perms).unwrap();
    let before = std::fs::read(&db).unwrap();
    for (_, words) in snapshot_cases(&db, dir.path()) {
        answer_json(&db, &words);
    }
    assert_eq!(std::fs::read(&db).unwrap(), before);
}

#[test]
fn table_and_csv_formats_print_for_people() {
    let db = fixture_db();
    let table = |words: &[&str]| {
        let mut args = vec!["--db", db.to_str().unwrap(), "query"];
        args.extend_from_slice(words);
        args.extend_from_slice(&["--format", "table"]);
        let mut command = fleetctl(&args);
        command.env_remove("COLUMNS");
        run(command).ok().stdout
    };
    // Every table fits 100 columns, whatever the report.
    for words in [
        &["stopped"][..],
        &["trips"],
        &["daily"],
        &["alerts"],
        &["events"],
        &["stops"],
        &["trip", "P-701JFG", "--date", "2026-11-24"],
    ] {
        let text = table(words);
        // (The next page's command stays whole, to be pasted.)
        for line in text.lines().filter(|l| !l.starts_with("next page: ")) {
            assert!(line.chars().count() <= 100, "{words:?}: {line}");
        }
    }
    // Local times as HH:MM with the day once in the heading; the columns a person
    // reads, and `--wide` for the rest.
    let stopped = table(&["stopped"]);
    assert!(stopped.contains("vehicles ("), "{stopped}");
    assert!(stopped.contains(" since "), "{stopped}");
    assert!(stopped.contains("13:55"), "{stopped}");
    assert!(!stopped.contains("T13:55"), "{stopped}");
    assert!(
        stopped.ends_with("(--wide shows every column)\n"),
        "{stopped}"
    );
    let wide = table(&["stopped", "--wide"]);
    assert!(wide.contains("2026-11-25T13:55:00-06:00"), "{wide}");
    assert!(wide.contains(" lat "), "{wide}");
    // A vehicle's stops in the day's order.
    let day = query_json(db, &["trip", "P-701JFG", "--date", "2026-11-24"]);
    let stops = day["stops"].get("items").unwrap_or(&day["stops"]);
    let starts: Vec<&str> = stops
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["start"].as_str().unwrap())
        .collect();
    assert!(starts.len() > 2 && starts.is_sorted(), "{starts:?}");
    let r = run(fleetctl(&[
        "--db",
        db.to_str().unwrap(),
        "query",
        "mileage",
        "--format",
        "csv",
    ]))
    .ok();
    let mut lines = r.stdout.lines();
    assert_eq!(
        lines.next(),
        Some(
            "rank,plate,driver,distance_km,active_days,daily_average_km,distance_source,odometer_rejected,active"
        )
    );
    assert_eq!(lines.count(), 15);
}

#[test]
fn analyze_reruns_detection_with_new_thresholds_atomically() {
    let dir = TempDir::new("analyze");
    let db = dir.join("fleet.db");
    std::fs::copy(fixture_db(), &db).unwrap();
    let speeding = |db: &Path| {
        query_json(db, &["alerts", "--type", "speeding"])["total"]
            .as_u64()
            .unwrap()
    };
    let before = speeding(&db);
    let r = run(fleetctl(&[
        "--db",
        db.to_str().unwrap(),
        "analyze",
        "--speed-limit",
        "60",
    ]))
    .ok();
    assert!(r.stdout.contains("speeding"), "{}", r.stdout);
    assert!(speeding(&db) > before, "a lower limit finds more speeding");
    let limit: String = open(&db)
        .query_row(
            "SELECT value FROM meta WHERE key = 'speed_limit_kmh'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(limit, "60");
    // A refused threshold changes nothing.
    let r = run(fleetctl(&[
        "--db",
        db.to_str().unwrap(),
        "analyze",
        "--speed-limit",
        "0",
    ]))
    .fails(2);
    assert!(
        r.stderr.contains("--speed-limit 0 is out of range"),
        "{}",
        r.stderr
    );
    // Without flags, analyze keeps what is stored (the issue: a stop radius edited
    // in meta was overwritten by the next run).
    let at_60 = speeding(&db);
    run(fleetctl(&["--db", db.to_str().unwrap(), "analyze"])).ok();
    assert_eq!(speeding(&db), at_60, "the stored limit of 60 is kept");
    run(fleetctl(&[
        "--db",
        db.to_str().unwrap(),
        "analyze",
        "--speed-limit",
        "80",
        "--stop-radius-m",
        "120",
    ]))
    .ok();
    assert_eq!(speeding(&db), before);
    let settings = run(fleetctl(&["--db", db.to_str().unwrap(), "settings"])).ok();
    assert!(
        settings.stdout.contains("stop_radius_m        120"),
        "{}",
        settings.stdout
    );
    assert!(
        settings.stdout.contains("America/Guatemala"),
        "{}",
        settings.stdout
    );
}

#[test]
fn regression_an_idle_vehicle_has_zero_km_not_minus_zero() {
    let r = run(fleetctl(&[
        "--db",
        fixture_db().to_str().unwrap(),
        "query",
        "mileage",
        "--format",
        "json",
    ]))
    .ok();
    assert!(!r.stdout.contains("-0.0"), "{}", r.stdout);
}

#[test]
fn regression_a_day_after_the_data_holds_no_visit() {
    let db = fixture_db();
    let plate = stopped_longest(db);
    let depot = depot_of(db, &plate);
    let r = query_json(db, &["geofence", &plate, &depot, "--date", "2026-12-01"]);
    assert_eq!(r["entered"], false, "{r}");
    assert!(
        r["note"]
            .as_str()
            .unwrap()
            .contains("has data from 2026-11-19 to 2026-11-25"),
        "{r}"
    );
}

#[test]
fn regression_nearest_counts_every_vehicle_before_the_limit() {
    let r = query_json(fixture_db(), &["nearest", "Bodega Mixco", "--limit", "2"]);
    assert_eq!(r["vehicles"]["items"].as_array().unwrap().len(), 2);
    assert_eq!(
        r["vehicles"]["total"], 14,
        "every active vehicle with a position"
    );
    assert_eq!(r["vehicles"]["truncated"], true);
}

#[test]
fn an_out_of_service_vehicle_says_so_in_its_day() {
    let inactive: String = open(fixture_db())
        .query_row("SELECT plate FROM vehicles WHERE active = 0", [], |r| {
            r.get(0)
        })
        .unwrap();
    let r = query_json(fixture_db(), &["trip", &inactive]);
    assert_eq!(r["has_data"], false);
    assert!(
        r["note"].as_str().unwrap().contains("out of service"),
        "{r}"
    );
}

#[test]
fn names_with_numbers_never_pick_another_zone() {
    let db = fixture_db();
    let plate = stopped_longest(db);
    let (line, _) = query_fails(db, &["geofence", &plate, "Bodega Zona 1"], 3);
    assert!(
        line.contains("no geofence named \"Bodega Zona 1\""),
        "{line}"
    );
    assert_eq!(
        query_json(db, &["nearest", "zona 1"])["place"]["name"],
        "Zona 1 (Centro Histórico)"
    );
}

#[test]
fn the_docs_error_table_is_the_code_s() {
    let docs =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/errors.md"))
            .unwrap();
    let rows: Vec<(String, i32, u16)> = docs
        .lines()
        .filter(|l| l.starts_with("| `"))
        .filter_map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            let code = cells.get(1)?.trim_matches('`').to_string();
            Some((
                code,
                cells.get(2)?.parse().ok()?,
                cells.get(3)?.parse().ok()?,
            ))
        })
        .collect();
    let expected: Vec<(String, i32, u16)> = fleetctl::error::ErrorCode::ALL
        .iter()
        .map(|c| (c.as_str().to_string(), c.exit_code(), c.http_status()))
        .collect();
    assert_eq!(
        rows, expected,
        "docs/errors.md's error table against ErrorCode"
    );
}

#[test]
fn speeding_is_judged_against_the_lowest_limit_that_applies_and_says_which() {
    let dir = TempDir::new("limits");
    let db = dir.join("fleet.db");
    std::fs::copy(fixture_db(), &db).unwrap();
    let plate = stopped_longest(&db);
    let speeding = |db: &Path, plate: &str| {
        query_json(db, &["events", "--kind", "speeding", "--plate", plate])["events"]["items"]
            .as_array()
            .unwrap()
            .clone()
    };
    let before = speeding(&db, &plate);
    assert!(
        before
            .iter()
            .all(|e| e["detail"]["limit_source"] == "fleet")
    );
    let set = |limit: &str| {
        run(fleetctl(&[
            "--db",
            db.to_str().unwrap(),
            "vehicles",
            "set",
            &plate.to_lowercase(),
            "--speed-limit",
            limit,
        ]))
        .ok()
    };
    assert!(set("50").stdout.contains("above 50 km/h"));
    let own = speeding(&db, &plate);
    assert!(
        own.len() > before.len(),
        "a lower own limit finds more speeding"
    );
    for e in &own {
        assert_eq!(e["detail"]["limit_source"], "vehicle", "{e}");
        assert_eq!(e["detail"]["limit_kmh"], 50.0, "{e}");
    }
    // Another vehicle keeps the fleet's limit.
    let fleet_wide = query_json(&db, &["events", "--kind", "speeding"]);
    assert!(
        fleet_wide["events"]["items"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["plate"] != plate.as_str())
            .all(|e| e["detail"]["limit_kmh"] == 80.0)
    );
    // A school zone at 30 around where the vehicle drove wins inside it.
    let first = &own[0];
    plant_school_zone(&db, &dir, &plate, 300);
    let zoned = speeding(&db, &plate);
    let in_school = zoned
        .iter()
        .find(|e| e["at"] == first["at"])
        .unwrap_or_else(|| panic!("the episode at {} is still found", first["at"]));
    assert_eq!(in_school["detail"]["limit_source"], "geofence");
    assert_eq!(in_school["detail"]["limit_geofence"], "Escuela");
    assert_eq!(in_school["detail"]["limit_kmh"], 30.0);
    assert!(set("none").stdout.contains("fleet's speed limit again"));
    let (_, err) = query_fails(&db, &["position", "P-000XXX"], 3);
    assert!(err["error"]["code"] == "not_found");
    let bad = run(fleetctl(&[
        "--db",
        db.to_str().unwrap(),
        "vehicles",
        "set",
        &plate,
        "--speed-limit",
        "fast",
    ]))
    .fails(2);
    assert!(bad.stderr.contains("\"fast\""), "{}", bad.stderr);
}

/// A database whose visits carry the index of an older schema gets the new ones from
/// its next analyze (the old one dropped), and answers the same meanwhile.
#[test]
fn analyze_replaces_a_former_index_with_the_current_ones() {
    let dir = TempDir::new("former-index");
    let db = dir.join("fleet.db");
    std::fs::copy(fixture_db(), &db).unwrap();
    let report = |db: &std::path::Path| query_json(db, &["geofence-report", "Bodega Mixco"]);
    let expected = report(&db);
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute_batch(
            "DROP INDEX visits_geofence_time; DROP INDEX visits_geofence_vehicle;
             CREATE INDEX visits_geofence ON visits (geofence_id, enter_ts);",
        )
        .unwrap();
    assert_eq!(
        report(&db),
        expected,
        "the old index serves the same answers"
    );
    crate::harness::run(crate::harness::fleetctl(&[
        "--db",
        db.to_str().unwrap(),
        "analyze",
    ]))
    .ok();
    let mut names: Vec<String> = open(&db)
        .prepare("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'visits' ORDER BY name")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap();
    names.sort();
    assert_eq!(
        names,
        [
            "visits_geofence_time",
            "visits_geofence_vehicle",
            "visits_vehicle"
        ]
    );
    assert_eq!(report(&db), expected);
}
