//! The live feed: positions that trackers and phone apps push to `fleetctl serve
//! --http --ingest`, read from their own protocols (`protocols`) and appended to the
//! store (`store::live`), each device known by its id (`vehicles.device_id`).

pub mod protocols;
