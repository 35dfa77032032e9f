//! The two pictures of issue 12: `fleetctl chart` (the `speed_chart` tool) and
//! `fleetctl map --fleet` (the `fleet_map` tool) — the PNG a user gets, what it
//! shows where, and that its answer agrees with the reports that count the same
//! things (events, trip_summary, vehicle_position, stopped_vehicles).

use crate::harness::{
    McpSession, TempDir, draw_on, fixture_db, fleetctl, open, plant_school_zone, projector,
    query_json, run, tool_error,
};
use fleetctl::geo::LatLon;
use fleetctl::render::chart::{LOSS_SHADE, OVER_LINE, SPEED_LINE, SPEEDING_SHADE, plot_area};
use fleetctl::render::fleet::state_colour;
use image::RgbImage;
use serde_json::{Value, json};
use std::path::Path;

/// Draws on the fixture database (see [`draw_on`]).
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
    plant_school_zone(&db, &dir, &plate, 400);
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

fn point(v: &Value) -> LatLon {
    LatLon::new(v["lat"].as_f64().unwrap(), v["lon"].as_f64().unwrap())
}

#[test]
fn the_fleet_map_at_the_data_clock_agrees_with_vehicle_position_and_stopped_vehicles() {
    let dir = TempDir::new("fleet-map");
    let db = fixture_db();
    let (answer, bytes) = draw(&["map", "--fleet"], &dir.join("f.png"));
    let img = decode(&answer, &bytes);
    assert_eq!((img.width(), img.height()), (1024, 768));
    assert_eq!(answer["at"], answer["data_now"]);
    let vehicles = answer["vehicles"]["items"].as_array().unwrap();
    assert_eq!(
        vehicles.len(),
        answer["vehicles_total"].as_u64().unwrap() as usize
    );
    // Counts by state are the list's, and they add up.
    let counts = &answer["counts"];
    let mut sum = 0;
    for state in ["moving", "idle", "parked", "offline", "inactive", "no_data"] {
        let n = vehicles.iter().filter(|v| v["state"] == state).count();
        assert_eq!(counts[state].as_u64().unwrap() as usize, n, "{state}");
        sum += n;
    }
    assert_eq!(sum, vehicles.len());
    assert!(counts["moving"].as_u64().unwrap() > 0 && counts["idle"].as_u64().unwrap() > 0);
    // Each vehicle is where, and as, vehicle_position says.
    for v in vehicles {
        let plate = v["plate"].as_str().unwrap();
        let position = query_json(db, &["position", plate]);
        assert_eq!(v["state"], position["state"], "{plate}");
        assert_eq!(v["lat"], position["lat"], "{plate}");
        assert_eq!(v["lon"], position["lon"], "{plate}");
        assert_eq!(v["last_fix_at"], position["last_fix_at"], "{plate}");
    }
    // Every vehicle stopped_vehicles lists is idle or parked (or offline, as it says).
    let stopped = query_json(db, &["stopped", "--min-minutes", "0"]);
    let listed = stopped["vehicles"]["items"].as_array().unwrap();
    assert!(!listed.is_empty());
    for s in listed {
        let v = vehicles.iter().find(|v| v["plate"] == s["plate"]).unwrap();
        let expected = match (s["offline"].as_bool().unwrap(), s["engine_on"].as_bool()) {
            (true, _) => "offline",
            (false, Some(true)) => "idle",
            (false, _) => "parked",
        };
        assert_eq!(v["state"], expected, "{s}");
    }
    // Each vehicle's dot is drawn in its state's colour where it is (vehicles close
    // together share one marker, listed beside it).
    let project = projector(&answer);
    let drawn: Vec<&Value> = vehicles.iter().filter(|v| !v["lat"].is_null()).collect();
    assert_eq!(drawn.len(), answer["drawn"].as_u64().unwrap() as usize);
    let mut alone = 0;
    for v in &drawn {
        let (x, y) = project(point(v));
        let together = drawn.iter().any(|o| {
            let (ox, oy) = project(point(o));
            o["plate"] != v["plate"] && (ox - x).pow(2) + (oy - y).pow(2) <= 20 * 20
        });
        if together {
            continue;
        }
        alone += 1;
        let state = match v["state"].as_str().unwrap() {
            "moving" => fleetctl::report::vehicle_position::LiveState::Moving,
            "idle" => fleetctl::report::vehicle_position::LiveState::Idle,
            "parked" => fleetctl::report::vehicle_position::LiveState::Parked,
            _ => fleetctl::report::vehicle_position::LiveState::Offline,
        };
        let colour = rgb!(state_colour(state));
        let hit = (-4..=4).any(|dx| {
            (-4..=4).any(|dy| {
                let (px, py) = (x + dx, y + dy);
                px >= 0
                    && py >= 0
                    && (px as u32) < img.width()
                    && (py as u32) < img.height()
                    && img.get_pixel(px as u32, py as u32).0 == colour
            })
        });
        assert!(hit, "{} ({}) drawn at ({x}, {y})", v["plate"], v["state"]);
    }
    assert!(alone >= 5, "{alone} vehicles drawn alone");
}

#[test]
fn the_fleet_map_at_an_earlier_time_shows_where_the_fleet_was_then() {
    let dir = TempDir::new("fleet-at");
    let (now, now_png) = draw(&["map", "--fleet"], &dir.join("now.png"));
    let (morning, png) = draw(
        &["map", "--fleet", "--at", "2026-11-25T10:00"],
        &dir.join("am.png"),
    );
    decode(&morning, &png);
    assert_eq!(morning["at"], "2026-11-25T10:00:00-06:00");
    assert!(png != now_png, "another picture");
    let moved = morning["vehicles"]["items"]
        .as_array()
        .unwrap()
        .iter()
        .zip(now["vehicles"]["items"].as_array().unwrap())
        .filter(|(a, b)| a["lat"] != b["lat"] || a["lon"] != b["lon"])
        .count();
    assert!(moved >= 7, "{moved} vehicles elsewhere at 10:00");
    for v in morning["vehicles"]["items"].as_array().unwrap() {
        if let Some(last) = v["last_fix_at"].as_str() {
            assert!(last <= "2026-11-25T10:00:00-06:00", "{v}");
        }
    }
    // HH:MM means that time on the data clock's day.
    let (same, _) = draw(&["map", "--fleet", "--at", "10:00"], &dir.join("hhmm.png"));
    assert_eq!(same, morning);
    // In the night every vehicle is parked where its shift ended, engine off: parked
    // overnight, not offline, however old its last fix.
    let (night, _) = draw(
        &["map", "--fleet", "--at", "2026-11-24T03:00"],
        &dir.join("night.png"),
    );
    assert_eq!(night["counts"]["parked"], night["drawn"], "{night}");
    assert_eq!(night["counts"]["offline"], 0, "{night}");
}

#[test]
fn bad_fleet_map_requests_are_refused_with_what_would_work() {
    let dir = TempDir::new("fleet-bad");
    let db = fixture_db().to_str().unwrap();
    let out = dir.join("x.png");
    let o = out.to_str().unwrap();
    let fails = |args: &[&str], code: i32| -> String {
        let mut all = vec!["--db", db, "map"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["-o", o]);
        run(fleetctl(&all)).fails(code).stderr
    };
    let e = fails(&["--fleet", "--at", "2026-10-01T10:00"], 3);
    assert!(
        e.starts_with("fleetctl: no_data: no vehicle has a position at or before 2026-10-01T10:00")
            && e.contains("data from 2026-11-19 to 2026-11-25"),
        "{e}"
    );
    let e = fails(&["--fleet", "--at", "2026-11-25T18:00"], 2);
    assert!(e.contains("after the data clock"), "{e}");
    let e = fails(&["--fleet", "--at", "9am"], 2);
    assert!(
        e.contains("`at` = \"9am\"") && e.contains("YYYY-MM-DDTHH:MM"),
        "{e}"
    );
    let (plate, _) = a_speeding_day();
    let e = fails(&["--fleet", &plate], 2);
    assert!(e.contains("--fleet"), "{e}");
    let e = fails(&[&plate, "--at", "10:00"], 2);
    assert!(e.contains("--at"), "{e}");
    let e = fails(&["--at", "10:00"], 2);
    assert!(e.contains("--fleet"), "{e}");
    assert!(!out.exists(), "nothing written");
    // With --format json the error object goes to stdout too.
    let r = run(fleetctl(&[
        "--db",
        db,
        "map",
        "--fleet",
        "--at",
        "2026-10-01T10:00",
        "--format",
        "json",
        "-o",
        o,
    ]))
    .fails(3);
    let error: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(error["error"]["code"], "no_data");

    let mut cmd = fleetctl(&["--db", db, "map", "--fleet"]);
    cmd.current_dir(dir.path());
    let r = run(cmd).ok();
    assert_eq!(r.stdout.trim(), "fleet_2026-11-25_1530.png");
    assert!(dir.join("fleet_2026-11-25_1530.png").exists());
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
    let cases = [
        (
            "speed_chart",
            json!({"plate": plate, "date": date, "width": 800, "height": 400}),
            vec![
                "chart", &plate, "--date", &date, "--width", "800", "--height", "400",
            ],
        ),
        (
            "fleet_map",
            json!({"at": "2026-11-24T11:15"}),
            vec!["map", "--fleet", "--at", "2026-11-24T11:15"],
        ),
    ];
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
    let e = tool_error(&s.call_tool("fleet_map", json!({"at": "tomorrow"})));
    assert_eq!(e["error"]["code"], "invalid_argument");
}
