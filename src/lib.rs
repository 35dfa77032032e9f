//! fleetctl: offline fleet telemetry. A synthetic fleet generator with ground truth,
//! fleet reports computed straight from GPS positions, route maps, and an MCP server,
//! all over one SQLite file. The library is the product; the command line is a thin
//! front end over it.

#![warn(missing_docs)]

pub mod analyze;
pub mod cli;
pub mod clock;
pub mod error;
pub mod geo;
pub mod logging;
pub mod mcp;
pub mod model;
pub mod pipeline;
pub mod render;
pub mod report;
pub mod store;
pub mod synth;
pub mod untrusted;
