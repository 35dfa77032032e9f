//! The speed chart of issue 12: `fleetctl chart` (the `speed_chart` tool) — the PNG
//! a user gets, what it shows where, and that its answer agrees with the reports
//! that count the same things (events, trip_summary).

use crate::harness::{
    McpSession, TempDir, fixture_db, fleetctl, open, query_json, run, tool_error,
};
use fleetctl::render::chart::{LOSS_SHADE, OVER_LINE, SPEED_LINE, SPEEDING_SHADE, plot_area};
use image::RgbImage;
use serde_json::{Value, json};
use std::path::Path;

/// Runs `fleetctl --db DB WORDS… -o OUT --format json`; returns the answer and the
/// PNG's bytes.
fn draw_on(db: &Path, words: &[&str], out: &Path) -> (Value, Vec<u8>) {
    let mut all = vec!["--db", db.to_str().unwrap()];
    all.extend_from_slice(words);
    all.extend_from_slice(&["-o", out.to_str().unwrap(), "--format", "json"]);
    let r = run(fleetctl(&all)).ok();
    (
        serde_json::from_str(&r.stdout).unwrap(),
        std::fs::read(out).unwrap(),
    )
}

fn draw(words: &[&str], out: &Path) -> (Value, Vec<u8>) {
    draw_on(fixture_db(), words, out)
}

/// Decodes a PNG and checks what every picture promises: a PNG, under 1 MB, as big
/// as the answer says.
fn decode(answer: &Value, bytes: &[u8]) -> RgbImage {
    assert!(bytes.len() < 1024 * 1024, "{} bytes", bytes.len());
    assert_eq!(answer["png_bytes"].as_u64().unwrap() as usize, bytes.len());
    assert_eq!(
        image::guess_format(bytes).unwrap(),
        image::ImageFormat::Png,
        "a PNG"
    );
    let img = image::load_from_memory(bytes).unwrap().to_rgb8();
    assert_eq!(
        (img.width(), img.height()),
        (
            answer["width"].as_u64().unwrap() as u32,
            answer["height"].as_u64().unwrap() as u32
        )
    );
    img
}

/// A colour of the pictures as the pixel it paints.
macro_rules! rgb {
    ($c:expr) => {{
        let c = $c;
        [c.0, c.1, c.2]
    }};
}

/// Pixels of `colour` inside the chart's plot.
fn in_plot(img: &RgbImage, colour: [u8; 3]) -> usize {
    let (left, top, right, bottom) = plot_area(img.width(), img.height());
    img.enumerate_pixels()
        .filter(|(x, y, p)| {
            (left..=right).contains(&(*x as i32))
                && (top..=bottom).contains(&(*y as i32))
                && p.0 == colour
        })
        .count()
}

/// The speeding events of a vehicle-day, as `query events` lists them.
fn speeding_on(db: &Path, plate: &str, date: &str) -> usize {
    query_json(
        db,
        &[
            "events", "--kind", "speeding", "--plate", plate, "--from", date, "--to", date,
        ],
    )["events"]["total"]
        .as_u64()
        .unwrap() as usize
}

/// The fixture's first speeding episode: (plate, local date).
fn a_speeding_day() -> (String, String) {
    let events = query_json(fixture_db(), &["events", "--kind", "speeding"]);
    let first = &events["events"]["items"][0];
    (
        first["plate"].as_str().unwrap().to_string(),
        first["at"].as_str().unwrap()[..10].to_string(),
    )
}

#[test]
fn the_speed_chart_shows_the_day_trip_summary_and_events_describe() {
    let dir = TempDir::new("chart");
    let db = fixture_db();
    let (plate, date) = a_speeding_day();
    let (answer, bytes) = draw(
        &[
            "chart", &plate, "--date", &date, "--width", "1000", "--height", "480",
        ],
        &dir.join("c.png"),
    );
    let img = decode(&answer, &bytes);
    assert_eq!((img.width(), img.height()), (1000, 480));
    // The limit: the fleet's (no vehicle of the fixture has its own).
    let alerts = query_json(db, &["alerts"]);
    assert_eq!(answer["limit_kmh"], alerts["thresholds"]["speed_limit_kmh"]);
    assert_eq!(answer["limit_source"], "fleet");
    assert_eq!(answer["zone_limits"]["total"], 0);
    // What is shaded is what the other reports count.
    let speeding = speeding_on(db, &plate, &date);
    assert!(speeding >= 1);
    assert_eq!(answer["speeding"].as_u64().unwrap() as usize, speeding);
    let trip = query_json(db, &["trip", &plate, "--date", &date]);
    assert_eq!(answer["stops"], trip["stops_count"]);
    assert_eq!(answer["signal_losses"], trip["signal_losses"]["total"]);
    assert_eq!(answer["first_fix_at"], trip["first_fix_at"]);
    assert_eq!(answer["last_fix_at"], trip["last_fix_at"]);
    assert_eq!(answer["max_speed_kmh"], trip["max_speed_kmh"]);
    // The time axis holds the day's fixes, on whole local hours.
    let (from, to) = (
        answer["chart_from"].as_str().unwrap(),
        answer["chart_to"].as_str().unwrap(),
    );
    assert!(
        from.starts_with(&date) && from[14..19] == *"00:00",
        "{from}"
    );
    assert!(from <= answer["first_fix_at"].as_str().unwrap());
    assert!(to >= answer["last_fix_at"].as_str().unwrap());
    // The episode is shaded across the plot, and the line over it is red.
    let (_, top, _, bottom) = plot_area(img.width(), img.height());
    assert!(
        in_plot(&img, rgb!(SPEEDING_SHADE)) >= (bottom - top) as usize,
        "a speeding band"
    );
    assert!(
        in_plot(&img, rgb!(OVER_LINE)) > 0,
        "the speed over the limit"
    );
    assert!(in_plot(&img, rgb!(SPEED_LINE)) > 1000, "the speed line");

    // The same vehicle on a day without speeding: no shade.
    let quiet = (19..=25)
        .map(|d| format!("2026-11-{d}"))
        .find(|d| {
            speeding_on(db, &plate, d) == 0
                && query_json(db, &["trip", &plate, "--date", d])["has_data"] == true
        })
        .expect("a day without speeding");
    let (calm, bytes) = draw(&["chart", &plate, "--date", &quiet], &dir.join("quiet.png"));
    let img = decode(&calm, &bytes);
    assert_eq!(calm["speeding"], 0);
    assert_eq!(in_plot(&img, rgb!(SPEEDING_SHADE)), 0, "no speeding band");
    assert_eq!(in_plot(&img, rgb!(OVER_LINE)), 0);
    assert!(in_plot(&img, rgb!(SPEED_LINE)) > 1000);
}

#[test]
fn a_signal_loss_breaks_the_speed_line() {
    let dir = TempDir::new("chart-gap");
    let losses = query_json(fixture_db(), &["events", "--kind", "signal_loss"]);
    let loss = &losses["events"]["items"][0];
    let plate = loss["plate"].as_str().unwrap();
    let date = &loss["at"].as_str().unwrap()[..10];
    let (answer, bytes) = draw(&["chart", plate, "--date", date], &dir.join("g.png"));
    let img = decode(&answer, &bytes);
    assert!(answer["signal_losses"].as_u64().unwrap() >= 1);
    // The column in the middle of the gap: the grey band, and no line crossing it.
    let zone = fleetctl::clock::FleetZone::default();
    let ts = |text: &str| zone.parse_local_minute(&text[..16]).unwrap();
    let (start, end) = (
        ts(loss["at"].as_str().unwrap()),
        ts(loss["until"].as_str().unwrap()),
    );
    let (from, to) = (
        ts(answer["chart_from"].as_str().unwrap()),
        ts(answer["chart_to"].as_str().unwrap()),
    );
    let (left, top, right, bottom) = plot_area(img.width(), img.height());
    let x = left + ((start + end) / 2 - from) as i32 * (right - left) / (to - from) as i32;
    let column: Vec<[u8; 3]> = (top + 1..bottom)
        .map(|y| img.get_pixel(x as u32, y as u32).0)
        .collect();
    assert!(
        column.iter().filter(|p| **p == rgb!(LOSS_SHADE)).count() > (bottom - top) as usize / 3,
        "the signal loss is shaded"
    );
    assert!(
        !column.contains(&rgb!(SPEED_LINE)) && !column.contains(&rgb!(OVER_LINE)),
        "no straight line across the gap"
    );
}

#[test]
fn a_vehicle_s_own_limit_and_a_school_zone_s_limit_are_charted() {
    let dir = TempDir::new("chart-limits");
    let db = dir.join("fleet.db");
    std::fs::copy(fixture_db(), &db).unwrap();
    let (plate, date) = a_speeding_day();
    let fleetctl_on = |args: &[&str]| {
        let mut all = vec!["--db", db.to_str().unwrap()];
        all.extend_from_slice(args);
        run(fleetctl(&all)).ok()
    };
    fleetctl_on(&["vehicles", "set", &plate, "--speed-limit", "50"]);
    // A school zone at 30 around where the vehicle first sped that day.
    let (lat, lon): (f64, f64) = open(&db)
        .query_row(
            "SELECT lat, lon FROM events WHERE kind = 'speeding' AND vehicle_id = \
             (SELECT id FROM vehicles WHERE plate = ?1) ORDER BY start_ts LIMIT 1",
            [&plate],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    let zone = dir.join("school.geojson");
    std::fs::write(
        &zone,
        format!(
            r#"{{"type":"FeatureCollection","features":[{{"type":"Feature","properties":{{"name":"Escuela","speed_limit_kmh":30,"radius_m":400}},"geometry":{{"type":"Point","coordinates":[{lon},{lat}]}}}}]}}"#
        ),
    )
    .unwrap();
    fleetctl_on(&["geofences", "import", zone.to_str().unwrap()]);
    let (answer, bytes) = draw_on(&db, &["chart", &plate, "--date", &date], &dir.join("l.png"));
    decode(&answer, &bytes);
    assert_eq!(answer["limit_kmh"], 50.0);
    assert_eq!(answer["limit_source"], "vehicle");
    let zones = &answer["zone_limits"]["items"];
    assert_eq!(zones[0]["geofence"], "Escuela", "{answer}");
    assert_eq!(zones[0]["limit_kmh"], 30.0);
    assert!(zones[0]["inside_min"].as_f64().unwrap() > 0.0);
    assert_eq!(
        answer["speeding"].as_u64().unwrap() as usize,
        speeding_on(&db, &plate, &date),
        "every episode under the lower limits is shaded"
    );
    assert!(answer["speeding"].as_u64().unwrap() > 1);
}

#[test]
fn bad_chart_requests_are_refused_and_the_default_file_is_named_after_plate_and_date() {
    let dir = TempDir::new("chart-bad");
    let db = fixture_db().to_str().unwrap();
    let out = dir.join("x.png");
    let o = out.to_str().unwrap();
    let fails = |args: &[&str], code: i32| -> String {
        let mut all = vec!["--db", db, "chart"];
        all.extend_from_slice(args);
        run(fleetctl(&all)).fails(code).stderr
    };
    let (plate, _) = a_speeding_day();
    let e = fails(&["P-000XXX", "-o", o], 3);
    assert!(e.starts_with("fleetctl: not_found: no vehicle"), "{e}");
    let e = fails(&[&plate, "--date", "2026-10-01", "-o", o], 3);
    assert!(
        e.starts_with(&format!(
            "fleetctl: no_data: {plate} has no fixes on 2026-10-01"
        )) && e.contains("it has data from 2026-11-19"),
        "{e}"
    );
    let inactive: String = open(fixture_db())
        .query_row("SELECT plate FROM vehicles WHERE active = 0", [], |r| {
            r.get(0)
        })
        .unwrap();
    let e = fails(&[&inactive, "-o", o], 3);
    assert!(e.contains("out of service"), "{e}");
    let e = fails(&[&plate, "--width", "100", "-o", o], 2);
    assert!(e.contains("`width` = 100"), "{e}");
    let e = fails(&[&plate, "--tiles", "/tmp", "-o", o], 2);
    assert!(e.contains("--tiles"), "charts take no tiles: {e}");
    assert!(!out.exists(), "nothing written");

    let mut cmd = fleetctl(&["--db", db, "chart", &plate, "--date", "2026-11-24"]);
    cmd.current_dir(dir.path());
    let r = run(cmd).ok();
    let name = format!("{plate}_2026-11-24_speed.png");
    assert_eq!(r.stdout.trim(), name);
    assert!(dir.join(&name).exists());
}

/// The image block of a tool result, decoded.
fn image_block(result: &Value) -> Vec<u8> {
    use base64::Engine;
    let image = &result["content"][1];
    assert_eq!(image["type"], "image", "{result}");
    assert_eq!(image["mimeType"], "image/png");
    base64::engine::general_purpose::STANDARD
        .decode(image["data"].as_str().unwrap())
        .unwrap()
}

#[test]
fn the_tools_answer_an_image_block_and_what_the_cli_prints() {
    let dir = TempDir::new("chart-mcp");
    let mut s = McpSession::initialized(fixture_db(), "2025-11-25");
    let (plate, date) = a_speeding_day();
    let cases = [(
        "speed_chart",
        json!({"plate": plate, "date": date, "width": 800, "height": 400}),
        vec![
            "chart", &plate, "--date", &date, "--width", "800", "--height", "400",
        ],
    )];
    for (tool, args, words) in cases {
        let result = s.call_tool(tool, args);
        assert_eq!(result["isError"], false, "{tool}: {result}");
        let png = image_block(&result);
        let (cli, written) = draw(&words, &dir.join(&format!("{tool}.png")));
        assert_eq!(result["structuredContent"], cli, "{tool}");
        assert!(png == written, "{tool}: the very PNG the CLI wrote");
        decode(&result["structuredContent"], &png);
    }
    let e = tool_error(&s.call_tool("speed_chart", json!({"plate": "P-000XXX"})));
    assert_eq!(e["error"]["code"], "not_found");
}
