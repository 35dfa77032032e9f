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

/// Answers one request (the log line is written by the caller). Each step below
/// either lets the request go on or is its answer (`Err`).
async fn handle(req: Request<Incoming>, conn: &Conn, shared: &Shared) -> Answer {
    let _in_hand = conn.clock.in_hand();
    let deadline = conn.clock.take() + shared.request_timeout;
    match answer(req, conn, shared, deadline).await {
        Ok(answer) => answer,
        Err(refused) => *refused,
    }
}

/// A request answered before it reached a worker (boxed: a response is large).
type Refused = Box<Answer>;

async fn answer(
    req: Request<Incoming>,
    conn: &Conn,
    shared: &Shared,
    deadline: Instant,
) -> std::result::Result<Answer, Refused> {
    check_host(
        req.headers(),
        req.uri(),
        req.version(),
        &conn.local,
        &shared.allowed_hosts,
    )?;
    let cors = policy::cors(
        header(&req, "origin"),
        &shared.allowed_origins,
        req.method() == hyper::Method::OPTIONS,
    );
    let token = req.headers().get("authorization").map(|v| v.as_bytes());
    let token_ok = policy::bearer_matches(token, &shared.token);
    if token_ok {
        conn.authenticated.store(true, Ordering::Relaxed);
    }
    let anonymous = !conn.authenticated.load(Ordering::Relaxed);
    if let Some(answer) = open_answer(
        req.method(),
        req.uri().path(),
        &cors,
        &shared.openapi,
        anonymous,
    ) {
        return Ok(answer);
    }
    authenticate(token_ok, conn.ip, &shared.failures)?;
    let cors = match cors {
        policy::Cors::Allowed(headers) => headers,
        policy::Cors::Refused(o) => return Err(Box::new(forbidden_origin(&o))),
        policy::Cors::NoOrigin => Vec::new(),
    };
    let route = route_of(req.method(), req.uri().path(), &cors)?;
    if policy::body_too_large(header(&req, "content-length"), MAX_BODY_BYTES) {
        return Err(Box::new(too_large(&cors)));
    }
    let protocol_headers: HashMap<String, String> =
        ["mcp-protocol-version", "mcp-method", "mcp-name"]
            .into_iter()
            .filter_map(|n| header(&req, n).map(|v| (n.to_string(), v.to_string())))
            .collect();
    let (body, budget) = read_body(req, shared, deadline, &cors).await?;
    // Bytes that arrived while the body was read belong to this request, not the next.
    conn.clock.take();
    let job = match route {
        None => Job::Mcp {
            body,
            headers: protocol_headers,
        },
        Some(name) => Job::Tool { name, body },
    };
    dispatch(job, budget, shared, &cors).await
}

/// DNS rebinding: a page on another name must not reach a loopback server. Two Host
/// headers are a bad request (RFC 9112 §3.2); an absolute URL's authority is the host
/// the request is for, whatever its Host header says (§3.2.2).
fn check_host(
    headers: &hyper::HeaderMap,
    uri: &hyper::Uri,
    version: hyper::Version,
    local: &str,
    allowed_hosts: &[String],
) -> std::result::Result<(), Refused> {
    if headers.get_all("host").iter().count() > 1 {
        return Err(Box::new(error_answer(
            ErrorCode::InvalidArgument,
            "a request has one Host header; this one has several",
            &[],
            true,
        )));
    }
    let host = uri
        .authority()
        .map(|a| a.as_str())
        .or_else(|| headers.get("host").and_then(|v| v.to_str().ok()));
    match host {
        None if version == hyper::Version::HTTP_11 => Err(Box::new(error_answer(
            ErrorCode::InvalidArgument,
            "HTTP/1.1 requests need a Host header",
            &[],
            true,
        ))),
        Some(h) if !policy::host_allowed(h, local, allowed_hosts) => {
            let e = Error::new(
                ErrorCode::Forbidden,
                format!("host {h:?} is not served here"),
            )
            .with_hint("start the server with --allow-host NAME to answer to that name");
            Err(Box::new(refuse(&e, &[], true)))
        }
        _ => Ok(()),
    }
}

/// The answers that need no token: health, the OpenAPI document and CORS preflights.
/// Their connection closes unless it has shown a valid token (`anonymous` false),
/// before or with this request; a wrong one here is no failed attempt, as nothing was
/// asked that needs it.
fn open_answer(
    method: &hyper::Method,
    path: &str,
    cors: &policy::Cors,
    openapi: &Bytes,
    anonymous: bool,
) -> Option<Answer> {
    match (method.as_str(), path) {
        ("GET", "/healthz") => Some(respond(
            200,
            Some(br#"{"status":"ok"}"#.to_vec()),
            &[],
            anonymous,
        )),
        ("GET", "/openapi.json") => Some(respond(200, Some(openapi.to_vec()), &[], anonymous)),
        ("OPTIONS", _) => Some(match cors {
            policy::Cors::Allowed(headers) => respond(204, None, headers, anonymous),
            policy::Cors::Refused(o) => forbidden_origin(o),
            policy::Cors::NoOrigin => error_answer(
                ErrorCode::MethodNotAllowed,
                "use POST",
                &[("Allow", "POST".into())],
                true,
            ),
        }),
        _ => None,
    }
}

/// Everything else needs the token: a request without it is a failed attempt, and
/// too many from one address are refused for a minute.
fn authenticate(
    token_ok: bool,
    ip: IpAddr,
    failures: &Mutex<FailureLog>,
) -> std::result::Result<(), Refused> {
    if token_ok {
        return Ok(());
    }
    let limited = failures
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .fail(ip, Instant::now());
    Err(Box::new(if limited {
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
    }))
}

/// Where a POST goes: `/mcp` (None) or one tool's REST twin (its name).
fn route_of(
    method: &hyper::Method,
    path: &str,
    cors: &[(&str, String)],
) -> std::result::Result<Option<String>, Refused> {
    let route = match path {
        "/mcp" => None,
        p => match p.strip_prefix("/api/v1/tools/") {
            Some(name) if !name.is_empty() && !name.contains('/') => Some(name.to_string()),
            _ => {
                return Err(Box::new(error_answer(
                    ErrorCode::NotFound,
                    format!("no such path {p}"),
                    cors,
                    true,
                )));
            }
        },
    };
    if method != hyper::Method::POST {
        return Err(Box::new(error_answer(
            ErrorCode::MethodNotAllowed,
            "use POST",
            &[("Allow", "POST".into())],
            true,
        )));
    }
    Ok(route)
}

fn too_large(cors: &[(&str, String)]) -> Answer {
    error_answer(
        ErrorCode::TooLarge,
        format!("request body over {MAX_BODY_BYTES} bytes"),
        cors,
        true,
    )
}

/// Reads the body by the deadline, within the shared budget: bodies held at once
/// (being read, queued or run) share one budget, so memory stays bounded whatever the
/// number of clients. The permit goes with the job to its worker.
async fn read_body(
    req: Request<Incoming>,
    shared: &Shared,
    deadline: Instant,
    cors: &[(&str, String)],
) -> std::result::Result<(Bytes, tokio::sync::OwnedSemaphorePermit), Refused> {
    let announced = header(&req, "content-length").and_then(|v| v.parse::<usize>().ok());
    let kib = announced.unwrap_or(MAX_BODY_BYTES).div_ceil(1024).max(1) as u32;
    let Ok(budget) = shared.body_budget_kib.clone().try_acquire_many_owned(kib) else {
        return Err(Box::new(error_answer(
            ErrorCode::Busy,
            "too many request bodies in hand; retry shortly",
            &[("Retry-After", "1".into())],
            true,
        )));
    };
    let remaining = deadline.saturating_duration_since(Instant::now());
    let read = tokio::time::timeout(
        remaining,
        Limited::new(req.into_body(), MAX_BODY_BYTES).collect(),
    );
    match read.await {
        Err(_) => Err(Box::new(error_answer(
            ErrorCode::Timeout,
            "request body not received in time",
            cors,
            true,
        ))),
        Ok(Err(e))
            if e.downcast_ref::<http_body_util::LengthLimitError>()
                .is_some() =>
        {
            Err(Box::new(too_large(cors)))
        }
        Ok(Err(_)) => Err(Box::new(error_answer(
            ErrorCode::InvalidArgument,
            "the request body could not be read",
            cors,
            true,
        ))),
        Ok(Ok(collected)) => Ok((collected.to_bytes(), budget)),
    }
}

/// Hands the job to a worker (or answers 503 when none can take it) and answers with
/// its reply.
async fn dispatch(
    job: Job,
    budget: tokio::sync::OwnedSemaphorePermit,
    shared: &Shared,
    cors: &[(&str, String)],
) -> std::result::Result<Answer, Refused> {
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
            return Err(Box::new(error_answer(
                ErrorCode::Busy,
                "all workers are busy; retry shortly",
                &[("Retry-After", "1".into())],
                false,
            )));
        }
        Err(TrySendError::Disconnected(_)) => {
            return Err(Box::new(error_answer(
                ErrorCode::Busy,
                "the server is stopping",
                &[("Retry-After", "1".into())],
                true,
            )));
        }
    };
    let stopping = shared.stopping.load(Ordering::Relaxed);
    Ok(respond(
        reply.status,
        reply.body.map(|b| b.to_string().into_bytes()),
        cors,
        stopping,
    ))
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

/// One connection's life: requests served with keep-alive until the client leaves,
/// a deadline passes, or the server stops (then the request in hand is finished).
/// Each request is logged with its status and time.
async fn serve_connection(
    io: hyper_util::rt::TokioIo<Deadlined<tokio::net::TcpStream>>,
    conn: Arc<Conn>,
    shared: Arc<Shared>,
    mut stop_rx: tokio::sync::watch::Receiver<bool>,
    request_timeout: Duration,
    _leave: Leave,
) {
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
        let leave = Leave(registry.clone(), id);
        let task = serve_connection(
            io,
            conn,
            shared.clone(),
            stop_rx.clone(),
            opts.request_timeout,
            leave,
        );
        // The slot is in the registry before the task can run, so that its `Leave`
        // always finds it: on this current-thread runtime a spawned task starts only
        // when this loop next awaits, and nothing between here and the insert awaits.
        let abort = tasks.spawn(task);
        let slot = Slot {
            ip,
            opened: Instant::now(),
            authenticated,
            abort,
        };
        registry
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .open
            .insert(id, slot);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(uri: &str, hosts: &[&str], version: hyper::Version) -> hyper::http::request::Parts {
        let mut req = Request::builder().uri(uri).version(version);
        for h in hosts {
            req = req.header("host", *h);
        }
        req.body(()).unwrap().into_parts().0
    }

    fn host_status(uri: &str, hosts: &[&str], version: hyper::Version) -> Option<u16> {
        let p = parts(uri, hosts, version);
        check_host(&p.headers, &p.uri, p.version, "127.0.0.1:8080", &[])
            .err()
            .map(|a| a.status().as_u16())
    }

    #[test]
    fn the_host_is_checked_once_and_from_the_url_when_it_has_one() {
        use hyper::Version;
        assert_eq!(
            host_status("/mcp", &["localhost:8080"], Version::HTTP_11),
            None
        );
        assert_eq!(
            host_status("/mcp", &["evil.example"], Version::HTTP_11),
            Some(403)
        );
        assert_eq!(
            host_status("/mcp", &["localhost", "evil.example"], Version::HTTP_11),
            Some(400)
        );
        assert_eq!(host_status("/mcp", &[], Version::HTTP_11), Some(400));
        assert_eq!(host_status("/mcp", &[], Version::HTTP_10), None);
        // The URL's authority wins over the header.
        assert_eq!(
            host_status("http://evil.example/mcp", &["localhost"], Version::HTTP_11),
            Some(403)
        );
    }

    #[test]
    fn open_answers_close_the_connection_until_a_token_is_shown() {
        let openapi = Bytes::from_static(b"{}");
        let get = hyper::Method::GET;
        let closes = |a: Answer| a.headers().get("connection").is_some();
        let health = open_answer(&get, "/healthz", &policy::Cors::NoOrigin, &openapi, true);
        assert!(closes(health.unwrap()));
        let health = open_answer(&get, "/healthz", &policy::Cors::NoOrigin, &openapi, false);
        assert!(!closes(health.unwrap()));
        assert!(open_answer(&get, "/mcp", &policy::Cors::NoOrigin, &openapi, false).is_none());
        let preflight = open_answer(
            &hyper::Method::OPTIONS,
            "/mcp",
            &policy::Cors::NoOrigin,
            &openapi,
            false,
        );
        assert_eq!(preflight.unwrap().status().as_u16(), 405);
    }

    #[test]
    fn routes_are_mcp_or_one_tool_and_only_post() {
        let post = hyper::Method::POST;
        assert_eq!(route_of(&post, "/mcp", &[]).ok(), Some(None));
        assert_eq!(
            route_of(&post, "/api/v1/tools/trips", &[]).ok(),
            Some(Some("trips".to_string()))
        );
        let status =
            |m: &hyper::Method, p: &str| route_of(m, p, &[]).err().map(|a| a.status().as_u16());
        assert_eq!(status(&post, "/api/v1/tools/"), Some(404));
        assert_eq!(status(&post, "/api/v1/tools/a/b"), Some(404));
        assert_eq!(status(&hyper::Method::GET, "/mcp"), Some(405));
    }

    #[test]
    fn failed_authentications_are_limited_per_address() {
        let failures = Mutex::new(FailureLog::default());
        let ip: IpAddr = "10.0.0.1".parse().unwrap();
        assert!(authenticate(true, ip, &failures).is_ok());
        let statuses: Vec<u16> = (0..=policy::MAX_FAILURES)
            .map(|_| {
                authenticate(false, ip, &failures)
                    .unwrap_err()
                    .status()
                    .as_u16()
            })
            .collect();
        assert_eq!(statuses[0], 401);
        assert_eq!(*statuses.last().unwrap(), 429);
    }
}
