//! `fleetctl export` as a fleet manager and a data team use it: positions written
//! out and imported into a fresh database give the same reports; the files hold the
//! database's rows and the reports' figures; Parquet carries real UTC timestamps and
//! a partitioned dataset has Hive folders; the map formats and the workbook open with
//! what a person expects; an existing file is never overwritten without --force, and
//! an interrupted export leaves nothing under the target name.

use crate::harness::{TempDir, fixture_db, fleetctl, open, query_json, run};
use crate::import::{assert_same_reports, import_demo_copy_of, write_demo_as_files};
use polars::prelude::{DataType, ParquetReader, SerReader, TimeUnit};
use serde_json::Value;
use std::path::Path;

fn export(db: &Path, args: &[&str]) -> crate::harness::Run {
    let mut all = vec!["--db", db.to_str().unwrap(), "export"];
    all.extend_from_slice(args);
    run(fleetctl(&all))
}

fn positions_count(db: &Path) -> i64 {
    open(db)
        .query_row("SELECT COUNT(*) FROM positions", [], |r| r.get(0))
        .unwrap()
}

fn read_parquet(path: &Path) -> polars::prelude::DataFrame {
    ParquetReader::new(std::fs::File::open(path).unwrap())
        .finish()
        .unwrap()
}

#[test]
fn positions_exported_as_csv_or_parquet_import_into_the_same_reports() {
    let dir = TempDir::new("export-roundtrip");
    // The demo's geofences and places, as an operator would hand them over.
    write_demo_as_files(&dir, |_| {});
    for file in ["export.csv", "export.parquet"] {
        let r = export(
            fixture_db(),
            &["positions", "-o", dir.join(file).to_str().unwrap()],
        )
        .ok();
        assert!(r.stdout.contains("positions"), "{}", r.stdout);
        let copy = import_demo_copy_of(&dir, file);
        assert_eq!(
            positions_count(&copy),
            positions_count(fixture_db()),
            "{file}"
        );
        assert_same_reports(&copy);
    }
}

#[test]
fn parquet_holds_every_fix_with_utc_timestamps_and_units_in_column_names() {
    let dir = TempDir::new("export-parquet");
    let out = dir.join("p.parquet");
    export(
        fixture_db(),
        &[
            "positions",
            "--plate",
            "P-701JFG",
            "-o",
            out.to_str().unwrap(),
        ],
    )
    .ok();
    let df = read_parquet(&out);
    let names: Vec<String> = df
        .get_column_names()
        .iter()
        .map(|n| n.to_string())
        .collect();
    assert_eq!(
        names,
        [
            "plate",
            "date",
            "time_local",
            "time_utc",
            "lat",
            "lon",
            "speed_kmh",
            "speed_derived",
            "heading_deg",
            "ignition",
            "odometer_km"
        ]
    );
    assert!(matches!(
        df.column("time_utc").unwrap().dtype(),
        DataType::Datetime(TimeUnit::Milliseconds, Some(tz)) if tz.as_str() == "UTC"
    ));
    // Every fix of the vehicle, in time order, with the stored values.
    let conn = open(fixture_db());
    let stored: Vec<(i64, f64, f64)> = conn
        .prepare(
            "SELECT p.ts, p.lat, p.lon FROM fixes p JOIN vehicles v ON v.id = p.vehicle_id \
             WHERE v.plate = 'P-701JFG' ORDER BY p.ts",
        )
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(df.height(), stored.len());
    let times = df
        .column("time_utc")
        .unwrap()
        .cast(&DataType::Int64)
        .unwrap();
    let times = times.i64().unwrap();
    let lats = df.column("lat").unwrap();
    let lats = lats.f64().unwrap();
    for (i, (ts, lat, _)) in stored.iter().enumerate().step_by(997) {
        assert_eq!(times.get(i), Some(ts * 1000), "row {i}");
        assert_eq!(lats.get(i), Some(*lat), "row {i}");
    }
    // The local date beside the UTC time: 2026-11-24 06:00 UTC is still the 23rd in
    // Guatemala (UTC−6).
    // And the local time with its offset, as people read it, in every row (the
    // week's days written one after another).
    let dates = df.column("date").unwrap();
    let dates = dates.str().unwrap();
    let locals = df.column("time_local").unwrap();
    let locals = locals.str().unwrap();
    for i in (0..df.height()).step_by(1013) {
        let ts = times.get(i).unwrap() / 1000;
        let local = (ts - 6 * 3600).div_euclid(86_400);
        let expected = fleetctl::clock::Date::from_days_since_epoch(local).to_string();
        assert_eq!(dates.get(i), Some(expected.as_str()));
        let sod = (ts - 6 * 3600).rem_euclid(86_400);
        let time_local = format!(
            "{expected}T{:02}:{:02}:{:02}-06:00",
            sod / 3600,
            sod / 60 % 60,
            sod % 60
        );
        assert_eq!(locals.get(i), Some(time_local.as_str()), "row {i}");
    }
}

#[test]
fn a_dataset_partitioned_by_date_has_a_hive_folder_per_day_and_every_row_once() {
    let dir = TempDir::new("export-hive");
    let out = dir.join("positions");
    export(
        fixture_db(),
        &[
            "positions",
            "--format",
            "parquet",
            "--partition-by",
            "date",
            "-o",
            out.to_str().unwrap(),
        ],
    )
    .ok();
    let mut folders: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    folders.sort();
    let days: Vec<String> = open(fixture_db())
        .prepare("SELECT DISTINCT date FROM daily ORDER BY date")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    // fleetctl's mark (a leading `_`: Hive-style readers skip it), then a folder per day.
    let mut expected: Vec<String> = vec!["_fleetctl_dataset".into()];
    expected.extend(days.iter().map(|d| format!("date={d}")));
    assert_eq!(folders, expected);
    folders.remove(0);
    let mut rows = 0;
    for f in &folders {
        let df = read_parquet(&out.join(f).join("part-0.parquet"));
        assert!(
            df.column("date").is_err(),
            "the partition key lives in the folder name, not the file"
        );
        rows += df.height() as i64;
    }
    assert_eq!(rows, positions_count(fixture_db()));
    // No temporary left beside it.
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(left, ["positions"]);
}

/// Every row of a paged range report, following its cursors.
pub(crate) fn all_rows(db: &Path, report: &str, list: &str, range: &[&str]) -> Vec<Value> {
    let mut rows = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut args = vec![report];
        args.extend_from_slice(range);
        if let Some(c) = &cursor {
            args.extend_from_slice(&["--cursor", c]);
        }
        let v = query_json(db, &args);
        rows.extend(v[list]["items"].as_array().unwrap().iter().cloned());
        match v[list]["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => return rows,
        }
    }
}

pub(crate) fn csv_rows(path: &Path) -> Vec<std::collections::HashMap<String, String>> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text.lines();
    let header: Vec<String> = lines
        .next()
        .unwrap()
        .split(',')
        .map(str::to_string)
        .collect();
    lines
        .map(|l| {
            // The places are quoted (they may hold commas); split outside quotes.
            let mut cells = Vec::new();
            let (mut cell, mut quoted) = (String::new(), false);
            for c in l.chars() {
                match c {
                    '"' => quoted = !quoted,
                    ',' if !quoted => cells.push(std::mem::take(&mut cell)),
                    c => cell.push(c),
                }
            }
            cells.push(cell);
            header.iter().cloned().zip(cells).collect()
        })
        .collect()
}

#[test]
fn trips_and_daily_files_hold_the_reports_rows_with_utc_times() {
    let dir = TempDir::new("export-reports");
    let range = ["--from", "2026-11-19", "--to", "2026-11-25"];
    let trips_csv = dir.join("trips.csv");
    let mut args = vec!["trips", "-o", trips_csv.to_str().unwrap()];
    args.extend_from_slice(&range);
    export(fixture_db(), &args).ok();
    let exported = csv_rows(&trips_csv);
    let reported = all_rows(fixture_db(), "trips", "trips", &range);
    assert_eq!(exported.len(), reported.len());
    let key = |plate: &str, start_ms: i64| (plate.to_string(), start_ms);
    let mut by_start: std::collections::HashMap<(String, i64), &Value> =
        std::collections::HashMap::new();
    for r in &reported {
        let start: jiff::Timestamp = r["start"].as_str().unwrap().parse().unwrap();
        by_start.insert(key(r["plate"].as_str().unwrap(), start.as_millisecond()), r);
    }
    for row in &exported {
        assert!(row["start_utc"].ends_with('Z'), "{row:?}");
        let start: jiff::Timestamp = row["start_utc"].parse().unwrap();
        // The same instant as people read it, local with its offset, as the report
        // (and the events inside the row) give it.
        let local: jiff::Timestamp = row["start_local"].parse().unwrap();
        assert_eq!(local, start, "{row:?}");
        assert!(row["start_local"].ends_with("-06:00"), "{row:?}");
        let r = by_start
            .get(&key(&row["plate"], start.as_millisecond()))
            .unwrap_or_else(|| panic!("no reported trip for {row:?}"));
        assert_eq!(
            row["distance_km"].parse::<f64>().unwrap(),
            r["distance_km"].as_f64().unwrap()
        );
        assert_eq!(row["start_place"], r["start_place"].as_str().unwrap());
        assert_eq!(row["date"], &r["start"].as_str().unwrap()[..10]);
    }
    // The daily rows, in Parquet, sum to the mileage ranking's km.
    let daily = dir.join("daily.parquet");
    let mut args = vec!["daily", "-o", daily.to_str().unwrap()];
    args.extend_from_slice(&range);
    export(fixture_db(), &args).ok();
    let df = read_parquet(&daily);
    let plates = df.column("plate").unwrap();
    let plates = plates.str().unwrap();
    let km = df.column("distance_km").unwrap();
    let km = km.f64().unwrap();
    let mut sums: std::collections::HashMap<String, f64> = std::collections::HashMap::new();
    for i in 0..df.height() {
        *sums.entry(plates.get(i).unwrap().to_string()).or_default() += km.get(i).unwrap();
    }
    let mut ranking = vec!["mileage"];
    ranking.extend_from_slice(&range);
    let mileage = query_json(fixture_db(), &ranking);
    for v in mileage["vehicles"]["items"].as_array().unwrap() {
        let plate = v["plate"].as_str().unwrap();
        let expected = v["distance_km"].as_f64().unwrap();
        let got = sums.get(plate).copied().unwrap_or(0.0);
        assert!(
            (got - expected).abs() < 0.05,
            "{plate}: daily rows sum to {got} km, mileage says {expected}"
        );
    }
}

#[test]
fn map_formats_hold_a_line_per_trip_or_vehicle_day_and_a_point_per_stop() {
    let dir = TempDir::new("export-geo");
    let day = [
        "--plate",
        "P-701JFG",
        "--from",
        "2026-11-24",
        "--to",
        "2026-11-24",
    ];
    let trips = query_json(
        fixture_db(),
        &[
            "trips",
            "--plate",
            "P-701JFG",
            "--from",
            "2026-11-24",
            "--to",
            "2026-11-24",
        ],
    );
    let trip_count = trips["trips"]["total"].as_u64().unwrap() as usize;
    assert!(trip_count > 0);

    let geojson = dir.join("trips.geojson");
    let mut args = vec!["trips", "-o", geojson.to_str().unwrap()];
    args.extend_from_slice(&day);
    export(fixture_db(), &args).ok();
    let fc: Value = serde_json::from_str(&std::fs::read_to_string(&geojson).unwrap()).unwrap();
    assert_eq!(fc["type"], "FeatureCollection");
    let features = fc["features"].as_array().unwrap();
    assert_eq!(features.len(), trip_count);
    for f in features {
        assert_eq!(f["geometry"]["type"], "LineString");
        assert!(f["geometry"]["coordinates"].as_array().unwrap().len() > 2);
        assert!(f["properties"]["distance_km"].as_f64().unwrap() > 0.0);
        // GeoJSON is lon, lat: Guatemala City is near -90.5, 14.6.
        let first = &f["geometry"]["coordinates"][0];
        assert!((first[0].as_f64().unwrap() + 90.5).abs() < 1.0, "{first}");
    }

    let stops = dir.join("stops.geojson");
    let mut args = vec!["stops", "-o", stops.to_str().unwrap()];
    args.extend_from_slice(&day);
    export(fixture_db(), &args).ok();
    let fc: Value = serde_json::from_str(&std::fs::read_to_string(&stops).unwrap()).unwrap();
    let reported = query_json(
        fixture_db(),
        &[
            "stops",
            "--plate",
            "P-701JFG",
            "--from",
            "2026-11-24",
            "--to",
            "2026-11-24",
        ],
    );
    assert_eq!(
        fc["features"].as_array().unwrap().len() as u64,
        reported["stops"]["total"].as_u64().unwrap()
    );
    assert!(
        fc["features"]
            .as_array()
            .unwrap()
            .iter()
            .all(|f| f["geometry"]["type"] == "Point" && f["properties"]["place"].is_string())
    );

    // GPX: one track of the day, a point per fix with its time; read back by import.
    let gpx = dir.join("day.gpx");
    let mut args = vec!["positions", "-o", gpx.to_str().unwrap()];
    args.extend_from_slice(&day);
    export(fixture_db(), &args).ok();
    let text = std::fs::read_to_string(&gpx).unwrap();
    let fixes: i64 = open(fixture_db())
        .query_row(
            "SELECT COUNT(*) FROM fixes p JOIN vehicles v ON v.id = p.vehicle_id \
             WHERE v.plate = 'P-701JFG' AND date(p.ts - 6 * 3600, 'unixepoch') = '2026-11-24'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(text.matches("<trk>").count(), 1);
    assert_eq!(text.matches("<trkpt ").count() as i64, fixes);
    assert_eq!(text.matches("<time>").count() as i64, fixes);
    let copy = dir.join("gpx.db");
    run(fleetctl(&[
        "--db",
        copy.to_str().unwrap(),
        "import",
        "--time-zone",
        "America/Guatemala",
        "--plate",
        "P-701JFG",
        gpx.to_str().unwrap(),
    ]))
    .ok();
    assert_eq!(positions_count(&copy), fixes);

    // KML: a gx:Track with a <when> per coordinate.
    let kml = dir.join("day.kml");
    let mut args = vec!["positions", "-o", kml.to_str().unwrap()];
    args.extend_from_slice(&day);
    export(fixture_db(), &args).ok();
    let text = std::fs::read_to_string(&kml).unwrap();
    assert_eq!(text.matches("<gx:Track>").count(), 1);
    assert_eq!(text.matches("<when>").count() as i64, fixes);
    assert_eq!(text.matches("<gx:coord>").count() as i64, fixes);
}

#[test]
fn a_workbook_has_a_typed_sheet_per_dataset_with_a_frozen_header() {
    use std::io::Read;
    let dir = TempDir::new("export-xlsx");
    let out = dir.join("week.xlsx");
    export(
        fixture_db(),
        &[
            "trips",
            "stops",
            "daily",
            "--from",
            "2026-11-19",
            "--to",
            "2026-11-25",
            "-o",
            out.to_str().unwrap(),
        ],
    )
    .ok();
    let mut zip = zip::ZipArchive::new(std::fs::File::open(&out).unwrap()).unwrap();
    let mut part = |name: &str| {
        let mut text = String::new();
        zip.by_name(name)
            .unwrap_or_else(|_| panic!("no {name} in the workbook"))
            .read_to_string(&mut text)
            .unwrap();
        text
    };
    let book = part("xl/workbook.xml");
    for name in ["trips", "stops", "daily"] {
        assert!(book.contains(&format!("name=\"{name}\"")), "{book}");
    }
    let daily = part("xl/worksheets/sheet3.xml");
    assert!(daily.contains("ySplit=\"1\""), "frozen header row");
    assert!(daily.contains("<cols>"), "column widths set");
    // Booleans are typed cells, not text; km are numbers.
    let trips = part("xl/worksheets/sheet1.xml");
    let rows = trips.matches("<row ").count();
    let reported = query_json(
        fixture_db(),
        &["trips", "--from", "2026-11-19", "--to", "2026-11-25"],
    );
    assert_eq!(
        rows as u64,
        reported["trips"]["total"].as_u64().unwrap() + 1
    );
    let stops = part("xl/worksheets/sheet2.xml");
    assert!(stops.contains("t=\"b\""), "ongoing is a boolean cell");
    // The local date is a date cell (a number with a date format), not text; the
    // times are date-times, so the CSV's `…_local` text columns are left out.
    let strings = part("xl/sharedStrings.xml");
    assert!(!strings.contains(">2026-11-24<"), "a date written as text");
    assert!(!strings.contains("_local"), "{strings}");
    let styles = part("xl/styles.xml");
    assert!(styles.contains("yyyy-mm-dd\""), "no date format: {styles}");
}

#[test]
fn an_existing_output_is_kept_without_force_and_wrong_combinations_are_refused() {
    let dir = TempDir::new("export-refusals");
    let out = dir.join("trips.csv");
    std::fs::write(&out, "keep me").unwrap();
    let r = export(fixture_db(), &["trips", "-o", out.to_str().unwrap()]).fails(2);
    assert!(
        r.stderr.contains("exists") && r.stderr.contains("--force"),
        "{}",
        r.stderr
    );
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "keep me");
    export(
        fixture_db(),
        &["trips", "-o", out.to_str().unwrap(), "--force"],
    )
    .ok();
    assert!(
        std::fs::read_to_string(&out)
            .unwrap()
            .starts_with("plate,date,")
    );

    for (args, says) in [
        (
            vec!["daily", "--format", "gpx"],
            "daily rows are not places",
        ),
        (vec!["trips", "stops", "--format", "csv"], "xlsx"),
        (vec!["trips", "--partition-by", "date"], "--format parquet"),
        (vec!["routes"], "positions, trips, stops, events, daily"),
        (
            vec!["trips", "--format", "pdf"],
            "csv, parquet, geojson, gpx, kml, xlsx",
        ),
        (vec!["trips", "--plate", "Z-000ZZZ"], "valid plates"),
        (
            vec!["trips", "--from", "2026-11-25", "--to", "2026-11-19"],
            "after",
        ),
    ] {
        let mut all = args.clone();
        let target = dir.join("refused.out");
        all.extend_from_slice(&["-o", target.to_str().unwrap()]);
        let r = export(fixture_db(), &all);
        assert_ne!(r.code, 0, "{args:?}");
        assert!(r.stderr.contains(says), "{args:?}: {}", r.stderr);
        assert!(!target.exists(), "{args:?} wrote a file");
    }
}

#[test]
fn a_killed_export_leaves_nothing_under_the_target_name() {
    let dir = TempDir::new("export-killed");
    let out = dir.join("all.csv");
    let mut child = fleetctl(&[
        "--db",
        fixture_db().to_str().unwrap(),
        "export",
        "positions",
        "-o",
        out.to_str().unwrap(),
    ])
    .stdout(std::process::Stdio::null())
    .stderr(std::process::Stdio::null())
    .spawn()
    .unwrap();
    let partial = dir.join(&format!(".all.csv.partial-{}", child.id()));
    // Killed once it writes; a 60 s deadline only for a hung process.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !partial.exists() && child.try_wait().unwrap().is_none() {
        assert!(
            std::time::Instant::now() < deadline,
            "the export never wrote"
        );
        std::thread::yield_now();
    }
    let _ = child.kill();
    let _ = child.wait();
    assert!(!out.exists(), "a half-written file under the target name");
    // The next export removes what the killed one left, and completes.
    export(fixture_db(), &["positions", "-o", out.to_str().unwrap()]).ok();
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["all.csv"]);
}

#[test]
fn the_docs_list_every_exported_column_in_order() {
    let docs =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/export.md")).unwrap();
    for dataset in fleetctl::export::Dataset::ALL {
        let columns: Vec<String> = dataset
            .columns()
            .iter()
            .map(|c| format!("`{}`", c.name))
            .collect();
        let row = format!("| {} | {} |", dataset.as_str(), columns.join(", "));
        assert!(docs.contains(&row), "docs/export.md lacks the row\n{row}");
    }
}
