//! `fleetctl mcp-config --bundle`: an MCP Bundle (`.mcpb`) that Claude Desktop installs
//! in one click — a zip of `manifest.json` (the MCPB manifest, spec 0.3) and this very
//! binary as a `binary` server. The tools are listed from the report registry, the
//! list `tools/list` serves, and the database path is a setting the user confirms at
//! install (defaulting to the database given).

use crate::error::{Error, Result};
use serde_json::{Value, json};
use std::io::Write;
use std::path::Path;

/// The manifest for a bundle whose server is `server/fleetctl`, asking for the
/// database with `default_db` offered.
pub(super) fn manifest(default_db: &Path) -> Value {
    let tools: Vec<Value> = crate::report::registry()
        .iter()
        .map(|spec| json!({"name": spec.tool, "description": spec.description}))
        .collect();
    json!({
        "manifest_version": "0.3",
        "name": "fleetctl",
        "display_name": "fleetctl — fleet telemetry",
        "version": env!("CARGO_PKG_VERSION"),
        "description": "Ask about your fleet: where a vehicle is, who is stopped and since when, a vehicle's day, alerts, geofences, km ranking, route maps and speed charts — computed offline from the positions in your fleet database.",
        "long_description": "fleetctl answers from a fleet database on this machine (generated, or imported from Traccar exports, tracker CSVs, GPX, GeoJSON or Parquet). Positions never leave the machine: only computed answers, capped in size, reach the model.",
        "author": {"name": "the fleetctl developers"},
        "license": "MIT",
        "keywords": ["fleet", "gps", "telemetry", "tracking", "traccar"],
        "server": {
            "type": "binary",
            "entry_point": "server/fleetctl",
            "mcp_config": {
                "command": "${__dirname}/server/fleetctl",
                "args": ["--db", "${user_config.database}", "serve"],
            },
        },
        "tools": tools,
        "prompts_generated": true,
        "user_config": {
            "database": {
                "type": "file",
                "title": "Fleet database",
                "description": "The fleetctl database to answer from (made by `fleetctl generate` or `fleetctl import`).",
                "required": true,
                "default": default_db.display().to_string(),
            },
        },
        "compatibility": {"platforms": [platform()]},
    })
}

/// This machine's platform, as MCPB names it (Node's `process.platform`).
fn platform() -> &'static str {
    match std::env::consts::OS {
        "macos" => "darwin",
        "windows" => "win32",
        other => other,
    }
}

/// Writes the bundle to `path`: the manifest and `exe` as `server/fleetctl`
/// (executable), through a temporary file renamed into place when complete.
pub(super) fn write(path: &Path, exe: &Path, default_db: &Path) -> Result<()> {
    let binary = std::fs::read(exe).map_err(|e| Error::io(exe, e))?;
    let manifest = serde_json::to_string_pretty(&manifest(default_db))
        .map_err(|e| Error::internal(e.to_string()))?;
    let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let deflated = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    let zipped = |e: zip::result::ZipError| Error::io(path, std::io::Error::other(e.to_string()));
    zip.start_file("manifest.json", deflated.unix_permissions(0o644))
        .map_err(zipped)?;
    zip.write_all(manifest.as_bytes())
        .map_err(|e| Error::io(path, e))?;
    zip.start_file("server/fleetctl", deflated.unix_permissions(0o755))
        .map_err(zipped)?;
    zip.write_all(&binary).map_err(|e| Error::io(path, e))?;
    let bytes = zip.finish().map_err(zipped)?.into_inner();
    crate::output::write_file(path, "--bundle", crate::output::May::ReplaceFile, &bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_manifest_lists_every_tool_and_asks_for_the_database() {
        let m = manifest(Path::new("/data/fleet.db"));
        let names: Vec<&str> = m["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .collect();
        let registry: Vec<&str> = crate::report::registry().iter().map(|s| s.tool).collect();
        assert_eq!(names, registry);
        assert_eq!(m["server"]["type"], "binary");
        assert_eq!(
            m["server"]["mcp_config"]["args"],
            json!(["--db", "${user_config.database}", "serve"])
        );
        assert_eq!(m["user_config"]["database"]["default"], "/data/fleet.db");
    }
}
