//! `nearest_vehicles` (`fleetctl query nearest PLACE`): the dispatcher's "who is
//! closest to Bodega Mixco?" — vehicles ranked by straight-line distance from their
//! last fix to a place resolved by name (or to given coordinates).

use super::resolve::ResolvedPlace;
use super::{Db, List, ReportSpec, round1, round2};
use crate::error::{Error, Result};
use crate::geo::{LatLon, bearing_deg, compass_point, haversine_m};
use crate::store::read;
use serde::{Deserialize, Serialize};

/// A place by name, or a point.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NearestVehiclesRequest {
    /// Place name, e.g. "Bodega Mixco" or "Zona 10" (or give --lat and --lon)
    #[schemars(extend("x-kind" = "text", "x-positional" = true, "x-conflicts" = "lat"))]
    pub place: Option<String>,
    /// Latitude, only with --lon
    #[schemars(range(min = -90.0, max = 90.0), extend("x-pair" = "lon"))]
    pub lat: Option<f64>,
    /// Longitude, only with --lat
    #[schemars(range(min = -180.0, max = 180.0), extend("x-pair" = "lat"))]
    pub lon: Option<f64>,
    /// How many vehicles (default 5)
    #[schemars(range(min = 1, max = 50))]
    pub limit: Option<i64>,
}

/// One vehicle and how far it is.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct NearestRow {
    /// 1 for the closest.
    pub rank: usize,
    /// Plate.
    pub plate: String,
    /// Driver.
    pub driver: String,
    /// Straight-line distance from the place to the last fix, km.
    pub distance_km: f64,
    /// Where the vehicle is, seen from the place (compass point).
    pub direction: &'static str,
    /// `moving`, `idle`, `parked` or `offline`.
    pub state: super::vehicle_position::LiveState,
    /// Where the vehicle is, for people.
    pub vehicle_place: String,
    /// Time of the last fix.
    pub last_fix_at: String,
    /// Minutes from the last fix to the data clock.
    pub minutes_since_fix: f64,
    /// Seconds from the last fix to the data clock.
    pub last_fix_age_s: i64,
}

/// The ranking.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct NearestVehiclesReport {
    /// What was asked for.
    pub query: String,
    /// The place chosen for it (say which, aloud).
    pub place: ResolvedPlace,
    /// The data clock.
    pub data_now: String,
    /// Vehicles with a known position, closest first, up to `limit` (`total` counts them all).
    pub vehicles: List<NearestRow>,
}

/// Runs the report.
pub fn run(db: &Db, req: &NearestVehiclesRequest) -> Result<NearestVehiclesReport> {
    let (query, place) = match (&req.place, req.lat, req.lon) {
        (Some(name), None, None) => (name.clone(), db.resolve_place(name)?),
        (None, Some(lat), Some(lon)) => {
            let p = LatLon::new(lat, lon);
            let name = format!("{lat:.5}, {lon:.5} ({})", db.place(lat, lon));
            (
                format!("{lat}, {lon}"),
                ResolvedPlace {
                    name,
                    kind: "point".into(),
                    source: super::resolve::PlaceSource::Coordinates,
                    lat: p.lat,
                    lon: p.lon,
                },
            )
        }
        _ => {
            return Err(Error::invalid("give either place, or lat and lon together")
                .with_hint("e.g. place=\"Bodega Mixco\", or lat=14.6 and lon=-90.5"));
        }
    };
    let limit = req.limit.unwrap_or(5).clamp(1, 50) as usize;
    let mut rows: Vec<(NearestRow, crate::model::Fix)> = Vec::new();
    let stops = read::ongoing_stops(db.conn())?;
    for fix in read::last_fixes(db.conn())? {
        let v = db.vehicle_of(fix.vehicle_id)?;
        let at = LatLon::new(fix.lat, fix.lon);
        let in_stop = stops.get(&v.id).is_some_and(|s| s.end_ts == fix.ts);
        let (state, _) = super::vehicle_position::state_of(db, &fix, in_stop);
        let row = NearestRow {
            rank: 0,
            plate: v.plate.clone(),
            driver: v.driver.clone(),
            distance_km: round2(haversine_m(place.point(), at) / 1000.0),
            direction: compass_point(bearing_deg(place.point(), at)),
            state,
            // Named below, for the rows that are kept.
            vehicle_place: String::new(),
            last_fix_at: db.time(fix.ts),
            minutes_since_fix: round1((db.now_ts - fix.ts) as f64 / 60.0),
            last_fix_age_s: db.now_ts - fix.ts,
        };
        rows.push((row, fix));
    }
    rows.sort_by(|(a, _), (b, _)| {
        a.distance_km
            .total_cmp(&b.distance_km)
            .then_with(|| a.plate.cmp(&b.plate))
    });
    let total = rows.len();
    rows.truncate(limit);
    let rows: Vec<NearestRow> = rows
        .into_iter()
        .enumerate()
        .map(|(i, (mut r, fix))| {
            r.rank = i + 1;
            // A vehicle in a stop is named as the stop is everywhere else.
            r.vehicle_place = match stops.get(&fix.vehicle_id) {
                Some(s) if s.end_ts == fix.ts => s.place.clone(),
                _ => db.place(fix.lat, fix.lon),
            };
            r
        })
        .collect();
    Ok(NearestVehiclesReport {
        query,
        place,
        data_now: db.time(db.now_ts),
        // `total` counts every vehicle with a position; `truncated` says `limit` cut it.
        vehicles: List {
            total,
            truncated: total > rows.len(),
            items: rows,
        },
    })
}

/// The registry entry.
pub const SPEC: ReportSpec = ReportSpec {
    tool: "nearest_vehicles",
    cli: "nearest",
    title: "Vehicles closest to a place",
    description: "Vehicles ranked by straight-line distance (km) from their last known position to a place, \
with direction (the compass point from the place to the vehicle), state (moving, idle, parked, offline; idle \
and parked include standing for less than a stop's minimum, 3 minutes by default, which stopped_vehicles does not \
list) and where each one is. Give the place by name — a depot, \
customer zone, zone (\"Zona 10\"), neighbourhood or landmark — and the server resolves it and returns which place \
it chose (say it aloud); an ambiguous name returns the candidates. Give lat and lon together only for a point \
that has no name; never invent coordinates. Use it for dispatch: 'who is closest to Bodega Mixco?'.",
    input: super::schema::derived_input::<NearestVehiclesRequest>,
    rows: "vehicles",
    columns: &[(
        "vehicles",
        &[
            "rank",
            "plate",
            "driver",
            "distance_km",
            "direction",
            "state",
            "vehicle_place",
            "minutes_since_fix",
        ],
    )],
    run: |db, args| super::invoke(db, args, run),
    output_schema: super::schema::derived::<NearestVehiclesReport>,
    draws: false,
};
