//! Interop: the official Rust MCP SDK (`rmcp`), a client we did not write, drives
//! `fleetctl serve` through a full legacy session and through the stateless
//! 2026-07-28 revision.

use crate::harness::fixture_db;
use rmcp::model::{CallToolRequestParams, GetPromptRequestParams, ProtocolVersion};
use rmcp::transport::{ConfigureCommandExt, TokioChildProcess};
use rmcp::{ClientLifecycleMode, ClientServiceExt, ServiceExt};
use serde_json::{Map, Value};

fn serve_command() -> tokio::process::Command {
    let db = fixture_db().to_str().unwrap().to_string();
    tokio::process::Command::new(env!("CARGO_BIN_EXE_fleetctl")).configure(|c| {
        c.args(["--db", &db, "serve"]).env_remove("FLEETCTL_DB");
    })
}

/// The server as a child process, its log lines (stderr) discarded.
fn transport() -> TokioChildProcess {
    TokioChildProcess::builder(serve_command())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("serve starts")
        .0
}

fn arguments(v: Value) -> Map<String, Value> {
    v.as_object().cloned().unwrap_or_default()
}

/// A plate and a geofence of the fixture for the tools that need them.
fn sample_arguments(tool: &str) -> Map<String, Value> {
    let conn = crate::harness::open(fixture_db());
    let plate: String = conn
        .query_row(
            "SELECT plate FROM vehicles WHERE active = 1 ORDER BY id LIMIT 1",
            [],
            |r| r.get(0),
        )
        .unwrap();
    match tool {
        "vehicle_position" => arguments(serde_json::json!({"plate": plate})),
        "trip_summary" | "route_map" | "speed_chart" => {
            arguments(serde_json::json!({"plate": plate, "date": "yesterday"}))
        }
        "geofence_visits" => arguments(
            serde_json::json!({"plate": plate, "geofence": "Centro Histórico", "date": "yesterday"}),
        ),
        "nearest_vehicles" => arguments(serde_json::json!({"place": "Bodega Mixco", "limit": 3})),
        "geofence_report" => arguments(serde_json::json!({"geofence": "Bodega Mixco"})),
        _ => Map::new(),
    }
}

#[tokio::test]
async fn rmcp_drives_a_full_legacy_session() {
    let client = ().serve(transport()).await.expect("handshake");
    let info = client.peer_info().expect("server info");
    assert_eq!(info.protocol_version, ProtocolVersion::V_2025_11_25);
    assert!(
        info.instructions
            .as_deref()
            .unwrap_or_default()
            .contains("data clock")
    );

    let tools = client
        .list_tools(Default::default())
        .await
        .expect("tools/list");
    let names: Vec<String> = tools.tools.iter().map(|t| t.name.to_string()).collect();
    let expected: Vec<&str> = fleetctl::report::registry()
        .iter()
        .map(|s| s.tool)
        .collect();
    assert_eq!(names, expected);
    assert!(tools.tools.iter().all(|t| t.output_schema.is_some()));

    for name in &names {
        let result = client
            .call_tool(
                CallToolRequestParams::new(name.clone()).with_arguments(sample_arguments(name)),
            )
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(result.is_error, Some(false), "{name}");
        let structured = result
            .structured_content
            .clone()
            .expect("structuredContent");
        let text = &result.content[0].as_text().expect("a text block").text;
        assert_eq!(
            serde_json::from_str::<Value>(text).unwrap(),
            structured,
            "{name}"
        );
    }
    let bad = client
        .call_tool(
            CallToolRequestParams::new("trip_summary")
                .with_arguments(arguments(serde_json::json!({"plate": "P-000XXX"}))),
        )
        .await
        .expect("a tool error is a result");
    assert_eq!(bad.is_error, Some(true));
    assert!(
        bad.structured_content.is_none(),
        "a tool error has no structuredContent"
    );

    let prompts = client.list_prompts(None).await.expect("prompts/list");
    assert!(prompts.prompts.len() >= 3);
    let prompt = client
        .get_prompt(
            GetPromptRequestParams::new("dispatch_nearest_vehicle")
                .with_arguments(arguments(serde_json::json!({"place": "Zona 10"}))),
        )
        .await
        .expect("prompts/get");
    assert!(!prompt.messages.is_empty());
    client.cancel().await.expect("shutdown");
}

#[tokio::test]
async fn rmcp_discovers_and_calls_under_2026_07_28() {
    let mode = ClientLifecycleMode::Discover {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
    };
    let client = ().serve_with_lifecycle(transport(), mode).await.expect("discover");
    let info = client.peer_info().expect("server info");
    assert_eq!(info.protocol_version, ProtocolVersion::V_2026_07_28);
    let tools = client
        .list_tools(Default::default())
        .await
        .expect("tools/list");
    assert_eq!(tools.tools.len(), fleetctl::report::registry().len());
    let result = client
        .call_tool(
            CallToolRequestParams::new("stopped_vehicles")
                .with_arguments(arguments(serde_json::json!({"min_minutes": 30}))),
        )
        .await
        .expect("tools/call");
    assert_eq!(result.structured_content.unwrap()["vehicles"]["total"], 5);
    client.cancel().await.expect("shutdown");
}
