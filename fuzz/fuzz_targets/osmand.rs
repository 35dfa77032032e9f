//! Fuzzes the OsmAnd protocol as `serve --ingest` reads it at /ingest/osmand: the
//! query or form fields (`id=…&lat=…`) and Traccar Client 9's JSON body. No panic;
//! every accepted fix within its real ranges (shared/device.rs).

#![no_main]

#[path = "shared/device.rs"]
mod device;

use fleetctl::live::protocols;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    device::decode_as(data, |body, reading| {
        let pairs = protocols::form_pairs(&String::from_utf8_lossy(body));
        protocols::osmand_fields(&pairs, reading)
    });
    device::decode_as(data, protocols::osmand_json);
});
