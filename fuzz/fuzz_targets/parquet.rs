//! Fuzzes the Parquet reader (`import --format parquet`): polars reading the footer's
//! metadata and schema, then each row group's columns found by name. No panic or
//! out-of-memory; see shared/import.rs.

#![no_main]

#[path = "shared/import.rs"]
mod import;

use fleetctl::formats::Format;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| import::read_as(Format::Parquet, data));
