//! Fuzzes the GPX reader (`import --format gpx`): a streaming XML read of track points,
//! their time, speed and course (GPX 1.0 elements or extensions), the track's name.
//! No panic; see shared/import.rs.

#![no_main]

#[path = "shared/import.rs"]
mod import;

use fleetctl::formats::Format;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| import::read_as(Format::Gpx, data));
