//! `fleetctl serve --http` over loopback with a real HTTP client (ureq): the
//! authentication and hardening rules in the order they apply, both MCP eras, the
//! OpenAPI twin, concurrency, and shutdown.

use crate::harness::{fixture_db, fleetctl};
use serde_json::{Value, json};
use std::io::{BufRead, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

const TOKEN: &str = "test-token-0123456789abcdef";

/// A running `fleetctl serve --http 127.0.0.1:0`.
struct Http {
    child: std::process::Child,
    base: String,
    log: std::sync::Arc<std::sync::Mutex<String>>,
}

impl Http {
    fn start_with(extra: &[&str]) -> Http {
        let mut args = vec![
            "--db",
            fixture_db().to_str().unwrap(),
            "serve",
            "--http",
            "127.0.0.1:0",
        ];
        args.extend_from_slice(extra);
        let mut child = fleetctl(&args)
            .env("FLEETCTL_TOKEN", TOKEN)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        let base = loop {
            line.clear();
            assert!(
                stderr.read_line(&mut line).unwrap() > 0,
                "the server exited before listening"
            );
            if let Some(rest) = line.split("listening on ").nth(1) {
                break rest.split_whitespace().next().unwrap().to_string();
            }
        };
        let log = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let sink = log.clone();
        std::thread::spawn(move || {
            let mut rest = String::new();
            let _ = stderr.read_to_string(&mut rest);
            sink.lock().unwrap().push_str(&rest);
        });
        Http { child, base, log }
    }

    fn start() -> Http {
        Http::start_with(&[])
    }

    fn agent() -> ureq::Agent {
        ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(10)))
            .build()
            .into()
    }

    /// POSTs JSON with the token and extra headers; returns status, headers and body.
    fn post(&self, path: &str, body: &Value, headers: &[(&str, &str)]) -> (u16, Value) {
        let mut req = Http::agent()
            .post(format!("{}{path}", self.base))
            .header("Authorization", format!("Bearer {TOKEN}"));
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let mut resp = req
            .header("Content-Type", "application/json")
            .send(body.to_string())
            .unwrap();
        let status = resp.status().as_u16();
        let text = resp.body_mut().read_to_string().unwrap();
        (
            status,
            if text.is_empty() {
                Value::Null
            } else {
                serde_json::from_str(&text).unwrap_or(Value::String(text))
            },
        )
    }

    fn healthy(&self) {
        let mut resp = Http::agent()
            .get(format!("{}/healthz", self.base))
            .call()
            .unwrap();
        assert_eq!(resp.status().as_u16(), 200);
        assert_eq!(
            resp.body_mut().read_to_string().unwrap(),
            r#"{"status":"ok"}"#
        );
    }

    /// Sends raw bytes on a fresh connection and returns the response head, waiting
    /// at most 3 s (a server that waited for an unsent body would time out here).
    fn raw(&self, request: &str) -> String {
        let addr = self.base.trim_start_matches("http://");
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
        s.write_all(request.as_bytes()).unwrap();
        let mut buf = [0u8; 4096];
        let n = s.read(&mut buf).unwrap_or(0);
        String::from_utf8_lossy(&buf[..n]).into_owned()
    }
}

impl Drop for Http {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn modern_meta() -> Value {
    crate::harness::modern_meta()
}

fn modern(method: &str, params: Value) -> (Value, Vec<(&'static str, String)>) {
    let mut params = params;
    params["_meta"] = modern_meta();
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let mut headers = vec![
        ("MCP-Protocol-Version", "2026-07-28".to_string()),
        ("Mcp-Method", method.to_string()),
    ];
    if let Some(name) = body["params"]["name"].as_str() {
        headers.push(("Mcp-Name", name.to_string()));
    }
    (body, headers)
}

fn post_modern(h: &Http, method: &str, params: Value) -> (u16, Value) {
    let (body, headers) = modern(method, params);
    let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
    h.post("/mcp", &body, &headers)
}

#[test]
fn authentication_comes_before_the_body_is_read() {
    let h = Http::start();
    // A request announcing a large body it never sends gets its 401 at once.
    let head = h.raw("POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Length: 900000\r\n\r\n");
    assert!(head.starts_with("HTTP/1.1 401"), "{head}");
    assert!(
        head.contains("WWW-Authenticate: Bearer realm=\"fleetctl\""),
        "{head}"
    );
    let head = h.raw("POST /mcp HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer wrong-token-wrong-token\r\nContent-Length: 5\r\n\r\n{bad");
    assert!(head.starts_with("HTTP/1.1 401"), "{head}");
    // Health and the API document need no token.
    h.healthy();
    let mut doc = Http::agent()
        .get(format!("{}/openapi.json", h.base))
        .call()
        .unwrap();
    assert_eq!(doc.status().as_u16(), 200);
    let doc: Value = serde_json::from_str(&doc.body_mut().read_to_string().unwrap()).unwrap();
    assert_eq!(doc["openapi"], "3.1.0");
    // The token never reaches the logs.
    let (status, _) = h.post("/mcp", &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}), &[]);
    assert_eq!(status, 200);
    std::thread::sleep(Duration::from_millis(100));
    let log = h.log.lock().unwrap().clone();
    assert!(
        !log.contains(TOKEN) && !log.contains("wrong-token"),
        "{log}"
    );
}

#[test]
fn oversized_bodies_foreign_origins_and_wrong_methods_are_refused() {
    let h = Http::start();
    let auth = format!("Authorization: Bearer {TOKEN}\r\n");
    let head = h.raw(&format!(
        "POST /mcp HTTP/1.1\r\nHost: x\r\n{auth}Content-Length: 2000000\r\n\r\n"
    ));
    assert!(head.starts_with("HTTP/1.1 413"), "{head}");
    let (status, body) = h.post(
        "/mcp",
        &json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}),
        &[("Origin", "https://evil.example")],
    );
    assert_eq!(status, 403, "{body}");
    let (status, _) = h.post(
        "/mcp",
        &json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}),
        &[("Origin", "http://localhost:6274")],
    );
    assert_eq!(status, 200);
    let mut get = Http::agent()
        .get(format!("{}/mcp", h.base))
        .header("Authorization", format!("Bearer {TOKEN}"))
        .call()
        .unwrap();
    assert_eq!(get.status().as_u16(), 405);
    assert_eq!(get.headers().get("allow").unwrap(), "POST");
    let _ = get.body_mut().read_to_string();
    let (status, _) = h.post("/nowhere", &json!({}), &[]);
    assert_eq!(status, 404);
    let (status, body) = h.post(
        "/mcp",
        &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        &[],
    );
    assert_eq!(
        (status, body),
        (202, Value::Null),
        "a notification is accepted with an empty body"
    );
    let (status, body) = h.post(
        "/mcp",
        &json!([{"jsonrpc": "2.0", "id": 1, "method": "ping"}]),
        &[],
    );
    assert_eq!(
        (status, body["error"]["code"].as_i64()),
        (400, Some(-32600))
    );
    h.healthy();
}

#[test]
fn repeated_failures_from_one_address_are_rate_limited_but_the_right_token_still_passes() {
    let h = Http::start();
    for _ in 0..10 {
        let head = h.raw("POST /mcp HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer nope\r\nContent-Length: 0\r\n\r\n");
        assert!(head.starts_with("HTTP/1.1 401"), "{head}");
    }
    let head = h.raw(
        "POST /mcp HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer nope\r\nContent-Length: 0\r\n\r\n",
    );
    assert!(
        head.starts_with("HTTP/1.1 429") && head.contains("Retry-After"),
        "{head}"
    );
    // A client holding the token is never locked out by someone else's guesses.
    let (status, _) = h.post(
        "/mcp",
        &json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}),
        &[],
    );
    assert_eq!(status, 200);
    h.healthy();
}

#[test]
fn regression_a_body_on_an_unauthenticated_get_is_never_read_as_a_request() {
    let h = Http::start();
    let smuggled = "GET /openapi.json HTTP/1.1\r\nHost: x\r\n\r\n";
    let request = format!(
        "GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n{smuggled}",
        smuggled.len()
    );
    let addr = h.base.trim_start_matches("http://").to_string();
    let mut s = TcpStream::connect(&addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut all = Vec::new();
    let _ = s.read_to_end(&mut all);
    let text = String::from_utf8_lossy(&all);
    assert_eq!(
        text.matches("HTTP/1.1 ").count(),
        1,
        "one response, then the connection closes: {text}"
    );
    assert!(text.contains("Connection: close"));
    // Conflicting lengths are refused.
    let head = h.raw(&format!(
        "POST /mcp HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\nContent-Length: 2\r\nContent-Length: 40\r\n\r\n{{}}"
    ));
    assert!(head.starts_with("HTTP/1.1 400"), "{head}");
    h.healthy();
}

#[test]
fn browsers_from_allowed_origins_get_cors() {
    let h = Http::start_with(&["--allow-origin", "https://dispatch.example"]);
    let head = h.raw("OPTIONS /mcp HTTP/1.1\r\nHost: x\r\nOrigin: https://dispatch.example\r\nAccess-Control-Request-Method: POST\r\n\r\n");
    assert!(head.starts_with("HTTP/1.1 204"), "{head}");
    assert!(
        head.contains("Access-Control-Allow-Origin: https://dispatch.example")
            && head.contains("Authorization"),
        "{head}"
    );
    let head = h.raw("OPTIONS /mcp HTTP/1.1\r\nHost: x\r\nOrigin: https://evil.example\r\n\r\n");
    assert!(head.starts_with("HTTP/1.1 403"), "{head}");
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}).to_string();
    let head = h.raw(&format!(
        "POST /mcp HTTP/1.1\r\nHost: x\r\nOrigin: https://dispatch.example\r\nAuthorization: Bearer {TOKEN}\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    ));
    assert!(
        head.starts_with("HTTP/1.1 200")
            && head.contains("Access-Control-Allow-Origin: https://dispatch.example"),
        "{head}"
    );
    h.healthy();
}

#[test]
fn protocol_headers_cannot_disagree_with_a_handshake_era_body() {
    let h = Http::start();
    let legacy = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "list_vehicles", "arguments": {}}});
    let (status, r) = h.post(
        "/mcp",
        &legacy,
        &[
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", "tools/list"),
        ],
    );
    assert_eq!(
        (status, r["error"]["code"].as_i64()),
        (400, Some(-32020)),
        "{r}"
    );
    let (status, r) = h.post("/mcp", &legacy, &[("MCP-Protocol-Version", "1999-01-01")]);
    assert_eq!(
        (status, r["error"]["code"].as_i64()),
        (400, Some(-32022)),
        "{r}"
    );
    let (status, _) = h.post("/mcp", &legacy, &[("MCP-Protocol-Version", "2025-06-18")]);
    assert_eq!(status, 200, "a handshake revision in the header is fine");
    // A name that is not header-safe travels base64-encoded.
    let (body, _) = modern(
        "tools/call",
        json!({"name": "list_vehicles", "arguments": {}}),
    );
    let encoded = format!(
        "=?base64?{}?=",
        fleetctl::mcp::tools::base64(b"list_vehicles")
    );
    let (status, r) = h.post(
        "/mcp",
        &body,
        &[
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", "tools/call"),
            ("Mcp-Name", &encoded),
        ],
    );
    assert_eq!(status, 200, "{r}");
    h.healthy();
}

#[test]
fn a_client_trickling_bytes_still_times_out() {
    let h = Http::start_with(&["--request-timeout-s", "1"]);
    let addr = h.base.trim_start_matches("http://").to_string();
    let mut s = TcpStream::connect(&addr).unwrap();
    s.set_read_timeout(Some(Duration::from_millis(150)))
        .unwrap();
    let started = Instant::now();
    let mut buf = [0u8; 512];
    let mut answer = String::new();
    for byte in "POST /mcp HTTP/1.1\r\nHost: a-very-long-host-name-sent-slowly.example\r\n".bytes()
    {
        if s.write_all(&[byte]).is_err() {
            break;
        }
        if let Ok(n) = s.read(&mut buf)
            && n > 0
        {
            answer = String::from_utf8_lossy(&buf[..n]).into_owned();
            break;
        }
        if started.elapsed() > Duration::from_secs(6) {
            break;
        }
    }
    assert!(
        answer.starts_with("HTTP/1.1 408"),
        "got {answer:?} after {:?}",
        started.elapsed()
    );
    assert!(started.elapsed() < Duration::from_secs(4));
    h.healthy();
}

#[test]
fn both_eras_are_served_and_modern_headers_must_match_the_body() {
    let h = Http::start();
    // Legacy: initialize, then calls stand alone (no session on HTTP).
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    let (status, body) = h.post("/mcp", &init, &[]);
    assert_eq!(
        (status, body["result"]["protocolVersion"].as_str()),
        (200, Some("2025-06-18"))
    );
    let call = json!({"jsonrpc": "2.0", "id": "c", "method": "tools/call", "params": {"name": "stopped_vehicles", "arguments": {}}});
    let (status, body) = h.post("/mcp", &call, &[]);
    assert_eq!(status, 200);
    assert_eq!(body["id"], "c");
    assert_eq!(body["result"]["structuredContent"]["vehicles"]["total"], 5);
    // Modern, headers matching.
    let (status, body) = post_modern(&h, "server/discover", json!({}));
    assert_eq!(
        (status, body["result"]["resultType"].as_str()),
        (200, Some("complete"))
    );
    let (status, body) = post_modern(
        &h,
        "tools/call",
        json!({"name": "list_vehicles", "arguments": {}}),
    );
    assert_eq!(status, 200);
    assert_eq!(body["result"]["structuredContent"]["vehicles"]["total"], 15);
    // Mismatches.
    let (body, _) = modern("tools/list", json!({}));
    let (status, r) = h.post("/mcp", &body, &[("Mcp-Method", "tools/list")]);
    assert_eq!(
        (status, r["error"]["code"].as_i64()),
        (400, Some(-32020)),
        "a missing MCP-Protocol-Version"
    );
    let (status, r) = h.post(
        "/mcp",
        &body,
        &[
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", "prompts/list"),
        ],
    );
    assert_eq!(
        (status, r["error"]["code"].as_i64()),
        (400, Some(-32020)),
        "{r}"
    );
    let (body, _) = modern(
        "tools/call",
        json!({"name": "list_vehicles", "arguments": {}}),
    );
    let (status, r) = h.post(
        "/mcp",
        &body,
        &[
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", "tools/call"),
            ("Mcp-Name", "alerts"),
        ],
    );
    assert_eq!(
        (status, r["error"]["code"].as_i64()),
        (400, Some(-32020)),
        "{r}"
    );
    // An unsupported version, headers consistent.
    let mut old = body.clone();
    old["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!("2099-01-01");
    let (status, r) = h.post(
        "/mcp",
        &old,
        &[
            ("MCP-Protocol-Version", "2099-01-01"),
            ("Mcp-Method", "tools/call"),
            ("Mcp-Name", "list_vehicles"),
        ],
    );
    assert_eq!(
        (status, r["error"]["code"].as_i64()),
        (400, Some(-32022)),
        "{r}"
    );
    assert_eq!(r["error"]["data"]["requested"], "2099-01-01");
    h.healthy();
}

#[test]
fn the_openapi_twin_answers_what_the_mcp_tool_answers() {
    let h = Http::start();
    let mut doc = Http::agent()
        .get(format!("{}/openapi.json", h.base))
        .call()
        .unwrap();
    let doc: Value = serde_json::from_str(&doc.body_mut().read_to_string().unwrap()).unwrap();
    let conn = crate::harness::open(fixture_db());
    let plate: String = conn
        .query_row(
            "SELECT plate FROM vehicles WHERE active = 1 ORDER BY id LIMIT 1",
            [],
            |r| r.get(0),
        )
        .unwrap();
    for spec in fleetctl::report::registry() {
        let op = &doc["paths"][format!("/api/v1/tools/{}", spec.tool)]["post"];
        assert_eq!(op["operationId"], spec.tool, "every tool has its path");
        assert_eq!(
            op["requestBody"]["content"]["application/json"]["schema"]["type"],
            "object"
        );
        assert!(op["responses"]["200"]["content"]["application/json"]["schema"].is_object());
        let mut args = serde_json::Map::new();
        for p in spec.params.iter().filter(|p| p.required || p.positional) {
            let v = if p.kind == fleetctl::report::ParamKind::Plate {
                plate.clone()
            } else {
                "Bodega Mixco".to_string()
            };
            args.insert(p.name.into(), v.into());
        }
        if spec.draws {
            args.insert("date".into(), "yesterday".into());
        }
        let (status, rest) = h.post(
            &format!("/api/v1/tools/{}", spec.tool),
            &Value::Object(args.clone()),
            &[],
        );
        assert_eq!(status, 200, "{}: {rest}", spec.tool);
        let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": spec.tool, "arguments": args}});
        let (_, mcp) = h.post("/mcp", &call, &[]);
        assert_eq!(rest, mcp["result"]["structuredContent"], "{}", spec.tool);
    }
    let (status, r) = h.post(
        "/api/v1/tools/trip_summary",
        &json!({"plate": "P-000XXX"}),
        &[],
    );
    assert_eq!(
        (status, r["error"]["code"].as_str()),
        (404, Some("not_found"))
    );
    let (status, r) = h.post("/api/v1/tools/alerts", &json!({"type": "nope"}), &[]);
    assert_eq!(
        (status, r["error"]["code"].as_str()),
        (400, Some("invalid_argument"))
    );
    let (status, _) = h.post("/api/v1/tools/teleport", &json!({}), &[]);
    assert_eq!(status, 404);
    let (status, r) = h.post(
        "/api/v1/tools/geofence_visits",
        &json!({"plate": plate, "geofence": "bodega"}),
        &[],
    );
    assert_eq!(
        (status, r["error"]["code"].as_str()),
        (409, Some("ambiguous"))
    );
    h.healthy();
}

#[test]
fn two_hundred_requests_over_ten_connections_are_all_answered() {
    let h = Http::start();
    let base = h.base.clone();
    let threads: Vec<_> = (0..10)
        .map(|t| {
            let base = base.clone();
            std::thread::spawn(move || {
                let agent = Http::agent();
                for i in 0..20 {
                    let id = t * 100 + i;
                    let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "list_geofences", "arguments": {}}});
                    let mut resp = agent
                        .post(format!("{base}/mcp"))
                        .header("Authorization", format!("Bearer {TOKEN}"))
                        .send(body.to_string())
                        .unwrap();
                    assert_eq!(resp.status().as_u16(), 200);
                    let v: Value = serde_json::from_str(&resp.body_mut().read_to_string().unwrap()).unwrap();
                    assert_eq!(v["id"], id);
                    assert_eq!(v["result"]["structuredContent"]["geofences"]["total"], 9);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("a client thread failed");
    }
    h.healthy();
}

#[test]
fn sigterm_finishes_and_exits() {
    let mut h = Http::start();
    h.healthy();
    let pid = h.child.id().to_string();
    let started = Instant::now();
    assert!(
        std::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    let status = loop {
        if let Some(s) = h.child.try_wait().unwrap() {
            break s;
        }
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "still running after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    assert!(status.success(), "{status:?}");
}

#[test]
fn the_server_refuses_to_start_unsafely() {
    let db = fixture_db().to_str().unwrap();
    let mut cmd = fleetctl(&["--db", db, "serve", "--http", "0.0.0.0:0"]);
    cmd.env("FLEETCTL_TOKEN", TOKEN);
    let r = crate::harness::run(cmd).fails(2);
    assert!(
        r.stderr.contains("not a loopback address")
            && r.stderr.contains("--allow-remote")
            && r.stderr.contains("TLS"),
        "{}",
        r.stderr
    );
    let r = crate::harness::run(fleetctl(&["--db", db, "serve", "--http", "127.0.0.1:0"])).fails(2);
    assert!(
        r.stderr.contains("FLEETCTL_TOKEN") && r.stderr.contains("--token-file"),
        "{}",
        r.stderr
    );
}

#[test]
fn a_slow_client_times_out_and_the_server_goes_on() {
    let h = Http::start_with(&["--request-timeout-s", "1"]);
    let addr = h.base.trim_start_matches("http://").to_string();
    let mut s = TcpStream::connect(&addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(b"POST /mcp HTTP/1.1\r\nHost: x\r\n").unwrap(); // ...and nothing more
    let started = Instant::now();
    let mut buf = [0u8; 512];
    let n = s.read(&mut buf).unwrap_or(0);
    let head = String::from_utf8_lossy(&buf[..n]);
    assert!(head.starts_with("HTTP/1.1 408"), "{head}");
    assert!(started.elapsed() < Duration::from_secs(4));
    h.healthy();
}

#[test]
fn a_full_queue_answers_503_and_every_other_request_is_served() {
    let h = Http::start_with(&["--workers", "1", "--queue", "1"]);
    let conn = crate::harness::open(fixture_db());
    let plate: String = conn
        .query_row(
            "SELECT plate FROM vehicles WHERE active = 1 ORDER BY id LIMIT 1",
            [],
            |r| r.get(0),
        )
        .unwrap();
    let base = h.base.clone();
    let threads: Vec<_> = (0..12)
        .map(|_| {
            let (base, plate) = (base.clone(), plate.clone());
            std::thread::spawn(move || {
                let mut resp = Http::agent()
                    .post(format!("{base}/api/v1/tools/route_map"))
                    .header("Authorization", format!("Bearer {TOKEN}"))
                    .send(
                        json!({"plate": plate, "date": "yesterday", "width": 2048, "height": 2048})
                            .to_string(),
                    )
                    .unwrap();
                let status = resp.status().as_u16();
                let _ = resp.body_mut().read_to_string();
                (status, resp.headers().get("retry-after").is_some())
            })
        })
        .collect();
    let results: Vec<(u16, bool)> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    assert!(
        results.iter().all(|(s, _)| *s == 200 || *s == 503),
        "{results:?}"
    );
    assert!(
        results.iter().any(|(s, retry)| *s == 503 && *retry),
        "one worker and a queue of one must turn some away: {results:?}"
    );
    assert!(results.iter().any(|(s, _)| *s == 200));
    h.healthy();
}
