//! Fuzzes the reader of Traccar's JSON positions (`import --format traccar-json`): an
//! array of objects, keys found like CSV columns, `attributes` flattened. No panic; see
//! shared/import.rs.

#![no_main]

#[path = "shared/import.rs"]
mod import;

use fleetctl::formats::Format;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| import::read_as(Format::TraccarJson, data));
