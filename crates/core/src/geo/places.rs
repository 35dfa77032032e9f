//! Naming a point for people: `in Bodega Mixco` inside a geofence, otherwise
//! `1.2 km NE of Zona 10 (Zona Viva)` after the nearest gazetteer entry. Offline: the
//! gazetteer is the embedded `routes/places.json`.

use super::{LatLon, Shape, atlas, bearing_deg, compass_point, haversine_m};

/// Names points after geofences and the gazetteer.
pub struct Namer {
    geofences: Vec<(String, Shape)>,
    places: Vec<(String, LatLon)>,
}

impl Namer {
    /// A namer over these geofences (name, shape) and the embedded gazetteer.
    pub fn new(geofences: Vec<(String, Shape)>) -> Namer {
        let places = atlas::places()
            .iter()
            .map(|p| (p.name.clone(), LatLon::new(p.lat, p.lon)))
            .collect();
        Namer { geofences, places }
    }

    /// A namer over geofences: specific places (depots, customers) name a point
    /// before broad zones do.
    pub fn for_geofences(geofences: &[super::Geofence]) -> Namer {
        let in_order = |zones: bool| {
            geofences
                .iter()
                .filter(move |g| (g.kind == "zone") == zones)
                .map(|g| (g.name.clone(), g.shape.clone()))
        };
        Namer::new(in_order(false).chain(in_order(true)).collect())
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
    /// geofences.
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
        let namer = Namer::new(vec![("Test Depot".into(), depot)]);
        assert_eq!(namer.name(LatLon::new(14.5, -90.6)), "in Test Depot");
        let Some(first) = atlas::places().first() else {
            return;
        };
        let at = LatLon::new(first.lat, first.lon);
        let p = offset_m(at, 0.0, 1200.0);
        let (name, _, _) = namer.nearest_place(p).unwrap();
        let text = namer.name(p);
        assert!(text.ends_with(&format!("of {name}")), "{text}");
        assert!(text.contains(" km "), "{text}");
    }
}
