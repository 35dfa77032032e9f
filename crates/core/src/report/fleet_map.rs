//! `fleet_map` (`fleetctl map --fleet [--at TIME]`): every vehicle where it was at the
//! data clock (or at a given local time), coloured by what it was doing — moving,
//! idle, parked or offline — on the same offline basemap as the route map. The
//! domain works out each vehicle's position and state at that instant and gathers
//! what to draw (`FleetMapInput`); `render::fleet` draws it.

use super::route_map::{Bounds, TileSource};
use super::vehicle_position::{LiveState, PositionState};
use super::{Answer, Db, List, ReportSpec, round1};
use crate::error::{Error, ErrorCode, Result};
use crate::geo::LatLon;
use crate::store::read;
use serde::{Deserialize, Serialize};

/// A vehicle to draw.
#[derive(Debug, Clone, PartialEq)]
pub struct FleetMapVehicle {
    /// Plate, its label.
    pub plate: String,
    /// Where it was: its last fix by then.
    pub at: LatLon,
    /// What it was doing: its colour.
    pub state: LiveState,
    /// Heading when moving, degrees clockwise from north.
    pub heading_deg: Option<f64>,
}

/// Everything a fleet map shows: the data `render::fleet` draws.
#[derive(Debug, Clone, PartialEq)]
pub struct FleetMapInput {
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// First title line (the instant).
    pub title: String,
    /// Second title line (counts by state).
    pub subtitle: String,
    /// The vehicles with a position at that instant.
    pub vehicles: Vec<FleetMapVehicle>,
    /// Geofences (name, kind, shape).
    pub geofences: Vec<crate::geo::Geofence>,
    /// The database's places, labelled on the plain basemap.
    pub places: Vec<crate::geo::Place>,
    /// Draw the demo's streets: only under the demo fleet.
    pub streets: bool,
    /// The points the picture is framed on: the vehicles less those far from the
    /// rest (`outside_picture`).
    pub frame: Vec<LatLon>,
}

/// Which instant, and how big.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FleetMapRequest {
    /// The instant to show, local time: YYYY-MM-DDTHH:MM, or HH:MM for today (default: the data clock)
    #[schemars(extend("x-kind" = "datetime"))]
    pub at: Option<String>,
    /// Image width in pixels, 320–2048 (default 1024)
    #[schemars(range(min = super::route_map::MIN_SIZE_PX, max = super::route_map::MAX_SIZE_PX))]
    pub width: Option<u32>,
    /// Image height in pixels, 320–2048 (default 768)
    #[schemars(range(min = super::route_map::MIN_SIZE_PX, max = super::route_map::MAX_SIZE_PX))]
    pub height: Option<u32>,
}

/// One vehicle at the instant.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct FleetVehicle {
    /// Plate.
    pub plate: String,
    /// Driver.
    pub driver: String,
    /// `moving` (5 km/h or faster at its last fix), `idle` (slower, engine on),
    /// `parked` (slower, engine off or not reported; its last fix at most 72 hours
    /// old), `offline` (no fix for over 10 minutes by then, or over 72 hours when
    /// parked), `inactive` (out of service) or `no_data` (no fix yet by then).
    pub state: PositionState,
    /// Latitude of that fix; null without a position.
    pub lat: Option<f64>,
    /// Longitude.
    pub lon: Option<f64>,
    /// Its last fix at or before the instant.
    pub last_fix_at: Option<String>,
    /// Minutes from that fix to the instant.
    pub minutes_since_fix: Option<f64>,
    /// Seconds from that fix to the instant.
    pub last_fix_age_s: Option<i64>,
    /// Speed at that fix, km/h.
    pub speed_kmh: Option<f64>,
    /// Where, for people.
    pub place: Option<String>,
}

/// How many vehicles were in each state.
#[derive(Debug, Clone, Default, Serialize, schemars::JsonSchema)]
pub struct StateCounts {
    /// Driving.
    pub moving: usize,
    /// Stopped, engine on.
    pub idle: usize,
    /// Stopped, engine off or not reported.
    pub parked: usize,
    /// Not parked at its last fix, over 10 minutes old by then (drawn at the last
    /// position known).
    pub offline: usize,
    /// Out of service: never drawn.
    pub inactive: usize,
    /// In service but without a fix by then: not drawn.
    pub no_data: usize,
}

impl StateCounts {
    fn add(&mut self, state: PositionState) {
        *match state {
            PositionState::Moving => &mut self.moving,
            PositionState::Idle => &mut self.idle,
            PositionState::Parked => &mut self.parked,
            PositionState::Offline => &mut self.offline,
            PositionState::Inactive => &mut self.inactive,
            PositionState::NoData => &mut self.no_data,
        } += 1;
    }
}

/// What the fleet map shows.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct FleetMapReport {
    /// The instant drawn.
    pub at: String,
    /// The data clock ("now").
    pub data_now: String,
    /// Vehicles in the fleet.
    pub vehicles_total: usize,
    /// Vehicles drawn (those with a position by then).
    pub drawn: usize,
    /// Vehicles by state.
    pub counts: StateCounts,
    /// Every vehicle, by plate.
    pub vehicles: List<FleetVehicle>,
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
    /// Vehicles too far from the rest of the fleet to frame with it (a tracker in
    /// another city, a bad fix): not in the picture, said here with where they are.
    pub outside_picture: Vec<OutsidePicture>,
}

/// A vehicle left out of the picture's frame.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct OutsidePicture {
    /// Plate.
    pub plate: String,
    /// Straight-line km from the middle of the fleet.
    pub distance_km: f64,
    /// Compass point from the middle of the fleet to it.
    pub direction: &'static str,
    /// Where it is, for people.
    pub place: String,
}

/// A vehicle is left out of the frame when it lies farther from the fleet's middle
/// (the median latitude and longitude) than this many times the distance within
/// which four fifths of the fleet lie…
const OUTLIER_FACTOR: f64 = 5.0;
/// …and farther than this, km: a fleet spread over a city is framed whole.
const OUTLIER_MIN_KM: f64 = 25.0;

/// Splits the vehicles into those the picture frames and those far from the rest:
/// the middle of the fleet is the median position; a vehicle over `OUTLIER_FACTOR`
/// times the 80th-percentile distance from it (and over `OUTLIER_MIN_KM`) is left
/// out, so that one vehicle 250 km away does not shrink the other 52 to a dot.
fn frame_split(vehicles: &[FleetMapVehicle]) -> (LatLon, Vec<usize>, Vec<usize>) {
    let median = |mut xs: Vec<f64>| {
        xs.sort_by(f64::total_cmp);
        xs[xs.len() / 2]
    };
    let middle = LatLon::new(
        median(vehicles.iter().map(|v| v.at.lat).collect()),
        median(vehicles.iter().map(|v| v.at.lon).collect()),
    );
    let km: Vec<f64> = vehicles
        .iter()
        .map(|v| crate::geo::haversine_m(middle, v.at) / 1000.0)
        .collect();
    let mut sorted = km.clone();
    sorted.sort_by(f64::total_cmp);
    let p80 = sorted[(sorted.len() * 4 / 5).min(sorted.len() - 1)];
    let limit_km = (OUTLIER_FACTOR * p80).max(OUTLIER_MIN_KM);
    let (inside, outside) = (0..vehicles.len()).partition(|&k| km[k] <= limit_km);
    (middle, inside, outside)
}

/// The map's summary and the data to draw it from (`render::call` draws the PNG).
pub fn run(db: &Db, req: &FleetMapRequest) -> Result<Answer> {
    let at_ts = db.resolve_time(req.at.as_deref())?;
    if at_ts > db.now_ts {
        return Err(Error::invalid(format!(
            "at {} is after the data clock {}",
            db.time(at_ts),
            db.time(db.now_ts)
        ))
        .with_hint("the data ends at the data clock: leave at out to see the fleet then"));
    }
    let (width, height) = (req.width.unwrap_or(1024), req.height.unwrap_or(768));
    let ids: Vec<i64> = db.vehicles.iter().map(|(v, _)| v.id).collect();
    let fixes = read::fixes_at_or_before(db.conn(), &ids, at_ts)?;
    if fixes.is_empty() {
        let hint = match db.data_dates()? {
            Some((from, to)) => format!("the fleet has data from {from} to {to}"),
            None => "this database has no positions".to_string(),
        };
        return Err(Error::new(
            ErrorCode::NoData,
            format!("no vehicle has a position at or before {}", db.time(at_ts)),
        )
        .with_hint(hint));
    }
    let by_vehicle: std::collections::HashMap<i64, &crate::model::Fix> =
        fixes.iter().map(|f| (f.vehicle_id, f)).collect();
    let mut rows = Vec::with_capacity(db.vehicles.len());
    let mut drawn = Vec::with_capacity(fixes.len());
    let mut counts = StateCounts::default();
    for (v, _) in &db.vehicles {
        let Some(fix) = by_vehicle.get(&v.id) else {
            let state = if v.active {
                PositionState::NoData
            } else {
                PositionState::Inactive
            };
            counts.add(state);
            rows.push(FleetVehicle {
                plate: v.plate.clone(),
                driver: v.driver.clone(),
                state,
                lat: None,
                lon: None,
                last_fix_at: None,
                minutes_since_fix: None,
                last_fix_age_s: None,
                speed_kmh: None,
                place: None,
            });
            continue;
        };
        // vehicle_position's rule, at this instant.
        let stop = read::stop_containing(db.conn(), v.id, fix.ts)?;
        let (state, _) = super::vehicle_position::state_rule(fix, stop.is_some(), at_ts);
        // Where, as vehicle_position gives it: the fix, named after the stop when
        // standing still (the place every other report gives for the stop).
        let (lat, lon) = (fix.lat, fix.lon);
        let place = stop
            .as_ref()
            .map_or_else(|| db.place(lat, lon), |s| s.place.clone());
        counts.add(state.into());
        drawn.push(FleetMapVehicle {
            plate: v.plate.clone(),
            at: LatLon::new(lat, lon),
            state,
            heading_deg: fix.heading_deg.filter(|_| state == LiveState::Moving),
        });
        rows.push(FleetVehicle {
            plate: v.plate.clone(),
            driver: v.driver.clone(),
            state: state.into(),
            lat: Some(lat),
            lon: Some(lon),
            last_fix_at: Some(db.time(fix.ts)),
            minutes_since_fix: Some(round1((at_ts - fix.ts) as f64 / 60.0)),
            last_fix_age_s: Some(at_ts - fix.ts),
            speed_kmh: Some(round1(fix.speed_kmh)),
            place: Some(place),
        });
    }
    rows.sort_by(|a, b| a.plate.cmp(&b.plate));
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
    let when = format!("{} {}", db.zone.local_date(at_ts), db.zone.hhmm(at_ts));
    let (frame, outside_picture) = if drawn.is_empty() {
        (Vec::new(), Vec::new())
    } else {
        let (middle, inside, outside) = frame_split(&drawn);
        let mut far: Vec<OutsidePicture> = outside
            .iter()
            .map(|&k| {
                let v = &drawn[k];
                OutsidePicture {
                    plate: v.plate.clone(),
                    distance_km: super::round2(crate::geo::haversine_m(middle, v.at) / 1000.0),
                    direction: crate::geo::compass_point(crate::geo::bearing_deg(middle, v.at)),
                    place: db.place(v.at.lat, v.at.lon),
                }
            })
            .collect();
        far.sort_by(|a, b| a.plate.cmp(&b.plate));
        (inside.iter().map(|&k| drawn[k].at).collect(), far)
    };
    let input = FleetMapInput {
        width,
        height,
        title: if at_ts == db.now_ts {
            format!("Fleet at {when} (data clock)")
        } else {
            format!("Fleet at {when}")
        },
        subtitle: format!(
            "{} vehicles shown · {} moving · {} idle · {} parked · {} offline{}",
            drawn.len() - outside_picture.len(),
            counts.moving,
            counts.idle,
            counts.parked,
            counts.offline,
            match outside_picture.len() {
                0 => String::new(),
                n => format!(" · {n} far from the rest, not in the picture"),
            }
        ),
        vehicles: drawn,
        geofences: db.geofences.clone(),
        places,
        streets: db.vehicles.iter().any(|(_, route)| route.is_some()),
        frame,
    };
    // The picture's own figures (its size, zoom and bounds) are filled in when
    // `render::call` draws it.
    let report = FleetMapReport {
        at: db.time(at_ts),
        data_now: db.time(db.now_ts),
        vehicles_total: db.vehicles.len(),
        drawn: input.vehicles.len(),
        counts,
        vehicles: List::capped(rows),
        width,
        height,
        png_bytes: 0,
        zoom: 0.0,
        bounds: Bounds::default(),
        tiles: db.tiles.as_ref().map(TileSource::name),
        outside_picture,
    };
    super::drawn(report, super::Drawing::Fleet(input))
}

/// The registry entry.
pub const SPEC: ReportSpec = ReportSpec {
    tool: "fleet_map",
    cli: "map --fleet",
    title: "Map of the whole fleet at an instant",
    description: "Draws every vehicle where it was at the data clock (or at `at`, a local time YYYY-MM-DDTHH:MM, or \
HH:MM for today) as a PNG map: a dot per vehicle labelled with its plate and coloured by state — moving, idle \
(stopped, engine on), parked (stopped, engine off or not reported), offline (no fix for over 10 minutes by then, \
or over 72 hours when parked; drawn at its last position); idle and parked include vehicles standing for less than \
a stop's minimum (3 minutes by default), which stopped_vehicles does not list — over the offline basemap with depots and zones named, and a legend. Returns the \
counts by state and every vehicle (plate, state, lat, lon, last fix, place) with the image; a vehicle far from \
the rest of the fleet (over 5 times the distance that holds four fifths of it, and over 25 km) is left out of the \
frame and listed in outside_picture with its distance, direction and place. Use it to see where \
the fleet is or was at a moment; use vehicle_position for one vehicle, stopped_vehicles to list who is stopped, \
nearest_vehicles to dispatch. An instant before any data is a no_data error naming the dates with data.",
    input: super::schema::derived_input::<FleetMapRequest>,
    rows: "vehicles",
    columns: &[],
    run: |db, args| super::invoke_drawing(db, args, run),
    output_schema: super::schema::derived::<FleetMapReport>,
    draws: true,
};
