//! Fuzzes route polyline decoding (`fleetctl::geo::decode_polyline`, over the polyline
//! crate at precision 5, as the atlas's routes use it), and encode → decode round trips.

#![no_main]

use fleetctl::geo::decode_polyline;
use geo_types::Coord;
use libfuzzer_sys::fuzz_target;

const PRECISION: u32 = 5;

fuzz_target!(|data: &[u8]| {
    // The input as an encoded polyline: ours and the crate's must agree, and what
    // decodes must encode and decode again to the same points.
    if let Ok(text) = std::str::from_utf8(data) {
        let ours = decode_polyline(text);
        let theirs = polyline::decode_polyline(text, PRECISION);
        assert_eq!(
            ours.is_ok(),
            theirs.is_ok(),
            "the wrapper disagrees on {text:?}"
        );
        if let (Ok(ours), Ok(line)) = (ours, theirs) {
            assert_eq!(ours.len(), line.0.len());
            for (p, c) in ours.iter().zip(&line.0) {
                assert!(p.lat == c.y && p.lon == c.x, "coordinate order");
            }
            let again = polyline::encode_coordinates(line.0.iter().copied(), PRECISION)
                .expect("decoded points are in range, so they encode");
            let back =
                polyline::decode_polyline(&again, PRECISION).expect("our own output decodes");
            assert_eq!(back, line, "{text:?} re-encoded as {again:?}");
        }
    }

    // The input as points (two i32 per point, scaled into range): encoding then decoding
    // gives each point back to within half a unit of the fifth decimal.
    let coords: Vec<Coord<f64>> = data
        .chunks_exact(8)
        .map(|c| {
            // i32::MIN would scale to just past -180 / -90.
            let a = i32::from_le_bytes([c[0], c[1], c[2], c[3]]).max(-i32::MAX);
            let b = i32::from_le_bytes([c[4], c[5], c[6], c[7]]).max(-i32::MAX);
            Coord {
                x: f64::from(a) / f64::from(i32::MAX) * 180.0,
                y: f64::from(b) / f64::from(i32::MAX) * 90.0,
            }
        })
        .collect();
    let encoded = polyline::encode_coordinates(coords.iter().copied(), PRECISION)
        .expect("points in range encode");
    let decoded = decode_polyline(&encoded).expect("an encoded polyline decodes");
    assert_eq!(decoded.len(), coords.len());
    for (p, c) in decoded.iter().zip(&coords) {
        assert!(
            (p.lat - c.y).abs() <= 0.5e-5 + 1e-9 && (p.lon - c.x).abs() <= 0.5e-5 + 1e-9,
            "{c:?} came back as {p:?}"
        );
    }
});
