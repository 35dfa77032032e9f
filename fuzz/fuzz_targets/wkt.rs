//! Fuzzes the geofence WKT reader (geofences come from the database, which may be a
//! file from elsewhere): parsing, then containment and the centre of what it accepts.

#![no_main]

use fleetctl::geo::{LatLon, Shape, haversine_m};
use libfuzzer_sys::fuzz_target;

/// A circle radius from the first byte: none, or one of a few, odd ones included.
fn radius(byte: u8) -> Option<f64> {
    match byte % 8 {
        0 => None,
        1 => Some(0.0),
        2 => Some(-5.0),
        3 => Some(f64::NAN),
        4 => Some(f64::INFINITY),
        5 => Some(1e-9),
        _ => Some(f64::from(byte) * 37.0),
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&first, rest)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    let Ok(shape) = Shape::from_wkt(text, radius(first)) else {
        return;
    };
    let center = shape.center();
    let mut points = vec![
        center,
        LatLon::new(14.6349, -90.5069),
        LatLon::new(0.0, 0.0),
        LatLon::new(90.0, 180.0),
        LatLon::new(-90.0, -180.0),
        LatLon::new(f64::NAN, 0.0),
        LatLon::new(f64::INFINITY, f64::NEG_INFINITY),
    ];
    if let Shape::Polygon(poly) = &shape {
        points.extend(
            poly.exterior()
                .0
                .iter()
                .take(16)
                .map(|c| LatLon::new(c.y, c.x)),
        );
    }
    for p in points {
        let _ = shape.contains(p);
        let _ = haversine_m(center, p);
    }
    if let Shape::Circle { center, radius_m } = shape {
        assert!(radius_m > 0.0, "a circle of radius {radius_m} was accepted");
        if center.lat.is_finite() && center.lon.is_finite() {
            assert!(shape.contains(center), "a circle does not hold its centre");
        }
    }
});
