//! `fleetctl serve --http`: MCP over Streamable HTTP (one JSON-RPC message per POST,
//! a JSON answer, no sessions) and an OpenAPI twin of the tools.
//!
//! HTTP/1.1 framing — parsing, keep-alive, pipelining, chunked bodies, header
//! validation, the header-read timeout — is hyper's, on a current-thread tokio
//! runtime started only here. What is ours is policy (`policy.rs`, small pure
//! functions) applied in order: the `Host` allow-list, routes that need no token,
//! the bearer token before any body is read (with a per-address failure limit),
//! Origin, method, body size, then a bounded pool of worker threads (`worker.rs`),
//! each with its own read-only database connection, or 503.
//!
//! Nobody without the token can take the server from somebody with it: every socket
//! has read and write stall limits (`io.rs`), answers to requests without a valid
//! token close their connection, a client address may hold only so many connections,
//! and when the server is full a new connection takes the place of the oldest one
//! that has not yet shown a token. SIGTERM stops accepting, lets requests in hand
//! finish, and exits within `--request-timeout-s` + 1 s whatever the clients do.

mod io;
pub mod openapi;
pub mod policy;
pub mod worker;

pub use openapi::openapi;

use crate::error::{Error, ErrorCode, Result};
use crate::logging;
use crate::mcp::jsonrpc;
use crate::mcp::session::{self, Server};
use crate::report::route_map::TileSource;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response, StatusCode};
use io::{Deadlined, RequestClock};
use policy::FailureLog;
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use worker::{Job, Reply};

/// The largest request body accepted, bytes (the same bound as a stdio message).
pub const MAX_BODY_BYTES: usize = jsonrpc::MAX_MESSAGE_BYTES;
/// Request bodies held at once, bytes: being read, waiting for a worker, or run.
const MAX_BODIES_IN_HAND_BYTES: usize = 8 * 1024 * 1024;
/// How long a connection may wait for its next request's first byte.
const IDLE_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a response write may stall (a client that does not read).
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// Connections one client address may hold.
const MAX_CONNECTIONS_PER_ADDRESS: usize = 64;

/// How the HTTP server is set up.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// Where to listen.
    pub addr: SocketAddr,
    /// The bearer token clients must present.
    pub token: String,
    /// Origins allowed besides loopback ones (exact `scheme://host[:port]`).
    pub allowed_origins: Vec<String>,
    /// `Host` names allowed besides loopback ones and the address connected to.
    pub allowed_hosts: Vec<String>,
    /// Worker threads, each with its own database connection.
    pub workers: usize,
    /// Requests that may wait for a worker before the server answers 503.
    pub queue: usize,
    /// Connections served at once.
    pub max_connections: usize,
    /// Raster tiles for route maps.
    pub tiles: Option<PathBuf>,
    /// How long a client may take to send one request (headers and body).
    pub request_timeout: Duration,
}

/// A job and where its reply goes. It holds its body's share of the budget until the
/// worker is done with it, even if the client has gone.
struct Task {
    job: Job,
    reply: tokio::sync::oneshot::Sender<Reply>,
    _budget: tokio::sync::OwnedSemaphorePermit,
}

/// What every request handler shares.
struct Shared {
    token: Vec<u8>,
    allowed_origins: Vec<String>,
    allowed_hosts: Vec<String>,
    failures: Mutex<FailureLog>,
    jobs: SyncSender<Task>,
    openapi: Bytes,
    request_timeout: Duration,
    stopping: AtomicBool,
    body_budget_kib: Arc<tokio::sync::Semaphore>,
}

/// One connection, as its handler sees it.
struct Conn {
    ip: IpAddr,
    /// The address this connection reached (for the `Host` check when listening on
    /// all interfaces).
    local: String,
    clock: Arc<RequestClock>,
    authenticated: Arc<AtomicBool>,
}

type Answer = Response<Full<Bytes>>;

/// Builds a response; `close` asks hyper to end the connection after it.
fn respond(status: u16, body: Option<Vec<u8>>, headers: &[(&str, String)], close: bool) -> Answer {
    let mut r = Response::builder()
        .status(StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR));
    if body.is_some() {
        r = r.header("Content-Type", "application/json");
    }
    for (name, value) in headers {
        r = r.header(*name, value.as_str());
    }
    if close {
        r = r.header("Connection", "close");
    }
    r.body(Full::new(Bytes::from(body.unwrap_or_default())))
        .unwrap_or_else(|_| {
            let mut broken = Response::new(Full::new(Bytes::new()));
            *broken.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
            broken
        })
}

fn error_answer(
    code: ErrorCode,
    message: impl Into<String>,
    headers: &[(&str, String)],
    close: bool,
) -> Answer {
    refuse(&Error::new(code, message), headers, close)
}

fn refuse(e: &Error, headers: &[(&str, String)], close: bool) -> Answer {
    respond(
        e.code.http_status(),
        Some(e.to_json().to_string().into_bytes()),
        headers,
        close,
    )
}

fn header<'r>(req: &'r Request<Incoming>, name: &str) -> Option<&'r str> {
    req.headers().get(name).and_then(|v| v.to_str().ok())
}

fn forbidden_origin(origin: &str) -> Answer {
    error_answer(
        ErrorCode::Forbidden,
        format!("origin {origin:?} is not allowed"),
        &[],
        true,
    )
}

/// Answers one request (the log line is written by the caller).
async fn handle(req: Request<Incoming>, conn: &Conn, shared: &Shared) -> Answer {
    let _in_hand = conn.clock.in_hand();
    let started = conn.clock.take();
    let deadline = started + shared.request_timeout;
    // DNS rebinding: a page on another name must not reach a loopback server. Two
    // Host headers are a bad request (RFC 9112 §3.2); an absolute URL's authority
    // is the host the request is for, whatever its Host header says (§3.2.2).
    if req.headers().get_all("host").iter().count() > 1 {
        return error_answer(
            ErrorCode::InvalidArgument,
            "a request has one Host header; this one has several",
            &[],
            true,
        );
    }
    let host = req
        .uri()
        .authority()
        .map(|a| a.as_str())
        .or_else(|| header(&req, "host"));
    match host {
        None if req.version() == hyper::Version::HTTP_11 => {
            return error_answer(
                ErrorCode::InvalidArgument,
                "HTTP/1.1 requests need a Host header",
                &[],
                true,
            );
        }
        Some(h) if !policy::host_allowed(h, &conn.local, &shared.allowed_hosts) => {
            let e = Error::new(
                ErrorCode::Forbidden,
                format!("host {h:?} is not served here"),
            )
            .with_hint("start the server with --allow-host NAME to answer to that name");
            return refuse(&e, &[], true);
        }
        _ => {}
    }
    let origin = header(&req, "origin");
    let preflight = req.method() == hyper::Method::OPTIONS;
    let cors = policy::cors(origin, &shared.allowed_origins, preflight);
    let path = req.uri().path().to_string();
    let method = req.method().as_str().to_string();
    // Answers that need no token; their connection closes unless it has shown one,
    // before or with this request (a wrong one here is no failed attempt: nothing
    // was asked that needs it).
    let token = req.headers().get("authorization").map(|v| v.as_bytes());
    let token_ok = policy::bearer_matches(token, &shared.token);
    if token_ok {
        conn.authenticated.store(true, Ordering::Relaxed);
    }
    let anonymous_close = !conn.authenticated.load(Ordering::Relaxed);
    match (method.as_str(), path.as_str()) {
        ("GET", "/healthz") => {
            return respond(
                200,
                Some(br#"{"status":"ok"}"#.to_vec()),
                &[],
                anonymous_close,
            );
        }
        ("GET", "/openapi.json") => {
            return respond(200, Some(shared.openapi.to_vec()), &[], anonymous_close);
        }
        ("OPTIONS", _) => {
            return match cors {
                policy::Cors::Allowed(headers) => respond(204, None, &headers, anonymous_close),
                policy::Cors::Refused(o) => forbidden_origin(&o),
                policy::Cors::NoOrigin => error_answer(
                    ErrorCode::MethodNotAllowed,
                    "use POST",
                    &[("Allow", "POST".into())],
                    true,
                ),
            };
        }
        _ => {}
    }
    if !token_ok {
        let limited = shared
            .failures
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .fail(conn.ip, Instant::now());
        return if limited {
            error_answer(
                ErrorCode::RateLimited,
                "too many failed authentications from this address; wait a minute",
                &[("Retry-After", "60".into())],
                true,
            )
        } else {
            error_answer(
                ErrorCode::Unauthorized,
                "a valid bearer token is required",
                &[("WWW-Authenticate", "Bearer realm=\"fleetctl\"".into())],
                true,
            )
        };
    }
    conn.authenticated.store(true, Ordering::Relaxed);
    let cors: Vec<(&str, String)> = match cors {
        policy::Cors::Allowed(headers) => headers,
        policy::Cors::Refused(o) => return forbidden_origin(&o),
        policy::Cors::NoOrigin => Vec::new(),
    };
    let route = match path.as_str() {
        "/mcp" => None,
        p => match p.strip_prefix("/api/v1/tools/") {
            Some(name) if !name.is_empty() && !name.contains('/') => Some(name.to_string()),
            _ => {
                return error_answer(
                    ErrorCode::NotFound,
                    format!("no such path {p}"),
                    &cors,
                    true,
                );
            }
        },
    };
    if method != "POST" {
        return error_answer(
            ErrorCode::MethodNotAllowed,
            "use POST",
            &[("Allow", "POST".into())],
            true,
        );
    }
    if policy::body_too_large(header(&req, "content-length"), MAX_BODY_BYTES) {
        return error_answer(
            ErrorCode::TooLarge,
            format!("request body over {MAX_BODY_BYTES} bytes"),
            &cors,
            true,
        );
    }
    let protocol_headers: HashMap<String, String> =
        ["mcp-protocol-version", "mcp-method", "mcp-name"]
            .into_iter()
            .filter_map(|n| header(&req, n).map(|v| (n.to_string(), v.to_string())))
            .collect();
    // Bodies held at once (being read, queued or run) share one budget, so memory
    // stays bounded whatever the number of clients.
    let announced = header(&req, "content-length").and_then(|v| v.parse::<usize>().ok());
    let kib = announced.unwrap_or(MAX_BODY_BYTES).div_ceil(1024).max(1) as u32;
    let Ok(budget) = shared.body_budget_kib.clone().try_acquire_many_owned(kib) else {
        return error_answer(
            ErrorCode::Busy,
            "too many request bodies in hand; retry shortly",
            &[("Retry-After", "1".into())],
            true,
        );
    };
    let remaining = deadline.saturating_duration_since(Instant::now());
    let body = match tokio::time::timeout(
        remaining,
        Limited::new(req.into_body(), MAX_BODY_BYTES).collect(),
    )
    .await
    {
        Err(_) => {
            return error_answer(
                ErrorCode::Timeout,
                "request body not received in time",
                &cors,
                true,
            );
        }
        Ok(Err(e))
            if e.downcast_ref::<http_body_util::LengthLimitError>()
                .is_some() =>
        {
            return error_answer(
                ErrorCode::TooLarge,
                format!("request body over {MAX_BODY_BYTES} bytes"),
                &cors,
                true,
            );
        }
        Ok(Err(_)) => {
            return error_answer(
                ErrorCode::InvalidArgument,
                "the request body could not be read",
                &cors,
                true,
            );
        }
        Ok(Ok(collected)) => collected.to_bytes(),
    };
    // Bytes that arrived while the body was read belong to this request, not the next.
    conn.clock.take();
    let job = match route {
        None => Job::Mcp {
            body,
            headers: protocol_headers,
        },
        Some(name) => Job::Tool { name, body },
    };
    let (reply, answer) = tokio::sync::oneshot::channel();
    let task = Task {
        job,
        reply,
        _budget: budget,
    };
    let reply = match shared.jobs.try_send(task) {
        Ok(()) => answer
            .await
            .unwrap_or_else(|_| Reply::error(&Error::internal("the worker failed"))),
        Err(TrySendError::Full(_)) => {
            return error_answer(
                ErrorCode::Busy,
                "all workers are busy; retry shortly",
                &[("Retry-After", "1".into())],
                false,
            );
        }
        Err(TrySendError::Disconnected(_)) => {
            return error_answer(
                ErrorCode::Busy,
                "the server is stopping",
                &[("Retry-After", "1".into())],
                true,
            );
        }
    };
    let stopping = shared.stopping.load(Ordering::Relaxed);
    respond(
        reply.status,
        reply.body.map(|b| b.to_string().into_bytes()),
        &cors,
        stopping,
    )
}

/// The open connections, for the per-address cap and for making room.
#[derive(Default)]
struct Registry {
    next_id: u64,
    open: HashMap<u64, Slot>,
}

struct Slot {
    ip: IpAddr,
    opened: Instant,
    authenticated: Arc<AtomicBool>,
    abort: tokio::task::AbortHandle,
}

impl Registry {
    /// Makes room for a connection from `ip`: `false` when the server is full of
    /// connections that have all shown the token. Otherwise the oldest connection
    /// that has not (of this address when the address is at its cap) is closed.
    fn make_room(&mut self, ip: IpAddr, max_total: usize) -> bool {
        let from_ip = self.open.values().filter(|s| s.ip == ip).count();
        let same_ip_only = from_ip >= MAX_CONNECTIONS_PER_ADDRESS;
        if !same_ip_only && self.open.len() < max_total {
            return true;
        }
        let victim = self
            .open
            .iter()
            .filter(|(_, s)| {
                !s.authenticated.load(Ordering::Relaxed) && (!same_ip_only || s.ip == ip)
            })
            .min_by_key(|(_, s)| s.opened)
            .map(|(id, _)| *id);
        match victim.and_then(|id| self.open.remove(&id)) {
            Some(slot) => {
                slot.abort.abort();
                true
            }
            None => false,
        }
    }
}

/// Removes a connection's slot when its task ends, however it ends.
struct Leave(Arc<Mutex<Registry>>, u64);

impl Drop for Leave {
    fn drop(&mut self) {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .open
            .remove(&self.1);
    }
}

/// The longest token file read, bytes.
const MAX_TOKEN_FILE_BYTES: u64 = 4096;

/// The first line of a small regular file (never a device or pipe a link points to).
fn first_line_of(path: &Path) -> std::io::Result<String> {
    let bytes = crate::untrusted::read_capped(path, MAX_TOKEN_FILE_BYTES)
        .map_err(|e| std::io::Error::new(e.kind(), format!("{e}; a token file holds one line")))?;
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

/// Starts the worker threads; each owns a read-only database connection.
fn start_workers(db_path: &Path, opts: &HttpOptions) -> Result<SyncSender<Task>> {
    let (jobs, queue) = mpsc::sync_channel::<Task>(opts.queue.max(1));
    let queue = Arc::new(Mutex::new(queue));
    for _ in 0..opts.workers.max(1) {
        let queue = queue.clone();
        let mut server = Server::stateless(db_path);
        if let Some(path) = &opts.tiles {
            server.set_tiles(Some(TileSource::open(path)?));
        }
        std::thread::spawn(move || {
            loop {
                let task = queue.lock().unwrap_or_else(|e| e.into_inner()).recv();
                let Ok(task) = task else { break };
                let reply = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    worker::run_job(&mut server, task.job)
                }))
                .unwrap_or_else(|_| {
                    Reply::error(&Error::internal("the request failed inside the server"))
                });
                let _ = task.reply.send(reply);
            }
        });
    }
    Ok(jobs)
}

/// Answers a connection there is no room for, and closes it.
async fn turn_away(mut stream: tokio::net::TcpStream) {
    use tokio::io::AsyncWriteExt;
    let body = Error::new(ErrorCode::Busy, "too many connections; retry shortly")
        .to_json()
        .to_string();
    let head = format!(
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nContent-Length: {}\r\nRetry-After: 1\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        stream.write_all(head.as_bytes()).await?;
        stream.write_all(body.as_bytes()).await?;
        stream.shutdown().await
    })
    .await;
}

/// Resolves at SIGTERM or SIGINT.
async fn stop_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        ) {
            (Ok(mut term), Ok(mut int)) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = int.recv() => {}
                }
            }
            _ => std::future::pending::<()>().await,
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// Serves until SIGTERM or SIGINT: stops accepting, finishes the requests in hand.
pub fn serve(db_path: &Path, opts: HttpOptions) -> Result<()> {
    let listener = std::net::TcpListener::bind(opts.addr)
        .map_err(|e| Error::io(Path::new(&opts.addr.to_string()), e))?;
    listener
        .set_nonblocking(true)
        .map_err(|e| Error::io(Path::new("listener"), e))?;
    let local = listener.local_addr().unwrap_or(opts.addr);
    let jobs = start_workers(db_path, &opts)?;
    let shared = Arc::new(Shared {
        token: opts.token.clone().into_bytes(),
        allowed_origins: opts.allowed_origins.clone(),
        allowed_hosts: opts.allowed_hosts.clone(),
        failures: Mutex::new(FailureLog::default()),
        jobs,
        openapi: Bytes::from(openapi().to_string()),
        request_timeout: opts.request_timeout,
        stopping: AtomicBool::new(false),
        body_budget_kib: Arc::new(tokio::sync::Semaphore::new(MAX_BODIES_IN_HAND_BYTES / 1024)),
    });
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
        .map_err(|e| Error::internal(format!("starting the HTTP runtime: {e}")))?;
    logging::start_background();
    let served = runtime.block_on(accept_loop(listener, local, shared, opts));
    logging::stop_background(Duration::from_secs(1));
    served
}

async fn accept_loop(
    listener: std::net::TcpListener,
    local: SocketAddr,
    shared: Arc<Shared>,
    opts: HttpOptions,
) -> Result<()> {
    let listener = tokio::net::TcpListener::from_std(listener)
        .map_err(|e| Error::io(Path::new("listener"), e))?;
    logging::info(&format!(
        "http: listening on http://{local} (MCP at /mcp, OpenAPI at /openapi.json; protocol {} and the handshake revisions)",
        session::MODERN_VERSION
    ));
    let registry = Arc::new(Mutex::new(Registry::default()));
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let mut tasks = tokio::task::JoinSet::new();
    let stop = stop_signal();
    tokio::pin!(stop);
    loop {
        let (stream, peer) = tokio::select! {
            _ = &mut stop => break,
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of file descriptors, say: wait instead of spinning on it.
                    logging::info(&format!("http: accept failed: {e}"));
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        while tasks.try_join_next().is_some() {}
        let ip = policy::client_key(peer.ip());
        let room = registry
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .make_room(ip, opts.max_connections);
        if !room {
            tasks.spawn(turn_away(stream));
            continue;
        }
        let _ = stream.set_nodelay(true);
        let clock = Arc::new(RequestClock::default());
        let authenticated = Arc::new(AtomicBool::new(false));
        let conn = Arc::new(Conn {
            ip,
            local: stream
                .local_addr()
                .map_or_else(|_| local.to_string(), |a| a.to_string()),
            clock: clock.clone(),
            authenticated: authenticated.clone(),
        });
        let io = hyper_util::rt::TokioIo::new(Deadlined::new(
            stream,
            IDLE_TIMEOUT.max(opts.request_timeout),
            WRITE_TIMEOUT,
            clock,
        ));
        let id = {
            let mut r = registry.lock().unwrap_or_else(|e| e.into_inner());
            r.next_id += 1;
            r.next_id
        };
        let (shared, mut stop_rx, leave_registry) =
            (shared.clone(), stop_rx.clone(), registry.clone());
        let request_timeout = opts.request_timeout;
        let abort = tasks.spawn(async move {
            let _leave = Leave(leave_registry, id);
            let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                let (conn, shared) = (conn.clone(), shared.clone());
                async move {
                    let line = format!("{} {}", req.method(), req.uri().path());
                    let started = Instant::now();
                    let answer = handle(req, &conn, &shared).await;
                    logging::info(&format!(
                        "http: {} {line} {} {:.2} ms",
                        conn.ip,
                        answer.status().as_u16(),
                        started.elapsed().as_secs_f64() * 1000.0
                    ));
                    Ok::<_, std::convert::Infallible>(answer)
                }
            });
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(request_timeout)
                .max_buf_size(64 * 1024)
                .keep_alive(true);
            let connection = builder.serve_connection(io, service);
            tokio::pin!(connection);
            tokio::select! {
                _ = connection.as_mut() => {}
                _ = stop_rx.changed() => {
                    connection.as_mut().graceful_shutdown();
                    let _ = connection.await;
                }
            }
        });
        registry
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .open
            .insert(
                id,
                Slot {
                    ip,
                    opened: Instant::now(),
                    authenticated,
                    abort,
                },
            );
    }
    logging::info("http: stopping: no new connections; finishing the requests in hand");
    drop(listener);
    shared.stopping.store(true, Ordering::Relaxed);
    let _ = stop_tx.send(true);
    let grace = opts.request_timeout + Duration::from_secs(1);
    if tokio::time::timeout(grace, async { while tasks.join_next().await.is_some() {} })
        .await
        .is_err()
    {
        logging::info("http: closing the connections still open");
        tasks.abort_all();
    }
    logging::info("http: stopped");
    Ok(())
}
