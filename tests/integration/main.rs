//! The integration tests, built as one binary: they run the real `fleetctl` the way a
//! user would and read what it wrote.

mod architecture;
mod cadence;
mod charts;
mod detection;
mod distance;
mod export;
mod faults;
mod generate;
mod harness;
mod http;
mod import;
mod interop;
mod live;
mod maps;
mod mcp;
mod postgres;
mod real_fleet;
mod reports;
mod traccar;
