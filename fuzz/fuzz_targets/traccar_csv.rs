//! Fuzzes the reader of Traccar's positions export (`import --format traccar-csv`):
//! unquoted cells split by hand, an address with commas and all. No panic; see
//! shared/import.rs.

#![no_main]

#[path = "shared/import.rs"]
mod import;

use fleetctl::formats::Format;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| import::read_as(Format::TraccarCsv, data));
