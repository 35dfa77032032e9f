//! Pure geometry on the Earth's surface, with no I/O: distances, bearings, small
//! offsets in metres, geofence shapes (polygon or circle) and the polyline codec.
//!
//! Everything here works in WGS84 degrees (`lat`, `lon`) and metres. At city scale a
//! local equirectangular approximation is exact to well under a metre, which is what
//! the offset helpers use; distances between fixes use the haversine formula on the
//! mean Earth radius, as docs/definitions.md defines.

pub mod atlas;
pub mod places;

use crate::error::{Error, Result};
use geo::Contains;

/// Mean Earth radius in metres (IUGG), the radius docs/definitions.md gives.
pub const EARTH_RADIUS_M: f64 = 6_371_008.8;

/// A point in WGS84 degrees.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LatLon {
    /// Latitude in degrees, north positive.
    pub lat: f64,
    /// Longitude in degrees, east positive.
    pub lon: f64,
}

impl LatLon {
    /// A point from latitude and longitude in degrees.
    pub const fn new(lat: f64, lon: f64) -> Self {
        LatLon { lat, lon }
    }
}

impl From<LatLon> for geo::Point {
    fn from(p: LatLon) -> geo::Point {
        geo::Point::new(p.lon, p.lat)
    }
}

/// Great-circle distance in metres (haversine, `geo`'s, on the mean Earth radius).
pub fn haversine_m(a: LatLon, b: LatLon) -> f64 {
    use geo::Distance;
    geo::Haversine.distance(geo::Point::from(a), geo::Point::from(b))
}

/// Initial bearing from `a` to `b`, degrees clockwise from north in `[0, 360)`.
pub fn bearing_deg(a: LatLon, b: LatLon) -> f64 {
    use geo::Bearing;
    geo::Haversine
        .bearing(geo::Point::from(a), geo::Point::from(b))
        .rem_euclid(360.0)
}

/// The eight-point compass name of a bearing (`N`, `NE`, … `NW`).
pub fn compass_point(bearing_deg: f64) -> &'static str {
    const POINTS: [&str; 8] = ["N", "NE", "E", "SE", "S", "SW", "W", "NW"];
    POINTS[((bearing_deg.rem_euclid(360.0) + 22.5) / 45.0) as usize % 8]
}

/// The point `east_m` metres east and `north_m` metres north of `p`.
pub fn offset_m(p: LatLon, east_m: f64, north_m: f64) -> LatLon {
    let m_per_deg_lat = EARTH_RADIUS_M.to_radians();
    let m_per_deg_lon = m_per_deg_lat * p.lat.to_radians().cos();
    LatLon::new(
        p.lat + north_m / m_per_deg_lat,
        p.lon + east_m / m_per_deg_lon,
    )
}

/// East and north metres from `origin` to `p` (local tangent plane).
pub fn local_xy_m(origin: LatLon, p: LatLon) -> (f64, f64) {
    let m_per_deg_lat = EARTH_RADIUS_M.to_radians();
    let m_per_deg_lon = m_per_deg_lat * origin.lat.to_radians().cos();
    (
        (p.lon - origin.lon) * m_per_deg_lon,
        (p.lat - origin.lat) * m_per_deg_lat,
    )
}

/// Web Mercator "world pixel" coordinates of a point at a zoom level (256-pixel
/// tiles; zoom may be fractional): x grows east, y grows south.
pub fn web_mercator_px(p: LatLon, zoom: f64) -> (f64, f64) {
    let size = 256.0 * zoom.exp2();
    let lat = p.lat.clamp(-85.051_128_78, 85.051_128_78).to_radians();
    let x = (p.lon + 180.0) / 360.0 * size;
    let y = (1.0 - (lat.tan() + 1.0 / lat.cos()).ln() / std::f64::consts::PI) / 2.0 * size;
    (x, y)
}

/// The point at Web Mercator world pixel `(x, y)` at a zoom level.
pub fn web_mercator_latlon(x: f64, y: f64, zoom: f64) -> LatLon {
    let size = 256.0 * zoom.exp2();
    let lon = x / size * 360.0 - 180.0;
    let n = std::f64::consts::PI * (1.0 - 2.0 * y / size);
    LatLon::new(n.sinh().atan().to_degrees(), lon)
}

/// The sphere radius Web Mercator is defined on (EPSG:3857), metres.
pub const WEB_MERCATOR_RADIUS_M: f64 = 6_378_137.0;

/// Ground metres per Web Mercator pixel at a latitude and zoom.
pub fn web_mercator_m_per_px(lat: f64, zoom: f64) -> f64 {
    2.0 * std::f64::consts::PI * WEB_MERCATOR_RADIUS_M * lat.to_radians().cos()
        / (256.0 * zoom.exp2())
}

/// Decodes a Google encoded polyline of precision 5 into points.
pub fn decode_polyline(encoded: &str) -> Result<Vec<LatLon>> {
    let line = polyline::decode_polyline(encoded, 5)
        .map_err(|e| Error::invalid(format!("bad encoded polyline: {e}")))?;
    Ok(line.coords().map(|c| LatLon::new(c.y, c.x)).collect())
}

/// A named area the fleet is measured against (depot, distribution centre, zone,
/// customer zone): the one geofence type, from the store to detection, the reports
/// and the map.
#[derive(Debug, Clone, PartialEq)]
pub struct Geofence {
    /// Its id in the store.
    pub id: i64,
    /// Unique name, e.g. `Bodega Mixco`.
    pub name: String,
    /// `depot`, `distribution_center`, `zone` or `customer_zone`.
    pub kind: String,
    /// Its area.
    pub shape: Shape,
    /// A speed limit inside it (a school zone), km/h.
    pub speed_limit_kmh: Option<f64>,
}

/// A geofence's area: a polygon (exterior ring, lon/lat) or a circle.
#[derive(Debug, Clone, PartialEq)]
pub enum Shape {
    /// A simple polygon without holes.
    Polygon(geo::Polygon<f64>),
    /// A circle around `center` with radius `radius_m` metres.
    Circle {
        /// The centre.
        center: LatLon,
        /// The radius in metres.
        radius_m: f64,
    },
}

/// A named place: an entry of the demo's gazetteer or of a fleet's own places.
#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
pub struct Place {
    /// Name for people, e.g. `Zona 10 (Zona Viva)`.
    pub name: String,
    /// `zone`, `neighbourhood`, `landmark`, `municipality`, `city`, `depot`, …
    pub kind: String,
    /// Latitude, degrees.
    pub lat: f64,
    /// Longitude, degrees.
    pub lon: f64,
}

impl Shape {
    /// Reads a shape from WKT (`POLYGON((lon lat, …))`, or `POINT(lon lat)` with a
    /// radius in metres for a circle).
    pub fn from_wkt(wkt: &str, radius_m: Option<f64>) -> Result<Shape> {
        let bad = |why: &str| {
            Error::invalid(format!("bad geofence WKT {wkt:?}: {why}"))
                .with_hint("use POLYGON((lon lat, lon lat, …)) or POINT(lon lat) with radius_m")
        };
        let text = wkt.trim();
        let upper = text.to_ascii_uppercase();
        let inner = |prefix: &str, open: &str, close: &str| -> Option<&str> {
            let rest = upper.strip_prefix(prefix)?.trim_start();
            let start = text.len() - rest.len();
            let body = text[start..]
                .trim()
                .strip_prefix(open)?
                .strip_suffix(close)?;
            Some(body)
        };
        let pair = |s: &str| -> Option<(f64, f64)> {
            let mut it = s.split_whitespace();
            let (x, y) = (it.next()?.parse().ok()?, it.next()?.parse().ok()?);
            it.next().is_none().then_some((x, y))
        };
        if let Some(body) = inner("POLYGON", "((", "))") {
            let ring: Option<Vec<(f64, f64)>> = body.split(',').map(pair).collect();
            let ring = ring.ok_or_else(|| bad("coordinates must be `lon lat` pairs"))?;
            if ring.len() < 4 || ring.first() != ring.last() {
                return Err(bad("a ring needs at least 4 points and must be closed"));
            }
            return Ok(Shape::Polygon(geo::Polygon::new(ring.into(), vec![])));
        }
        if let Some(body) = inner("POINT", "(", ")") {
            let (lon, lat) = pair(body).ok_or_else(|| bad("POINT needs `lon lat`"))?;
            let radius_m = radius_m
                .filter(|r| *r > 0.0)
                .ok_or_else(|| bad("a circle (POINT) needs a positive radius_m"))?;
            return Ok(Shape::Circle {
                center: LatLon::new(lat, lon),
                radius_m,
            });
        }
        Err(bad("only POLYGON and POINT (circle) are supported"))
    }

    /// Whether the point lies inside the shape.
    pub fn contains(&self, p: LatLon) -> bool {
        match self {
            Shape::Polygon(poly) => poly.contains(&geo::Coord { x: p.lon, y: p.lat }),
            Shape::Circle { center, radius_m } => haversine_m(*center, p) <= *radius_m,
        }
    }

    /// The box around the shape: south, west, north, east degrees.
    pub fn bbox(&self) -> [f64; 4] {
        match self {
            Shape::Polygon(poly) => {
                let ring = &poly.exterior().0;
                let fold = |f: fn(f64, f64) -> f64, pick: fn(&geo::Coord<f64>) -> f64, init| {
                    ring.iter().map(pick).fold(init, f)
                };
                [
                    fold(f64::min, |c| c.y, f64::INFINITY),
                    fold(f64::min, |c| c.x, f64::INFINITY),
                    fold(f64::max, |c| c.y, f64::NEG_INFINITY),
                    fold(f64::max, |c| c.x, f64::NEG_INFINITY),
                ]
            }
            Shape::Circle { center, radius_m } => {
                let sw = offset_m(*center, -radius_m, -radius_m);
                let ne = offset_m(*center, *radius_m, *radius_m);
                [sw.lat, sw.lon, ne.lat, ne.lon]
            }
        }
    }

    /// A representative centre point (ring vertex mean, or the circle's centre).
    pub fn center(&self) -> LatLon {
        match self {
            Shape::Polygon(poly) => {
                let ring = &poly.exterior().0[1..];
                let n = ring.len() as f64;
                let (sx, sy) = ring
                    .iter()
                    .fold((0.0, 0.0), |(sx, sy), c| (sx + c.x, sy + c.y));
                LatLon::new(sy / n, sx / n)
            }
            Shape::Circle { center, .. } => *center,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn haversine_matches_known_distances() {
        // One degree of latitude on the mean sphere is 111.195 km.
        let d = haversine_m(LatLon::new(14.0, -90.5), LatLon::new(15.0, -90.5));
        assert!((d - 111_195.08).abs() < 1.0, "{d}");
        // Plaza de la Constitución to La Aurora airport is about 5.9 km.
        let d = haversine_m(
            LatLon::new(14.6425, -90.5133),
            LatLon::new(14.5833, -90.5275),
        );
        assert!((6_500.0..6_900.0).contains(&d), "{d}");
        assert_eq!(
            haversine_m(LatLon::new(14.6, -90.5), LatLon::new(14.6, -90.5)),
            0.0
        );
    }

    #[test]
    fn bearings_and_compass_points() {
        let o = LatLon::new(14.6, -90.5);
        assert!((bearing_deg(o, offset_m(o, 0.0, 500.0)) - 0.0).abs() < 0.01);
        assert!((bearing_deg(o, offset_m(o, 500.0, 0.0)) - 90.0).abs() < 0.01);
        assert!((bearing_deg(o, offset_m(o, -500.0, -500.0)) - 225.0).abs() < 0.1);
        assert_eq!(compass_point(0.0), "N");
        assert_eq!(compass_point(359.0), "N");
        assert_eq!(compass_point(44.0), "NE");
        assert_eq!(compass_point(225.0), "SW");
    }

    #[test]
    fn offsets_round_trip_through_local_xy() {
        let o = LatLon::new(14.6, -90.5);
        let p = offset_m(o, 1200.0, -800.0);
        let (x, y) = local_xy_m(o, p);
        assert!((x - 1200.0).abs() < 1e-6 && (y + 800.0).abs() < 1e-6);
        assert!((haversine_m(o, p) - (1200f64.hypot(800.0))).abs() < 0.5);
    }

    #[test]
    fn polygon_and_circle_containment() {
        // An L-shaped (non-convex) polygon: the notch is outside.
        let l = Shape::from_wkt(
            "POLYGON((-90.52 14.60, -90.50 14.60, -90.50 14.61, -90.51 14.61, -90.51 14.62, -90.52 14.62, -90.52 14.60))",
            None,
        )
        .unwrap();
        assert!(l.contains(LatLon::new(14.605, -90.505)));
        assert!(l.contains(LatLon::new(14.615, -90.515)));
        assert!(!l.contains(LatLon::new(14.615, -90.505)), "the notch");
        assert!(!l.contains(LatLon::new(14.63, -90.515)));
        let c = Shape::from_wkt("POINT(-90.5 14.6)", Some(250.0)).unwrap();
        let o = LatLon::new(14.6, -90.5);
        assert!(c.contains(offset_m(o, 249.0, 0.0)));
        assert!(!c.contains(offset_m(o, 0.0, 251.0)));
        assert_eq!(c.center(), o);
    }

    #[test]
    fn bad_wkt_is_refused_with_the_accepted_forms() {
        for (wkt, r) in [
            ("POLYGON((-90.5 14.6, -90.4 14.6, -90.4 14.7))", None),
            ("POINT(-90.5 14.6)", None),
            ("LINESTRING(0 0, 1 1)", None),
            ("POLYGON((a b, c d, e f, a b))", None),
        ] {
            let e = Shape::from_wkt(wkt, r).unwrap_err();
            assert!(e.message.contains(wkt) && e.hint.is_some(), "{e:?}");
        }
    }

    #[test]
    fn web_mercator_matches_the_tile_scheme() {
        // Zoom 0 is one 256-pixel tile; (0, 0) is its centre.
        let (x, y) = web_mercator_px(LatLon::new(0.0, 0.0), 0.0);
        assert!((x - 128.0).abs() < 1e-9 && (y - 128.0).abs() < 1e-9);
        // Guatemala City (Plaza de la Constitución) at zoom 12 is in tile 1018/1879.
        let (x, y) = web_mercator_px(LatLon::new(14.6349, -90.5069), 12.0);
        assert_eq!(((x / 256.0) as u32, (y / 256.0) as u32), (1018, 1879));
        let back = web_mercator_latlon(x, y, 12.0);
        assert!((back.lat - 14.6349).abs() < 1e-9 && (back.lon + 90.5069).abs() < 1e-9);
        let m = web_mercator_m_per_px(0.0, 0.0);
        assert!((m - 156_543.03).abs() < 0.01, "{m}");
    }

    #[test]
    fn polyline_decodes_the_reference_example() {
        // The example of the format's documentation.
        let pts = decode_polyline("_p~iF~ps|U_ulLnnqC_mqNvxq`@").unwrap();
        assert_eq!(pts.len(), 3);
        assert!((pts[0].lat - 38.5).abs() < 1e-9 && (pts[0].lon + 120.2).abs() < 1e-9);
        assert!((pts[2].lat - 43.252).abs() < 1e-9 && (pts[2].lon + 126.453).abs() < 1e-9);
    }
}
