//! The hand-authored map data embedded in the binary: delivery routes, geofences and
//! the offline gazetteer (see `routes/README.md` for how they were made).
//!
//! Embedding keeps `fleetctl` a single file that works anywhere, with no network and
//! no data folder to install.

use serde::Deserialize;
use std::sync::OnceLock;

/// A named point on a route (a customer stop).
#[derive(Debug, Clone, Deserialize)]
pub struct RouteStop {
    /// The customer's name.
    pub name: String,
    /// Latitude, degrees.
    pub lat: f64,
    /// Longitude, degrees.
    pub lon: f64,
}

/// A delivery route: a closed loop from a depot through named stops and back.
#[derive(Debug, Clone, Deserialize)]
pub struct Route {
    /// Short identifier, e.g. `mixco-roosevelt`.
    pub slug: String,
    /// Name for people.
    pub name: String,
    /// Name of the depot geofence the loop starts and ends in.
    pub depot: String,
    /// The stops, in driving order.
    pub stops: Vec<RouteStop>,
    /// Loop length, km (as authored).
    pub length_km: f64,
    /// The path, Google encoded polyline, precision 5.
    pub polyline: String,
}

/// A geofence as authored in `routes/geofences.json`.
#[derive(Debug, Clone, Deserialize)]
pub struct GeofenceDef {
    /// Unique name.
    pub name: String,
    /// `depot`, `distribution_center`, `zone` or `customer_zone`.
    pub kind: String,
    /// WKT, lon lat order.
    pub wkt: String,
    /// Radius in metres, for a circle (`POINT`).
    #[serde(default)]
    pub radius_m: Option<f64>,
}

/// An entry of the offline gazetteer.
#[derive(Debug, Clone, Deserialize)]
pub struct Place {
    /// Name for people, e.g. `Zona 10 (Oakland)`.
    pub name: String,
    /// `zone`, `neighbourhood`, `landmark`, `municipality` or `depot`.
    pub kind: String,
    /// Latitude, degrees.
    pub lat: f64,
    /// Longitude, degrees.
    pub lon: f64,
}

const ROUTE_FILES: &[&str] = &[
    include_str!("../../routes/mixco-san-cristobal.json"),
    include_str!("../../routes/mixco-zona1.json"),
    include_str!("../../routes/pinula-fraijanes.json"),
    include_str!("../../routes/pinula-zona10-americas.json"),
    include_str!("../../routes/zona12-villa-nueva.json"),
    include_str!("../../routes/zona12-zona9-zona5.json"),
    include_str!("../../routes/zona18-atlantida-paraiso.json"),
    include_str!("../../routes/zona18-zona1-calle-marti.json"),
    include_str!("../../routes/zona7-calzada-san-juan-mixco.json"),
    include_str!("../../routes/zona7-trebol-avenida-elena.json"),
];

/// The embedded routes, in a fixed order.
pub fn routes() -> &'static [Route] {
    static ROUTES: OnceLock<Vec<Route>> = OnceLock::new();
    ROUTES.get_or_init(|| {
        ROUTE_FILES
            .iter()
            .map(|text| {
                serde_json::from_str(text).expect("embedded route files are checked by tests")
            })
            .collect()
    })
}

/// The embedded geofences.
pub fn geofences() -> &'static [GeofenceDef] {
    static GEOFENCES: OnceLock<Vec<GeofenceDef>> = OnceLock::new();
    GEOFENCES.get_or_init(|| {
        serde_json::from_str(include_str!("../../routes/geofences.json"))
            .expect("embedded geofences are checked by tests")
    })
}

/// The embedded gazetteer.
pub fn places() -> &'static [Place] {
    static PLACES: OnceLock<Vec<Place>> = OnceLock::new();
    PLACES.get_or_init(|| {
        serde_json::from_str(include_str!("../../routes/places.json"))
            .expect("embedded places are checked by tests")
    })
}
