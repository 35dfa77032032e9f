//! What a worker does with a request that passed every rule: one JSON-RPC message on
//! `/mcp` (the same session code stdio uses) or one tool call on `/api/v1/tools/{name}`.
//! Workers are plain threads, each with its own read-only database connection.

use super::policy::header_value;
use crate::error::{Error, ErrorCode};
use crate::mcp::jsonrpc::{self, Incoming};
use crate::mcp::session::{self, Response, Server};
use crate::report;
use crate::threads::OrdinaryWhile;
use serde_json::{Value, json};
use std::collections::HashMap;

/// A request for a worker.
pub enum Job {
    /// One JSON-RPC message, with the request's protocol headers (lower-case names).
    Mcp {
        /// The body.
        body: hyper::body::Bytes,
        /// `mcp-protocol-version`, `mcp-method`, `mcp-name`, when sent.
        headers: HashMap<String, String>,
    },
    /// One tool call of the OpenAPI twin.
    Tool {
        /// The tool.
        name: String,
        /// Its arguments as a JSON object (or empty).
        body: hyper::body::Bytes,
    },
}

/// A worker's answer: a status and a JSON body (`None`: empty, as for 202), serialized
/// here on the worker's thread rather than on the event loop.
pub struct Reply {
    /// The HTTP status.
    pub status: u16,
    /// The body, serialized JSON.
    pub body: Option<hyper::body::Bytes>,
}

impl Reply {
    fn json(status: u16, body: Value) -> Reply {
        Reply {
            status,
            body: Some(body.to_string().into()),
        }
    }

    /// The reply for an error.
    pub fn error(e: &Error) -> Reply {
        Reply::json(e.code.http_status(), e.to_json())
    }
}

/// Status for a JSON-RPC answer over HTTP.
fn rpc_status(answer: &Value) -> u16 {
    match answer["error"]["code"].as_i64() {
        None => 200,
        Some(jsonrpc::METHOD_NOT_FOUND) => 404,
        Some(jsonrpc::INTERNAL_ERROR) => 500,
        Some(_) => 400,
    }
}

/// -32020: a header does not match the body.
pub const HEADER_MISMATCH: i64 = -32020;

/// Checks the protocol headers against the body; `Some(error)` when they disagree.
/// A 2026-07-28 body needs MCP-Protocol-Version, Mcp-Method and (for tools/call and
/// prompts/get) Mcp-Name matching it; a handshake-era body may carry
/// MCP-Protocol-Version, which must then name a handshake revision.
pub fn header_mismatch(incoming: &Incoming, headers: &HashMap<String, String>) -> Option<Value> {
    let (id, method, params) = match incoming {
        Incoming::Request { id, method, params } => (id.clone(), method, params),
        Incoming::Notification { method, params } => (Value::Null, method, params),
        _ => return None,
    };
    let header = |name: &str| headers.get(name).and_then(|v| header_value(v));
    let mismatch = |what: String| {
        Some(jsonrpc::error(
            &id,
            HEADER_MISMATCH,
            &format!("Header mismatch: {what}"),
            None,
        ))
    };
    let body_version = params
        .as_ref()
        .and_then(|p| p.get("_meta"))
        .and_then(|m| m.get("io.modelcontextprotocol/protocolVersion"))
        .and_then(Value::as_str);
    let Some(meta_version) = body_version else {
        return match header("mcp-protocol-version") {
            None => None,
            Some(v) if session::LEGACY_VERSIONS.contains(&v.as_str()) => None,
            Some(v) if v == session::MODERN_VERSION => mismatch(format!(
                "MCP-Protocol-Version header value '{v}' but the body carries no _meta protocolVersion"
            )),
            Some(v) => {
                let mut supported = vec![session::MODERN_VERSION];
                supported.extend(session::LEGACY_VERSIONS);
                Some(jsonrpc::error(
                    &id,
                    session::UNSUPPORTED_VERSION,
                    "Unsupported protocol version",
                    Some(json!({"supported": supported, "requested": v})),
                ))
            }
        };
    };
    match header("mcp-protocol-version") {
        Some(v) if v == meta_version => {}
        Some(v) => {
            return mismatch(format!(
                "MCP-Protocol-Version header value '{v}' does not match body value '{meta_version}'"
            ));
        }
        None => return mismatch("the MCP-Protocol-Version header is required".into()),
    }
    match header("mcp-method") {
        Some(m) if m == *method => {}
        Some(m) => {
            return mismatch(format!(
                "Mcp-Method header value '{m}' does not match body value '{method}'"
            ));
        }
        None => return mismatch("the Mcp-Method header is required".into()),
    }
    if matches!(method.as_str(), "tools/call" | "prompts/get") {
        let name = params
            .as_ref()
            .and_then(|p| p.get("name"))
            .and_then(Value::as_str)
            .unwrap_or_default();
        match header("mcp-name") {
            Some(n) if n == name => {}
            Some(n) => {
                return mismatch(format!(
                    "Mcp-Name header value '{n}' does not match body value '{name}'"
                ));
            }
            None => return mismatch("the Mcp-Name header is required".into()),
        }
    }
    None
}

/// Runs one job.
pub fn run_job(server: &mut Server, job: Job) -> Reply {
    match job {
        Job::Mcp { body, headers } => {
            let incoming = jsonrpc::parse(&body);
            if let Incoming::Batch(_) = incoming {
                let e = jsonrpc::error(
                    &Value::Null,
                    jsonrpc::INVALID_REQUEST,
                    "Invalid Request: one JSON-RPC message per HTTP request",
                    None,
                );
                return Reply::json(400, e);
            }
            if let Some(e) = header_mismatch(&incoming, &headers) {
                return Reply::json(400, e);
            }
            let _ordinary = OrdinaryWhile::if_drawing(|| tool_called(&incoming).is_some_and(draws));
            match server.handle(incoming) {
                None => Reply {
                    status: 202,
                    body: None,
                },
                Some(Response::Value(answer)) => Reply::json(rpc_status(&answer), answer),
                Some(kept) => Reply {
                    status: 200,
                    body: Some(kept.text().into()),
                },
            }
        }
        Job::Tool { name, body } => {
            let args = if body.iter().all(u8::is_ascii_whitespace) {
                Ok(report::Args::new())
            } else {
                // The same bounds as a JSON-RPC message (values counted before any
                // is built).
                match jsonrpc::parse_bounded(&body) {
                    Ok(Value::Object(args)) => Ok(args),
                    Ok(_) => Err(Error::invalid(
                        "the request body must be a JSON object of the tool's arguments",
                    )),
                    Err(why) => Err(Error::invalid(why.to_string())),
                }
            };
            let _ordinary = OrdinaryWhile::if_drawing(|| draws(&name));
            match args.map(|args| server.run_tool(&name, &args)) {
                Ok(None) => Reply::error(&Error::new(
                    ErrorCode::NotFound,
                    format!("no tool named {name}"),
                )),
                Ok(Some(Ok(answer))) => {
                    // A drawing tool's picture is part of its answer here too (an
                    // MCP client gets it as an image block).
                    let mut value = answer.value;
                    if let Some(png) = &answer.png {
                        value["png_base64"] = crate::mcp::tools::base64(png).into();
                    }
                    match crate::mcp::tools::over_limit(&name, &value, session::MAX_ANSWER_BYTES) {
                        Some(e) => Reply::error(&e),
                        None => Reply::json(200, value),
                    }
                }
                Ok(Some(Err(e))) | Err(e) => Reply::error(&e),
            }
        }
    }
}

/// The tool a JSON-RPC message calls, if it is a `tools/call`.
fn tool_called(incoming: &Incoming) -> Option<&str> {
    match incoming {
        Incoming::Request { method, params, .. } if method == "tools/call" => params
            .as_ref()
            .and_then(|p| p.get("name"))
            .and_then(Value::as_str),
        _ => None,
    }
}

/// Whether the tool draws a picture, which a real-time worker draws at the
/// ordinary priority.
fn draws(tool: &str) -> bool {
    report::find(tool).is_some_and(|s| s.draws)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pictures_are_the_tools_a_realtime_worker_draws_at_the_ordinary_priority() {
        for picture in ["route_map", "speed_chart", "fleet_map"] {
            assert!(draws(picture), "{picture}");
        }
        for report in [
            "vehicle_position",
            "stopped_vehicles",
            "daily_summary",
            "no_such_tool",
        ] {
            assert!(!draws(report), "{report}");
        }
        let call = |message: &str| {
            let incoming = jsonrpc::parse(message.as_bytes());
            tool_called(&incoming).map(str::to_owned)
        };
        assert_eq!(
            call(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"fleet_map"}}"#),
            Some("fleet_map".into())
        );
        assert_eq!(
            call(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"name":"fleet_map"}}"#),
            None
        );
    }

    fn headers(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn modern_headers_must_match_the_body() {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "alerts",
            "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}});
        let incoming = jsonrpc::classify(body);
        let ok = headers(&[
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/call"),
            ("mcp-name", "alerts"),
        ]);
        assert_eq!(header_mismatch(&incoming, &ok), None);
        let wrong = headers(&[
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/call"),
            ("mcp-name", "trip_summary"),
        ]);
        let e = header_mismatch(&incoming, &wrong).unwrap();
        assert_eq!(e["error"]["code"], HEADER_MISMATCH);
        assert_eq!(
            header_mismatch(&incoming, &headers(&[])).unwrap()["error"]["code"],
            HEADER_MISMATCH
        );
    }
}
