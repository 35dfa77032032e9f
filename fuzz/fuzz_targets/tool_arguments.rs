//! Fuzzes argument validation, the one gate every tool call and `fleetctl query` passes:
//! any JSON object, checked against every report in the registry, must never panic.

#![no_main]

use fleetctl::report::{self, Args};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(serde_json::Value::Object(args)) = serde_json::from_slice::<serde_json::Value>(data)
    else {
        return;
    };
    let args: Args = args;
    for spec in report::registry() {
        if let Err(e) = report::validate(spec, &args) {
            // What a client is shown of the refusal must serialise too.
            assert!(!e.message.is_empty(), "{}: an empty refusal", spec.tool);
            let _ = serde_json::to_string(&e.to_json()).expect("the error serialises");
        }
    }
});
