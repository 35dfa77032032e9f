//! Traccar's own test tracks (its unit tests for trips, stops, motion, overspeed and
//! distance, transcribed as data in `fixtures/traccar/`) run through `fleetctl
//! import` and `analyze`: where fleetctl agrees with what Traccar asserts, the test
//! compares with Traccar's figure; where it differs by design, the test names the
//! difference, and `docs/definitions.md` explains it.

use crate::harness::{TempDir, fleetctl, query_json, run};
use serde_json::Value;
use std::path::{Path, PathBuf};

const TRACCAR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/traccar");

/// The differences by design, each a phrase of `docs/definitions.md`.
const MOVEMENT_IS_DISPLACEMENT: &str =
    "a vehicle whose position never changes made no trip, whatever speed it reports";
const STOP_FROM_THE_HALT: &str = "a stop lasts as long as the position holds";
const EPISODE_FROM_FIRST_FIX: &str = "a speeding episode is dated from its first fast fix";
const UNSEEN_IS_GAP: &str = "ten minutes without a fix are a signal loss";
const ONE_FIX_PER_INSTANT: &str = "two rows at one instant and place are one fix";

/// What fleetctl made of one track.
#[derive(Debug)]
struct Outcome {
    /// (start, end) as `HH:MM:SS` UTC, and km.
    trips: Vec<(String, String, f64)>,
    /// (start, end) as `HH:MM:SS` UTC.
    stops: Vec<(String, String)>,
    /// (start `HH:MM:SS`, max km/h, fixes).
    speeding: Vec<(String, f64, u64)>,
    /// The day's driven km and straight-line km across gaps.
    km: f64,
    gap_km: f64,
    import: String,
}

fn hms(t: &Value) -> String {
    t.as_str().unwrap()[11..19].to_string()
}

/// Writes the case's rows as fleetctl reads them: moved 1° east along the equator
/// (fleetctl refuses 0°, 0° as a tracker's "no fix"; along the equator every
/// distance stays the same), times filled in where the test has none (two fixes ten
/// minutes apart). Returns the file and the track's (UTC) date.
fn prepared(case: &Value, dir: &TempDir) -> (PathBuf, String) {
    let file = case["file"].as_str().unwrap();
    let text = std::fs::read_to_string(Path::new(TRACCAR).join(file)).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |n: &str| header.iter().position(|h| *h == n).unwrap();
    let (plate, time, lat, lon, speed, ignition) = (
        col("plate"),
        col("time"),
        col("lat"),
        col("lon"),
        col("speed_knots"),
        col("ignition"),
    );
    let mut out = String::from("plate,time,lat,lon,speed_knots,ignition\n");
    let mut date = String::new();
    for (k, line) in lines.enumerate() {
        let c: Vec<&str> = line.split(',').collect();
        let at = if c[time].is_empty() {
            format!("2017-01-01T00:{:02}:00Z", k * 10)
        } else {
            c[time].to_string()
        };
        date = at[..10].to_string();
        let east: f64 = c[lon].parse::<f64>().unwrap() + 1.0;
        out.push_str(&format!(
            "{},{at},{},{east},{},{}\n",
            c[plate], c[lat], c[speed], c[ignition]
        ));
    }
    let path = dir.join(file);
    std::fs::write(&path, out).unwrap();
    (path, date)
}

/// Imports a case into a database of its own and analyses it with Traccar's settings
/// where fleetctl has the same one: the shortest stop (`minimal_parking_duration`,
/// the motion tests' `min_duration` with `min_distance` as the stop radius) and the
/// speed limit. The rest are fleetctl's own defaults.
fn outcome(case: &Value, dir: &TempDir) -> Outcome {
    let name = case["case"].as_str().unwrap();
    let db = dir.join(&format!("{name}.db"));
    let db_arg = db.to_str().unwrap();
    let (csv, date) = prepared(case, dir);
    let import = run(fleetctl(&[
        "--db",
        db_arg,
        "import",
        "--time-zone",
        "UTC",
        csv.to_str().unwrap(),
    ]))
    .ok()
    .stdout;
    let config = &case["config"];
    let mut analyze: Vec<String> = ["--db", db_arg, "analyze"].map(String::from).to_vec();
    if let Some(s) = config["minimal_parking_duration_s"].as_f64() {
        analyze.extend(["--stop-min-minutes".into(), (s / 60.0).to_string()]);
    }
    if let (Some(s), Some(m)) = (
        config["min_duration_s"].as_f64(),
        config["min_distance_m"].as_f64(),
    ) {
        analyze.extend(["--stop-min-minutes".into(), (s / 60.0).to_string()]);
        analyze.extend(["--stop-radius-m".into(), m.to_string()]);
    }
    if let Some(knots) = config["speed_limit_knots"].as_f64() {
        analyze.extend(["--speed-limit".into(), (knots * 1.852).to_string()]);
    }
    let words: Vec<&str> = analyze.iter().map(String::as_str).collect();
    run(fleetctl(&words)).ok();
    let list = |what: &str, key: &str, extra: &[&str]| -> Vec<Value> {
        let mut args = vec![what, "--from", date.as_str(), "--to", date.as_str()];
        args.extend_from_slice(extra);
        query_json(&db, &args)[key]["items"]
            .as_array()
            .unwrap()
            .clone()
    };
    let days = list("daily", "days", &[]);
    Outcome {
        trips: list("trips", "trips", &[])
            .iter()
            .map(|t| {
                (
                    hms(&t["start"]),
                    hms(&t["end"]),
                    t["distance_km"].as_f64().unwrap(),
                )
            })
            .collect(),
        stops: list("stops", "stops", &["--min-minutes", "0"])
            .iter()
            .map(|s| (hms(&s["start"]), hms(&s["end"])))
            .collect(),
        speeding: list("events", "events", &["--kind", "speeding"])
            .iter()
            .map(|e| {
                (
                    hms(&e["at"]),
                    e["detail"]["max_speed_kmh"].as_f64().unwrap(),
                    e["detail"]["fixes"].as_u64().unwrap(),
                )
            })
            .collect(),
        km: days
            .iter()
            .map(|d| d["distance_km"].as_f64().unwrap())
            .sum(),
        gap_km: days.iter().map(|d| d["gap_km"].as_f64().unwrap()).sum(),
        import,
    }
}

/// Traccar's asserted time `name` of a case, as `HH:MM:SS`.
fn asserted(case: &Value, name: &str) -> String {
    hms(&case["asserted"][name])
}

#[test]
fn traccars_own_test_tracks_run_through_fleetctl_import() {
    let dir = TempDir::new("traccar-tracks");
    let cases: Vec<Value> = serde_json::from_str(
        &std::fs::read_to_string(Path::new(TRACCAR).join("expected.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(cases.len(), 16);
    let mut differences = Vec::new();
    for case in &cases {
        let name = case["case"].as_str().unwrap();
        let o = outcome(case, &dir);
        let said = format!("{name}: {o:?}\nTraccar: {}", case["asserted"]);
        match name {
            // Agreements: the same stop, or none.
            "stops-only" | "stops-trip-cut" => {
                let traccar = (asserted(case, "stop_0_start"), asserted(case, "stop_0_end"));
                assert_eq!(o.stops.first(), Some(&traccar), "{said}");
            }
            "stops-moving" | "motion-no-stop-before-duration" => {
                assert!(o.stops.is_empty() && o.trips.is_empty(), "{said}");
            }
            // Traccar's report tests move by speed and a distance attribute at one
            // coordinate; fleetctl sees a vehicle that never left.
            "trips-simple" | "trips-simple-ignition" | "trips-fluctuation" | "trip-stop-by-gap" => {
                assert!(o.trips.is_empty() && o.km == 0.0, "{said}");
                differences.push(MOVEMENT_IS_DISPLACEMENT);
                // The parking after the "trip" is the same stop in both.
                if let Some(end) = case["asserted"]["stop_1_end"].as_str() {
                    let traccar = (asserted(case, "stop_1_start"), hms(&Value::from(end)));
                    assert_eq!(o.stops.last(), Some(&traccar), "{said}");
                }
            }
            "stops-started-from-trip" => {
                // Traccar starts the stop when the speed reads 0 (00:02); the position
                // held from 00:00.
                assert_eq!(
                    o.stops,
                    vec![("00:00:00".into(), asserted(case, "stop_0_end"))],
                    "{said}"
                );
                differences.push(STOP_FROM_THE_HALT);
            }
            "overspeed" => {
                // One episode at 55 knots, as Traccar; dated from its first fast fix
                // (00:00:00), where Traccar raises its event once the minimum has
                // passed (00:00:20).
                assert_eq!(o.speeding.len(), 1, "{said}");
                let (at, max_kmh, fixes) = &o.speeding[0];
                assert_eq!(*max_kmh, 101.9, "55 knots: {said}");
                assert_eq!((at.as_str(), *fixes), ("00:00:00", 4), "{said}");
                differences.push(EPISODE_FROM_FIRST_FIX);
                // The last two rows share 00:00:30 and the place: one fix.
                assert!(o.import.contains("exact_duplicate"), "{said}");
                differences.push(ONE_FIX_PER_INSTANT);
            }
            "motion-detected" | "motion-no-event-when-already-moving" => {
                // Moving by the time of the far fix: a trip of 600 m ends there.
                let last = o.trips.last().map(|t| (t.1.clone(), t.2));
                let end = if name == "motion-detected" {
                    asserted(case, "state_event_time")
                } else {
                    "00:03:00".into()
                };
                assert_eq!(last, Some((end, 0.6)), "{said}");
            }
            "motion-stop-detected" => {
                // Traccar: stopped at 00:06; fleetctl: a stop to 00:06, held within
                // the radius since the first fix.
                assert_eq!(
                    o.stops,
                    vec![("00:00:00".into(), asserted(case, "state_event_time"))],
                    "{said}"
                );
            }
            "motion-fast-average-speed" | "motion-slow-speed-stop-motion-stop" => {
                // Two fixes ten minutes apart: Traccar moves (and stops); fleetctl
                // counts the line between them as unseen, not driven.
                assert!(o.trips.is_empty() && o.km == 0.0, "{said}");
                let metres = if name == "motion-fast-average-speed" {
                    1.2
                } else {
                    0.7
                };
                assert_eq!(o.gap_km, metres, "{said}");
                differences.push(UNSEEN_IS_GAP);
            }
            "distance-haversine" => {
                // 7863 ± 10 m in Traccar; the test's two points, ten minutes apart.
                let traccar = case["asserted"]["distance_m"].as_f64().unwrap();
                assert!((o.gap_km * 1000.0 - traccar).abs() <= 10.0, "{said}");
                let exact = fleetctl::geo::haversine_m(
                    fleetctl::geo::LatLon::new(0.0, 0.0),
                    fleetctl::geo::LatLon::new(0.05, 0.05),
                );
                assert!((exact - traccar).abs() <= 10.0, "{exact} m: {said}");
            }
            other => panic!("a case this test does not know: {other}"),
        }
    }
    let definitions =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/definitions.md"))
            .unwrap()
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
    differences.dedup();
    for d in differences {
        assert!(
            definitions.contains(d),
            "docs/definitions.md does not explain: {d}"
        );
    }
}
