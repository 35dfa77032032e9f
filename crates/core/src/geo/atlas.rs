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
    /// A speed limit inside it, km/h.
    #[serde(default)]
    pub speed_limit_kmh: Option<f64>,
}

pub use super::Place;

const ROUTE_FILES: &[&str] = &[
    include_str!("../../../../routes/mixco-san-cristobal.json"),
    include_str!("../../../../routes/mixco-zona1.json"),
    include_str!("../../../../routes/pinula-fraijanes.json"),
    include_str!("../../../../routes/pinula-zona10-americas.json"),
    include_str!("../../../../routes/zona12-villa-nueva.json"),
    include_str!("../../../../routes/zona12-zona9-zona5.json"),
    include_str!("../../../../routes/zona18-atlantida-paraiso.json"),
    include_str!("../../../../routes/zona18-zona1-calle-marti.json"),
    include_str!("../../../../routes/zona7-calzada-san-juan-mixco.json"),
    include_str!("../../../../routes/zona7-trebol-avenida-elena.json"),
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
        serde_json::from_str(include_str!("../../../../routes/geofences.json"))
            .expect("embedded geofences are checked by tests")
    })
}

/// The embedded gazetteer.
pub fn places() -> &'static [Place] {
    static PLACES: OnceLock<Vec<Place>> = OnceLock::new();
    PLACES.get_or_init(|| {
        serde_json::from_str(include_str!("../../../../routes/places.json"))
            .expect("embedded places are checked by tests")
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::geo::{LatLon, Shape, decode_polyline, haversine_m};
    use std::collections::HashSet;

    #[test]
    fn the_embedded_routes_are_closed_dense_loops_from_a_depot() {
        assert!(routes().len() >= 10);
        let shapes: Vec<(&GeofenceDef, Shape)> = geofences()
            .iter()
            .map(|g| (g, Shape::from_wkt(&g.wkt, g.radius_m).unwrap()))
            .collect();
        for r in routes() {
            let pts = decode_polyline(&r.polyline).unwrap();
            assert_eq!(pts.first(), pts.last(), "{} is a loop", r.slug);
            let max_gap = pts
                .windows(2)
                .map(|w| haversine_m(w[0], w[1]))
                .fold(0.0, f64::max);
            assert!(
                max_gap <= 100.0,
                "{}: vertices {max_gap:.0} m apart",
                r.slug
            );
            let (depot, shape) = shapes
                .iter()
                .find(|(g, _)| g.name == r.depot)
                .expect("the depot is a geofence");
            assert!(matches!(
                depot.kind.as_str(),
                "depot" | "distribution_center"
            ));
            assert!(
                shape.contains(pts[0]),
                "{} starts inside {}",
                r.slug,
                r.depot
            );
            let length_km: f64 =
                pts.windows(2).map(|w| haversine_m(w[0], w[1])).sum::<f64>() / 1000.0;
            assert!(
                (12.0..=45.0).contains(&length_km),
                "{}: {length_km:.1} km",
                r.slug
            );
            assert!((4..=8).contains(&r.stops.len()));
            // Stops further apart than the 200 m stop radius (with room for GPS noise),
            // so two normal dwells never merge into one long stop.
            for w in r.stops.windows(2) {
                let d = haversine_m(
                    LatLon::new(w[0].lat, w[0].lon),
                    LatLon::new(w[1].lat, w[1].lon),
                );
                assert!(
                    d >= 300.0,
                    "{}: {} and {} are {d:.0} m apart",
                    r.slug,
                    w[0].name,
                    w[1].name
                );
            }
        }
    }

    #[test]
    fn geofences_and_places_are_complete_and_unique() {
        let g = geofences();
        assert!(g.len() >= 6);
        assert_eq!(
            g.iter()
                .filter(|g| matches!(g.kind.as_str(), "depot" | "distribution_center"))
                .count(),
            5
        );
        assert!(g.iter().any(|g| g.name == "Centro Histórico"));
        assert!(g.iter().any(|g| g.radius_m.is_some()), "a circle");
        assert!(
            g.iter().any(|g| g.wkt.matches(',').count() >= 5),
            "a non-rectangular polygon"
        );
        let names: HashSet<&str> = g.iter().map(|g| g.name.as_str()).collect();
        assert_eq!(names.len(), g.len());
        let p = places();
        assert!(p.len() >= 40);
        let names: HashSet<&str> = p.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names.len(), p.len());
        assert!(
            p.iter()
                .all(|p| (14.4..14.8).contains(&p.lat) && (-90.7..-90.3).contains(&p.lon))
        );
    }
}
