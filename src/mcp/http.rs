//! `fleetctl serve --http`: MCP over Streamable HTTP (one JSON-RPC message per POST,
//! a JSON answer, no sessions) and an OpenAPI twin of the tools, on a small HTTP/1.1
//! server written here so that every rule is ours to enforce in order: the bearer
//! token is checked before the body is read, bodies are bounded, foreign origins are
//! refused, slow clients time out, and a bounded pool of workers — each with its own
//! read-only database connection — answers, or the server says 503.
//!
//! The protocol itself is `session.rs`'s, the same code stdio uses.

use super::jsonrpc::{self, Incoming};
use super::session::{self, Server};
use crate::error::{Error, ErrorCode, Result};
use crate::logging;
use crate::report::{self, route_map::TileSource};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{self, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The largest request body accepted, bytes.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;
const MAX_HEADER_BYTES: usize = 16 * 1024;
/// Failed authentications from one address within `FAILURE_WINDOW` before it gets 429.
const MAX_FAILURES: u32 = 10;
const FAILURE_WINDOW: Duration = Duration::from_secs(60);
/// How long a client may stay idle between requests.
const IDLE_TIMEOUT: Duration = Duration::from_secs(30);
const POLL: Duration = Duration::from_millis(200);

/// How the HTTP server is set up.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// Where to listen.
    pub addr: SocketAddr,
    /// The bearer token clients must present.
    pub token: String,
    /// Origins allowed besides loopback ones (exact `scheme://host:port`).
    pub allowed_origins: Vec<String>,
    /// Worker threads, each with its own database connection.
    pub workers: usize,
    /// Requests that may wait for a worker before the server answers 503.
    pub queue: usize,
    /// Connections served at once.
    pub max_connections: usize,
    /// Raster tiles for route maps.
    pub tiles: Option<PathBuf>,
    /// How long a client may take to send one request.
    pub request_timeout: Duration,
}

/// An HTTP response.
struct Response {
    status: u16,
    headers: Vec<(&'static str, String)>,
    body: Vec<u8>,
    close: bool,
}

impl Response {
    fn json(status: u16, body: &Value) -> Response {
        Response {
            status,
            headers: vec![("Content-Type", "application/json".into())],
            body: body.to_string().into_bytes(),
            close: false,
        }
    }

    fn error(status: u16, code: &str, message: &str) -> Response {
        Response::json(
            status,
            &json!({"error": {"code": code, "message": message, "hint": Value::Null}}),
        )
    }

    fn empty(status: u16) -> Response {
        Response {
            status,
            headers: Vec::new(),
            body: Vec::new(),
            close: false,
        }
    }

    fn closing(mut self) -> Response {
        self.close = true;
        self
    }

    fn with(mut self, name: &'static str, value: impl Into<String>) -> Response {
        self.headers.push((name, value.into()));
        self
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        202 => "Accepted",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        411 => "Length Required",
        413 => "Content Too Large",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "Status",
    }
}

/// A request, headers read, body not yet.
struct Head {
    method: String,
    path: String,
    headers: HashMap<String, String>,
    keep_alive: bool,
}

impl Head {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .get(&name.to_ascii_lowercase())
            .map(String::as_str)
    }
}

/// What a worker is asked to do.
enum Job {
    Mcp {
        body: Vec<u8>,
        headers: HashMap<String, String>,
    },
    Tool {
        name: String,
        body: Vec<u8>,
    },
}

struct Task {
    job: Job,
    reply: mpsc::Sender<Response>,
}

/// Shared by the connection threads.
struct Shared {
    token: Vec<u8>,
    allowed_origins: Vec<String>,
    failures: Mutex<HashMap<IpAddr, (u32, Instant)>>,
    jobs: SyncSender<Task>,
    shutdown: Arc<AtomicBool>,
    openapi: Vec<u8>,
    request_timeout: Duration,
}

/// Compares without an early exit, so timing does not tell how much matched.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let mut diff = a.len() ^ b.len();
    for i in 0..a.len().max(b.len()) {
        diff |= usize::from(a.get(i).copied().unwrap_or(0) ^ b.get(i).copied().unwrap_or(0xff));
    }
    diff == 0
}

/// Whether a browser origin may call us: loopback ones, and those listed.
fn origin_allowed(origin: &str, allowed: &[String]) -> bool {
    if allowed.iter().any(|a| a == origin) {
        return true;
    }
    let host = origin.split("://").nth(1).unwrap_or("");
    let host = host.rsplit_once(':').map_or(host, |(h, port)| {
        if port.bytes().all(|b| b.is_ascii_digit()) {
            h
        } else {
            host
        }
    });
    matches!(host, "localhost" | "127.0.0.1" | "[::1]")
}

/// One read into `buf`: `Some(n)` bytes (0 at end of stream), or `None` when the
/// poll interval passed with nothing to read.
fn read_some(stream: &mut TcpStream, buf: &mut Vec<u8>) -> std::io::Result<Option<usize>> {
    let mut chunk = [0u8; 16 * 1024];
    match stream.read(&mut chunk) {
        Ok(n) => {
            buf.extend_from_slice(&chunk[..n]);
            Ok(Some(n))
        }
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock
                    | std::io::ErrorKind::TimedOut
                    | std::io::ErrorKind::Interrupted
            ) =>
        {
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// Reads until the end of the headers. `None`: the client went away, idled out, or
/// the server is stopping between requests. The time limit runs from the request's
/// first byte, and is checked whatever the client trickles in.
fn read_head(
    stream: &mut TcpStream,
    buf: &mut Vec<u8>,
    shutdown: &AtomicBool,
    timeout: Duration,
) -> std::io::Result<Option<std::result::Result<Head, Response>>> {
    let waiting_since = Instant::now();
    let mut first_byte = (!buf.is_empty()).then(Instant::now);
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = parse_head(&buf[..end]);
            buf.drain(..end + 4);
            return Ok(Some(head));
        }
        if buf.len() > MAX_HEADER_BYTES {
            return Ok(Some(Err(Response::error(
                431,
                "invalid_argument",
                "request headers too large",
            )
            .closing())));
        }
        match first_byte {
            Some(t) if t.elapsed() > timeout => {
                return Ok(Some(Err(Response::error(
                    408,
                    "invalid_argument",
                    "request not received in time",
                )
                .closing())));
            }
            None if shutdown.load(Ordering::Relaxed) || waiting_since.elapsed() > IDLE_TIMEOUT => {
                return Ok(None);
            }
            _ => {}
        }
        match read_some(stream, buf)? {
            Some(0) => return Ok(None),
            Some(_) => {
                first_byte.get_or_insert_with(Instant::now);
            }
            None => {}
        }
    }
}

fn parse_head(bytes: &[u8]) -> std::result::Result<Head, Response> {
    let bad = |why: &str| {
        Response::error(
            400,
            "invalid_argument",
            &format!("malformed HTTP request: {why}"),
        )
        .closing()
    };
    let text = std::str::from_utf8(bytes).map_err(|_| bad("not UTF-8"))?;
    let mut lines = text.split("\r\n");
    let mut request_line = lines.next().unwrap_or_default().split(' ');
    let (method, path, version) = (
        request_line.next(),
        request_line.next(),
        request_line.next(),
    );
    let (Some(method), Some(path), Some(version)) = (method, path, version) else {
        return Err(bad("request line"));
    };
    if !version.starts_with("HTTP/1.") || request_line.next().is_some() {
        return Err(bad("request line"));
    }
    let mut headers: HashMap<String, String> = HashMap::new();
    for line in lines {
        let (name, value) = line.split_once(':').ok_or_else(|| bad("header line"))?;
        // RFC 9112: no whitespace between a field name and its colon.
        if name.is_empty() || name.trim() != name {
            return Err(bad("header name"));
        }
        let name = name.to_ascii_lowercase();
        let value = value.trim().to_string();
        if let Some(previous) = headers.get(&name)
            && (name == "content-length" || name == "authorization" || name == "host")
            && *previous != value
        {
            return Err(bad(&format!("conflicting {name} headers")));
        }
        headers.insert(name, value);
    }
    let connection = headers.get("connection").map(|c| c.to_ascii_lowercase());
    let keep_alive = match connection.as_deref() {
        Some("close") => false,
        Some("keep-alive") => true,
        _ => version == "HTTP/1.1",
    };
    Ok(Head {
        method: method.to_string(),
        path: path.split('?').next().unwrap_or("").to_string(),
        headers,
        keep_alive,
    })
}

/// Reads a body of `len` bytes. `Err(response)`: the client was too slow (408).
fn read_body(
    stream: &mut TcpStream,
    buf: &mut Vec<u8>,
    len: usize,
    timeout: Duration,
) -> std::io::Result<Option<std::result::Result<Vec<u8>, Response>>> {
    let started = Instant::now();
    while buf.len() < len {
        if started.elapsed() > timeout {
            return Ok(Some(Err(Response::error(
                408,
                "invalid_argument",
                "request body not received in time",
            )
            .closing())));
        }
        if read_some(stream, buf)? == Some(0) {
            return Ok(None);
        }
    }
    let rest = buf.split_off(len);
    Ok(Some(Ok(std::mem::replace(buf, rest))))
}

fn write_response(stream: &mut TcpStream, r: &Response, keep_alive: bool) -> std::io::Result<()> {
    let mut head = format!(
        "HTTP/1.1 {} {}\r\nContent-Length: {}\r\n",
        r.status,
        reason(r.status),
        r.body.len()
    );
    for (name, value) in &r.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str(if keep_alive && !r.close {
        "Connection: keep-alive\r\n\r\n"
    } else {
        "Connection: close\r\n\r\n"
    });
    stream.write_all(head.as_bytes())?;
    stream.write_all(&r.body)?;
    stream.flush()
}

/// The length of the body a request announces (0 without one).
fn body_len(head: &Head) -> std::result::Result<usize, Response> {
    if head.header("transfer-encoding").is_some() {
        return Err(
            Response::error(411, "invalid_argument", "send a Content-Length body").closing(),
        );
    }
    match head.header("content-length").map(str::parse) {
        Some(Ok(n)) => Ok(n),
        None => Ok(0),
        Some(Err(_)) => {
            Err(Response::error(400, "invalid_argument", "bad Content-Length").closing())
        }
    }
}

impl Shared {
    /// Whether this address has failed authentication too often lately.
    fn rate_limited(&self, ip: IpAddr) -> bool {
        let failures = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        failures
            .get(&ip)
            .is_some_and(|(n, since)| since.elapsed() < FAILURE_WINDOW && *n >= MAX_FAILURES)
    }

    fn record_failure(&self, ip: IpAddr) {
        let mut failures = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        failures.retain(|_, (_, since)| since.elapsed() < FAILURE_WINDOW);
        failures.entry(ip).or_insert((0, Instant::now())).0 += 1;
    }

    fn authorised(&self, head: &Head) -> bool {
        head.header("authorization")
            .and_then(|v| {
                v.strip_prefix("Bearer ")
                    .or_else(|| v.strip_prefix("bearer "))
            })
            .is_some_and(|t| constant_time_eq(t.trim().as_bytes(), &self.token))
    }

    /// The origin to echo in CORS headers: a present, allowed `Origin`.
    fn cors_origin(&self, head: &Head) -> Option<String> {
        head.header("origin")
            .filter(|o| origin_allowed(o, &self.allowed_origins))
            .map(str::to_owned)
    }

    /// Answers everything that can be answered before the body: health, the API
    /// document, CORS preflights, authentication (and its rate limit), origin,
    /// method, size. `Ok(route)` (`mcp` or a tool name) means: read the body and run it.
    fn gate(&self, head: &Head, ip: IpAddr) -> std::result::Result<String, Response> {
        // Answers given without reading a body close the connection if one was sent,
        // so that its bytes can never be read as the next request.
        let has_body = head.header("content-length").is_some_and(|v| v != "0")
            || head.header("transfer-encoding").is_some();
        let unread = |r: Response| if has_body { r.closing() } else { r };
        match (head.method.as_str(), head.path.as_str()) {
            ("GET", "/healthz") => {
                return Err(unread(Response::json(200, &json!({"status": "ok"}))));
            }
            ("GET", "/openapi.json") => {
                let doc = Response {
                    status: 200,
                    headers: vec![("Content-Type", "application/json".into())],
                    body: self.openapi.clone(),
                    close: false,
                };
                return Err(unread(doc));
            }
            ("OPTIONS", _) => {
                // A browser's CORS preflight carries no token; allowed origins get one.
                return Err(match head.header("origin") {
                    Some(o) if origin_allowed(o, &self.allowed_origins) => unread(
                        Response::empty(204)
                            .with("Access-Control-Allow-Origin", o)
                            .with("Access-Control-Allow-Methods", "POST, GET, OPTIONS")
                            .with("Access-Control-Allow-Headers", "Authorization, Content-Type, MCP-Protocol-Version, Mcp-Method, Mcp-Name")
                            .with("Access-Control-Max-Age", "600")
                            .with("Vary", "Origin"),
                    ),
                    Some(o) => Response::error(403, "forbidden", &format!("origin {o} is not allowed")).closing(),
                    None => Response::error(405, "method_not_allowed", "use POST").with("Allow", "POST").closing(),
                });
            }
            _ => {}
        }
        if !self.authorised(head) {
            let limited = self.rate_limited(ip);
            self.record_failure(ip);
            return Err(if limited {
                Response::error(
                    429,
                    "rate_limited",
                    "too many failed authentications from this address; wait a minute",
                )
                .with("Retry-After", "60")
                .closing()
            } else {
                Response::error(401, "unauthorized", "a valid bearer token is required")
                    .with("WWW-Authenticate", "Bearer realm=\"fleetctl\"")
                    .closing()
            });
        }
        if let Some(origin) = head.header("origin")
            && !origin_allowed(origin, &self.allowed_origins)
        {
            return Err(Response::error(
                403,
                "forbidden",
                &format!("origin {origin} is not allowed"),
            )
            .closing());
        }
        let route = match head.path.as_str() {
            "/mcp" => "mcp".to_string(),
            p => match p.strip_prefix("/api/v1/tools/") {
                Some(name) if !name.is_empty() && !name.contains('/') => name.to_string(),
                _ => {
                    return Err(
                        Response::error(404, "not_found", &format!("no such path {p}")).closing(),
                    );
                }
            },
        };
        if head.method != "POST" {
            return Err(Response::error(405, "method_not_allowed", "use POST")
                .with("Allow", "POST")
                .closing());
        }
        let len = body_len(head)?;
        if len > MAX_BODY_BYTES {
            return Err(Response::error(
                413,
                "invalid_argument",
                &format!("request body over {MAX_BODY_BYTES} bytes"),
            )
            .closing());
        }
        Ok(route)
    }
}

fn serve_connection(mut stream: TcpStream, shared: &Shared) {
    let ip = stream
        .peer_addr()
        .map_or(IpAddr::from([0, 0, 0, 0]), |a| a.ip());
    let _ = stream.set_read_timeout(Some(POLL));
    let _ = stream.set_nodelay(true);
    let mut buf = Vec::new();
    loop {
        let head = match read_head(
            &mut stream,
            &mut buf,
            &shared.shutdown,
            shared.request_timeout,
        ) {
            Ok(Some(Ok(head))) => head,
            Ok(Some(Err(response))) => {
                let _ = write_response(&mut stream, &response, false);
                return;
            }
            Ok(None) | Err(_) => return,
        };
        let started = Instant::now();
        let mut response = match shared.gate(&head, ip) {
            Err(response) => response,
            Ok(route) => {
                let len = body_len(&head).unwrap_or(0);
                let body = match read_body(&mut stream, &mut buf, len, shared.request_timeout) {
                    Ok(Some(Ok(body))) => body,
                    Ok(Some(Err(response))) => {
                        let _ = write_response(&mut stream, &response, false);
                        return;
                    }
                    Ok(None) | Err(_) => return,
                };
                let job = match route.as_str() {
                    "mcp" => Job::Mcp {
                        body,
                        headers: head.headers.clone(),
                    },
                    name => Job::Tool {
                        name: name.to_string(),
                        body,
                    },
                };
                let (reply, answer) = mpsc::channel();
                match shared.jobs.try_send(Task { job, reply }) {
                    Ok(()) => answer
                        .recv()
                        .unwrap_or_else(|_| Response::error(500, "internal", "worker failed")),
                    Err(TrySendError::Full(_)) => {
                        Response::error(503, "busy", "all workers are busy; retry shortly")
                            .with("Retry-After", "1")
                    }
                    Err(TrySendError::Disconnected(_)) => {
                        Response::error(503, "shutting_down", "the server is stopping")
                    }
                }
            }
        };
        if let Some(origin) = shared.cors_origin(&head)
            && head.method != "OPTIONS"
        {
            response = response
                .with("Access-Control-Allow-Origin", origin)
                .with("Vary", "Origin");
        }
        logging::info(&format!(
            "http: {ip} {} {} {} {:.2} ms",
            head.method,
            head.path,
            response.status,
            started.elapsed().as_secs_f64() * 1000.0
        ));
        let keep = head.keep_alive && !response.close && !shared.shutdown.load(Ordering::Relaxed);
        if write_response(&mut stream, &response, keep).is_err() || !keep {
            return;
        }
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

/// A header value as sent, or decoded from the `=?base64?…?=` form the 2026-07-28
/// revision uses for values that are not header-safe.
fn header_value(raw: &str) -> Option<String> {
    match raw
        .strip_prefix("=?base64?")
        .and_then(|r| r.strip_suffix("?="))
    {
        Some(encoded) => String::from_utf8(base64_decode(encoded)?).ok(),
        None => Some(raw.to_string()),
    }
}

/// Standard base64 (with or without padding).
fn base64_decode(text: &str) -> Option<Vec<u8>> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'+' => Some(62),
        b'/' => Some(63),
        _ => None,
    };
    let digits: Vec<u8> = text
        .trim_end_matches('=')
        .bytes()
        .map(value)
        .collect::<Option<_>>()?;
    let mut out = Vec::with_capacity(digits.len() * 3 / 4);
    for chunk in digits.chunks(4) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, d)| n | (u32::from(*d) << (18 - 6 * i)));
        out.extend(
            n.to_be_bytes()[1..]
                .iter()
                .take(chunk.len().saturating_sub(1)),
        );
    }
    Some(out)
}

/// Checks the protocol headers against the body; `Some(error)` when they disagree.
/// A 2026-07-28 body needs MCP-Protocol-Version, Mcp-Method and (for tools/call and
/// prompts/get) Mcp-Name matching it; a handshake-era body may carry
/// MCP-Protocol-Version, which must then name a handshake revision.
fn header_mismatch(incoming: &Incoming, headers: &HashMap<String, String>) -> Option<Value> {
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

fn status_for(code: ErrorCode) -> u16 {
    match code {
        ErrorCode::InvalidArgument => 400,
        ErrorCode::NotFound | ErrorCode::NoData => 404,
        ErrorCode::Ambiguous => 409,
        ErrorCode::DbUnavailable | ErrorCode::DbSchema => 503,
        ErrorCode::Io | ErrorCode::Render | ErrorCode::Internal => 500,
    }
}

fn run_job(server: &mut Server, job: Job) -> Response {
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
                return Response::json(400, &e);
            }
            if let Some(e) = header_mismatch(&incoming, &headers) {
                return Response::json(400, &e);
            }
            match server.handle(incoming) {
                None => Response::empty(202),
                Some(answer) => Response::json(rpc_status(&answer), &answer),
            }
        }
        Job::Tool { name, body } => {
            let args = if body.iter().all(u8::is_ascii_whitespace) {
                Ok(report::Args::new())
            } else {
                match serde_json::from_slice::<Value>(&body) {
                    Ok(Value::Object(args)) => Ok(args),
                    _ => Err(Error::invalid(
                        "the request body must be a JSON object of the tool's arguments",
                    )),
                }
            };
            match args.map(|args| server.run_tool(&name, &args)) {
                Ok(None) => Response::error(404, "not_found", &format!("no tool named {name}")),
                Ok(Some(Ok(answer))) => Response::json(200, &answer.value),
                Ok(Some(Err(e))) | Err(e) => Response::json(status_for(e.code), &e.to_json()),
            }
        }
    }
}

/// The OpenAPI 3.1 document of the tools, generated from the report registry.
pub fn openapi() -> Value {
    let error = json!({"type": "object", "properties": {"error": {"type": "object", "properties": {
        "code": {"type": "string"}, "message": {"type": "string"}, "hint": {"type": ["string", "null"]}},
        "required": ["code", "message"]}}, "required": ["error"]});
    let mut paths = serde_json::Map::new();
    for spec in report::registry() {
        let error_ref = json!({"description": "The request was refused; the body says why and what would be accepted.",
                               "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}});
        paths.insert(
            format!("/api/v1/tools/{}", spec.tool),
            json!({"post": {
                "operationId": spec.tool,
                "summary": spec.title,
                "description": spec.description,
                "requestBody": {"required": true, "content": {"application/json": {"schema": report::input_schema(spec)}}},
                "responses": {
                    "200": {"description": spec.title, "content": {"application/json": {"schema": (spec.output_schema)()}}},
                    "400": error_ref.clone(), "401": {"description": "Missing or wrong bearer token."},
                    "404": error_ref.clone(), "409": error_ref.clone(), "503": error_ref,
                },
            }}),
        );
    }
    json!({
        "openapi": "3.1.0",
        "info": {"title": "fleetctl", "version": env!("CARGO_PKG_VERSION"),
                 "description": "Fleet reports computed from GPS positions: the same tools `fleetctl serve` offers over MCP."},
        "servers": [{"url": "/"}],
        "security": [{"bearer": []}],
        "paths": paths,
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": {"Error": error},
        },
    })
}

/// The longest token file read, bytes.
const MAX_TOKEN_FILE_BYTES: u64 = 4096;

/// The first line of a small regular file (never a device a link points to).
fn first_line_of(path: &Path) -> std::io::Result<String> {
    use std::io::Read;
    let file = std::fs::File::open(path)?;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    let mut bytes = Vec::new();
    file.take(MAX_TOKEN_FILE_BYTES + 1)
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_TOKEN_FILE_BYTES {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("larger than {MAX_TOKEN_FILE_BYTES} bytes; a token file holds one line"),
        ));
    }
    let text = String::from_utf8(bytes)
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidData, "not UTF-8 text"))?;
    Ok(text.lines().next().unwrap_or_default().trim().to_string())
}

/// Reads the token: `FLEETCTL_TOKEN`, or the first line of `token_file`.
pub fn read_token(token_file: Option<&Path>) -> Result<String> {
    let token = match token_file {
        Some(path) => first_line_of(path)
            .map_err(|e| Error::invalid(format!("--token-file {}: {e}", path.display())))?,
        None => std::env::var("FLEETCTL_TOKEN")
            .unwrap_or_default()
            .trim()
            .to_string(),
    };
    if token.chars().any(|c| c.is_control() || c == ' ') {
        return Err(
            Error::invalid("the bearer token holds spaces or control characters")
                .with_hint("use printable characters only, e.g. `openssl rand -hex 32 > token`"),
        );
    }
    if token.len() < 16 {
        return Err(Error::invalid("no bearer token of at least 16 characters was given").with_hint(
            "set FLEETCTL_TOKEN or pass --token-file PATH (first line), e.g. `openssl rand -hex 32 > token`; tokens are never taken from the command line",
        ));
    }
    Ok(token)
}

/// Serves until SIGTERM or SIGINT: stops accepting, finishes the requests in hand.
pub fn serve(db_path: &Path, opts: HttpOptions) -> Result<()> {
    let listener = TcpListener::bind(opts.addr)
        .map_err(|e| Error::io(Path::new(&opts.addr.to_string()), e))?;
    listener
        .set_nonblocking(true)
        .map_err(|e| Error::io(Path::new("listener"), e))?;
    let shutdown = Arc::new(AtomicBool::new(false));
    #[cfg(unix)]
    for signal in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(signal, shutdown.clone())
            .map_err(|e| Error::internal(format!("signal handler: {e}")))?;
    }
    let (jobs, queue) = mpsc::sync_channel::<Task>(opts.queue.max(1));
    let queue = Arc::new(Mutex::new(queue));
    let mut workers = Vec::new();
    for _ in 0..opts.workers.max(1) {
        let queue = queue.clone();
        let mut server = Server::stateless(db_path);
        if let Some(path) = &opts.tiles {
            server.set_tiles(Some(TileSource::open(path)?));
        }
        workers.push(std::thread::spawn(move || {
            loop {
                let task = queue.lock().unwrap_or_else(|e| e.into_inner()).recv();
                let Ok(task) = task else { break };
                let response = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    run_job(&mut server, task.job)
                }))
                .unwrap_or_else(|_| {
                    Response::error(500, "internal", "the request failed inside the server")
                });
                let _ = task.reply.send(response);
            }
        }));
    }
    let shared = Arc::new(Shared {
        token: opts.token.into_bytes(),
        allowed_origins: opts.allowed_origins,
        failures: Mutex::new(HashMap::new()),
        jobs,
        shutdown: shutdown.clone(),
        openapi: openapi().to_string().into_bytes(),
        request_timeout: opts.request_timeout,
    });
    let active = Arc::new(AtomicUsize::new(0));
    let mut connections = Vec::new();
    logging::info(&format!(
        "http: listening on http://{} (MCP at /mcp, OpenAPI at /openapi.json; protocol {} and the handshake revisions)",
        listener.local_addr().map_or(opts.addr, |a| a),
        session::MODERN_VERSION
    ));
    while !shutdown.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((mut stream, _)) => {
                let _ = stream.set_nonblocking(false);
                if active.load(Ordering::Relaxed) >= opts.max_connections {
                    let busy = Response::error(503, "busy", "too many connections; retry shortly")
                        .with("Retry-After", "1");
                    let _ = write_response(&mut stream, &busy, false);
                    continue;
                }
                active.fetch_add(1, Ordering::Relaxed);
                let (shared, active) = (shared.clone(), active.clone());
                connections.push(std::thread::spawn(move || {
                    serve_connection(stream, &shared);
                    active.fetch_sub(1, Ordering::Relaxed);
                }));
                connections.retain(|c| !c.is_finished());
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(2))
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => logging::info(&format!("http: accept failed: {e}")),
        }
    }
    logging::info("http: stopping: no new connections; finishing the requests in hand");
    drop(listener);
    for c in connections {
        let _ = c.join();
    }
    drop(shared);
    for w in workers {
        let _ = w.join();
    }
    logging::info("http: stopped");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_header_values_are_decoded() {
        assert_eq!(
            header_value("=?base64?dHJpcF9zdW1tYXJ5?=").as_deref(),
            Some("trip_summary")
        );
        assert_eq!(
            header_value("=?base64?Wm9uYSDDoQ==?=").as_deref(),
            Some("Zona á")
        );
        assert_eq!(header_value("plain").as_deref(), Some("plain"));
        assert_eq!(header_value("=?base64?***?="), None);
        assert_eq!(base64_decode("Zm9vYmFy").unwrap(), b"foobar");
        assert_eq!(base64_decode("Zm9vYg==").unwrap(), b"foob");
    }

    #[test]
    fn tokens_compare_whole() {
        assert!(constant_time_eq(b"secret-token-123", b"secret-token-123"));
        assert!(!constant_time_eq(b"secret-token-123", b"secret-token-124"));
        assert!(!constant_time_eq(b"secret", b"secret-token-123"));
        assert!(!constant_time_eq(b"", b"x"));
    }

    #[test]
    fn only_loopback_or_listed_origins_pass() {
        let allowed = vec!["https://dispatch.example".to_string()];
        for ok in [
            "http://localhost:6274",
            "http://127.0.0.1",
            "http://[::1]:8080",
            "https://dispatch.example",
        ] {
            assert!(origin_allowed(ok, &allowed), "{ok}");
        }
        for bad in [
            "https://evil.example",
            "http://localhost.evil.example",
            "http://127.0.0.1.nip.io",
            "null",
        ] {
            assert!(!origin_allowed(bad, &allowed), "{bad}");
        }
    }

    #[test]
    fn the_openapi_document_has_one_path_per_tool() {
        let doc = openapi();
        assert_eq!(doc["openapi"], "3.1.0");
        assert_eq!(
            doc["paths"].as_object().unwrap().len(),
            report::registry().len()
        );
        assert!(doc["paths"]["/api/v1/tools/trip_summary"]["post"]["requestBody"]["content"]["application/json"]["schema"]["required"]
            .as_array()
            .unwrap()
            .contains(&json!("plate")));
    }
}
