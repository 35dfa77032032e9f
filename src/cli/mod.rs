//! Front end 1, the command line: flags become a request, the domain does the work,
//! `render` turns the answer into text. No fleet logic lives here. This file holds the
//! commands and their dispatch; each command with flags of its own has its file
//! (`analyze.rs`, `generate.rs`, `serve.rs`, `draw.rs` for map and chart, `query.rs`,
//! `import.rs`, `export.rs`, `places.rs`, `vehicles.rs`), and `output.rs` what they
//! all write with.

use crate::error::{Error, ErrorCode, Result};
use crate::{render, report, store};

mod analyze;
mod bundle;
mod draw;
pub mod export;
mod generate;
pub mod import;
mod output;
pub mod places;
mod prune;
pub mod query;
mod replay;
mod serve;
pub mod vehicles;

use analyze::{AnalyzeArgs, analyze};
use clap::{Parser, Subcommand};
use draw::draw;
use generate::{GenerateArgs, generate};
use output::{ProgressBar, print_stdout};
use serve::{ServeArgs, serve};
use std::io::IsTerminal;
use std::path::PathBuf;

/// fleetctl — offline fleet telemetry: a synthetic fleet, reports computed from GPS
/// positions, route maps, and an MCP server for AI assistants.
#[derive(Debug, Parser)]
#[command(name = "fleetctl", version, about, long_about = None, max_term_width = 100)]
pub struct Cli {
    /// The fleet database: a SQLite file, by default fleet.db in the fleetctl folder of
    /// your data directory (~/.local/share/fleetctl/fleet.db on Linux); or a
    /// PostgreSQL + PostGIS database, postgres://USER@HOST/DB[?sslmode=verify-full&sslrootcert=CA.pem]
    /// (PGHOST, PGUSER, PGPASSWORD… fill what the URL leaves out), where every command
    /// but `mcp-config` runs (docs/postgres.md).
    #[arg(long, global = true, env = "FLEETCTL_DB", value_name = "PATH|URL")]
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

    /// Bring a database of an earlier schema version up to this fleetctl's, in
    /// place: every position kept (rewritten in the current layout), detection run
    /// again, the file compacted. A failure leaves it as it was. A file of this
    /// version made before 2026-12-06 gets the revision counter a server reads
    /// instead of the vehicles, geofences, places and meta at every change.
    ///
    /// Example: fleetctl --db fleet.db migrate
    Migrate,

    /// Show the database's time zone and detection thresholds.
    Settings,

    /// Remove the positions of days older than N days (a live fleet's retention),
    /// archiving them first with --archive as a Hive-partitioned Parquet dataset;
    /// the vehicles concerned are analysed again.
    ///
    /// Example: fleetctl prune --older-than 400d --archive archive/2026-12
    Prune(prune::PruneArgs),

    /// Push this database's positions to a live server (`serve --http --ingest`) as
    /// a fleet of OsmAnd clients, at real time or faster: the demo of a live fleet,
    /// and a load test. Prints the rate and latency it saw.
    ///
    /// Example: fleetctl replay --to http://127.0.0.1:5055 --speed 60 --devices 15
    ///
    /// Example: fleetctl replay --to http://127.0.0.1:5055 --speed 0 --rate 20000 --devices 1000
    Replay(replay::ReplayArgs),

    /// Create an empty database for a live fleet: its time zone, and the wall clock
    /// as its "now" (a generated or imported database answers at its data clock).
    /// Then add vehicles with `vehicles add PLATE --device-id ID` and serve with
    /// `serve --http ADDR --ingest` (docs/live.md).
    ///
    /// Example: fleetctl --db live.db init --time-zone America/Guatemala
    /// Example: fleetctl --db postgres://fleet@localhost/fleet init --time-zone America/Guatemala
    Init {
        /// The fleet's IANA time zone (its local days and times).
        #[arg(long, value_name = "ZONE")]
        time_zone: String,
    },

    /// The fleet's own named places, which describe where a vehicle is ("1.2 km NE
    /// of …"): import (GeoJSON points, GeoNames dumps), list, remove.
    #[command(subcommand)]
    Places(places::PlacesCommand),

    /// The fleet's geofences (depots, customers, zones): import (GeoJSON), list,
    /// remove.
    #[command(subcommand)]
    Geofences(places::GeofencesCommand),

    /// Add a vehicle for a tracker that pushes its positions (`vehicles add PLATE
    /// --device-id ID`), or set a vehicle's own speed limit or device id.
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
    /// (stopped, engine off or not reported), offline (not parked, no fix for over
    /// 10 minutes).
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
    /// the Claude Code command), with absolute paths to this binary and the database;
    /// or, with --bundle, write an MCP Bundle that Claude Desktop installs in one click.
    ///
    /// Examples:
    ///   fleetctl mcp-config > fleetctl-mcp.json
    ///   fleetctl mcp-config --bundle fleetctl.mcpb   # then open it with Claude Desktop
    #[command(verbatim_doc_comment)]
    McpConfig(McpConfigArgs),
}

/// `fleetctl mcp-config`'s flags.
#[derive(Debug, clap::Args)]
pub struct McpConfigArgs {
    /// Write an MCP Bundle (.mcpb) here instead: this binary and a manifest of every
    /// tool; Claude Desktop installs it when opened, asking for the database (this
    /// one offered). A file there is replaced; a folder, link, device or FIFO is
    /// refused; - writes the bundle to standard output.
    #[arg(long, value_name = "FILE.mcpb")]
    bundle: Option<PathBuf>,
}

/// Parses `argv` and runs the command, writing its output to stdout.
pub fn run(cli: Cli) -> Result<()> {
    // `--db` is read here, once: past this point it is a file or a database.
    let location = store::Location::parse(&cli.db.clone().unwrap_or_else(store::default_db_path))?;
    let db = match &location {
        store::Location::Postgres(target) => return on_postgres(target, cli.command),
        store::Location::File(path) => path.clone(),
    };
    match cli.command {
        Command::Generate(args) => generate(location, args),
        Command::Analyze(args) => analyze(location, args),
        Command::Migrate => analyze::migrate(db),
        Command::Import(args) => import::run(location, args),
        Command::Export(args) => export::run(location, args),
        Command::Places(cmd) => places::run_places(location, cmd),
        Command::Geofences(cmd) => places::run_geofences(location, cmd),
        Command::Vehicles(cmd) => vehicles::run(location, cmd),
        Command::Init { time_zone } => {
            let zone = crate::clock::FleetZone::named(&time_zone)?;
            crate::live::init(&db, &zone)?;
            print_stdout(&format!(
                "Created {} for a live fleet in {} (its clock: the wall clock)\nNext: fleetctl --db {} vehicles add PLATE --device-id ID\n",
                db.display(),
                zone.name,
                db.display()
            ))
        }
        Command::Replay(args) => replay::run(location, args),
        Command::Prune(args) => prune::run(location, args),
        Command::Settings => {
            let (zone, thresholds) = crate::pipeline::settings(&db)?;
            print_stdout(&render::settings(&db, &zone, &thresholds, &[]))
        }
        Command::Query(q) => run_query(location, q),
        Command::Map(args) => draw(location, args.0),
        Command::Chart(args) => draw(location, args.0),
        Command::Serve(args) => serve(location, args),
        Command::McpConfig(args) => mcp_config(&db, args),
    }
}

/// A command on a PostgreSQL database (`--db postgres://…`): `init`, `migrate` and
/// `settings` here, the others through the store's PostgreSQL paths; `mcp-config`
/// runs on a SQLite file only, and says so before touching anything.
fn on_postgres(target: &store::pg::Target, command: Command) -> Result<()> {
    let db = || store::Location::Postgres(Box::new(target.clone()));
    match command {
        Command::Init { time_zone } => {
            let zone = crate::clock::FleetZone::named(&time_zone)?;
            store::pg::init(target, &zone)?;
            print_stdout(&format!(
                "Created a fleet in {} in {} (its clock: the wall clock)\nNext: fleetctl --db URL vehicles add PLATE --device-id ID\n",
                target.display(),
                zone.name
            ))
        }
        Command::Migrate => {
            drop(store::pg::open(target)?);
            print_stdout(&format!(
                "{} is at schema version {} already; nothing to do\n",
                target.display(),
                store::SCHEMA_VERSION
            ))
        }
        Command::Settings => {
            let (zone, thresholds, under_way) =
                crate::pipeline::settings_in_postgres(target)?;
            let shown = std::path::Path::new(target.display());
            print_stdout(&render::settings(shown, &zone, &thresholds, &under_way))
        }
        // These read through report::Db, which opens either store.
        Command::Generate(args) => generate(db(), args),
        Command::Query(q) => run_query(db(), q),
        Command::Map(args) => draw(db(), args.0),
        Command::Chart(args) => draw(db(), args.0),
        Command::Serve(args) => serve(db(), args),
        Command::Analyze(args) => analyze(db(), args),
        Command::Export(args) => export::run(db(), args),
        Command::Import(args) => import::run(db(), args),
        Command::Places(cmd) => places::run_places(db(), cmd),
        Command::Geofences(cmd) => places::run_geofences(db(), cmd),
        Command::Vehicles(cmd) => vehicles::run(db(), cmd),
        Command::Prune(args) => prune::run(db(), args),
        Command::Replay(args) => replay::run(db(), args),
        other => Err(Error::new(
            ErrorCode::InvalidArgument,
            format!(
                "--db {}: `{}` runs on a SQLite file only in this fleetctl; on PostgreSQL, every other command does",
                target.display(),
                command_name(&other)
            ),
        )
        .with_hint("for a client of a PostgreSQL fleet, write its configuration by hand with FLEETCTL_DB in the server's environment (docs/postgres.md), so that the URL's password stays out of the arguments")),
    }
}

/// A command's name, as typed.
fn command_name(command: &Command) -> &'static str {
    match command {
        Command::Generate(_) => "generate",
        Command::Analyze(_) => "analyze",
        Command::Migrate => "migrate",
        Command::Settings => "settings",
        Command::Prune(_) => "prune",
        Command::Replay(_) => "replay",
        Command::Init { .. } => "init",
        Command::Places(_) => "places",
        Command::Geofences(_) => "geofences",
        Command::Vehicles(_) => "vehicles",
        Command::Import(_) => "import",
        Command::Export(_) => "export",
        Command::Query(_) => "query",
        Command::Map(_) => "map",
        Command::Chart(_) => "chart",
        Command::Serve(_) => "serve",
        Command::McpConfig(_) => "mcp-config",
    }
}

/// `fleetctl mcp-config`: the JSON on stdout, the notes and warnings on stderr; or the
/// bundle, and where it went.
fn mcp_config(db: &std::path::Path, args: McpConfigArgs) -> Result<()> {
    let (exe, db) = mcp_paths(db)?;
    let mut warnings = Vec::new();
    if !db.exists() {
        warnings.push(format!(
            "{} does not exist yet: create it (`fleetctl --db {} generate`, or `import`) before the client starts the server",
            db.display(),
            db.display()
        ));
    }
    if let Some(path) = args.bundle {
        if cfg!(debug_assertions) {
            warnings.push(
                "this fleetctl is a debug build (`make run`'s), and the bundle carries it: `make mcpb` or an installed fleetctl bundles the optimized one".to_string(),
            );
        }
        if !crate::output::is_stdout(&path) {
            crate::output::check(&path, "--bundle", crate::output::May::ReplaceFile)?;
        }
        bundle::write(&path, &exe, &db)?;
        for w in &warnings {
            eprintln!("warning: {w}");
        }
        eprintln!(
            "Claude Desktop: open {} (double-click, or Settings → Extensions → Install Extension) and confirm the database",
            path.display()
        );
        return match crate::output::is_stdout(&path) {
            true => Ok(()),
            false => print_stdout(&format!("{}\n", path.display())),
        };
    }
    let exe = match installed_instead_of(&exe) {
        Some(installed) => {
            warnings.push(format!(
                "{} is a build output (`make clean` removes it); the configuration points to the installed {} instead",
                exe.display(),
                installed.display()
            ));
            installed
        }
        None => {
            if in_build_folder(&exe) {
                warnings.push(format!(
                    "{} is a build output (`make clean` removes it); `make install` puts fleetctl where it stays",
                    exe.display()
                ));
            }
            exe
        }
    };
    let (json, notes) = render::mcp_config(&(exe, db), &warnings);
    eprint!("{notes}");
    print_stdout(&json)
}

/// True for a binary inside a cargo `target` folder.
fn in_build_folder(exe: &std::path::Path) -> bool {
    exe.components().any(|c| c.as_os_str() == "target")
}

/// An installed `fleetctl` on the PATH, when this one is a build output.
fn installed_instead_of(exe: &std::path::Path) -> Option<PathBuf> {
    if !in_build_folder(exe) {
        return None;
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join("fleetctl"))
        .find(|candidate| candidate.is_file() && !in_build_folder(candidate))
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

fn run_query(path: store::Location, q: query::QueryArgs) -> Result<()> {
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
        query::Format::Table => {
            let options = render::TableOptions {
                wide: q.wide,
                ..Default::default()
            };
            let mut text = render::table(&value, spec.columns, options);
            if let Some(cursor) = next_cursor(&value) {
                let args: Vec<String> = std::env::args().skip(1).collect();
                text += &format!("next page: {}\n", next_page_command(&args, cursor));
            }
            text
        }
    };
    print_stdout(&text)
}

/// The `next_cursor` of a paged answer, when more rows follow.
fn next_cursor(value: &serde_json::Value) -> Option<&str> {
    value
        .as_object()?
        .values()
        .find_map(|v| v.get("next_cursor").and_then(|c| c.as_str()))
}

/// The command that fetches the next page: this one's arguments, with `--cursor`
/// set to `cursor` (an earlier one replaced), quoted for a shell.
fn next_page_command(args: &[String], cursor: &str) -> String {
    let mut words = vec!["fleetctl".to_string()];
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        if arg == "--cursor" {
            rest.next();
        } else if !arg.starts_with("--cursor=") {
            words.push(render::shell_quote(arg));
        }
    }
    words.push("--cursor".into());
    words.push(cursor.to_string());
    words.join(" ")
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

    #[test]
    fn a_paged_table_says_the_command_for_the_next_page() {
        let args: Vec<String> = [
            "query",
            "stops",
            "--geofence",
            "Bodega Mixco",
            "--cursor",
            "1.2.3.400",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert_eq!(
            next_page_command(&args, "5.6.7.400"),
            "fleetctl query stops --geofence 'Bodega Mixco' --cursor 5.6.7.400"
        );
        let value = serde_json::json!({"from": "2026-11-19", "stops": {"total": 400, "next_cursor": "5.6.7.400", "items": []}});
        assert_eq!(next_cursor(&value), Some("5.6.7.400"));
        assert_eq!(
            next_cursor(&serde_json::json!({"stops": {"next_cursor": null}})),
            None
        );
    }
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
