//! Fuzzes the generic CSV/TSV reader (`import --format csv`): the separator sniffed
//! from the header, records cut into blocks around quotes, columns found by name and
//! parsed by polars, rows checked. No panic; see shared/import.rs.

#![no_main]

#[path = "shared/import.rs"]
mod import;

use fleetctl::formats::Format;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| import::read_as(Format::Csv, data));
