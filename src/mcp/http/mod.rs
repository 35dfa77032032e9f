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

mod answer;
mod ingest;
mod io;
mod lanes;
pub mod openapi;
pub mod policy;
mod request;
mod slots;
mod steps;
mod token;
pub mod worker;

pub use openapi::openapi;
use slots::{Leave, Registry, Slot, serve_connection, turn_away};
pub use token::{read_ingest_token, read_token};

use crate::error::{Error, Result};
use crate::logging;
use crate::mcp::jsonrpc;
use crate::mcp::session::{self, Server};
use crate::report::route_map::TileSource;
use hyper::body::Bytes;
use io::{Deadlined, RequestClock};
use policy::FailureLog;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, SyncSender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use worker::{Job, Reply};

/// The largest request body accepted, bytes (the same bound as a stdio message).
pub const MAX_BODY_BYTES: usize = jsonrpc::MAX_MESSAGE_BYTES;
/// Request bodies held at once, bytes: being read, waiting for a worker, or run.
const MAX_BODIES_IN_HAND_BYTES: usize = 8 * 1024 * 1024;
/// Answer bodies held at once, bytes: from a worker's reply until hyper has handed
/// all but its last buffer to the socket. A client that does not read holds its
/// answer; past this budget the server answers 503 and closes the connection that
/// has longest not read.
const MAX_ANSWERS_IN_HAND_BYTES: usize = 16 * 1024 * 1024;
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
    /// The live feed's endpoints, when started with `--ingest`.
    pub ingest: Option<crate::feed::IngestOptions>,
    /// The tool calls' threads (their event loop and the workers) under a
    /// real-time policy, ahead of ingest (`--realtime-tools`, with `--ingest`).
    pub realtime_tools: bool,
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
    answer_budget_kib: Arc<tokio::sync::Semaphore>,
    registry: Arc<Mutex<Registry>>,
    ingest: Option<crate::feed::Feed>,
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

/// Starts the worker threads; each owns a read-only database connection.
fn start_workers(db_path: &crate::store::Location, opts: &HttpOptions) -> Result<SyncSender<Task>> {
    let (jobs, queue) = mpsc::sync_channel::<Task>(opts.queue.max(1));
    let queue = Arc::new(Mutex::new(queue));
    let shared = Arc::new(crate::mcp::answers::SharedAnswers::default());
    let warming = std::time::Instant::now();
    let mut warmed = 0;
    for _ in 0..opts.workers.max(1) {
        let queue = queue.clone();
        let mut server = Server::stateless(db_path);
        server.share_answers(shared.clone());
        if let Some(path) = &opts.tiles {
            server.set_tiles(Some(TileSource::open(path)?));
        }
        warmed += server.warm();
        let realtime = opts.realtime_tools;
        crate::threads::spawn_named("tool-worker", move || {
            if realtime {
                // Allowed: `serve` asked the system before starting any thread.
                let _ = crate::threads::make_this_thread_realtime();
            }
            loop {
                // A request waiting is taken at once; with none, the worker first
                // ends what the last one left open (`Server::rest`), off the path
                // of any answer. A queue locked by another worker is one that
                // worker waits on: empty.
                let waiting = match queue.try_lock() {
                    Ok(queue) => queue.try_recv(),
                    Err(std::sync::TryLockError::Poisoned(e)) => e.into_inner().try_recv(),
                    Err(std::sync::TryLockError::WouldBlock) => Err(mpsc::TryRecvError::Empty),
                };
                let task = match waiting {
                    Ok(task) => Ok(task),
                    Err(mpsc::TryRecvError::Disconnected) => break,
                    Err(mpsc::TryRecvError::Empty) => {
                        server.rest();
                        queue.lock().unwrap_or_else(|e| e.into_inner()).recv()
                    }
                };
                let Ok(task) = task else { break };
                let reply = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    worker::run_job(&mut server, task.job)
                }))
                .unwrap_or_else(|_| {
                    Reply::error(&Error::internal("the request failed inside the server"))
                });
                let _ = task.reply.send(reply);
            }
        })?;
    }
    if warmed > 0 {
        logging::info(&format!(
            "serve: {} workers ready ({warmed} reports run first) in {} ms",
            opts.workers.max(1),
            warming.elapsed().as_millis()
        ));
    }
    Ok(jobs)
}

/// Whether this process may put a thread under a real-time policy, asked of the
/// system on a thread of its own before the server starts any.
fn realtime_allowed() -> Result<()> {
    let asked = std::thread::spawn(crate::threads::make_this_thread_realtime)
        .join()
        .unwrap_or_else(|_| Err("the thread that asked failed".into()));
    match asked {
        Ok(()) => {
            logging::info(
                "serve: the tool calls' threads run real-time (SCHED_RR, priority 1), ahead of ingest; pictures are drawn at the ordinary priority",
            );
            Ok(())
        }
        Err(why) => Err(Error::new(
            crate::error::ErrorCode::Forbidden,
            format!("--realtime-tools: the system refused a real-time policy ({why})"),
        )
        .with_hint(
            "allow it: run with CAP_SYS_NICE (systemd: AmbientCapabilities=CAP_SYS_NICE), or raise the real-time priority limit (systemd: LimitRTPRIO=1; a shell: ulimit -r 1, as root); or serve without --realtime-tools",
        )),
    }
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
pub fn serve(db_path: &crate::store::Location, opts: HttpOptions) -> Result<()> {
    let listener = std::net::TcpListener::bind(opts.addr)
        .map_err(|e| Error::io(Path::new(&opts.addr.to_string()), e))?;
    listener
        .set_nonblocking(true)
        .map_err(|e| Error::io(Path::new("listener"), e))?;
    let local = listener.local_addr().unwrap_or(opts.addr);
    if opts.realtime_tools {
        realtime_allowed()?;
    }
    // The feed's writer first: it puts the database in WAL mode before the workers
    // open it.
    let ingest = opts
        .ingest
        .clone()
        .map(|o| crate::feed::start(db_path, o))
        .transpose()?;
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
        answer_budget_kib: Arc::new(tokio::sync::Semaphore::new(
            MAX_ANSWERS_IN_HAND_BYTES / 1024,
        )),
        registry: Arc::new(Mutex::new(Registry::default())),
        ingest,
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
    let feed = if shared.ingest.is_some() {
        "; positions at /ingest/osmand, /ingest/traccar, /ingest/owntracks"
    } else {
        ""
    };
    logging::info(&format!(
        "http: listening on http://{local} (MCP at /mcp, OpenAPI at /openapi.json; protocol {} and the handshake revisions{feed})",
        session::MODERN_VERSION
    ));
    let registry = shared.registry.clone();
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    // Tool calls get an event loop of their own when devices push positions.
    let tools_lane = match shared.ingest {
        Some(_) => Some(lanes::ToolsLane::start(opts.realtime_tools)?),
        None => None,
    };
    let tools = tools_lane.as_ref().map(lanes::ToolsLane::handle);
    let mut tasks = tokio::task::JoinSet::new();
    let stop = stop_signal();
    tokio::pin!(stop);
    let feed_died = async {
        match &shared.ingest {
            Some(feed) => feed.health.died().await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(feed_died);
    loop {
        let (stream, peer) = tokio::select! {
            _ = &mut stop => break,
            _ = &mut feed_died => break,
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
        let slot_clock = clock.clone();
        let id = {
            let mut r = registry.lock().unwrap_or_else(|e| e.into_inner());
            r.next_id += 1;
            r.next_id
        };
        let leave = Leave(registry.clone(), id);
        let (for_conn, stop_rx, request_timeout) =
            (shared.clone(), stop_rx.clone(), opts.request_timeout);
        let serve = move |stream| {
            let io = hyper_util::rt::TokioIo::new(Deadlined::new(
                stream,
                IDLE_TIMEOUT.max(request_timeout),
                WRITE_TIMEOUT,
                clock,
            ));
            serve_connection(io, conn, for_conn, stop_rx, request_timeout, leave)
        };
        let task = lanes::serve_in_its_lane(stream, tools.clone(), serve);
        // The slot is in the registry before the task can run, so that its `Leave`
        // always finds it: on this current-thread runtime a spawned task starts only
        // when this loop next awaits, and nothing between here and the insert awaits.
        let abort = tasks.spawn(task);
        let slot = Slot {
            ip,
            opened: Instant::now(),
            authenticated,
            clock: slot_clock,
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
    drop(tools_lane);
    if let Some(feed) = &shared.ingest {
        feed.finish(Duration::from_secs(30));
    }
    logging::info("http: stopped");
    match shared.ingest.as_ref().filter(|f| f.health.is_dead()) {
        Some(feed) => Err(Error::internal(format!(
            "the live feed stopped: {}",
            feed.health.problem().unwrap_or_default()
        ))
        .with_hint("start the server again; every fix acknowledged with 200 was stored")),
        None => Ok(()),
    }
}
