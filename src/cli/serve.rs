//! `fleetctl serve`: the MCP server over stdio, or over HTTP with `--http`.

use crate::error::{Error, Result};
use crate::report;
use clap::Args;
use std::path::PathBuf;

#[derive(Debug, Args)]
pub(super) struct ServeArgs {
    /// Also log every message in and out (on stderr).
    #[arg(long, short)]
    verbose: bool,

    /// Raster tiles for the route_map and fleet_map tools: a {z}/{x}/{y}.png folder or an
    /// MBTiles file.
    #[arg(long, value_name = "DIR|FILE.mbtiles")]
    tiles: Option<PathBuf>,

    /// Serve Streamable HTTP on this address instead of stdio (e.g. 127.0.0.1:8765).
    /// Needs a bearer token from FLEETCTL_TOKEN or --token-file.
    #[arg(long, value_name = "ADDR")]
    http: Option<String>,

    /// The bearer token's file (its first line); default: the FLEETCTL_TOKEN variable.
    #[arg(long, value_name = "PATH", requires = "http")]
    token_file: Option<PathBuf>,

    /// Allow a non-loopback address. Put TLS in front of it (a reverse proxy).
    #[arg(long, requires = "http")]
    allow_remote: bool,

    /// A browser origin allowed besides loopback ones, e.g. https://dispatch.example (repeatable).
    #[arg(long, value_name = "ORIGIN", requires = "http")]
    allow_origin: Vec<String>,

    /// A Host name the server answers to besides loopback names and its own address,
    /// e.g. fleet.example behind a reverse proxy (repeatable). Others get 403, so a
    /// web page whose DNS name was rebound to this machine cannot reach the server.
    #[arg(long, value_name = "NAME[:PORT]", requires = "http")]
    allow_host: Vec<String>,

    /// Worker threads, each with its own read-only database connection (1–64).
    #[arg(long, default_value_t = 4, value_name = "N", requires = "http",
          value_parser = clap::value_parser!(u16).range(1..=64))]
    workers: u16,

    /// Requests that may wait for a worker; beyond them the server answers 503
    /// (1–4096).
    #[arg(long, default_value_t = 64, value_name = "N", requires = "http",
          value_parser = clap::value_parser!(u16).range(1..=4096))]
    queue: u16,

    /// Seconds a client may take to send one request (headers and body) before it
    /// gets 408; SIGTERM waits at most this long (+1 s) for requests in hand (1–3600).
    #[arg(long, default_value_t = 10, value_name = "S", requires = "http",
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    request_timeout_s: u64,

    /// Connections held at once (one address may hold at most 64). When full, a new
    /// connection takes the place of the oldest one that has shown no token, else of
    /// the one that has longest not read its answers, else it gets 503 (1–4096).
    #[arg(long, default_value_t = 128, value_name = "N", requires = "http",
          value_parser = clap::value_parser!(u16).range(1..=4096))]
    max_connections: u16,

    /// Also take positions pushed by trackers and phone apps, at /ingest/osmand
    /// (Traccar Client, OsmAnd, GPSLogger), /ingest/traccar (a Traccar server's JSON
    /// forwarding) and /ingest/owntracks. Needs an ingest token, distinct from the
    /// bearer token: FLEETCTL_INGEST_TOKEN or --ingest-token-file. See docs/live.md.
    #[arg(long, requires = "http")]
    ingest: bool,

    /// The ingest token's file (its first line); default: FLEETCTL_INGEST_TOKEN.
    #[arg(long, value_name = "PATH", requires = "ingest")]
    ingest_token_file: Option<PathBuf>,

    /// Give an unknown device a vehicle of its own (plate = its id) instead of
    /// refusing its positions with 404, up to --max-new-vehicles-per-day.
    #[arg(long, requires = "ingest")]
    auto_register: bool,

    /// With --auto-register: at most this many vehicles added a day (UTC) by this
    /// server; past it a new device gets 429 until the next day, and the log says
    /// so once a minute with a count (1–1000000). Known devices are never limited.
    #[arg(long, default_value_t = 1000, value_name = "N", requires = "auto_register",
          value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    max_new_vehicles_per_day: u32,

    /// The unit of the OsmAnd protocol's `speed`: knots (Traccar Client, and
    /// Traccar's own reading), or mps for the OsmAnd app and GPSLogger (%SPD). A
    /// device may say its own with `&speed_unit=mps` in its URL.
    #[arg(
        long,
        value_name = "UNIT",
        default_value = "knots",
        requires = "ingest"
    )]
    osmand_speed_unit: String,

    /// POST each event detected live (speeding, long stop, signal loss, geofence
    /// entry and exit, ignition) as JSON to this http:// or https:// URL, e.g.
    /// https://alerts.example/fleet. Queued and retried for about a minute with
    /// growing pauses; never holds up ingest. Alerts are logged either way.
    #[arg(long, value_name = "URL", requires = "ingest")]
    alert_webhook: Option<String>,

    /// With an https:// --alert-webhook: trust the CA certificates in this PEM
    /// file (a private receiver's) instead of the public roots built in.
    #[arg(long, value_name = "FILE.pem", requires = "alert_webhook")]
    alert_webhook_ca: Option<PathBuf>,

    /// Run the tool calls' threads under a real-time policy (Linux SCHED_RR, the
    /// lowest priority), so that a call takes a core ahead of the devices' pushes
    /// when the cores are busy: the tail of a tool's latency under full ingest then
    /// stays near its idle figure (docs/live.md). Pictures are drawn at the ordinary
    /// priority. Needs CAP_SYS_NICE or a real-time priority limit (systemd:
    /// LimitRTPRIO=1); refused clearly otherwise.
    #[arg(long, requires = "ingest")]
    realtime_tools: bool,
}

pub(super) fn serve(db: crate::store::Location, args: ServeArgs) -> Result<()> {
    crate::logging::init(args.verbose);
    let Some(addr) = args.http else {
        let tiles = args
            .tiles
            .as_deref()
            .map(report::route_map::TileSource::open)
            .transpose()?;
        return crate::mcp::serve_stdio(&db, tiles)
            .map_err(|e| Error::io(std::path::Path::new("<stdio>"), e));
    };
    let addr: std::net::SocketAddr = addr.parse().map_err(|_| {
        Error::invalid(format!("--http {addr:?} is not an address"))
            .with_hint("use IP:PORT, e.g. 127.0.0.1:8765")
    })?;
    if !addr.ip().is_loopback() && !args.allow_remote {
        return Err(Error::invalid(format!("--http {addr} is not a loopback address"))
            .with_hint("add --allow-remote to listen beyond this machine, and put TLS in front of it (a reverse proxy)"));
    }
    if !addr.ip().is_loopback() {
        crate::logging::info(
            "http: listening beyond loopback: traffic is plain HTTP; terminate TLS in a reverse proxy in front",
        );
    }
    let token = crate::mcp::http::read_token(args.token_file.as_deref())?;
    let ingest = if args.ingest {
        let ingest_token = crate::mcp::http::read_ingest_token(args.ingest_token_file.as_deref())?;
        if ingest_token == token {
            return Err(Error::invalid("the ingest token is the bearer token").with_hint(
                "give devices a token of their own: an ingest token may only append positions, and the bearer token reads the fleet",
            ));
        }
        let osmand_speed = crate::ingest::units::SpeedUnit::parse(&args.osmand_speed_unit)
            .ok_or_else(|| {
                Error::invalid(format!(
                    "--osmand-speed-unit {:?} is not a speed unit",
                    args.osmand_speed_unit
                ))
                .with_hint(format!(
                    "use one of {}",
                    crate::ingest::units::SpeedUnit::NAMES
                ))
            })?;
        Some(crate::feed::IngestOptions {
            token: ingest_token,
            auto_register: args.auto_register.then_some(args.max_new_vehicles_per_day),
            osmand_speed,
            alert_webhook: args
                .alert_webhook
                .as_deref()
                .map(|url| {
                    let hook = crate::feed::Webhook::parse(url)?;
                    match &args.alert_webhook_ca {
                        Some(ca) => hook.with_ca_file(ca),
                        None => Ok(hook),
                    }
                })
                .transpose()?,
        })
    } else {
        None
    };
    // On PostgreSQL, every connection of the server gives up on a lock after 5 s (a
    // push then gets 503, retried; a tool call a timeout) and on a statement at the
    // request's own timeout, instead of waiting behind another session.
    let request_timeout = std::time::Duration::from_secs(args.request_timeout_s);
    crate::store::pg::set_deadlines(crate::store::pg::Deadlines {
        lock: std::time::Duration::from_secs(5).min(request_timeout),
        statement: request_timeout,
    });
    let opts = crate::mcp::http::HttpOptions {
        addr,
        token,
        ingest,
        allowed_origins: args.allow_origin,
        allowed_hosts: args.allow_host,
        workers: usize::from(args.workers),
        queue: usize::from(args.queue),
        max_connections: usize::from(args.max_connections),
        tiles: args.tiles,
        request_timeout,
        realtime_tools: args.realtime_tools,
    };
    crate::mcp::http::serve(&db, opts)
}
