//! fleetctl-core: the domain of fleetctl — plain types, the data clock, geometry, the
//! store (the only SQL), detection, the read–detect–write pipeline, the generator, the
//! import of a fleet's own positions and the reports. It never prints, never draws and knows no front end: the compiler
//! holds it to that, since it depends on neither `fleetctl-render` nor the binary.
//! Inside it, the layers of docs/architecture.md hold (checked by the architecture
//! test).

#![warn(missing_docs)]

pub mod analyze;
pub mod clock;
pub mod error;
pub mod export;
pub mod geo;
pub mod ingest;
pub mod live;
pub mod model;
pub mod output;
pub mod parallel;
pub mod pipeline;
pub mod report;
pub mod scratch;
pub mod secrets;
pub mod store;
pub mod synth;
pub mod untrusted;
