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
    places: Vec<(String, LatLon)>,
}

impl Namer {
    /// A namer over these geofences (name, shape) and places.
    pub fn new(geofences: Vec<(String, Shape)>, places: &[Place]) -> Namer {
        let places = places
            .iter()
            .map(|p| (p.name.clone(), LatLon::new(p.lat, p.lon)))
            .collect();
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

    /// The nearest gazetteer entry and its distance in metres.
    pub fn nearest_place(&self, p: LatLon) -> Option<(&str, LatLon, f64)> {
        self.places
            .iter()
            .map(|(name, at)| (name.as_str(), *at, haversine_m(*at, p)))
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
            Some((name, at, d)) if d <= NEAR_PLACE_M => format!(
                "{:.1} km {} of {name}",
                d / 1000.0,
                compass_point(bearing_deg(at, p))
            ),
            _ => format!("{:.5}, {:.5}", p.lat, p.lon),
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
}
