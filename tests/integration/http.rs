//! `fleetctl serve --http` over loopback with a real HTTP client (ureq): the
//! authentication and hardening rules in the order they apply, both MCP eras, the
//! OpenAPI twin, concurrency, and shutdown.

use crate::harness::{fixture_db, fleetctl};
use serde_json::{Value, json};
use std::io::{BufRead, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

pub(crate) const TOKEN: &str = "test-token-0123456789abcdef";

/// A running `fleetctl serve --http 127.0.0.1:0`.
struct Http {
    child: std::process::Child,
    base: String,
    log: std::sync::mpsc::Receiver<String>,
}

/// What `spawn_server` gives: the process, its stderr (read up to the line saying
/// where it listens), its base URL, and what it said before it listened.
pub(crate) type Spawned = (
    std::process::Child,
    std::io::BufReader<std::process::ChildStderr>,
    String,
    String,
);

/// Starts `serve --http` on the fixture database, on a free loopback port with
/// `extra` flags.
fn spawn_server(extra: &[&str], env: &[(&str, &str)]) -> Spawned {
    spawn_server_on(fixture_db(), extra, env)
}

/// Starts `serve --http` on `db`, on a free loopback port with `extra` flags.
pub(crate) fn spawn_server_on(
    db: &std::path::Path,
    extra: &[&str],
    env: &[(&str, &str)],
) -> Spawned {
    let mut args = vec![
        "--db",
        db.to_str().unwrap(),
        "serve",
        "--http",
        "127.0.0.1:0",
    ];
    args.extend_from_slice(extra);
    let mut child = fleetctl(&args)
        .env("FLEETCTL_TOKEN", TOKEN)
        .envs(env.iter().copied())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let (mut line, mut said) = (String::new(), String::new());
    let base = loop {
        line.clear();
        assert!(
            stderr.read_line(&mut line).unwrap() > 0,
            "the server exited before listening: {said}"
        );
        if let Some(rest) = line.split("listening on ").nth(1) {
            break rest.split_whitespace().next().unwrap().to_string();
        }
        said.push_str(&line);
    };
    (child, stderr, base, said)
}

/// The server's log, line by line, as it writes it (its lines are written by a
/// thread of their own, after the answers they describe may have gone out).
pub(crate) fn log_lines(
    stderr: std::io::BufReader<std::process::ChildStderr>,
) -> std::sync::mpsc::Receiver<String> {
    let (lines, log) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in stderr.lines().map_while(Result::ok) {
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    log
}

impl Http {
    fn start_with(extra: &[&str]) -> Http {
        Http::start_env(extra, &[])
    }

    fn start_env(extra: &[&str], env: &[(&str, &str)]) -> Http {
        let (child, stderr, base, _) = spawn_server(extra, env);
        Http {
            child,
            base,
            log: log_lines(stderr),
        }
    }

    /// The server's log from here up to the first line holding `needle`; 60 s is a
    /// deadline for a hung server only.
    fn log_until(&self, needle: &str) -> String {
        let mut out = String::new();
        loop {
            let line = self
                .log
                .recv_timeout(Duration::from_secs(60))
                .unwrap_or_else(|_| panic!("no log line with {needle:?} after:\n{out}"));
            out.push_str(&line);
            out.push('\n');
            if line.contains(needle) {
                return out;
            }
        }
    }

    fn start() -> Http {
        Http::start_with(&[])
    }

    fn agent() -> ureq::Agent {
        ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(60)))
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

    /// Sends raw bytes on a fresh connection and returns the first answer (empty if the
    /// server closed without one); 60 s is a deadline for a hung server only.
    fn raw(&self, request: &str) -> String {
        let addr = self.base.trim_start_matches("http://");
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        let _ = s.write_all(request.as_bytes());
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
    let head = h.raw("POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Length: 900000\r\n\r\n");
    assert!(head.starts_with("HTTP/1.1 401"), "{head}");
    assert!(
        head.contains("www-authenticate: Bearer realm=\"fleetctl\""),
        "{head}"
    );
    let head = h.raw("POST /mcp HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer wrong-token-wrong-token\r\nContent-Length: 5\r\n\r\n{bad");
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
    let log = h.log_until("POST /mcp 200");
    assert!(log.contains("POST /mcp 401"), "{log}");
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
        "POST /mcp HTTP/1.1\r\nHost: localhost\r\n{auth}Content-Length: 2000000\r\n\r\n"
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
        let head = h.raw("POST /mcp HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer nope\r\nContent-Length: 0\r\n\r\n");
        assert!(head.starts_with("HTTP/1.1 401"), "{head}");
    }
    let head = h.raw(
        "POST /mcp HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer nope\r\nContent-Length: 0\r\n\r\n",
    );
    assert!(
        head.starts_with("HTTP/1.1 429") && head.to_ascii_lowercase().contains("retry-after"),
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
    let smuggled = "GET /openapi.json HTTP/1.1\r\nHost: localhost\r\n\r\n";
    let request = format!(
        "GET /healthz HTTP/1.1\r\nHost: localhost\r\nContent-Length: {}\r\n\r\n{smuggled}",
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
    assert!(text.contains("connection: close"));
    // Conflicting lengths are refused.
    let head = h.raw(&format!(
        "POST /mcp HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {TOKEN}\r\nContent-Length: 2\r\nContent-Length: 40\r\n\r\n{{}}"
    ));
    assert!(head.starts_with("HTTP/1.1 400"), "{head}");
    h.healthy();
}

#[test]
fn browsers_from_allowed_origins_get_cors() {
    let h = Http::start_with(&["--allow-origin", "https://dispatch.example"]);
    let head = h.raw("OPTIONS /mcp HTTP/1.1\r\nHost: localhost\r\nOrigin: https://dispatch.example\r\nAccess-Control-Request-Method: POST\r\n\r\n");
    assert!(head.starts_with("HTTP/1.1 204"), "{head}");
    assert!(
        head.contains("access-control-allow-origin: https://dispatch.example")
            && head.contains("Authorization"),
        "{head}"
    );
    let head =
        h.raw("OPTIONS /mcp HTTP/1.1\r\nHost: localhost\r\nOrigin: https://evil.example\r\n\r\n");
    assert!(head.starts_with("HTTP/1.1 403"), "{head}");
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}).to_string();
    let head = h.raw(&format!(
        "POST /mcp HTTP/1.1\r\nHost: localhost\r\nOrigin: https://dispatch.example\r\nAuthorization: Bearer {TOKEN}\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    ));
    assert!(
        head.starts_with("HTTP/1.1 200")
            && head.contains("access-control-allow-origin: https://dispatch.example"),
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

/// Reads until the server answers or closes; the text it sent (empty if it closed
/// without a word). The 60 s read limit is a deadline for a hung server only.
fn until_answer_or_close(s: &mut TcpStream) -> String {
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut all = Vec::new();
    let _ = s.read_to_end(&mut all);
    String::from_utf8_lossy(&all).into_owned()
}

#[test]
fn a_client_trickling_bytes_is_cut_off() {
    let h = Http::start_with(&["--request-timeout-s", "1"]);
    let addr = h.base.trim_start_matches("http://").to_string();
    let mut s = TcpStream::connect(&addr).unwrap();
    // One byte at a time, and never the end of the headers: the server must not wait
    // for ever. The pauses only pace this client; nothing is measured.
    let writer = {
        let mut s = s.try_clone().unwrap();
        std::thread::spawn(move || {
            for byte in b"POST /mcp HTTP/1.1\r\nHost: localhost\r\nX-Slow: "
                .iter()
                .chain(std::iter::repeat(&b'a'))
            {
                if s.write_all(&[*byte]).is_err() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        })
    };
    let answer = until_answer_or_close(&mut s);
    assert!(
        answer.is_empty() || answer.starts_with("HTTP/1.1 408"),
        "{answer}"
    );
    writer.join().unwrap();
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
        for p in spec.params().iter().filter(|p| p.required || p.positional) {
            let v = if p.kind == fleetctl::report::ParamKind::Plate {
                plate.clone()
            } else {
                "Bodega Mixco".to_string()
            };
            args.insert(p.name.into(), v.into());
        }
        if spec.draws && spec.params().iter().any(|p| p.name == "date") {
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
        let mut rest = rest;
        // A drawing tool's REST answer carries the picture the MCP client gets as an
        // image block: the same bytes.
        let picture = rest.as_object_mut().unwrap().remove("png_base64");
        let image = mcp["result"]["content"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["type"] == "image")
            .map(|c| c["data"].clone());
        assert_eq!(picture, image, "{}", spec.tool);
        assert_eq!(picture.is_some(), spec.draws, "{}", spec.tool);
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
    let status = crate::harness::sigterm_and_wait(&mut h.child);
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
        r.stderr.contains("no bearer token was given")
            && r.stderr.contains("FLEETCTL_TOKEN")
            && r.stderr.contains("--token-file"),
        "{}",
        r.stderr
    );
    // A short token is said to be short, with its length.
    let mut cmd = fleetctl(&["--db", db, "serve", "--http", "127.0.0.1:0"]);
    cmd.env("FLEETCTL_TOKEN", "abcde");
    let r = crate::harness::run(cmd).fails(2);
    assert!(
        r.stderr.contains("5 characters long") && r.stderr.contains("at least 16"),
        "{}",
        r.stderr
    );
}

#[test]
fn a_token_file_others_can_read_is_warned_about() {
    use std::os::unix::fs::PermissionsExt;
    let dir = crate::harness::TempDir::new("token-mode");
    let file = dir.join("token");
    std::fs::write(&file, format!("{TOKEN}\n")).unwrap();
    let start = |mode: u32| {
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(mode)).unwrap();
        let (mut child, _, _, said) = spawn_server(&["--token-file", file.to_str().unwrap()], &[]);
        let _ = child.kill();
        let _ = child.wait();
        said
    };
    let said = start(0o644);
    assert!(
        said.contains("can be read by other users") && said.contains("chmod 600"),
        "{said}"
    );
    assert!(!start(0o600).contains("can be read by other users"));
}

#[test]
fn a_slow_client_times_out_and_the_server_goes_on() {
    let h = Http::start_with(&["--request-timeout-s", "1"]);
    let addr = h.base.trim_start_matches("http://").to_string();
    // Headers that never end.
    let mut s = TcpStream::connect(&addr).unwrap();
    s.write_all(b"POST /mcp HTTP/1.1\r\nHost: localhost\r\n")
        .unwrap();
    let answer = until_answer_or_close(&mut s);
    assert!(
        answer.is_empty() || answer.starts_with("HTTP/1.1 408"),
        "{answer}"
    );
    // A body that never comes.
    let mut s = TcpStream::connect(&addr).unwrap();
    s.write_all(format!("POST /mcp HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {TOKEN}\r\nContent-Length: 100\r\n\r\n{{").as_bytes()).unwrap();
    let answer = until_answer_or_close(&mut s);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("\"timeout\""), "{answer}");
    h.healthy();
}

#[test]
fn a_full_queue_answers_503_and_every_other_request_is_served() {
    let hold = crate::harness::TempDir::new("hold");
    let h = Http::start_env(
        &["--workers", "1", "--queue", "1"],
        &[
            ("FLEETCTL_TEST_HOLD_IN", "list_geofences"),
            ("FLEETCTL_TEST_HOLD_DIR", hold.path().to_str().unwrap()),
        ],
    );
    let call = |tool: &'static str| {
        let base = h.base.clone();
        std::thread::spawn(move || {
            let mut resp = Http::agent()
                .post(format!("{base}/api/v1/tools/{tool}"))
                .header("Authorization", format!("Bearer {TOKEN}"))
                .send("{}")
                .unwrap();
            let status = resp.status().as_u16();
            let _ = resp.body_mut().read_to_string();
            (status, resp.headers().get("retry-after").is_some())
        })
    };
    // The one worker is held inside a report (the test sees it enter)...
    let held = call("list_geofences");
    let entered = || {
        std::fs::read_dir(hold.path()).unwrap().any(|e| {
            e.unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with("held-")
        })
    };
    let started = Instant::now();
    while !entered() {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the worker never started"
        );
        std::thread::yield_now();
    }
    // ...so of two more requests, one waits in the queue of one and one is turned away.
    let mut waiting = vec![call("list_vehicles"), call("list_vehicles")];
    let first_done = loop {
        if let Some(i) = waiting.iter().position(|t| t.is_finished()) {
            break i;
        }
        std::thread::yield_now();
    };
    let refused = waiting.remove(first_done).join().unwrap();
    assert_eq!(
        refused,
        (503, true),
        "the second waiting request is turned away with Retry-After"
    );
    std::fs::write(hold.join("release"), "").unwrap();
    assert_eq!(held.join().unwrap().0, 200);
    let other: Vec<(u16, bool)> = waiting.into_iter().map(|t| t.join().unwrap()).collect();
    assert!(
        other.iter().any(|(s, _)| *s == 200),
        "the queued request is served: {other:?}"
    );
    h.healthy();
}

#[test]
fn regression_clients_without_the_token_cannot_take_the_server() {
    let h = Http::start();
    let addr = h.base.trim_start_matches("http://").to_string();
    // 200 connections that never say a word, and 50 that pipeline requests for the
    // API document and never read the answers.
    let mut idle: Vec<TcpStream> = (0..200)
        .map(|_| TcpStream::connect(&addr).unwrap())
        .collect();
    let pipeline = "GET /openapi.json HTTP/1.1\r\nHost: localhost\r\n\r\n".repeat(200);
    for _ in 0..50 {
        let mut s = TcpStream::connect(&addr).unwrap();
        let _ = s.write_all(pipeline.as_bytes());
        idle.push(s);
    }
    // The client with the token is served all the same.
    let (status, body) = h.post(
        "/mcp",
        &json!({"jsonrpc": "2.0", "id": 7, "method": "ping"}),
        &[],
    );
    assert_eq!((status, &body["id"]), (200, &json!(7)), "{body}");
    // An anonymous request gets its answer and the connection closes.
    let mut s = TcpStream::connect(&addr).unwrap();
    s.write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .unwrap();
    let answer = until_answer_or_close(&mut s);
    assert!(
        answer.starts_with("HTTP/1.1 200") && answer.contains("connection: close"),
        "{answer}"
    );
    drop(idle);
}

#[test]
fn regression_lenient_http_is_refused() {
    let h = Http::start_with(&["--allow-host", "fleet.example"]);
    let auth = format!("Authorization: Bearer {TOKEN}\r\n");
    let ping = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
    let post = |headers: &str| {
        h.raw(&format!(
            "POST /mcp HTTP/1.1\r\n{headers}Content-Length: {}\r\n\r\n{ping}",
            ping.len()
        ))
    };
    // Hosts: loopback names and --allow-host pass; others (DNS rebinding) do not.
    assert!(post(&format!("Host: localhost:1\r\n{auth}")).starts_with("HTTP/1.1 200"));
    assert!(post(&format!("Host: fleet.example\r\n{auth}")).starts_with("HTTP/1.1 200"));
    let r = post(&format!("Host: rebound.evil.example\r\n{auth}"));
    assert!(
        r.starts_with("HTTP/1.1 403") && r.contains("--allow-host"),
        "{r}"
    );
    let r = post(&auth);
    assert!(
        r.starts_with("HTTP/1.1 400") && r.contains("Host header"),
        "{r}"
    );
    // Origins: the scheme counts, and `null` is refused.
    for origin in ["evil://localhost", "file://localhost", "null"] {
        let r = post(&format!("Host: localhost\r\n{auth}Origin: {origin}\r\n"));
        assert!(
            r.starts_with("HTTP/1.1 403") && !r.contains("access-control-allow-origin"),
            "{origin}: {r}"
        );
    }
    // Framing the library refuses: a signed length, a bare CR, NUL in a value.
    for bad in [
        format!("POST /mcp HTTP/1.1\r\nHost: localhost\r\n{auth}Content-Length: +40\r\n\r\n{ping}"),
        format!(
            "POST /mcp HTTP/1.1\r\nHost: localhost\r\nX-A: a\rb\r\n{auth}Content-Length: 2\r\n\r\n{{}}"
        ),
        format!(
            "POST /mcp HTTP/1.1\r\nHost: localhost\r\nX-A: a\0b\r\n{auth}Content-Length: 2\r\n\r\n{{}}"
        ),
    ] {
        let r = h.raw(&bad);
        assert!(
            r.is_empty() || r.starts_with("HTTP/1.1 400"),
            "{bad:?}: {r}"
        );
    }
    // `Connection: close, TE` closes.
    let mut s = TcpStream::connect(h.base.trim_start_matches("http://")).unwrap();
    s.write_all(format!("POST /mcp HTTP/1.1\r\nHost: localhost\r\n{auth}Connection: close, TE\r\nTE: trailers\r\nContent-Length: {}\r\n\r\n{ping}", ping.len()).as_bytes()).unwrap();
    let answer = until_answer_or_close(&mut s);
    assert_eq!(answer.matches("HTTP/1.1 200").count(), 1, "{answer}");
    // A chunked body is read (the library frames it).
    let chunked = format!(
        "POST /mcp HTTP/1.1\r\nHost: localhost\r\n{auth}Transfer-Encoding: chunked\r\n\r\n{:x}\r\n{ping}\r\n0\r\n\r\n",
        ping.len()
    );
    assert!(h.raw(&chunked).starts_with("HTTP/1.1 200"));
    // The OpenAPI twin keeps the message bounds: values are counted before any is built.
    let many = format!("{{\"x\": [{}]}}", vec!["1"; 20_000].join(","));
    let (status, body) = h.post(
        "/api/v1/tools/alerts",
        &serde_json::from_str(&many).unwrap(),
        &[],
    );
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("at most 10000 JSON values"),
        "{body}"
    );
    // A 204 carries no Content-Length.
    let r =
        h.raw("OPTIONS /mcp HTTP/1.1\r\nHost: localhost\r\nOrigin: http://localhost:3000\r\n\r\n");
    assert!(
        r.starts_with("HTTP/1.1 204") && !r.contains("content-length"),
        "{r}"
    );
}

#[test]
fn sigterm_ends_the_server_whatever_the_clients_do() {
    let mut h = Http::start_with(&["--request-timeout-s", "1"]);
    let addr = h.base.trim_start_matches("http://").to_string();
    let pipeline = "GET /openapi.json HTTP/1.1\r\nHost: localhost\r\n\r\n".repeat(100);
    let mut held = Vec::new();
    for _ in 0..20 {
        let mut s = TcpStream::connect(&addr).unwrap();
        let _ = s.write_all(pipeline.as_bytes());
        held.push(s);
        let mut s = TcpStream::connect(&addr).unwrap();
        let _ = s.write_all(format!("POST /mcp HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {TOKEN}\r\nContent-Length: 99\r\n\r\n{{").as_bytes());
        held.push(s);
    }
    h.healthy();
    // The bound itself is measured, not asserted.
    let status = crate::harness::sigterm_and_wait(&mut h.child);
    assert!(status.success(), "{status:?}");
    drop(held);
}

#[test]
fn serve_refuses_out_of_range_settings_rather_than_clamping_them() {
    for (flag, value, range) in [
        ("--workers", "100", "1..=64"),
        ("--workers", "0", "1..=64"),
        ("--queue", "0", "1..=4096"),
        ("--request-timeout-s", "5000", "1..=3600"),
    ] {
        let r = crate::harness::run(crate::harness::fleetctl(&[
            "serve",
            "--http",
            "127.0.0.1:0",
            flag,
            value,
        ]))
        .fails(2);
        assert!(
            r.stderr.contains(flag) && r.stderr.contains(value) && r.stderr.contains(range),
            "{}",
            r.stderr
        );
    }
}

#[test]
fn two_host_headers_or_an_absolute_url_to_another_host_are_refused() {
    let h = Http::start();
    let two = h.raw(
        "GET /healthz HTTP/1.1\r\nHost: localhost\r\nHost: attacker.example\r\nConnection: close\r\n\r\n",
    );
    assert!(two.starts_with("HTTP/1.1 400"), "{two}");
    // The request line names another host: the Host header does not vouch for it.
    let absolute = h.raw(
        "GET http://attacker.example/healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
    );
    assert!(absolute.starts_with("HTTP/1.1 403"), "{absolute}");
    // One Host, ours: answered.
    let fine = h.raw("GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    assert!(fine.starts_with("HTTP/1.1 200"), "{fine}");
}

#[test]
fn health_and_openapi_keep_a_connection_that_shows_its_token() {
    let h = Http::start();
    for path in ["/healthz", "/openapi.json"] {
        let anonymous = h.raw(&format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n"));
        assert!(anonymous.starts_with("HTTP/1.1 200"), "{anonymous}");
        assert!(
            anonymous.to_ascii_lowercase().contains("connection: close"),
            "{anonymous}"
        );
        let known = h.raw(&format!(
            "GET {path} HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {TOKEN}\r\n\r\n"
        ));
        assert!(known.starts_with("HTTP/1.1 200"), "{known}");
        assert!(
            !known.to_ascii_lowercase().contains("connection: close"),
            "{known}"
        );
    }
}

/// A server whose stderr nobody reads (a stalled pipe) keeps answering: its log lines
/// queue, then are dropped and counted, and the count is logged once stderr moves.
#[test]
fn a_stalled_stderr_never_stops_the_server() {
    let (mut child, stderr, base, _) = spawn_server(&[], &[]);
    // Each request logs its path, up to 4 KiB: a 64 KiB pipe is full after a few
    // dozen, the writer's queue after about a thousand more.
    let long_path = format!("/{}", "x".repeat(3000));
    let agent = Http::agent();
    for i in 0..(logging_queue_lines() + 200) {
        let status = agent
            .get(format!("{base}{long_path}"))
            .call()
            .unwrap_or_else(|e| panic!("request {i} failed: {e}"))
            .status()
            .as_u16();
        assert!(status >= 400, "request {i}: {status}");
    }
    let mut health = agent.get(format!("{base}/healthz")).call().unwrap();
    assert_eq!(health.status().as_u16(), 200);
    assert_eq!(
        health.body_mut().read_to_string().unwrap(),
        r#"{"status":"ok"}"#
    );
    // stderr moves again: what was kept comes out, and the count of the dropped.
    let lines_rx = log_lines(stderr);
    agent.get(format!("{base}/healthz")).call().unwrap();
    loop {
        // 60 s is a deadline for a hung server only.
        let line = lines_rx
            .recv_timeout(Duration::from_secs(60))
            .expect("the count of dropped lines is logged");
        if line.contains("log lines dropped") {
            break;
        }
    }
    // SIGTERM: the server stops by itself.
    assert!(
        std::process::Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .unwrap()
            .success()
    );
    assert!(child.wait().unwrap().success());
}

/// The background log writer's queue, in lines (fleetctl's `logging::QUEUE_LINES`).
fn logging_queue_lines() -> usize {
    fleetctl::logging::QUEUE_LINES
}

/// Reads exactly one answer (its head and `Content-Length` bytes of body) and no more.
fn one_answer(s: &mut TcpStream) -> String {
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut got = Vec::new();
    let mut byte = [0u8; 1];
    while !got.ends_with(b"\r\n\r\n") && s.read(&mut byte).unwrap_or(0) == 1 {
        got.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&got).to_ascii_lowercase();
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    let mut body = vec![0u8; length];
    s.read_exact(&mut body).unwrap();
    got.extend_from_slice(&body);
    String::from_utf8_lossy(&got).into_owned()
}

/// Token holders who pipeline requests and never read the answers cannot lock out
/// another token holder: a full server closes the connection that has longest not
/// read its answers to make room (before, the newcomer got 503 until the stalled
/// writes timed out, 22–31 s with clients that reconnect).
#[test]
fn regression_token_holders_who_never_read_cannot_lock_others_out() {
    let h = Http::start_with(&["--max-connections", "2"]);
    let addr = h.base.trim_start_matches("http://").to_string();
    // Far more answer bytes than the sockets' buffers hold, so each write stalls.
    let pipeline = format!(
        "GET /openapi.json HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {TOKEN}\r\n\r\n"
    )
    .repeat(2000);
    let never_reading: Vec<TcpStream> = (0..2)
        .map(|_| {
            let mut s = TcpStream::connect(&addr).unwrap();
            // One answer read, so the connection has shown its token for sure; then
            // never another.
            let health = format!(
                "GET /healthz HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {TOKEN}\r\n\r\n"
            );
            s.write_all(health.as_bytes()).unwrap();
            assert!(one_answer(&mut s).starts_with("HTTP/1.1 200"));
            s.set_write_timeout(Some(Duration::from_secs(60))).unwrap();
            let _ = s.write_all(pipeline.as_bytes());
            s
        })
        .collect();
    // The newcomer is turned away (503, retry) until a writer has stalled, then let in.
    let ping = r#"{"jsonrpc": "2.0", "id": 7, "method": "ping"}"#;
    let request = format!(
        "POST /mcp HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {TOKEN}\r\n\
         Content-Type: application/json\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{ping}",
        ping.len()
    );
    let started = Instant::now();
    let answer = loop {
        let mut s = TcpStream::connect(&addr).unwrap();
        let _ = s.write_all(request.as_bytes());
        let answer = until_answer_or_close(&mut s);
        let turned_away = answer.is_empty() || answer.starts_with("HTTP/1.1 503");
        if !turned_away || started.elapsed() > Duration::from_secs(120) {
            break answer;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(
        answer.starts_with("HTTP/1.1 200") && answer.contains(r#""id":7"#),
        "{answer}"
    );
    let log = h.log_until("had not read its answers");
    assert!(log.contains("to make room for a new one"), "{log}");
    drop(never_reading);
}
