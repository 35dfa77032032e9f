//! Fuzzes OwnTracks' HTTP messages as `serve --ingest` reads them at
//! /ingest/owntracks (one message or an array). No panic; every accepted fix within
//! its real ranges (shared/device.rs).

#![no_main]

#[path = "shared/device.rs"]
mod device;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| device::decode_as(data, fleetctl::live::protocols::owntracks));
