//! `route_map` (`fleetctl map PLATE --date D`): a picture of one vehicle's day, or a
//! time window of it, with a short summary. The data comes from the store; the
//! drawing is `render::map`'s.

use super::resolve::parse_hhmm;
use super::{Answer, Db, ReportSpec, round1, round2};
use crate::analyze::distance;
use crate::error::{Error, ErrorCode, Result};
use crate::geo::LatLon;
use crate::model::EventKind;
use crate::model::Fix;
use crate::store::{
    mbtiles::{MAX_TILE_BYTES, MbTiles},
    read,
};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The smallest width or height, pixels.
pub const MIN_SIZE_PX: u32 = 320;
/// The largest width or height, pixels.
pub const MAX_SIZE_PX: u32 = 2048;
/// Accepted widths and heights, pixels.
pub const SIZE_RANGE: std::ops::RangeInclusive<u32> = MIN_SIZE_PX..=MAX_SIZE_PX;

/// How long all the tiles of one map may take to load.
pub const TILES_DEADLINE: Duration = Duration::from_secs(5);

/// Where raster tiles come from.
pub enum TileSource {
    /// A folder of `{z}/{x}/{y}.png` tiles.
    Folder(PathBuf),
    /// An MBTiles file.
    MbTiles(PathBuf, MbTiles),
}

impl TileSource {
    /// Opens a tiles folder or MBTiles file given by the user.
    pub fn open(path: &Path) -> Result<TileSource> {
        if path.is_dir() {
            return Ok(TileSource::Folder(path.to_path_buf()));
        }
        if !path.exists() {
            return Err(Error::invalid(format!(
                "--tiles {}: no such folder or file",
                path.display()
            ))
            .with_hint(
                "give a folder of {z}/{x}/{y}.png (or .jpg, .webp) tiles or an .mbtiles file",
            ));
        }
        Ok(TileSource::MbTiles(
            path.to_path_buf(),
            MbTiles::open(path)?,
        ))
    }

    /// One tile, read before `deadline` (the whole map's tiles share one).
    pub fn fetch(&self, z: u32, x: u32, y: u32, deadline: Instant) -> Result<Option<Vec<u8>>> {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(Error::new(
                ErrorCode::Render,
                format!(
                    "the tiles of {} did not load within {} s",
                    self.name(),
                    TILES_DEADLINE.as_secs()
                ),
            )
            .with_hint("draw without --tiles, or use a faster tile source"));
        }
        match self {
            TileSource::Folder(dir) => {
                let stem = dir.join(z.to_string()).join(x.to_string());
                for ext in ["png", "jpg", "jpeg", "webp"] {
                    let path = stem.join(format!("{y}.{ext}"));
                    match crate::untrusted::read_capped(&path, MAX_TILE_BYTES) {
                        Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                        Err(e) => {
                            return Err(Error::new(
                                ErrorCode::Render,
                                format!("tile {}: {e}", path.display()),
                            ));
                        }
                        Ok(bytes) => return Ok(Some(bytes)),
                    }
                }
                Ok(None)
            }
            TileSource::MbTiles(_, tiles) => tiles.tile(z, x, y, left),
        }
    }

    /// The line that credits the tiles.
    pub fn attribution(&self) -> String {
        match self {
            TileSource::Folder(dir) => format!("Tiles: {}", dir.display()),
            TileSource::MbTiles(path, tiles) => tiles
                .attribution()
                .map_or_else(|| format!("Tiles: {}", path.display()), str::to_owned),
        }
    }

    /// The folder or file the tiles come from, as the answer names it.
    pub fn name(&self) -> String {
        match self {
            TileSource::Folder(p) | TileSource::MbTiles(p, _) => p.display().to_string(),
        }
    }
}

/// A stop to draw.
#[derive(Debug, Clone, PartialEq)]
pub struct MapStop {
    /// Where.
    pub at: LatLon,
    /// How long, minutes.
    pub minutes: f64,
}

/// A speeding episode to mark.
#[derive(Debug, Clone, PartialEq)]
pub struct MapSpeeding {
    /// Where the highest speed was.
    pub at: LatLon,
    /// That speed, km/h.
    pub max_speed_kmh: f64,
    /// The episode detection found, UTC epoch seconds: the track between is haloed.
    pub start_ts: i64,
    /// Its end.
    pub end_ts: i64,
}

/// Everything a map shows: the data `render::map` draws (the domain does not draw).
#[derive(Debug, Clone, PartialEq)]
pub struct MapInput {
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// First title line (plate, driver).
    pub title: String,
    /// Second title line (date, km, stops).
    pub subtitle: String,
    /// The fixes to draw, in time order.
    pub fixes: Vec<Fix>,
    /// Gaps between fixes longer than this many seconds break the track.
    pub gap_s: i64,
    /// The signal losses detection found (the fix before the gap, the fix after):
    /// only these gaps are dashed "signal lost"; other gaps (engine off) stay blank.
    pub signal_losses: Vec<(i64, i64)>,
    /// The vehicle's speed limit (its own, else the fleet's), km/h: the legend's top
    /// class starts there.
    pub speed_limit_kmh: f64,
    /// Stops.
    pub stops: Vec<MapStop>,
    /// Speeding episodes.
    pub speeding: Vec<MapSpeeding>,
    /// Geofences (name, kind, shape).
    pub geofences: Vec<crate::geo::Geofence>,
    /// The database's places, labelled on the plain basemap.
    pub places: Vec<crate::geo::Place>,
    /// Draw the demo's streets (the routes the generator drives): only under the
    /// demo fleet, never under a fleet's own data.
    pub streets: bool,
    /// Local time of the first fix, e.g. `07:39`.
    pub first_label: String,
    /// Local time of the last fix.
    pub last_label: String,
}

/// Which vehicle, day and window, and how big.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RouteMapRequest {
    /// Plate, e.g. P-123BCD
    #[schemars(extend("x-kind" = "plate", "x-positional" = true))]
    pub plate: String,
    /// Local date: YYYY-MM-DD, today or yesterday (default today)
    #[schemars(extend("x-kind" = "date"))]
    pub date: Option<String>,
    /// Window start, local HH:MM (default: start of day)
    #[schemars(extend("x-kind" = "time"))]
    pub from: Option<String>,
    /// Window end, local HH:MM (default: end of day)
    #[schemars(extend("x-kind" = "time"))]
    pub to: Option<String>,
    /// Image width in pixels, 320–2048 (default 1024)
    #[schemars(range(min = MIN_SIZE_PX, max = MAX_SIZE_PX))]
    pub width: Option<u32>,
    /// Image height in pixels, 320–2048 (default 768)
    #[schemars(range(min = MIN_SIZE_PX, max = MAX_SIZE_PX))]
    pub height: Option<u32>,
}

/// The map's extent.
#[derive(Debug, Clone, Default, Serialize, schemars::JsonSchema)]
pub struct Bounds {
    /// Northern edge latitude.
    pub north: f64,
    /// Southern edge latitude.
    pub south: f64,
    /// Western edge longitude.
    pub west: f64,
    /// Eastern edge longitude.
    pub east: f64,
}

/// What the map shows.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct RouteMapReport {
    /// Plate.
    pub plate: String,
    /// Driver.
    pub driver: String,
    /// The local date drawn.
    pub date: String,
    /// Window start (local `HH:MM`), if one was asked for.
    pub from: Option<String>,
    /// Window end, if one was asked for.
    pub to: Option<String>,
    /// The data clock.
    pub data_now: String,
    /// First fix drawn.
    pub first_fix_at: String,
    /// Last fix drawn.
    pub last_fix_at: String,
    /// Fixes drawn.
    pub fixes: usize,
    /// Kilometres in the window.
    pub distance_km: f64,
    /// `odometer` or `gps`.
    pub distance_source: super::DistanceSource,
    /// Why the odometer's readings were not used (`decreasing`, `implausible`).
    pub odometer_rejected: Option<String>,
    /// Stops drawn.
    pub stops: usize,
    /// Speeding episodes marked.
    pub speeding: usize,
    /// Signal losses drawn dashed.
    pub signal_losses: usize,
    /// Highest speed, km/h.
    pub max_speed_kmh: f64,
    /// Image width, pixels.
    pub width: u32,
    /// Image height, pixels.
    pub height: u32,
    /// Size of the PNG, bytes.
    pub png_bytes: usize,
    /// Web Mercator zoom of the map.
    pub zoom: f64,
    /// The map's extent.
    pub bounds: Bounds,
    /// The raster tiles under the map, if any.
    pub tiles: Option<String>,
}

fn window(req: &RouteMapRequest, day: (i64, i64)) -> Result<(i64, i64)> {
    let parse = |name: &str, v: &Option<String>| -> Result<Option<i64>> {
        v.as_deref()
            .map(|t| {
                parse_hhmm(t).ok_or_else(|| {
                    Error::invalid(format!("`{name}` = {t:?} is not a time")).with_hint("use HH:MM")
                })
            })
            .transpose()
    };
    let (from, to) = (parse("from", &req.from)?, parse("to", &req.to)?);
    if let (Some(a), Some(b)) = (from, to)
        && a >= b
    {
        return Err(Error::invalid(format!(
            "from {} is not before to {}",
            req.from.as_deref().unwrap_or_default(),
            req.to.as_deref().unwrap_or_default()
        ))
        .with_hint("give a window such as from 08:00 to 12:00"));
    }
    Ok((
        from.map_or(day.0, |s| day.0 + s),
        to.map_or(day.1, |s| day.0 + s),
    ))
}

/// The map's summary and the data to draw it from (`render::call` draws the PNG).
pub fn run(db: &Db, req: &RouteMapRequest) -> Result<Answer> {
    let v = db.resolve_plate(&req.plate)?;
    let date = db.resolve_date(req.date.as_deref())?;
    let day = db.day_bounds(date);
    let (from_ts, to_ts) = window(req, day)?;
    let (width, height) = (req.width.unwrap_or(1024), req.height.unwrap_or(768));
    let fixes = read::fixes_between(db.conn(), v.id, from_ts, to_ts)?;
    if fixes.is_empty() {
        let what = if req.from.is_some() || req.to.is_some() {
            "in that window of "
        } else {
            "on "
        };
        // The one no-data wording (`Db::no_data_note`); every day it names is drawn.
        let hint = db
            .no_data_note(v, true, &date.to_string())?
            .unwrap_or_default();
        return Err(Error::new(
            ErrorCode::NoData,
            format!("{} has no fixes {what}{date}", v.plate),
        )
        .with_hint(hint));
    }
    let stops = read::stops_between(db.conn(), v.id, from_ts, to_ts)?;
    let events = read::events_between(
        db.conn(),
        Some(v.id),
        &[EventKind::Speeding, EventKind::SignalLoss],
        from_ts,
        to_ts,
    )?;
    let speeding: Vec<MapSpeeding> = events
        .iter()
        .filter(|e| e.kind == EventKind::Speeding)
        .filter_map(|e| {
            fixes
                .iter()
                .filter(|f| (e.start_ts..=e.end_ts).contains(&f.ts))
                .max_by(|a, b| a.speed_kmh.total_cmp(&b.speed_kmh))
                .map(|f| MapSpeeding {
                    at: LatLon::new(f.lat, f.lon),
                    max_speed_kmh: f.speed_kmh,
                    start_ts: e.start_ts,
                    end_ts: e.end_ts,
                })
        })
        .collect();
    let losses = events
        .iter()
        .filter(|e| e.kind == EventKind::SignalLoss)
        .count();
    let (first, last) = (fixes[0], fixes[fixes.len() - 1]);
    // Counted from the vehicle's last fix before the window, as a day's km are.
    let lead_in = read::fixes_at_or_before(db.conn(), &[v.id], from_ts - 1)?;
    let span: Vec<Fix> = lead_in.into_iter().chain(fixes.iter().copied()).collect();
    let distance = distance::span_distance(&span, &db.thresholds);
    let distance_km = distance.km();
    let max_speed = fixes.iter().map(|f| f.speed_kmh).fold(0.0, f64::max);
    let fix_count = fixes.len();
    let window_text = match (&req.from, &req.to) {
        (None, None) => String::new(),
        (a, b) => format!(
            " {}–{}",
            a.as_deref().unwrap_or("00:00"),
            b.as_deref().unwrap_or("24:00")
        ),
    };
    let places = db
        .places
        .iter()
        .filter(|p| p.source == super::resolve::PlaceSource::Gazetteer)
        .map(|p| crate::geo::Place {
            name: p.name.clone(),
            kind: p.kind.clone(),
            lat: p.lat,
            lon: p.lon,
        })
        .collect();
    let input = MapInput {
        places,
        streets: db.vehicles.iter().any(|(_, route)| route.is_some()),
        title: format!("{} · {}", v.plate, v.driver),
        subtitle: format!(
            "{date}{window_text} · {:.1} km · {} stops · max {:.0} km/h · {}–{}",
            distance_km,
            stops.len(),
            max_speed,
            db.zone.hhmm(first.ts),
            db.zone.hhmm(last.ts)
        ),
        fixes,
        width,
        height,
        gap_s: db.thresholds.signal_loss_s(),
        signal_losses: events
            .iter()
            .filter(|e| e.kind == EventKind::SignalLoss)
            .map(|e| (e.start_ts, e.end_ts))
            .collect(),
        // The vehicle's own limit when it has one (a zone's lower limit shows in
        // the episodes detection found, drawn with their halo).
        speed_limit_kmh: crate::analyze::own_or_fleet_limit(
            read::vehicle_speed_limits(db.conn())?.get(&v.id).copied(),
            db.thresholds.speed_limit_kmh,
        )
        .0,
        stops: stops
            .iter()
            .map(|s| MapStop {
                at: LatLon::new(s.lat, s.lon),
                minutes: s.duration_s() as f64 / 60.0,
            })
            .collect(),
        speeding,
        geofences: db.geofences.clone(),
        first_label: db.zone.hhmm(first.ts),
        last_label: db.zone.hhmm(last.ts),
    };
    // The picture's own figures (its size, zoom and bounds) are filled in when
    // `render::call` draws it.
    let report = RouteMapReport {
        plate: v.plate.clone(),
        driver: v.driver.clone(),
        date: date.to_string(),
        from: req.from.clone(),
        to: req.to.clone(),
        data_now: db.time(db.now_ts),
        first_fix_at: db.time(first.ts),
        last_fix_at: db.time(last.ts),
        fixes: fix_count,
        distance_km: round2(distance_km),
        distance_source: super::DistanceSource::of(&distance),
        odometer_rejected: super::odometer_rejected(&distance),
        stops: stops.len(),
        speeding: input.speeding.len(),
        signal_losses: losses,
        max_speed_kmh: round1(max_speed),
        width,
        height,
        png_bytes: 0,
        zoom: 0.0,
        bounds: Bounds::default(),
        tiles: db.tiles.as_ref().map(TileSource::name),
    };
    super::drawn(report, super::Drawing::Route(input))
}

/// The registry entry.
pub const SPEC: ReportSpec = ReportSpec {
    tool: "route_map",
    cli: "map",
    title: "Map of a vehicle's route on a day",
    description: "Draws one vehicle's route for a local day (or a from–to window of it) as a PNG image: the track \
coloured by speed, stops as circles labelled with minutes, speeding marked, signal losses dashed, depots and zones \
named, start and end with their times. Returns a short summary (km, stops, speeding, first and last fix, the map's \
bounds) and the image. Use it when the user wants to see where a vehicle went; use trip_summary for the numbers. \
A day without fixes is a no_data error that lists the days with data.",
    input: super::schema::derived_input::<RouteMapRequest>,
    rows: "",
    columns: &[],
    run: |db, args| super::invoke_drawing(db, args, run),
    output_schema: super::schema::derived::<RouteMapReport>,
    draws: true,
};
