//! Naming a point for people: `in Bodega Mixco` inside a geofence, otherwise
//! `1.2 km NE of Zona 10 (Zona Viva)` after the nearest known place, otherwise (no
//! place within 25 km) its coordinates. Offline: the places are the database's own
//! (the demo's gazetteer, or a fleet's from `fleetctl places import`).

use super::{LatLon, Place, Shape, bearing_deg, compass_point, haversine_m};

/// A point farther than this from every known place is named by its coordinates.
pub const NEAR_PLACE_M: f64 = 25_000.0;

/// Names points after geofences and the gazetteer.
pub struct Namer {
    geofences: Vec<(String, Shape)>,
    /// By latitude, so that only a band of them is searched.
    places: Vec<(String, LatLon)>,
}

/// Metres in a degree of latitude, rounded down (it is 110 574 m at the equator and
/// more towards the poles): a band this wide in degrees holds every place within a
/// given distance.
const MIN_METRES_PER_DEGREE_LAT: f64 = 110_500.0;

impl Namer {
    /// A namer over these geofences (name, shape) and places.
    pub fn new(geofences: Vec<(String, Shape)>, places: &[Place]) -> Namer {
        let mut places: Vec<(String, LatLon)> = places
            .iter()
            .map(|p| (p.name.clone(), LatLon::new(p.lat, p.lon)))
            .collect();
        places.sort_by(|a, b| a.1.lat.total_cmp(&b.1.lat));
        Namer { geofences, places }
    }

    /// A namer over geofences and places: specific geofences (depots, customers)
    /// name a point before broad zones do.
    pub fn for_geofences(geofences: &[super::Geofence], places: &[Place]) -> Namer {
        let in_order = |zones: bool| {
            geofences
                .iter()
                .filter(move |g| (g.kind == "zone") == zones)
                .map(|g| (g.name.clone(), g.shape.clone()))
        };
        Namer::new(in_order(false).chain(in_order(true)).collect(), places)
    }

    /// The geofences this namer knows.
    pub fn geofences(&self) -> &[(String, Shape)] {
        &self.geofences
    }

    /// The nearest gazetteer entry within [`NEAR_PLACE_M`], and its distance in
    /// metres. Fast on a large gazetteer (GeoNames' cities1000 has 150 000 entries):
    /// only the band of latitudes within reach is searched, ranked by a flat-earth
    /// distance (no trigonometry per place), and the great-circle distance computed
    /// for the few that come within 5 % of the best, so that the answer is the
    /// great-circle nearest.
    pub fn nearest_place(&self, p: LatLon) -> Option<(&str, LatLon, f64)> {
        let band_deg = NEAR_PLACE_M / MIN_METRES_PER_DEGREE_LAT;
        let lo = self
            .places
            .partition_point(|(_, at)| at.lat < p.lat - band_deg);
        let hi = self
            .places
            .partition_point(|(_, at)| at.lat <= p.lat + band_deg);
        let candidates = &self.places[lo..hi];
        let lon_scale = p.lat.to_radians().cos();
        let flat = |at: LatLon| {
            // Across the antimeridian, the short way round.
            let dlon = match at.lon - p.lon {
                d if d > 180.0 => d - 360.0,
                d if d < -180.0 => d + 360.0,
                d => d,
            };
            let (dy, dx) = (at.lat - p.lat, dlon * lon_scale);
            dy * dy + dx * dx
        };
        let best = candidates
            .iter()
            .map(|(_, at)| flat(*at))
            .fold(f64::INFINITY, f64::min);
        // 1.1 on squares: within about 5 % in distance.
        let reach = best * 1.1 + 1e-12;
        candidates
            .iter()
            .filter(|(_, at)| flat(*at) <= reach)
            .map(|(name, at)| (name.as_str(), *at, haversine_m(*at, p)))
            .filter(|(_, _, d)| *d <= NEAR_PLACE_M)
            .min_by(|a, b| a.2.total_cmp(&b.2))
    }

    /// `in <geofence>`, or `<km> <compass> of <place>`.
    pub fn name(&self, p: LatLon) -> String {
        // The first geofence holding the point wins: callers list the specific ones
        // (depots, customers) before broad zones.
        let mut inside = self
            .geofences
            .iter()
            .filter(|(_, s)| s.contains(p))
            .map(|(n, _)| n.as_str());
        if let Some(first) = inside.next() {
            return format!("in {first}");
        }
        self.relative(p)
    }

    /// `<km> <compass> of <nearest place>` (`at <place>` within 100 m), ignoring
    /// geofences; the coordinates when no place is within 25 km.
    pub fn relative(&self, p: LatLon) -> String {
        match self.nearest_place(p) {
            Some((name, _, d)) if d < 100.0 => format!("at {name}"),
            Some((name, at, d)) => format!(
                "{:.1} km {} of {name}",
                d / 1000.0,
                compass_point(bearing_deg(at, p))
            ),
            None => format!("{:.5}, {:.5}", p.lat, p.lon),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::geo::offset_m;

    #[test]
    fn names_inside_a_geofence_then_after_the_nearest_place() {
        let depot = Shape::Circle {
            center: LatLon::new(14.5, -90.6),
            radius_m: 200.0,
        };
        let places = crate::geo::atlas::places();
        let namer = Namer::new(vec![("Test Depot".into(), depot)], places);
        assert_eq!(namer.name(LatLon::new(14.5, -90.6)), "in Test Depot");
        let first = &places[0];
        let at = LatLon::new(first.lat, first.lon);
        let p = offset_m(at, 0.0, 1200.0);
        let (name, _, _) = namer.nearest_place(p).unwrap();
        let text = namer.name(p);
        assert!(text.ends_with(&format!("of {name}")), "{text}");
        assert!(text.contains(" km "), "{text}");
        // Far from every place (London, seen from Guatemala's gazetteer): coordinates.
        assert_eq!(namer.name(LatLon::new(51.5, -0.12)), "51.50000, -0.12000");
        assert_eq!(
            Namer::new(vec![], &[]).name(LatLon::new(14.6, -90.5)),
            "14.60000, -90.50000"
        );
    }

    #[test]
    fn the_nearest_place_is_the_great_circle_nearest_anywhere() {
        // A grid of places from the equator to the Arctic and across the
        // antimeridian; points between them: the banded search agrees with a
        // great-circle distance to every place.
        let mut places = Vec::new();
        for i in 0..60 {
            for j in 0..40 {
                let (lat, lon) = (
                    -5.0 + i as f64 * 1.37 + j as f64 * 0.011,
                    179.0 - j as f64 * 0.097,
                );
                let lon = if j % 7 == 0 {
                    -179.9 + j as f64 * 0.003
                } else {
                    lon
                };
                places.push(Place {
                    name: format!("p{i}-{j}"),
                    kind: "city".to_string(),
                    lat,
                    lon,
                });
            }
        }
        let namer = Namer::new(vec![], &places);
        let mut named = 0;
        for k in 0..3000 {
            let p = LatLon::new(-5.5 + k as f64 * 0.0277, 178.5 + (k % 97) as f64 * 0.0171);
            let p = LatLon::new(p.lat, if p.lon > 180.0 { p.lon - 360.0 } else { p.lon });
            let brute = places
                .iter()
                .map(|q| (q.name.as_str(), haversine_m(LatLon::new(q.lat, q.lon), p)))
                .filter(|(_, d)| *d <= NEAR_PLACE_M)
                .min_by(|a, b| a.1.total_cmp(&b.1));
            let found = namer.nearest_place(p).map(|(name, _, d)| (name, d));
            assert_eq!(found, brute, "at {p:?}");
            named += usize::from(found.is_some());
        }
        assert!(named > 600, "only {named} of the points near a place");
    }
}
