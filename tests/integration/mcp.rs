//! `fleetctl serve` on the wire: both eras, every tool and prompt, the CLI/MCP parity,
//! and the robustness rules — after each bad input, the next request is served.

use crate::harness::{
    McpSession, TempDir, fixture_db, fleetctl, modern_meta, open, run, tool_error,
};
use crate::reports::assert_snapshot;
use serde_json::{Value, json};

/// Asserts the server still answers a ping correctly.
fn still_serving(s: &mut McpSession) {
    let r = s.request("ping", json!({}));
    assert_eq!(r["result"], json!({}), "{r}");
}

/// Arguments for a tool, made from its schema: required plates get an active plate,
/// required text a geofence name; optional arguments are left out.
fn sample_arguments(spec: &fleetctl::report::ReportSpec) -> serde_json::Map<String, Value> {
    let conn = open(fixture_db());
    let plate: String = conn
        .query_row(
            "SELECT plate FROM vehicles WHERE active = 1 ORDER BY id LIMIT 1",
            [],
            |r| r.get(0),
        )
        .unwrap();
    let geofence: String = conn
        .query_row("SELECT name FROM geofences ORDER BY id LIMIT 1", [], |r| {
            r.get(0)
        })
        .unwrap();
    let mut args = serde_json::Map::new();
    for p in spec.params().iter().filter(|p| p.required || p.positional) {
        let v = match p.kind {
            fleetctl::report::ParamKind::Plate => plate.clone(),
            _ => geofence.clone(),
        };
        args.insert(p.name.into(), v.into());
    }
    args
}

/// The same arguments as CLI words: positionals in order, then `--flag value`.
fn cli_words(
    spec: &fleetctl::report::ReportSpec,
    args: &serde_json::Map<String, Value>,
) -> Vec<String> {
    // A report that draws is its own command (`fleetctl map`, `fleetctl chart`,
    // `fleetctl map --fleet`); the others are queries.
    let mut words = if spec.draws {
        spec.cli.split(' ').map(str::to_string).collect()
    } else {
        vec!["query".to_string(), spec.cli.to_string()]
    };
    for p in spec.params() {
        let Some(v) = args.get(p.name) else { continue };
        let text = v.as_str().map_or_else(|| v.to_string(), str::to_owned);
        if !p.positional {
            words.push(format!("--{}", p.name.replace('_', "-")));
        }
        words.push(text);
    }
    words
}

#[test]
fn a_legacy_session_lists_and_calls_every_tool_and_gets_every_prompt() {
    let mut s = McpSession::initialized(fixture_db(), "2025-11-25");
    let tools = s.request("tools/list", json!({}));
    assert_snapshot("tools_list", &tools["result"]);
    let names: Vec<&str> = tools["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    let expected: Vec<&str> = fleetctl::report::registry()
        .iter()
        .map(|s| s.tool)
        .collect();
    assert_eq!(names, expected, "tools in the registry's fixed order");
    for t in tools["result"]["tools"].as_array().unwrap() {
        let name = t["name"].as_str().unwrap();
        assert!(
            name.len() <= 64
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        );
        assert_eq!(t["inputSchema"]["additionalProperties"], false, "{name}");
        assert_eq!(t["annotations"]["readOnlyHint"], true);
        assert_eq!(t["annotations"]["openWorldHint"], false);
        assert!(
            t["description"].as_str().unwrap().len() > 150,
            "{name} describes itself for the model"
        );
    }
    for spec in fleetctl::report::registry() {
        let result = s.call_tool(spec.tool, Value::Object(sample_arguments(spec)));
        assert_eq!(result["isError"], false, "{}: {result}", spec.tool);
        let text = result["content"][0]["text"].as_str().unwrap();
        assert!(!text.contains('\n'), "one line");
        assert_eq!(
            serde_json::from_str::<Value>(text).unwrap(),
            result["structuredContent"]
        );
        fleetctl::report::schema::check(&(spec.output_schema)(), &result["structuredContent"])
            .unwrap_or_else(|e| panic!("{} breaks its outputSchema: {e}", spec.tool));
    }
    let prompts = s.request("prompts/list", json!({}));
    let prompts = prompts["result"]["prompts"].as_array().unwrap().clone();
    assert!(prompts.len() >= 3);
    for p in &prompts {
        let mut args = serde_json::Map::new();
        for a in p["arguments"].as_array().unwrap() {
            let value = match a["name"].as_str().unwrap() {
                "plate" => "P-000XXX",
                "place" => "Bodega Mixco",
                _ => "yesterday",
            };
            args.insert(a["name"].as_str().unwrap().into(), value.into());
        }
        let r = s.request("prompts/get", json!({"name": p["name"], "arguments": args}));
        let text = r["result"]["messages"][0]["content"]["text"]
            .as_str()
            .unwrap_or_else(|| panic!("{r}"));
        assert!(
            text.contains("1. ") && text.contains("2. "),
            "ordered steps: {text}"
        );
        assert!(
            fleetctl::report::registry()
                .iter()
                .any(|t| text.contains(t.tool)),
            "names the tools"
        );
        // Each step opens with the tool it calls: a tool that exists.
        for step in text.lines().filter_map(|l| l.trim().split_once(". ")) {
            if step.0.chars().all(|c| c.is_ascii_digit()) {
                let tool = step.1.split([' ', ',']).next().unwrap_or_default();
                assert!(
                    fleetctl::report::find(tool).is_some()
                        || tool.chars().next().is_some_and(char::is_uppercase),
                    "{}: step names {tool:?}, not a tool",
                    p["name"]
                );
            }
        }
    }
    let r = s.request(
        "prompts/get",
        json!({"name": "vehicle_day_review", "arguments": {}}),
    );
    assert_eq!(
        r["error"]["code"], -32602,
        "a missing required prompt argument: {r}"
    );
    let (status, _) = s.finish();
    assert!(status.success());
}

#[test]
fn initialize_negotiates_each_legacy_revision() {
    for (asked, answered) in [
        ("2024-11-05", "2024-11-05"),
        ("2025-03-26", "2025-03-26"),
        ("2025-06-18", "2025-06-18"),
        ("2025-11-25", "2025-11-25"),
        ("2026-07-28", "2025-11-25"),
        ("1999-01-01", "2025-11-25"),
    ] {
        let mut s = McpSession::start(fixture_db());
        let r = s.request("initialize", json!({"protocolVersion": asked, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}));
        assert_eq!(r["result"]["protocolVersion"], answered, "{asked}: {r}");
        assert_eq!(r["result"]["serverInfo"]["name"], "fleetctl");
        let instructions = r["result"]["instructions"].as_str().unwrap();
        assert!(
            instructions.contains("15 vehicles")
                && instructions.contains("2026-11-19 to 2026-11-25"),
            "{instructions}"
        );
        assert!(
            instructions.contains("America/Guatemala")
                && instructions.contains("2026-11-25T15:30:00-06:00")
        );
    }
}

#[test]
fn batches_are_served_under_2025_03_26_only() {
    let mut s = McpSession::initialized(fixture_db(), "2025-03-26");
    s.send_line(r#"[{"jsonrpc":"2.0","id":"a","method":"ping"},{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"zz"}},{"jsonrpc":"2.0","id":"b","method":"tools/call","params":{"name":"list_geofences"}}]"#);
    let r = s.recv();
    let answers = r.as_array().expect("an array of responses");
    assert_eq!(answers.len(), 2);
    assert_eq!(answers[0]["id"], "a");
    assert_eq!(answers[1]["id"], "b");
    assert_eq!(answers[1]["result"]["isError"], false);
    s.send_line(r#"[{"jsonrpc":"2.0","method":"notifications/initialized"}]"#);
    assert!(
        s.answered_nothing(),
        "a batch of notifications gets no answer"
    );
    still_serving(&mut s);

    let mut s = McpSession::initialized(fixture_db(), "2025-11-25");
    s.send_line(r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#);
    let r = s.recv();
    assert_eq!(r["error"]["code"], -32600, "{r}");
    assert_eq!(r["id"], Value::Null);
    still_serving(&mut s);
}

#[test]
fn regression_a_batch_cannot_cost_gigabytes_or_write_a_giant_line() {
    let mut s = McpSession::initialized(fixture_db(), "2025-03-26");
    // A 240 KiB line of `{}`: refused by its count, before it is built.
    let empties = format!("[{}]", vec!["{}"; 80_000].join(","));
    s.send_line(&empties);
    let r = s.recv();
    assert_eq!(r["error"]["code"], -32600, "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("at most 64 messages")
    );
    still_serving(&mut s);
    // 64 pages of the week's trips in one batch (each about a quarter of a MiB, so
    // the cap is reached after a dozen or so; pages are cheap, so the test does not
    // wait on a busy machine's drawing speed): the answers stop growing at the cap;
    // the rest are not run and say so, each with its own id.
    let calls: Vec<Value> = (0..64)
        .map(|i| json!({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": "trips", "arguments": {"from": "2026-11-19", "to": "2026-11-25"}}}))
        .collect();
    s.send_line(&Value::Array(calls).to_string());
    let r = s.recv();
    let answers = r.as_array().expect("an array");
    assert_eq!(answers.len(), 64);
    let line_bytes = r.to_string().len();
    assert!(
        line_bytes < 4 * 1024 * 1024 + 3 * 1024 * 1024,
        "{line_bytes} bytes"
    );
    let run = answers
        .iter()
        .filter(|a| a["result"]["isError"] == false)
        .count();
    let skipped: Vec<&Value> = answers
        .iter()
        .filter(|a| a["error"]["code"] == -32600)
        .collect();
    assert!(
        run >= 1 && !skipped.is_empty() && run + skipped.len() == 64,
        "{run} run, {} skipped",
        skipped.len()
    );
    assert!(
        skipped[0]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("send this request again")
    );
    assert_eq!(answers[63]["id"], 63);
    still_serving(&mut s);
}

#[test]
fn the_stateless_revision_needs_no_handshake() {
    let mut s = McpSession::start(fixture_db());
    let r = s.request("server/discover", json!({"_meta": modern_meta()}));
    let res = &r["result"];
    assert_eq!(res["resultType"], "complete", "{r}");
    assert_eq!(res["supportedVersions"][0], "2026-07-28");
    assert!(
        res["supportedVersions"]
            .as_array()
            .unwrap()
            .contains(&json!("2025-11-25"))
    );
    assert!(res["ttlMs"].as_u64().is_some() && res["cacheScope"] == "public");
    assert_eq!(
        res["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "fleetctl"
    );
    assert!(res["instructions"].as_str().unwrap().contains("data clock"));
    assert!(res["capabilities"]["tools"].is_object());

    for method in ["tools/list", "prompts/list"] {
        let r = s.request(method, json!({"_meta": modern_meta()}));
        assert_eq!(r["result"]["resultType"], "complete", "{r}");
        assert!(r["result"]["ttlMs"].is_u64() && r["result"]["cacheScope"] == "public");
        assert_eq!(
            r["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
            "fleetctl"
        );
    }
    let r = s.request("tools/call", json!({"name": "stopped_vehicles", "arguments": {"min_minutes": 30}, "_meta": modern_meta()}));
    assert_eq!(r["result"]["resultType"], "complete");
    assert_eq!(r["result"]["isError"], false);
    assert_eq!(r["result"]["structuredContent"]["vehicles"]["total"], 5);
    let r = s.request("prompts/get", json!({"name": "dispatch_nearest_vehicle", "arguments": {"place": "Zona 10"}, "_meta": modern_meta()}));
    assert_eq!(r["result"]["resultType"], "complete");

    let mut old = modern_meta();
    old["io.modelcontextprotocol/protocolVersion"] = json!("2099-01-01");
    let r = s.request("tools/list", json!({"_meta": old}));
    assert_eq!(r["error"]["code"], -32022, "{r}");
    assert_eq!(r["error"]["data"]["requested"], "2099-01-01");
    assert_eq!(r["error"]["data"]["supported"][0], "2026-07-28");

    let r = s.request(
        "tools/list",
        json!({"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}),
    );
    assert_eq!(
        r["error"]["code"], -32602,
        "missing clientCapabilities: {r}"
    );
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("clientCapabilities")
    );
    let r = s.request("ping", json!({"_meta": modern_meta()}));
    assert_eq!(r["error"]["code"], -32601, "no ping in 2026-07-28: {r}");

    // A legacy client on the same process is still served after the modern requests.
    let r = s.request("initialize", json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}));
    assert_eq!(r["result"]["protocolVersion"], "2025-06-18");
}

#[test]
fn tool_errors_are_results_the_model_can_act_on() {
    let mut s = McpSession::initialized(fixture_db(), "2025-11-25");
    let r = s.call_tool("trip_summary", json!({"plate": "P-000XXX"}));
    assert_eq!(r["isError"], true);
    assert_eq!(tool_error(&r)["error"]["code"], "not_found");
    assert!(
        r["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("valid plates: P-")
    );
    let r = s.call_tool("alerts", json!({"type": "speedin"}));
    assert_eq!(tool_error(&r)["error"]["code"], "invalid_argument");
    assert!(
        tool_error(&r)["error"]["hint"]
            .as_str()
            .unwrap()
            .contains("speeding, long_stop, signal_loss"),
        "{r}"
    );
    let r = s.call_tool("stopped_vehicles", json!({"min_minutes": "ten"}));
    assert!(
        tool_error(&r)["error"]["message"]
            .as_str()
            .unwrap()
            .contains("min_minutes"),
        "{r}"
    );
    let r = s.call_tool("list_vehicles", json!({"verbose": true}));
    assert!(
        tool_error(&r)["error"]["message"]
            .as_str()
            .unwrap()
            .contains("unknown argument `verbose`"),
        "{r}"
    );
    let r = s.call_tool("nearest_vehicles", json!({"lat": 14.6}));
    assert_eq!(tool_error(&r)["error"]["code"], "invalid_argument");
    let r = s.call_tool("stopped_vehicles", json!({"min_minutes": 10000}));
    assert_eq!(r["isError"], false, "an empty answer is a result: {r}");
    assert_eq!(r["structuredContent"]["vehicles"]["total"], 0);
    let r = s.request("tools/call", json!({"name": "teleport", "arguments": {}}));
    assert_eq!(r["error"]["code"], -32602);
    let r = s.request(
        "tools/call",
        json!({"name": "list_vehicles", "arguments": [1, 2]}),
    );
    assert_eq!(r["error"]["code"], -32602);
    still_serving(&mut s);
}

#[test]
fn bad_input_never_stops_the_server() {
    let mut s = McpSession::initialized(fixture_db(), "2025-11-25");
    // A 5 MB line: a real request with a huge argument is refused unread (a message
    // is at most 256 KiB), and the next one is served.
    let huge = "x".repeat(5 * 1024 * 1024);
    s.send_line(&json!({"jsonrpc": "2.0", "id": "big", "method": "tools/call", "params": {"name": "trip_summary", "arguments": {"plate": huge}}}).to_string());
    let r = s.recv();
    assert_eq!(
        (r["id"].clone(), r["error"]["code"].as_i64()),
        (Value::Null, Some(-32600)),
        "{r}"
    );
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("longer than 262144 bytes")
    );
    still_serving(&mut s);
    // Just under the limit: read, and answered as a tool error naming the plate.
    let big = "x".repeat(200 * 1024);
    s.send_line(&json!({"jsonrpc": "2.0", "id": "big", "method": "tools/call", "params": {"name": "trip_summary", "arguments": {"plate": big}}}).to_string());
    let r = s.recv();
    assert_eq!(
        (&r["id"], &r["result"]["isError"]),
        (&json!("big"), &json!(true))
    );
    still_serving(&mut s);
    // Invalid UTF-8.
    s.send_raw(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"p\xffing\"}\n");
    assert_eq!(s.recv()["error"]["code"], -32700);
    still_serving(&mut s);
    // 100 000 nested brackets.
    s.send_line(&"[".repeat(100_000));
    let r = s.recv();
    assert_eq!(r["error"]["code"], -32700);
    assert_eq!(r["id"], Value::Null);
    still_serving(&mut s);
    // Blank lines get no answer; CRLF line ends are fine.
    s.send_raw(b"\n\r\n   \n");
    assert!(s.answered_nothing());
    s.send_raw(b"{\"jsonrpc\":\"2.0\",\"id\":\"crlf\",\"method\":\"ping\"}\r\n");
    assert_eq!(s.recv()["id"], "crlf");
    // id null is refused; ids of every legal type are echoed exactly.
    s.send_line(r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#);
    let r = s.recv();
    assert_eq!(
        (r["error"]["code"].as_i64(), &r["id"]),
        (Some(-32600), &Value::Null)
    );
    for id in [
        json!(0),
        json!(-1),
        json!(9007199254740993u64),
        json!("x"),
        json!(""),
        json!("0"),
    ] {
        s.send_line(&json!({"jsonrpc": "2.0", "id": id, "method": "ping"}).to_string());
        let r = s.recv();
        assert_eq!(r["id"], id);
        assert_eq!(
            serde_json::to_string(&r["id"]).unwrap(),
            serde_json::to_string(&id).unwrap(),
            "same type and value"
        );
    }
    // Unknown methods, wrong param types, a second initialize.
    assert_eq!(
        s.request("resources/list", json!({}))["error"]["code"],
        -32601
    );
    s.send_line(r#"{"jsonrpc":"2.0","id":"p","method":"tools/list","params":"all"}"#);
    assert_eq!(s.recv()["error"]["code"], -32602);
    let r = s.request("initialize", json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}));
    assert_eq!(r["error"]["code"], -32600, "{r}");
    // A notification is never answered, not even a malformed-looking one.
    s.send_line(r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}"#);
    s.send_line(r#"{"jsonrpc":"2.0","method":"no/such/notification"}"#);
    assert!(s.answered_nothing());
    still_serving(&mut s);
}

#[test]
fn a_thousand_requests_written_at_once_are_all_answered_in_order() {
    let mut s = McpSession::initialized(fixture_db(), "2025-11-25");
    let mut burst = String::new();
    for i in 0..1000 {
        let req = if i % 2 == 0 {
            json!({"jsonrpc": "2.0", "id": i, "method": "ping"})
        } else {
            json!({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": "vehicle_position", "arguments": {"plate": "P-000XXX"}}})
        };
        burst.push_str(&req.to_string());
        burst.push('\n');
    }
    s.send_raw(burst.as_bytes());
    for i in 0..1000 {
        assert_eq!(s.recv()["id"], i);
    }
    still_serving(&mut s);
}

#[test]
fn requests_before_initialize_are_refused_but_ping_works() {
    let mut s = McpSession::start(fixture_db());
    let r = s.request("tools/list", json!({}));
    assert_eq!(r["error"]["code"], -32600, "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("initialize")
    );
    still_serving(&mut s);
    let r = s.request("initialize", json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}));
    assert!(r["result"].is_object());
}

#[test]
fn a_panic_inside_a_report_becomes_an_error_result() {
    let mut s = McpSession::start_with_env(fixture_db(), &[("FLEETCTL_TEST_PANIC_IN", "alerts")]);
    s.request("initialize", json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}));
    let r = s.call_tool("alerts", json!({}));
    assert_eq!(r["isError"], true);
    assert_eq!(tool_error(&r)["error"]["code"], "internal");
    let r = s.call_tool("list_vehicles", json!({}));
    assert_eq!(r["isError"], false, "the server keeps serving");
}

#[test]
fn end_of_input_exits_zero_at_once_and_logs_stay_on_stderr() {
    let mut s = McpSession::initialized(fixture_db(), "2025-11-25");
    s.call_tool("list_vehicles", json!({}));
    s.call_tool("trip_summary", json!({"plate": "P-000XXX"}));
    // The log is read after the exit (the reader has then seen all of it): reading it
    // while the server runs raced the thread that collects it.
    let (log, status) = s.finish_with_stderr();
    assert!(status.success());
    assert!(
        log.contains("tools/call list_vehicles") && log.contains(" ms ok"),
        "{log}"
    );
    assert!(log.contains("ms tool error not_found"), "{log}");
}

#[test]
fn sigterm_stops_the_server_promptly() {
    let mut s = McpSession::initialized(fixture_db(), "2025-11-25");
    crate::harness::sigterm_and_wait(&mut s.child);
}

#[test]
fn a_missing_database_does_not_stop_the_server() {
    let dir = TempDir::new("mcp-nodb");
    let mut s = McpSession::start(&dir.join("none.db"));
    let r = s.request("initialize", json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}));
    assert!(
        r["result"]["instructions"]
            .as_str()
            .unwrap()
            .contains("not available")
    );
    let r = s.call_tool("list_vehicles", json!({}));
    assert_eq!(r["isError"], true);
    assert_eq!(tool_error(&r)["error"]["code"], "db_unavailable");
    assert!(
        tool_error(&r)["error"]["hint"]
            .as_str()
            .unwrap()
            .contains("fleetctl generate")
    );
    let r = s.call_tool("alerts", json!({"type": "nope"}));
    assert_eq!(
        tool_error(&r)["error"]["code"],
        "invalid_argument",
        "arguments are still checked"
    );
}

#[test]
fn every_tool_answers_exactly_what_the_cli_prints() {
    let db = fixture_db();
    let dir = TempDir::new("parity");
    let png = dir.join("map.png");
    let mut s = McpSession::initialized(db, "2025-11-25");
    for spec in fleetctl::report::registry() {
        let args = sample_arguments(spec);
        let result = s.call_tool(spec.tool, Value::Object(args.clone()));
        let mut words = vec!["--db".to_string(), db.to_str().unwrap().to_string()];
        words.extend(cli_words(spec, &args));
        if spec.draws {
            words.extend(["-o".to_string(), png.to_str().unwrap().to_string()]);
        }
        words.extend(["--format".to_string(), "json".to_string()]);
        let cli = run(fleetctl(
            &words.iter().map(String::as_str).collect::<Vec<_>>(),
        ))
        .ok();
        assert_eq!(
            cli.stdout.trim_end(),
            result["content"][0]["text"].as_str().unwrap(),
            "{} differs",
            spec.tool
        );
        assert_eq!(
            serde_json::from_str::<Value>(&cli.stdout).unwrap(),
            result["structuredContent"]
        );
        if spec.draws {
            // The image block is the very PNG the CLI wrote.
            let image = &result["content"][1];
            assert_eq!(image["type"], "image");
            assert_eq!(image["mimeType"], "image/png");
            let written = std::fs::read(&png).unwrap();
            assert_eq!(
                image["data"].as_str().unwrap(),
                fleetctl::mcp::tools::base64(&written)
            );
        }
    }
    // An error is the same object too: the CLI's `--format json` and the tool's text.
    let result = s.call_tool("trip_summary", json!({"plate": "P-000XXX"}));
    let cli = run(fleetctl(&[
        "--db",
        db.to_str().unwrap(),
        "query",
        "trip",
        "P-000XXX",
        "--format",
        "json",
    ]))
    .fails(3);
    assert_eq!(
        serde_json::from_str::<Value>(&cli.stdout).unwrap(),
        tool_error(&result)
    );
}

#[test]
fn mcp_config_prints_absolute_paths() {
    let r = run(fleetctl(&["--db", "relative/fleet.db", "mcp-config"])).ok();
    // stdout is the JSON alone (it can be redirected into a file); notes on stderr.
    let config: Value = serde_json::from_str(&r.stdout).unwrap();
    let server = &config["mcpServers"]["fleetctl"];
    assert!(std::path::Path::new(server["command"].as_str().unwrap()).is_absolute());
    let db = server["args"][1].as_str().unwrap();
    assert!(
        std::path::Path::new(db).is_absolute() && db.ends_with("relative/fleet.db"),
        "{db}"
    );
    assert_eq!(server["args"][2], "serve");
    assert!(
        r.stderr.contains("claude mcp add fleetctl -- "),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr.contains("relative/fleet.db does not exist yet"),
        "{}",
        r.stderr
    );
    // An existing database gets no such warning.
    let r = run(fleetctl(&[
        "--db",
        fixture_db().to_str().unwrap(),
        "mcp-config",
    ]))
    .ok();
    assert!(!r.stderr.contains("does not exist"), "{}", r.stderr);
}

#[test]
fn regression_a_client_cannot_forge_log_lines_or_send_terminal_escapes() {
    let mut s = McpSession::initialized(fixture_db(), "2025-11-25");
    let forged = "x\u{1b}[2J\nfleetctl: serve: tools/call list_vehicles 0.01 ms ok";
    let r = s.request("tools/call", json!({"name": forged, "arguments": {}}));
    assert_eq!(r["error"]["code"], -32602);
    s.request("ping", json!({}));
    let (log, _) = s.finish_with_stderr();
    assert!(!log.contains('\u{1b}'), "{log:?}");
    assert!(
        !log.lines()
            .any(|l| l.starts_with("fleetctl: serve: tools/call list_vehicles")),
        "{log}"
    );
    assert!(log.contains("\\u{1b}[2J\\u{a}fleetctl"), "{log}");
}

/// A running server answers about the database as it is now: one generated after it
/// started is opened at the next call (before, every tool said db_unavailable until a
/// restart), a vehicle imported while it serves is known at the next call, and so
/// is a geofence removed.
#[test]
fn a_running_server_sees_what_was_generated_and_imported_after_it_started() {
    let dir = TempDir::new("mcp-live");
    let db = dir.join("fleet.db");
    let mut s = McpSession::start(&db);
    s.request("initialize", json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}));
    let r = s.call_tool("list_vehicles", json!({}));
    assert_eq!(tool_error(&r)["error"]["code"], "db_unavailable", "{r}");
    crate::harness::run(crate::harness::fleetctl(&[
        "--db",
        db.to_str().unwrap(),
        "generate",
        "--ahora",
        "2026-11-25T15:30",
    ]))
    .ok();
    let r = s.call_tool("list_vehicles", json!({}));
    assert_eq!(r["isError"], false, "{r}");
    assert_eq!(r["structuredContent"]["vehicles"]["total"], 15, "{r}");
    // A new tracker's morning, imported while the server runs.
    let csv = dir.join("new.csv");
    crate::harness::write_tracker_csv(&csv, "P-999ZZZ");
    crate::harness::run_on(&db, &["import", csv.to_str().unwrap()]).ok();
    let r = s.call_tool("vehicle_position", json!({"plate": "P-999ZZZ"}));
    assert_eq!(r["isError"], false, "{r}");
    assert_eq!(r["structuredContent"]["plate"], "P-999ZZZ", "{r}");
    assert!(
        s.stderr().contains("the database changed; reloaded"),
        "{}",
        s.stderr()
    );
    // A geofence removed while it serves is gone at the next call, though no fix came.
    let before = s.call_tool("list_geofences", json!({}));
    let fences = &before["structuredContent"]["geofences"];
    let (total, first) = (
        fences["total"].as_u64().unwrap(),
        fences["items"][0]["name"].clone(),
    );
    crate::harness::run_on(&db, &["geofences", "remove", first.as_str().unwrap()]).ok();
    let after = s.call_tool("list_geofences", json!({}));
    assert_eq!(
        after["structuredContent"]["geofences"]["total"],
        total - 1,
        "{after}"
    );
    still_serving(&mut s);
}

#[test]
fn a_question_asked_again_is_answered_from_the_database_as_it_is_now() {
    // A server keeps answers while the database is unchanged; another process then
    // changes what only the analysis holds (no vehicle, place or setting, no newer
    // fix), and the same question gets the new figure.
    let dir = TempDir::new("mcp-asked-again");
    let db = dir.join("fleet.db");
    std::fs::copy(fixture_db(), &db).unwrap();
    let mut s = McpSession::initialized(&db, "2025-11-25");
    let total = |s: &mut McpSession| {
        let r = s.call_tool("mileage_ranking", json!({}));
        r["structuredContent"]["fleet_total_km"]
            .as_f64()
            .unwrap_or_else(|| panic!("{r}"))
    };
    let before = total(&mut s);
    assert_eq!(
        total(&mut s),
        before,
        "the same question, the same database"
    );
    let changed = rusqlite::Connection::open(&db)
        .unwrap()
        .execute(
            "UPDATE daily SET gps_distance_km = gps_distance_km + 1000, \
             odometer_distance_km = odometer_distance_km + 1000 \
             WHERE vehicle_id = (SELECT vehicle_id FROM daily ORDER BY date DESC, vehicle_id LIMIT 1)",
            [],
        )
        .unwrap();
    assert!(changed > 0);
    let after = total(&mut s);
    assert!(after >= before + 999.0, "{before} km, then {after} km");
}
