//! Front end 1, the command line: flags become a request, the domain does the work,
//! `render` turns the answer into text. No fleet logic lives here.

use crate::clock::{self, FleetZone};
use crate::error::{Error, Result};
use crate::{render, report, store, synth};

pub mod export;
pub mod import;
pub mod places;
pub mod query;
pub mod vehicles;
use clap::{Args, Parser, Subcommand};
use std::io::{IsTerminal, Write};
use std::path::PathBuf;

/// fleetctl — offline fleet telemetry: a synthetic fleet, reports computed from GPS
/// positions, route maps, and an MCP server for AI assistants.
#[derive(Debug, Parser)]
#[command(name = "fleetctl", version, about, long_about = None, max_term_width = 100)]
pub struct Cli {
    /// The fleet database. Default: fleet.db in the fleetctl folder of your data
    /// directory (~/.local/share/fleetctl/fleet.db on Linux).
    #[arg(long, global = true, env = "FLEETCTL_DB", value_name = "PATH")]
    pub db: Option<PathBuf>,

    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Generate a synthetic fleet database with planted anomalies (ground truth).
    ///
    /// Drives the vehicles along the embedded Guatemala City routes, a fix every 15 s
    /// on shift with GPS noise, and plants speeding episodes, long stops, signal
    /// losses and three vehicles stopped "now", each recorded in `injected_events`.
    /// The same --seed and --ahora give identical rows.
    ///
    /// Example: fleetctl generate --ahora 2026-11-25T15:30
    Generate(GenerateArgs),

    /// Re-run detection (stops, trips, events, daily rollups) on an existing database.
    ///
    /// Replaces the derived tables atomically: a failure leaves the previous results.
    /// The thresholds given are stored in the database and kept by later runs;
    /// those not given keep their stored values (see `fleetctl settings`).
    ///
    /// Example: fleetctl analyze --stop-radius-m 100 --speed-limit 60
    Analyze(AnalyzeArgs),

    /// Show the database's time zone and detection thresholds.
    Settings,

    /// The fleet's own named places, which describe where a vehicle is ("1.2 km NE
    /// of …"): import (GeoJSON points, GeoNames dumps), list, remove.
    #[command(subcommand)]
    Places(places::PlacesCommand),

    /// The fleet's geofences (depots, customers, zones): import (GeoJSON), list,
    /// remove.
    #[command(subcommand)]
    Geofences(places::GeofencesCommand),

    /// A vehicle's own settings: its speed limit (`vehicles set PLATE --speed-limit 90`).
    #[command(subcommand)]
    Vehicles(vehicles::VehiclesCommand),

    /// Import a fleet's own positions: CSV/TSV, Parquet, Traccar CSV or JSON, GPX,
    /// GeoJSON.
    ///
    /// Appends to the database (created when missing: then --time-zone is needed).
    /// Every row that cannot be used is counted by reason, none silently dropped;
    /// importing the same file twice adds nothing; a failed import changes nothing.
    /// Only the vehicles touched are re-analysed.
    ///
    /// Examples:
    ///   fleetctl import --db bus.db --time-zone Europe/London positions.csv
    ///   fleetctl import traccar-export.csv --rejects rejects.csv
    ///   fleetctl import --plate MY-BIKE ride.gpx
    ///   fleetctl import feed.csv --map plate=unit_name --speed-unit mph
    #[command(verbatim_doc_comment)]
    Import(import::ImportArgs),

    /// Write positions or a report's rows to a file for people or data engines:
    /// CSV, Parquet (optionally a Hive-style dataset), GeoJSON, GPX, KML, XLSX.
    ///
    /// Columns carry their units in their names; CSV and Parquet times are UTC
    /// (`…_utc`) with the local `date` beside them; XLSX shows them in the fleet's
    /// zone. The file is written under a temporary name and renamed when complete;
    /// an existing one is replaced only with --force. Positions stay on this machine:
    /// exports are not MCP tools.
    ///
    /// Examples:
    ///   fleetctl export trips --from 2026-11-18 --to 2026-11-24 -o trips.csv
    ///   fleetctl export positions --format parquet --partition-by date -o positions
    ///   fleetctl export positions --plate P-123BCD --from yesterday --to yesterday -o day.gpx
    ///   fleetctl export stops --format geojson -o stops.geojson
    ///   fleetctl export trips stops events daily -o week.xlsx
    #[command(verbatim_doc_comment)]
    Export(export::ExportArgs),

    /// Ask the fleet a question: one report, computed from the positions.
    ///
    /// Every report is also an MCP tool of `fleetctl serve`; `--format json` prints
    /// exactly the tool's answer. Dates accept YYYY-MM-DD, today or yesterday,
    /// resolved on the data clock.
    ///
    /// Examples:
    ///   fleetctl query stopped --min-minutes 30
    ///   fleetctl query trip P-123BCD --date yesterday
    ///   fleetctl query nearest "Bodega Mixco"
    #[command(verbatim_doc_comment)]
    Query(query::QueryArgs),

    /// Draw a vehicle's route on a day, or the whole fleet at an instant, as a PNG map
    /// (offline), and print its path.
    ///
    /// With PLATE (MCP tool route_map): the track is coloured by speed; stops are
    /// circles labelled with minutes; speeding is marked and signal losses are dashed;
    /// depots and zones are named.
    /// With --fleet (MCP tool fleet_map): every vehicle where it was at the data clock,
    /// or --at a local time (YYYY-MM-DDTHH:MM, or HH:MM today), as a dot labelled with
    /// its plate and coloured by state: moving, idle (stopped, engine on), parked
    /// (stopped, engine off or not reported), offline (no fix for over 10 minutes).
    /// With --tiles, local raster tiles go underneath. --format json prints the
    /// tool's answer instead of the path.
    ///
    /// Examples:
    ///   fleetctl map P-123BCD --date yesterday
    ///   fleetctl map P-123BCD --date 2026-11-24 --from 08:00 --to 12:00 -o morning.png
    ///   fleetctl map --fleet
    ///   fleetctl map --fleet --at 2026-11-24T10:30 -o fleet-morning.png --format json
    #[command(verbatim_doc_comment)]
    Map(query::MapArgs),

    /// Draw a vehicle's speed over a local day as a PNG chart (offline), and print its
    /// path.
    ///
    /// x: local time in the fleet's zone; y: km/h. The limit that applied is dashed
    /// (the vehicle's own, else the fleet's; a geofence's lower limit where it
    /// applied); speeding episodes are shaded red with their top speed; stops are
    /// purple bands labelled with their minutes; signal losses break the line (grey
    /// bands); a strip along the bottom shows the ignition (on, off, not reported).
    /// MCP tool speed_chart; --format json prints its answer instead of the path.
    ///
    /// Examples:
    ///   fleetctl chart P-123BCD --date yesterday      # writes P-123BCD_<date>_speed.png
    ///   fleetctl chart P-123BCD --date 2026-11-24 -o speed.png --format json
    #[command(verbatim_doc_comment)]
    Chart(query::ChartArgs),

    /// Serve the reports as MCP tools over stdio, or over HTTP with --http.
    ///
    /// Speaks the handshake revisions 2024-11-05 to 2025-11-25 and the stateless
    /// 2026-07-28 revision. On stdio only protocol messages go to stdout; one log line
    /// per request goes to stderr. The database is opened read-only; if it is missing
    /// the server still starts and tools answer db_unavailable.
    ///
    /// With --http ADDR: POST /mcp (MCP), GET /openapi.json and POST /api/v1/tools/NAME
    /// (the same tools for function calling), GET /healthz. Every request except
    /// GET /healthz and GET /openapi.json needs `Authorization: Bearer TOKEN`, the
    /// token being FLEETCTL_TOKEN or the first line of --token-file. Requests must name
    /// a loopback Host (or one given with --allow-host); browsers need an allowed Origin.
    ///
    /// Examples:
    ///   fleetctl serve
    ///   FLEETCTL_TOKEN=… fleetctl serve --http 127.0.0.1:8765
    #[command(verbatim_doc_comment)]
    Serve(ServeArgs),

    /// Print the MCP client configuration for this machine (Claude Desktop JSON and
    /// the Claude Code command), with absolute paths to this binary and the database.
    McpConfig,
}

#[derive(Debug, Args)]
struct ServeArgs {
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
}

#[derive(Debug, Args)]
struct AnalyzeArgs {
    #[command(flatten)]
    thresholds: ThresholdFlags,
}

/// The `analyze` flags: one per threshold of `analyze::THRESHOLDS` that has a flag,
/// with its help, unit and default from there; each value given, as stored.
#[derive(Clone, Default)]
struct ThresholdFlags(Vec<(&'static crate::analyze::ThresholdSpec, f64)>);

impl std::fmt::Debug for ThresholdFlags {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map()
            .entries(self.0.iter().map(|(spec, value)| (spec.key, value)))
            .finish()
    }
}

impl clap::FromArgMatches for ThresholdFlags {
    fn from_arg_matches(matches: &clap::ArgMatches) -> std::result::Result<Self, clap::Error> {
        let given = crate::analyze::THRESHOLDS
            .iter()
            .filter_map(|spec| {
                let flag = spec.flag.as_ref()?;
                let value = matches.get_one::<f64>(flag.name)?;
                Some((spec, value * flag.stored_per_unit))
            })
            .collect();
        Ok(ThresholdFlags(given))
    }

    fn update_from_arg_matches(
        &mut self,
        matches: &clap::ArgMatches,
    ) -> std::result::Result<(), clap::Error> {
        *self = Self::from_arg_matches(matches)?;
        Ok(())
    }
}

impl clap::Args for ThresholdFlags {
    fn augment_args(mut cmd: clap::Command) -> clap::Command {
        let defaults = crate::analyze::Thresholds::default();
        for spec in &crate::analyze::THRESHOLDS {
            let Some(flag) = &spec.flag else { continue };
            let (lo, hi) = flag.range;
            let default = (spec.get)(&defaults) / flag.stored_per_unit;
            cmd = cmd.arg(
                clap::Arg::new(flag.name)
                    .long(flag.name)
                    .value_name(flag.value_name)
                    .value_parser(clap::value_parser!(f64))
                    .help(format!("{} (default {default}; {lo}–{hi})", spec.meaning)),
            );
        }
        cmd
    }

    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        Self::augment_args(cmd)
    }
}

#[derive(Debug, Args)]
struct GenerateArgs {
    /// The data clock's "now": local time in the fleet's zone (America/Guatemala,
    /// UTC−06:00). The last day of data ends here. Default: the current time.
    #[arg(long, visible_alias = "now", value_name = "YYYY-MM-DDTHH:MM")]
    ahora: Option<String>,

    /// Random seed; the same seed and --ahora give the same database.
    #[arg(long, default_value_t = 7)]
    seed: u64,

    /// Number of vehicles (1..=5000); one in fifteen is out of service.
    #[arg(long, default_value_t = 15, value_name = "N")]
    vehicles: u32,

    /// Days of data ending on the --ahora day (1..=366).
    #[arg(long, default_value_t = 7, value_name = "N")]
    days: u32,

    /// Replace an existing fleetctl database (never any other file).
    #[arg(long, conflicts_with = "if_missing")]
    force: bool,

    /// Do nothing if a fleetctl database is already there (for scripts and `make run`).
    #[arg(long)]
    if_missing: bool,
}

/// Parses `argv` and runs the command, writing its output to stdout.
pub fn run(cli: Cli) -> Result<()> {
    let db = cli.db.clone().unwrap_or_else(store::default_db_path);
    match cli.command {
        Command::Generate(args) => generate(db, args),
        Command::Analyze(args) => analyze(db, args),
        Command::Import(args) => import::run(db, args),
        Command::Export(args) => export::run(db, args),
        Command::Places(cmd) => places::run_places(db, cmd),
        Command::Geofences(cmd) => places::run_geofences(db, cmd),
        Command::Vehicles(cmd) => vehicles::run(db, cmd),
        Command::Settings => {
            let (zone, thresholds) = crate::pipeline::settings(&db)?;
            print_stdout(&render::settings(&db, &zone, &thresholds))
        }
        Command::Query(q) => run_query(db, q),
        Command::Map(args) => draw(db, args.0),
        Command::Chart(args) => draw(db, args.0),
        Command::Serve(args) => serve(db, args),
        Command::McpConfig => print_stdout(&render::mcp_config(&mcp_paths(&db)?)),
    }
}

/// Absolute paths of this binary and the database, for client configuration.
fn mcp_paths(db: &std::path::Path) -> Result<(PathBuf, PathBuf)> {
    let exe =
        std::env::current_exe().map_err(|e| Error::io(std::path::Path::new("fleetctl"), e))?;
    let db = if db.is_absolute() {
        db.to_path_buf()
    } else {
        std::env::current_dir()
            .map_err(|e| Error::io(std::path::Path::new("."), e))?
            .join(db)
    };
    Ok((exe, db))
}

fn analyze(path: PathBuf, args: AnalyzeArgs) -> Result<()> {
    let adjust = |t: &mut crate::analyze::Thresholds| {
        for (spec, value) in &args.thresholds.0 {
            (spec.set)(t, *value);
        }
    };
    let mut bar = ProgressBar::new("analysing");
    let summary = crate::pipeline::reanalyze(&path, &adjust, &mut |f| bar.set(f));
    bar.finish();
    let summary = summary?;
    print_stdout(&render::analyze_summary(&path, &summary))
}

fn serve(db: PathBuf, args: ServeArgs) -> Result<()> {
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
    let opts = crate::mcp::http::HttpOptions {
        addr,
        token: crate::mcp::http::read_token(args.token_file.as_deref())?,
        allowed_origins: args.allow_origin,
        allowed_hosts: args.allow_host,
        workers: usize::from(args.workers),
        queue: usize::from(args.queue),
        max_connections: 128,
        tiles: args.tiles,
        request_timeout: std::time::Duration::from_secs(args.request_timeout_s),
    };
    crate::mcp::http::serve(&db, opts)
}

fn draw(path: PathBuf, d: query::DrawArgs) -> Result<()> {
    let json = d.json;
    draw_to_file(path, d).or_else(|e| {
        // With --format json a failure is the same error object the tool answers.
        if json {
            print_stdout(&format!("{}\n", e.to_json()))?;
        }
        Err(e)
    })
}

/// The picture's file name when -o is not given, from what the answer says.
fn default_file_name(tool: &str, answer: &serde_json::Value) -> String {
    let text = |key: &str, default: &'static str| -> String {
        answer[key].as_str().unwrap_or(default).to_string()
    };
    let name = match tool {
        "speed_chart" => format!(
            "{}_{}_speed.png",
            text("plate", "chart"),
            text("date", "day")
        ),
        "fleet_map" => {
            // `2026-11-25T15:30:00-06:00` → `fleet_2026-11-25_1530.png`.
            let at = text("at", "");
            let (date, time) = at.split_once('T').unwrap_or(("now", ""));
            let hhmm: String = time.chars().take(5).filter(char::is_ascii_digit).collect();
            format!("fleet_{date}_{hhmm}.png")
        }
        _ => format!("{}_{}.png", text("plate", "map"), text("date", "day")),
    };
    safe_file_name(&name)
}

fn draw_to_file(path: PathBuf, d: query::DrawArgs) -> Result<()> {
    let spec = report::find(d.tool)
        .filter(|s| s.draws)
        .ok_or_else(|| Error::internal(format!("no drawing report {}", d.tool)))?;
    let tiles = d
        .tiles
        .as_deref()
        .map(report::route_map::TileSource::open)
        .transpose()?;
    let mut db = report::Db::open(&path)?;
    db.tiles = tiles;
    let answer = render::call(&db, spec, &d.args)?;
    let png = answer
        .png
        .ok_or_else(|| Error::internal(format!("{} drew nothing", spec.tool)))?;
    let output = d
        .output
        .unwrap_or_else(|| PathBuf::from(default_file_name(spec.tool, &answer.value)));
    write_replacing(&output, &png)
        .map_err(|e| Error::io(&output, e).with_hint("choose a writable path with -o FILE"))?;
    if d.json {
        print_stdout(&format!("{}\n", answer.value))
    } else {
        print_stdout(&format!("{}\n", output.display()))
    }
}

fn run_query(path: PathBuf, q: query::QueryArgs) -> Result<()> {
    let spec =
        report::find(q.tool).ok_or_else(|| Error::internal(format!("no report {}", q.tool)))?;
    let format = q.format.unwrap_or(if std::io::stdout().is_terminal() {
        query::Format::Table
    } else {
        query::Format::Json
    });
    let answer = match report::Db::open(&path).and_then(|db| render::call(&db, spec, &q.args)) {
        Ok(answer) => answer,
        Err(e) => {
            if format == query::Format::Json {
                print_stdout(&format!("{}\n", e.to_json()))?;
            }
            return Err(e);
        }
    };
    let value = answer.value;
    let text = match format {
        query::Format::Json => format!("{value}\n"),
        query::Format::Csv => render::csv(&value, spec.rows),
        query::Format::Table => render::table(&value),
    };
    print_stdout(&text)
}

fn generate(path: PathBuf, args: GenerateArgs) -> Result<()> {
    let zone = FleetZone::default();
    let now_ts = match &args.ahora {
        Some(text) => zone.parse_local_minute(text)?,
        None => clock::wall_clock_now() / 60 * 60,
    };
    let mut opts = synth::GenerateOptions {
        path,
        now_ts,
        seed: args.seed,
        vehicles: args.vehicles,
        days: args.days,
        force: args.force,
        zone,
    };
    synth::validate(&opts)?;
    if args.if_missing {
        match store::probe(&opts.path)? {
            store::Probe::Fleet { schema_version } if schema_version == store::SCHEMA_VERSION => {
                return print_stdout(&format!(
                    "{} already exists; kept it (pass --force to regenerate)\n",
                    opts.path.display()
                ));
            }
            // The previous schema: brought up to date in place (an import's fleet
            // may live at the default path), never replaced.
            store::Probe::Fleet { schema_version } if store::is_upgradable(schema_version) => {
                let mut bar = ProgressBar::new("bringing it up to date");
                crate::pipeline::reanalyze(&opts.path, &|_| {}, &mut |f| bar.set(f))?;
                bar.finish();
                return print_stdout(&format!(
                    "{} had schema version {schema_version}; brought it up to version {} and kept it\n",
                    opts.path.display(),
                    store::SCHEMA_VERSION
                ));
            }
            // Our own database, of a schema this binary cannot read: replace it.
            store::Probe::Fleet { schema_version } => {
                crate::logging::info(&format!(
                    "{} has schema version {schema_version}; regenerating it as version {}",
                    opts.path.display(),
                    store::SCHEMA_VERSION
                ));
                opts.force = true;
            }
            _ => {}
        }
    }
    let mut bar = ProgressBar::new("generating");
    let summary = synth::generate(&opts, &mut |f| bar.set(f));
    bar.finish();
    let text = render::generate_summary(&summary?);
    print_stdout(&text)
}

/// A file name made from data (a plate from someone else's database may hold `/` or
/// `..`): only letters, digits, `-`, `_` and `.` are kept, and it never starts with a dot.
fn safe_file_name(name: &str) -> String {
    let kept: String = name
        .chars()
        .map(|c| {
            if c.is_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect();
    kept.trim_start_matches('.').replace("..", "_")
}

/// Writes `bytes` to a temporary file beside `path` and renames it into place, so that
/// a full disk or a kill never leaves a truncated file where a good one was. A link at
/// `path` is written through, as `generate` does; the temporary file is created new
/// (never one planted under its name) and removed on failure, and the temporary files
/// that killed runs left beside it are removed. A target that is not a regular file
/// (a device such as `/dev/null`, a FIFO, a socket, or a link to one such as
/// `/dev/stdout`) is written in place: it is never renamed over.
fn write_replacing(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    if let Ok(m) = std::fs::metadata(path)
        && !m.is_file()
        && !m.is_dir()
    {
        // Our own standard output (`-o /dev/stdout`) is written through the descriptor
        // we hold: reopening a pipe that another user made is not allowed.
        let mut f = match own_stdout_if(&m) {
            Some(stdout) => stdout,
            None => std::fs::OpenOptions::new().write(true).open(path)?,
        };
        return f.write_all(bytes).and_then(|()| f.flush());
    }
    let path = match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => std::fs::canonicalize(path)?,
        _ => path.to_path_buf(),
    };
    let name = path
        .file_name()
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a file name"))?;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let prefix = format!(".{}.tmp-", name.to_string_lossy());
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(std::path::Path::new("."));
    crate::scratch::remove_abandoned(dir, &prefix);
    let tmp = path.with_file_name(format!("{prefix}{}-{nanos}", std::process::id()));
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)
        .and_then(|mut f| {
            f.write_all(bytes)?;
            f.sync_all()
        });
    match written.and_then(|()| crate::scratch::replace(&tmp, &path)) {
        Ok(()) => Ok(()),
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            Err(e)
        }
    }
}

/// Standard output as a file, when it is the file `target` describes.
fn own_stdout_if(target: &std::fs::Metadata) -> Option<std::fs::File> {
    use std::os::fd::AsFd;
    use std::os::unix::fs::MetadataExt;
    let stdout = std::fs::File::from(std::io::stdout().as_fd().try_clone_to_owned().ok()?);
    let m = stdout.metadata().ok()?;
    (m.dev() == target.dev() && m.ino() == target.ino()).then_some(stdout)
}

/// Writes to stdout, treating a closed pipe as success (`fleetctl … | head`).
fn print_stdout(text: &str) -> Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(Error::io(std::path::Path::new("<stdout>"), e))
        }
        _ => Ok(()),
    }
}

/// A progress bar on stderr when it is a terminal; silent otherwise.
struct ProgressBar {
    label: &'static str,
    enabled: bool,
    shown: i32,
}

impl ProgressBar {
    fn new(label: &'static str) -> Self {
        ProgressBar {
            label,
            enabled: std::io::stderr().is_terminal(),
            shown: -1,
        }
    }

    fn set(&mut self, fraction: f64) {
        let percent = (fraction.clamp(0.0, 1.0) * 100.0) as i32;
        if !self.enabled || percent == self.shown {
            return;
        }
        self.shown = percent;
        let filled = (percent / 4) as usize;
        eprint!(
            "\r{} [{}{}] {percent:3}%",
            self.label,
            "#".repeat(filled),
            " ".repeat(25 - filled)
        );
    }

    fn finish(&mut self) {
        if self.enabled && self.shown >= 0 {
            eprint!("\r{}\r", " ".repeat(self.label.len() + 34));
        }
    }
}

/// Turns a clap parse failure into our `invalid_argument`: a message of our own from
/// the error's kind and context, clap's suggestions and accepted values as the hint.
pub fn usage_error(e: &clap::Error) -> Error {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    // From the error's kind and context, never from its rendered text (which clap may
    // word differently from one version to the next).
    let context = |kind: ContextKind| match e.get(kind) {
        Some(ContextValue::String(s)) => Some(s.clone()),
        Some(ContextValue::Strings(v)) => Some(v.join(", ")),
        Some(ContextValue::StyledStr(s)) => Some(s.to_string()),
        Some(ContextValue::StyledStrs(v)) => Some(
            v.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", "),
        ),
        Some(ContextValue::Number(n)) => Some(n.to_string()),
        _ => None,
    };
    let arg = context(ContextKind::InvalidArg);
    let value = context(ContextKind::InvalidValue);
    let suggested = context(ContextKind::SuggestedArg)
        .or_else(|| context(ContextKind::SuggestedSubcommand))
        .or_else(|| context(ContextKind::SuggestedValue))
        .map(|s| format!("did you mean {s}?"))
        .or_else(|| context(ContextKind::Suggested));
    let valid = context(ContextKind::ValidValue)
        .filter(|v| !v.is_empty())
        .map(|v| format!("accepted: {v}"));
    let message = match (e.kind(), &arg, &value) {
        (ErrorKind::InvalidValue, Some(arg), Some(value)) if value.is_empty() => {
            Some(format!("{arg} needs a value"))
        }
        (ErrorKind::InvalidValue | ErrorKind::ValueValidation, Some(arg), Some(value)) => {
            // The parser's own reason (a range, a number), when it gave one.
            let why = std::error::Error::source(e)
                .map(|s| format!(": {s}"))
                .unwrap_or_default();
            Some(format!("invalid value {value:?} for {arg}{why}"))
        }
        (ErrorKind::UnknownArgument, Some(arg), _) => Some(format!("unexpected argument {arg:?}")),
        (ErrorKind::InvalidSubcommand, _, _) => {
            context(ContextKind::InvalidSubcommand).map(|c| format!("unknown command {c:?}"))
        }
        (ErrorKind::MissingRequiredArgument, Some(arg), _) => {
            Some(format!("missing required argument {arg}"))
        }
        (ErrorKind::ArgumentConflict, Some(arg), _) => Some(match context(ContextKind::PriorArg) {
            Some(prior) => format!("{arg} cannot be used with {prior}"),
            None => format!("{arg} cannot be used here"),
        }),
        (ErrorKind::TooManyValues | ErrorKind::WrongNumberOfValues, Some(arg), _) => {
            Some(format!("wrong number of values for {arg}"))
        }
        _ => None,
    };
    // Kinds without the context above fall back to clap's first line.
    let message = message.unwrap_or_else(|| {
        e.render()
            .to_string()
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty())
            .unwrap_or("bad command line")
            .trim_start_matches("error: ")
            .to_string()
    });
    let hint: Vec<String> = [suggested, valid].into_iter().flatten().collect();
    let err = Error::invalid(message);
    if hint.is_empty() {
        err.with_hint("see `fleetctl --help`, or `fleetctl COMMAND --help`")
    } else {
        err.with_hint(hint.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn refusal(args: &[&str]) -> Error {
        let e = Cli::try_parse_from(args).expect_err("refused");
        usage_error(&e)
    }

    #[test]
    fn command_line_errors_are_read_from_their_kind_not_their_text() {
        let e = refusal(&["fleetctl", "query", "stoped"]);
        assert_eq!(e.message, "unknown command \"stoped\"");
        assert_eq!(e.hint.as_deref(), Some("did you mean stops, stopped?"));
        let e = refusal(&["fleetctl", "query", "alerts", "--type", "bogus"]);
        assert!(
            e.message.starts_with("invalid value \"bogus\" for --type"),
            "{}",
            e.message
        );
        assert_eq!(
            e.hint.as_deref(),
            Some("accepted: speeding, long_stop, signal_loss")
        );
        let e = refusal(&["fleetctl", "query", "trip"]);
        assert_eq!(e.message, "missing required argument <PLATE>");
        let e = refusal(&["fleetctl", "generate", "--force", "--if-missing"]);
        assert_eq!(e.message, "--force cannot be used with --if-missing");
        let e = refusal(&["fleetctl", "generate", "--vehicles", "many"]);
        assert!(
            e.message.contains("\"many\"") && e.message.contains("--vehicles"),
            "{}",
            e.message
        );
        assert_eq!(e.code, crate::error::ErrorCode::InvalidArgument);
    }
}
