//! What the three device-protocol targets share: a body read as a device would send
//! it to `serve --ingest`, with the fleet's zone and a fixed wall clock, and the
//! promise every accepted fix must keep: a place, figures and a time within their
//! real ranges (what the store may keep unwrapped), and a device id.

use fleetctl::clock::FleetZone;
use fleetctl::error::Result;
use fleetctl::ingest::units::SpeedUnit;
use fleetctl::live::protocols::{Batch, Reading};
use std::sync::OnceLock;

/// 2026-11-25T21:30Z, the demo's data clock.
const NOW: i64 = 1_795_642_200;

/// Runs `decode` on `data` (the first byte picks the OsmAnd speed unit) and checks
/// what it accepted.
pub fn decode_as(data: &[u8], decode: impl Fn(&[u8], &Reading) -> Result<Batch>) {
    static ZONE: OnceLock<FleetZone> = OnceLock::new();
    let zone = ZONE.get_or_init(|| FleetZone::named("America/Guatemala").unwrap());
    let (unit, body) = match data.split_first() {
        Some((b, rest)) => ([SpeedUnit::Knots, SpeedUnit::Mps, SpeedUnit::Kmh][*b as usize % 3], rest),
        None => (SpeedUnit::Knots, data),
    };
    let reading = Reading {
        zone,
        now: NOW,
        osmand_speed: unit,
    };
    let Ok(batch) = decode(body, &reading) else {
        return;
    };
    for f in &batch.fixes {
        assert!(!f.device_id.trim().is_empty(), "{f:?}");
        fleetctl::store::positions::check_figures(f.lat, f.lon, f.speed_kmh, f.heading_deg, f.odometer_km)
            .unwrap_or_else(|e| panic!("accepted past its range: {f:?}: {e}"));
        fleetctl::ingest::time::check_plausible(f.ts)
            .unwrap_or_else(|e| panic!("accepted an implausible time: {f:?}: {e}"));
        assert!((0..1000).contains(&f.ts_ms), "{f:?}");
        assert!(f.ts <= NOW + 600, "a fix far in the future: {f:?}");
    }
}
