//! Fuzzes the GeoJSON reader (`import --format geojson`): Point features with a time,
//! LineStrings and MultiLineStrings with a parallel list of times. No panic; see
//! shared/import.rs.

#![no_main]

#[path = "shared/import.rs"]
mod import;

use fleetctl::formats::Format;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| import::read_as(Format::GeoJson, data));
