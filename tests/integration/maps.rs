//! Route maps: the PNG a user gets from `fleetctl map` (and the `route_map` tool) —
//! its size, where the track, markers and stops land, determinism, weight, local
//! tiles underneath, and each refusal.

use crate::harness::{TempDir, draw_on, fixture_db, fleetctl, open, projector, run};
use fleetctl::geo::{LatLon, web_mercator_px};
use fleetctl::render::map::SPEED_COLOURS;
use image::{Rgb, RgbImage};
use serde_json::Value;
use std::path::Path;

/// Runs `fleetctl map … -o OUT --format json`, returns the summary and the image.
fn draw(args: &[&str], out: &Path) -> (Value, Vec<u8>) {
    draw_on(fixture_db(), &[&["map"], args].concat(), out)
}

fn pixel(img: &RgbImage, x: i64, y: i64) -> Option<[u8; 3]> {
    (x >= 0 && y >= 0 && x < i64::from(img.width()) && y < i64::from(img.height()))
        .then(|| img.get_pixel(x as u32, y as u32).0)
}

/// Whether any pixel within `r` of (x, y) satisfies `want`.
fn near(img: &RgbImage, (x, y): (i64, i64), r: i64, want: impl Fn([u8; 3]) -> bool) -> bool {
    (-r..=r).any(|dx| (-r..=r).any(|dy| pixel(img, x + dx, y + dy).is_some_and(&want)))
}

/// Whether a pixel lies under the map's furniture (title, legend, scale bar) or
/// within a stop's circle, where other marks are drawn over the track.
fn obstructed(img: &RgbImage, stops: &[(i64, i64)], (x, y): (i64, i64)) -> bool {
    let (w, h) = (i64::from(img.width()), i64::from(img.height()));
    let furniture = (x < 470 && y < 80)
        || (x < 340 && y > h - 70)
        || (x > w - 220 && y > h - 50)
        || (x > w - 60 && y < 60);
    furniture
        || stops
            .iter()
            .any(|(sx, sy)| (sx - x).pow(2) + (sy - y).pow(2) < 34 * 34)
}

/// The stops of a vehicle-day, projected.
fn stop_pixels(
    plate: &str,
    date: &str,
    project: &impl Fn(LatLon) -> (i64, i64),
) -> Vec<(i64, i64)> {
    let conn = open(fixture_db());
    let start = fleetctl::clock::FleetZone::default()
        .day_start(fleetctl::clock::Date::parse(date).unwrap());
    let mut st = conn
        .prepare("SELECT lat, lon FROM stops WHERE vehicle_id = (SELECT id FROM vehicles WHERE plate = ?1) AND start_ts >= ?2 AND start_ts < ?3")
        .unwrap();
    st.query_map(rusqlite::params![plate, start, start + 86_400], |r| {
        Ok(project(LatLon::new(r.get(0)?, r.get(1)?)))
    })
    .unwrap()
    .map(Result::unwrap)
    .collect()
}

/// A vehicle's busiest day in the fixture: (plate, date).
fn busiest_day() -> (String, String) {
    open(fixture_db())
        .query_row(
            "SELECT v.plate, d.date FROM daily d JOIN vehicles v ON v.id = d.vehicle_id ORDER BY d.gps_distance_km DESC LIMIT 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap()
}

fn fixes(plate: &str, date: &str) -> Vec<(LatLon, f64, i64)> {
    let conn = open(fixture_db());
    let zone = fleetctl::clock::FleetZone::default();
    let start = zone.day_start(fleetctl::clock::Date::parse(date).unwrap());
    let mut st = conn
        .prepare("SELECT lat, lon, speed_kmh, ts FROM fixes WHERE vehicle_id = (SELECT id FROM vehicles WHERE plate = ?1) AND ts >= ?2 AND ts < ?3 ORDER BY ts")
        .unwrap();
    st.query_map(rusqlite::params![plate, start, start + 86_400], |r| {
        Ok((LatLon::new(r.get(0)?, r.get(1)?), r.get(2)?, r.get(3)?))
    })
    .unwrap()
    .map(Result::unwrap)
    .collect()
}

#[test]
fn the_map_decodes_at_the_requested_size_and_the_track_is_where_the_fixes_are() {
    let dir = TempDir::new("map");
    let (plate, date) = busiest_day();
    let (summary, bytes) = draw(
        &[&plate, "--date", &date, "--width", "900", "--height", "640"],
        &dir.join("m.png"),
    );
    let img = image::load_from_memory(&bytes).unwrap().to_rgb8();
    assert_eq!((img.width(), img.height()), (900, 640));
    assert_eq!(summary["png_bytes"].as_u64().unwrap() as usize, bytes.len());
    let project = projector(&summary);
    let track: Vec<[u8; 3]> = SPEED_COLOURS.iter().map(|(_, c)| [c.0, c.1, c.2]).collect();
    let stops = stop_pixels(&plate, &date, &project);
    let moving: Vec<_> = fixes(&plate, &date)
        .into_iter()
        .filter(|f| f.1 > 25.0 && !obstructed(&img, &stops, project(f.0)))
        .collect();
    assert!(moving.len() > 200);
    let sample: Vec<_> = moving.iter().step_by(moving.len() / 100).collect();
    let hits = sample
        .iter()
        .filter(|f| near(&img, project(f.0), 3, |p| track.contains(&p)))
        .count();
    assert!(
        hits * 20 >= sample.len() * 19,
        "track colour at {hits} of {} sampled fixes",
        sample.len()
    );
    // And away from the track the basemap shows, not track colours.
    let corner = [img.get_pixel(450, 600).0, img.get_pixel(880, 320).0];
    assert!(corner.iter().all(|p| !track.contains(p)), "{corner:?}");
}

#[test]
fn start_end_and_stop_markers_are_where_they_belong() {
    let dir = TempDir::new("markers");
    let (plate, date) = busiest_day();
    let (summary, bytes) = draw(&[&plate, "--date", &date], &dir.join("m.png"));
    let img = image::load_from_memory(&bytes).unwrap().to_rgb8();
    let project = projector(&summary);
    let day = fixes(&plate, &date);
    let (first, last) = (day[0].0, day[day.len() - 1].0);
    // The end marker is drawn over the start when a day ends where it began, so the
    // start is checked on a window that ends elsewhere.
    let (end_x, end_y) = project(last);
    assert!(
        near(&img, (end_x, end_y), 8, |p| p == [40, 40, 40]),
        "end marker (dark) at the last fix"
    );
    let midday = day[day.len() / 2].2;
    let zone = fleetctl::clock::FleetZone::default();
    let (s2, bytes2) = draw(
        &[&plate, "--date", &date, "--to", &zone.hhmm(midday)],
        &dir.join("am.png"),
    );
    let img2 = image::load_from_memory(&bytes2).unwrap().to_rgb8();
    assert!(
        near(&img2, projector(&s2)(first), 8, |p| p == [26, 150, 65]),
        "start marker (green) at the first fix"
    );
    // Each stop ring passes through the stop's radius to its right.
    let conn = open(fixture_db());
    let zone_start = zone.day_start(fleetctl::clock::Date::parse(&date).unwrap());
    let mut st = conn
        .prepare("SELECT lat, lon, end_ts - start_ts FROM stops WHERE vehicle_id = (SELECT id FROM vehicles WHERE plate = ?1) AND start_ts >= ?2 AND start_ts < ?3")
        .unwrap();
    let stops: Vec<(LatLon, f64)> = st
        .query_map(
            rusqlite::params![plate, zone_start, zone_start + 86_400],
            |r| {
                Ok((
                    LatLon::new(r.get(0)?, r.get(1)?),
                    r.get::<_, f64>(2)? / 60.0,
                ))
            },
        )
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert!(!stops.is_empty());
    // Stops at one spot are drawn as one ring sized by their total minutes, so each
    // stop has the ring colour within the largest radius of its centre.
    let purple = |p: [u8; 3]| p == [106, 61, 154];
    let largest = fleetctl::render::map::stop_radius_px(stops.iter().map(|s| s.1).sum()) as i64;
    for (at, _) in &stops {
        assert!(
            near(&img, project(*at), largest + 2, purple),
            "stop ring at {at:?}"
        );
    }
}

#[test]
fn the_same_input_gives_the_same_bytes_and_the_busiest_day_is_light() {
    let dir = TempDir::new("determinism-map");
    let (plate, date) = busiest_day();
    let (_, a) = draw(&[&plate, "--date", &date], &dir.join("a.png"));
    let (_, b) = draw(&[&plate, "--date", &date], &dir.join("b.png"));
    assert!(a == b, "identical bytes");
    assert!(a.len() < 1024 * 1024, "{} bytes", a.len());
    assert!(
        a.len() < 400 * 1024,
        "about 300 KB or less: {} bytes",
        a.len()
    );
}

#[test]
fn local_tiles_show_under_the_track_and_missing_ones_leave_the_basemap() {
    let dir = TempDir::new("tiles");
    let (plate, date) = busiest_day();
    let (plain, _) = draw(&[&plate, "--date", &date], &dir.join("plain.png"));
    let zoom = plain["zoom"].as_f64().unwrap();
    let z = zoom.ceil() as u32;
    let project = projector(&plain);
    // Magenta tiles for the left half of the map only.
    let nw = LatLon::new(
        plain["bounds"]["north"].as_f64().unwrap(),
        plain["bounds"]["west"].as_f64().unwrap(),
    );
    let se = LatLon::new(
        plain["bounds"]["south"].as_f64().unwrap(),
        plain["bounds"]["east"].as_f64().unwrap(),
    );
    let (x0, y0) = web_mercator_px(nw, f64::from(z));
    let (x1, y1) = web_mercator_px(se, f64::from(z));
    let mid_x = (x0 + x1) / 2.0;
    let magenta = RgbImage::from_pixel(256, 256, Rgb([255, 0, 255]));
    let mut png = Vec::new();
    magenta
        .write_to(&mut std::io::Cursor::new(&mut png), image::ImageFormat::Png)
        .unwrap();
    let tiles = dir.join("tiles");
    let mut written = Vec::new();
    for tx in (x0 / 256.0) as u32..=(x1 / 256.0) as u32 {
        for ty in (y0 / 256.0) as u32..=(y1 / 256.0) as u32 {
            if f64::from(tx + 1) * 256.0 <= mid_x {
                let d = tiles.join(z.to_string()).join(tx.to_string());
                std::fs::create_dir_all(&d).unwrap();
                std::fs::write(d.join(format!("{ty}.png")), &png).unwrap();
                written.push((tx, ty));
            }
        }
    }
    assert!(!written.is_empty());
    let (with, bytes) = draw(
        &[&plate, "--date", &date, "--tiles", tiles.to_str().unwrap()],
        &dir.join("tiles.png"),
    );
    assert!(with["tiles"].as_str().unwrap().ends_with("tiles"));
    let img = image::load_from_memory(&bytes).unwrap().to_rgb8();
    let is_magenta = |p: [u8; 3]| p == [255, 0, 255];
    let left = (0..img.height())
        .filter(|&y| is_magenta(img.get_pixel(2, y).0))
        .count();
    assert!(
        left > img.height() as usize / 3,
        "tiles drawn on the left: {left} magenta pixels in column 2"
    );
    let right = (0..img.height())
        .filter(|&y| is_magenta(img.get_pixel(img.width() - 3, y).0))
        .count();
    assert_eq!(right, 0, "no tile on the right: the offline basemap stays");
    // The track is drawn over the tiles.
    let stops = stop_pixels(&plate, &date, &project);
    let moving: Vec<_> = fixes(&plate, &date)
        .into_iter()
        .filter(|f| f.1 > 25.0 && !obstructed(&img, &stops, project(f.0)))
        .collect();
    let track: Vec<[u8; 3]> = SPEED_COLOURS.iter().map(|(_, c)| [c.0, c.1, c.2]).collect();
    let sample: Vec<_> = moving.iter().step_by(20).collect();
    let over = sample
        .iter()
        .filter(|f| near(&img, project(f.0), 3, |p| track.contains(&p)))
        .count();
    assert!(
        over * 20 >= sample.len() * 19,
        "track over the tiles at {over} of {} fixes",
        sample.len()
    );

    // The same tiles from an MBTiles file (rows counted from the south).
    let mbtiles = dir.join("city.mbtiles");
    let conn = rusqlite::Connection::open(&mbtiles).unwrap();
    conn.execute_batch(
        "CREATE TABLE metadata (name TEXT, value TEXT); CREATE TABLE tiles (zoom_level INTEGER, tile_column INTEGER, tile_row INTEGER, tile_data BLOB);
         INSERT INTO metadata VALUES ('attribution', 'Test tiles, made by the test');",
    )
    .unwrap();
    for (tx, ty) in &written {
        let row = (1u32 << z) - 1 - ty;
        conn.execute(
            "INSERT INTO tiles VALUES (?1, ?2, ?3, ?4)",
            rusqlite::params![z, tx, row, png],
        )
        .unwrap();
    }
    drop(conn);
    let (_, bytes2) = draw(
        &[
            &plate,
            "--date",
            &date,
            "--tiles",
            mbtiles.to_str().unwrap(),
        ],
        &dir.join("mb.png"),
    );
    let img2 = image::load_from_memory(&bytes2).unwrap().to_rgb8();
    let left2 = (0..img2.height())
        .filter(|&y| is_magenta(img2.get_pixel(2, y).0))
        .count();
    assert_eq!(left, left2, "MBTiles rows are flipped into the same place");
}

#[test]
fn bad_map_requests_are_refused() {
    let dir = TempDir::new("badmap");
    let (plate, _) = busiest_day();
    let db = fixture_db().to_str().unwrap();
    let out = dir.join("x.png");
    let o = out.to_str().unwrap();
    let fails = |args: &[&str], code: i32| -> String {
        let mut all = vec!["--db", db, "map"];
        all.extend_from_slice(args);
        run(fleetctl(&all)).fails(code).stderr
    };
    let e = fails(&[&plate, "--date", "2026-10-01", "-o", o], 3);
    assert!(
        e.starts_with("fleetctl: no_data: ")
            && e.contains("it has data from 2026-11-19 to 2026-11-25"),
        "{e}"
    );
    let e = fails(
        &[
            &plate,
            "--date",
            "yesterday",
            "-o",
            "/proc/no/such/dir/x.png",
        ],
        5,
    );
    assert!(e.starts_with("fleetctl: io: "), "{e}");
    let e = fails(
        &[
            &plate,
            "--tiles",
            dir.join("nope").to_str().unwrap(),
            "-o",
            o,
        ],
        2,
    );
    assert!(e.contains("no such folder or file"), "{e}");
    let junk = dir.join("junk.mbtiles");
    std::fs::write(&junk, "not sqlite").unwrap();
    let e = fails(&[&plate, "--tiles", junk.to_str().unwrap(), "-o", o], 2);
    assert!(e.starts_with("fleetctl: invalid_argument: --tiles"), "{e}");
    let e = fails(
        &[
            &plate,
            "--date",
            "yesterday",
            "--from",
            "14:00",
            "--to",
            "09:00",
            "-o",
            o,
        ],
        2,
    );
    assert!(e.contains("from 14:00 is not before to 09:00"), "{e}");
    let e = fails(&[&plate, "--from", "9am", "-o", o], 2);
    assert!(e.contains("`from` = \"9am\""), "{e}");
    let e = fails(&[&plate, "--width", "100", "-o", o], 2);
    assert!(
        e.contains("`width` = 100") && e.contains("320 to 2048"),
        "{e}"
    );
    assert!(!out.exists(), "nothing written");
}

#[test]
fn the_default_output_is_plate_and_date_in_the_current_folder() {
    let dir = TempDir::new("default-out");
    let (plate, date) = busiest_day();
    let mut cmd = fleetctl(&[
        "--db",
        fixture_db().to_str().unwrap(),
        "map",
        &plate,
        "--date",
        &date,
    ]);
    cmd.current_dir(dir.path());
    let r = run(cmd).ok();
    let name = format!("{plate}_{date}.png");
    assert_eq!(r.stdout.trim(), name);
    assert!(dir.join(&name).exists());
}

#[test]
fn regression_a_failed_map_with_format_json_prints_the_error_object() {
    let inactive: String = open(fixture_db())
        .query_row("SELECT plate FROM vehicles WHERE active = 0", [], |r| {
            r.get(0)
        })
        .unwrap();
    let dir = TempDir::new("map-json-error");
    let out = dir.join("x.png");
    let r = run(fleetctl(&[
        "--db",
        fixture_db().to_str().unwrap(),
        "map",
        &inactive,
        "--format",
        "json",
        "-o",
        out.to_str().unwrap(),
    ]))
    .fails(3);
    let error: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(error["error"]["code"], "no_data");
    assert!(
        error["error"]["hint"]
            .as_str()
            .unwrap()
            .contains("out of service"),
        "{error}"
    );
}

/// Fills every tile under the busiest day's map with `bytes` (as `{y}.ext`), and
/// returns the folder.
fn tiles_under_the_map(dir: &TempDir, ext: &str, bytes: &[u8]) -> std::path::PathBuf {
    let (plate, date) = busiest_day();
    let (plain, _) = draw(&[&plate, "--date", &date], &dir.join("plain.png"));
    let z = plain["zoom"].as_f64().unwrap().ceil() as u32;
    let corner = |lat: &str, lon: &str| {
        LatLon::new(
            plain["bounds"][lat].as_f64().unwrap(),
            plain["bounds"][lon].as_f64().unwrap(),
        )
    };
    let (x0, y0) = web_mercator_px(corner("north", "west"), f64::from(z));
    let (x1, y1) = web_mercator_px(corner("south", "east"), f64::from(z));
    let tiles = dir.join("tiles");
    for tx in (x0 / 256.0) as u32..=(x1 / 256.0) as u32 {
        for ty in (y0 / 256.0) as u32..=(y1 / 256.0) as u32 {
            let d = tiles.join(z.to_string()).join(tx.to_string());
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join(format!("{ty}.{ext}")), bytes).unwrap();
        }
    }
    tiles
}

/// A PNG whose header claims `width`×`height` (the pixels are never reached: a decoder
/// that honours its limits stops at the header).
fn png_claiming(width: u32, height: u32) -> Vec<u8> {
    fn crc32(bytes: &[u8]) -> u32 {
        let mut crc = 0xFFFF_FFFFu32;
        for &b in bytes {
            crc ^= u32::from(b);
            for _ in 0..8 {
                crc = if crc & 1 == 1 {
                    (crc >> 1) ^ 0xEDB8_8320
                } else {
                    crc >> 1
                };
            }
        }
        !crc
    }
    let chunk = |kind: &[u8], data: &[u8]| {
        let mut c = (data.len() as u32).to_be_bytes().to_vec();
        let mut body = kind.to_vec();
        body.extend_from_slice(data);
        c.extend_from_slice(&body);
        c.extend_from_slice(&crc32(&body).to_be_bytes());
        c
    };
    let mut ihdr = width.to_be_bytes().to_vec();
    ihdr.extend_from_slice(&height.to_be_bytes());
    ihdr.extend_from_slice(&[8, 2, 0, 0, 0]); // 8-bit RGB
    let mut png = b"\x89PNG\r\n\x1a\n".to_vec();
    png.extend(chunk(b"IHDR", &ihdr));
    png.extend(chunk(
        b"IDAT",
        &[0x78, 0x9c, 0x03, 0x00, 0x00, 0x00, 0x00, 0x01],
    ));
    png.extend(chunk(b"IEND", &[]));
    png
}

#[test]
fn jpeg_tiles_are_drawn_under_the_track() {
    let dir = TempDir::new("jpeg-tiles");
    let mut jpeg = Vec::new();
    RgbImage::from_pixel(256, 256, Rgb([255, 0, 255]))
        .write_to(
            &mut std::io::Cursor::new(&mut jpeg),
            image::ImageFormat::Jpeg,
        )
        .unwrap();
    let tiles = tiles_under_the_map(&dir, "jpg", &jpeg);
    let (plate, date) = busiest_day();
    let (_, bytes) = draw(
        &[&plate, "--date", &date, "--tiles", tiles.to_str().unwrap()],
        &dir.join("jpeg.png"),
    );
    let img = image::load_from_memory(&bytes).unwrap().to_rgb8();
    let magenta = img
        .pixels()
        .filter(|p| p.0[0] > 230 && p.0[1] < 30 && p.0[2] > 230)
        .count();
    assert!(
        magenta > img.pixels().len() / 4,
        "{magenta} magenta pixels: the JPEG tiles are drawn"
    );
}

#[test]
fn regression_hostile_tiles_are_refused_with_a_clear_error_and_bounded_memory() {
    let dir = TempDir::new("hostile-tiles");
    let (plate, date) = busiest_day();
    let db = fixture_db().to_str().unwrap();
    let out = dir.join("x.png");
    let map_with = |tiles: &Path| {
        run(fleetctl(&[
            "--db",
            db,
            "map",
            &plate,
            "--date",
            &date,
            "--tiles",
            tiles.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
        ]))
    };
    // A 410-byte PNG that claims 12000×12000 pixels: refused at its header.
    let giant = tiles_under_the_map(&dir, "png", &png_claiming(12_000, 12_000));
    let e = map_with(&giant).fails(5).stderr;
    assert!(
        e.starts_with("fleetctl: render: tile ") && e.contains("limit"),
        "{e}"
    );
    assert!(!out.exists(), "no map written");
    // A tile that is a link to an endless device.
    std::fs::remove_dir_all(&giant).unwrap();
    let zero = tiles_under_the_map(&dir, "png", b"");
    for entry in walk(&zero) {
        std::fs::remove_file(&entry).unwrap();
        std::os::unix::fs::symlink("/dev/zero", &entry).unwrap();
    }
    let e = map_with(&zero).fails(5).stderr;
    assert!(e.contains("not a regular file"), "{e}");
    // An MBTiles whose `tiles` is a view that never ends: refused at start, in time.
    let endless = dir.join("endless.mbtiles");
    rusqlite::Connection::open(&endless)
        .unwrap()
        .execute_batch(
            "CREATE TABLE metadata (name TEXT, value TEXT);
             CREATE VIEW tiles AS WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n)
               SELECT 0 AS zoom_level, 0 AS tile_column, 0 AS tile_row, x'00' AS tile_data FROM n WHERE i < 0;",
        )
        .unwrap();
    let e = map_with(&endless).fails(2).stderr;
    assert!(e.contains("no answer within 2 s"), "{e}");
    // Vector tiles are named as such.
    let vector = dir.join("vector.mbtiles");
    rusqlite::Connection::open(&vector)
        .unwrap()
        .execute_batch(
            "CREATE TABLE metadata (name TEXT, value TEXT); INSERT INTO metadata VALUES ('format', 'pbf');
             CREATE TABLE tiles (zoom_level INTEGER, tile_column INTEGER, tile_row INTEGER, tile_data BLOB);",
        )
        .unwrap();
    let e = map_with(&vector).fails(2).stderr;
    assert!(e.contains("\"pbf\"") && e.contains("raster"), "{e}");
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(walk(&path));
        } else {
            files.push(path);
        }
    }
    files
}

#[test]
fn a_day_with_one_fix_is_drawn_and_no_hint_names_a_day_that_is_refused() {
    let dir = TempDir::new("map-one-fix");
    let db = dir.join("fleet.db");
    let csv = dir.join("fixes.csv");
    // One fix on the 1st; a drive of two fixes on the 2nd.
    std::fs::write(
        &csv,
        "plate,time,lat,lon,speed_kmh\n\
         ONE,2026-03-01T10:00:00Z,51.5,-0.12,0\n\
         ONE,2026-03-02T10:00:00Z,51.5,-0.12,30\n\
         ONE,2026-03-02T10:01:00Z,51.505,-0.12,30\n",
    )
    .unwrap();
    run(fleetctl(&[
        "--db",
        db.to_str().unwrap(),
        "import",
        "--time-zone",
        "Europe/London",
        csv.to_str().unwrap(),
    ]))
    .ok();
    let (answer, png) = draw_on(
        &db,
        &["map", "ONE", "--date", "2026-03-01"],
        &dir.join("one.png"),
    );
    assert_eq!(answer["fixes"], 1, "{answer}");
    assert_eq!(answer["distance_km"], 0.0, "{answer}");
    assert!(image::load_from_memory(&png).is_ok());
    // A chart needs two fixes: it refuses the 1st, and its hint names only the 2nd.
    let r = run(fleetctl(&[
        "--db",
        db.to_str().unwrap(),
        "chart",
        "ONE",
        "--date",
        "2026-03-01",
        "-o",
        dir.join("chart.png").to_str().unwrap(),
    ]))
    .fails(3);
    assert!(r.stderr.contains("2026-03-02"), "{}", r.stderr);
    assert!(
        !r.stderr
            .contains("hint: days with two fixes or more for ONE: 2026-03-01"),
        "{}",
        r.stderr
    );
}
