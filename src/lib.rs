//! fleetctl: offline fleet telemetry. A synthetic fleet generator with ground truth,
//! fleet reports computed straight from GPS positions, route maps, and an MCP server,
//! all over one SQLite file. The domain is `fleetctl-core` (crates/core), presentation
//! `fleetctl-render` (crates/render); this crate holds the two front ends (the command
//! line and the MCP server) and re-exports the others under one name.

#![warn(missing_docs)]

pub mod cli;
pub mod feed;
pub mod logging;
pub mod mcp;
pub mod threads;

pub use fleetctl_core::{
    analyze, clock, error, export, geo, ingest, live, model, output, pipeline, report, scratch,
    store, synth, untrusted,
};
pub use fleetctl_formats as formats;
pub use fleetctl_render as render;
