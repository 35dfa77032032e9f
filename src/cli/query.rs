//! `fleetctl query <report>`: the CLI twin of every report, generated from the
//! registry. Flags become the same JSON arguments an MCP client would send, so the
//! core validates both alike and `--format json` prints exactly the tool's answer.

use crate::report::{self, Args, ParamKind, ReportSpec};
use clap::{Arg, ArgMatches, Command, FromArgMatches};
use serde_json::Value;

/// How to print a report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Aligned text for people.
    Table,
    /// The report object, one line (the MCP `structuredContent`).
    Json,
    /// The report's main list as CSV.
    Csv,
}

/// A parsed `query` invocation.
#[derive(Debug, Clone)]
pub struct QueryArgs {
    /// The report's tool name.
    pub tool: &'static str,
    /// Its arguments, as JSON.
    pub args: Args,
    /// `--format`, if given.
    pub format: Option<Format>,
    /// `--wide`: a table with every field, in full.
    pub wide: bool,
}

fn flag_name(param: &str) -> String {
    param.replace('_', "-")
}

/// The CLI arguments of a report's parameters.
pub fn spec_args(spec: &'static ReportSpec) -> Vec<Arg> {
    spec.params()
        .iter()
        .map(|p| {
            let mut arg = Arg::new(p.name).help(p.help).required(p.required);
            arg = if p.positional {
                arg.value_name(p.name.to_uppercase())
            } else {
                arg.long(flag_name(p.name)).value_name(match p.kind {
                    ParamKind::Date => "DATE",
                    ParamKind::TimeOfDay => "HH:MM",
                    ParamKind::DateTime => "TIME",
                    ParamKind::Integer { .. } => "N",
                    ParamKind::Number { .. } => "X",
                    _ => "TEXT",
                })
            };
            if let ParamKind::Enum(values) = p.kind {
                arg = arg.value_parser(clap::builder::PossibleValuesParser::new(
                    values.iter().copied(),
                ));
            }
            arg
        })
        .collect()
}

/// Reads a report's arguments back from parsed flags, as the JSON an MCP client
/// would send. Numbers become JSON numbers when they parse; anything else stays
/// text for the core to refuse with the same message an MCP client gets.
pub fn args_from(spec: &ReportSpec, m: &ArgMatches) -> Args {
    let mut args = Args::new();
    for p in spec.params() {
        let Some(text) = m.get_one::<String>(p.name) else {
            continue;
        };
        let value = match p.kind {
            ParamKind::Integer { .. } => text
                .parse::<i64>()
                .map(Value::from)
                .unwrap_or_else(|_| Value::from(text.as_str())),
            ParamKind::Number { .. } => text
                .parse::<f64>()
                .map(Value::from)
                .unwrap_or_else(|_| Value::from(text.as_str())),
            _ => Value::from(text.as_str()),
        };
        args.insert(p.name.to_string(), value);
    }
    args
}

fn format_from(m: &ArgMatches) -> Option<Format> {
    m.get_one::<String>("format").map(|f| match f.as_str() {
        "json" => Format::Json,
        "csv" => Format::Csv,
        _ => Format::Table,
    })
}

fn report_command(spec: &'static ReportSpec) -> Command {
    Command::new(spec.cli)
        .about(spec.title)
        .long_about(format!("{}\n\nMCP tool: {}", spec.description, spec.tool))
        .allow_negative_numbers(true)
        .args(spec_args(spec))
}

impl clap::Args for QueryArgs {
    fn augment_args(cmd: Command) -> Command {
        // Reports that draw have their own top-level commands (`fleetctl map`,
        // `fleetctl chart`).
        cmd.subcommand_required(true)
            .arg(
                Arg::new("format")
                    .long("format")
                    .global(true)
                    .value_parser(["table", "json", "csv"])
                    .help("Output: table (default on a terminal), json (default otherwise; the MCP answer), csv"),
            )
            .arg(
                Arg::new("wide")
                    .long("wide")
                    .global(true)
                    .action(clap::ArgAction::SetTrue)
                    .help("Tables: every field, in full (times, coordinates, every column), however wide. By default a table fits 100 columns (or $COLUMNS) with the columns a person reads"),
            )
            .subcommands(report::registry().iter().filter(|s| !s.draws).map(report_command))
    }

    fn augment_args_for_update(cmd: Command) -> Command {
        Self::augment_args(cmd)
    }
}

impl FromArgMatches for QueryArgs {
    fn from_arg_matches(m: &ArgMatches) -> Result<Self, clap::Error> {
        let (name, sub) = m
            .subcommand()
            .ok_or_else(|| clap::Error::new(clap::error::ErrorKind::MissingSubcommand))?;
        let spec = report::registry()
            .iter()
            .find(|s| s.cli == name)
            .ok_or_else(|| clap::Error::new(clap::error::ErrorKind::InvalidSubcommand))?;
        Ok(QueryArgs {
            tool: spec.tool,
            args: args_from(spec, sub),
            format: format_from(sub).or_else(|| format_from(m)),
            wide: sub.get_flag("wide") || m.get_flag("wide"),
        })
    }

    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(m)?;
        Ok(())
    }
}

/// A parsed drawing command (`fleetctl map`, `fleetctl chart`): which report draws,
/// its arguments, and where to write the picture.
#[derive(Debug, Clone)]
pub struct DrawArgs {
    /// The report's tool name (`route_map`, `fleet_map`, `speed_chart`).
    pub tool: &'static str,
    /// The report's arguments, as JSON.
    pub args: Args,
    /// `-o FILE`.
    pub output: Option<std::path::PathBuf>,
    /// `--tiles DIR|FILE.mbtiles` (maps only).
    pub tiles: Option<std::path::PathBuf>,
    /// `--format json`: print the summary instead of the path.
    pub json: bool,
}

/// The drawing report with this tool name (the registry's, by name: never "the first
/// one that draws").
fn drawing_spec(tool: &str) -> &'static ReportSpec {
    report::find(tool)
        .filter(|s| s.draws)
        .unwrap_or_else(|| panic!("the registry has the drawing report {tool}"))
}

/// `-o`, `--format` and, for maps, `--tiles`.
fn output_args(cmd: Command, output_help: &'static str, tiles: bool) -> Command {
    let cmd = cmd.arg(
        Arg::new("output")
            .short('o')
            .long("output")
            .value_name("FILE")
            .value_parser(clap::value_parser!(std::path::PathBuf))
            .help(output_help),
    );
    let cmd = if tiles {
        cmd.arg(
            Arg::new("tiles")
                .long("tiles")
                .value_name("DIR|FILE.mbtiles")
                .value_parser(clap::value_parser!(std::path::PathBuf))
                .help("Raster tiles to draw underneath: a {z}/{x}/{y}.png folder or an MBTiles file (read locally)"),
        )
    } else {
        cmd
    };
    cmd.arg(
        Arg::new("format")
            .long("format")
            .value_parser(["text", "json"])
            .help("Print the PNG's path (text, default) or the picture's summary (json, the MCP answer)"),
    )
}

fn draw_args_from(tool: &'static str, m: &ArgMatches, tiles: bool) -> DrawArgs {
    DrawArgs {
        tool,
        args: args_from(drawing_spec(tool), m),
        output: m.get_one::<std::path::PathBuf>("output").cloned(),
        tiles: if tiles {
            m.get_one::<std::path::PathBuf>("tiles").cloned()
        } else {
            None
        },
        json: m.get_one::<String>("format").map(String::as_str) == Some("json"),
    }
}

/// `fleetctl map`: the route map of one vehicle (`route_map`), or with `--fleet` the
/// whole fleet at an instant (`fleet_map`).
#[derive(Debug, Clone)]
pub struct MapArgs(pub DrawArgs);

impl clap::Args for MapArgs {
    fn augment_args(cmd: Command) -> Command {
        let route = drawing_spec("route_map");
        let fleet = drawing_spec("fleet_map");
        let route_only: Vec<&'static str> = route
            .params()
            .iter()
            .map(|p| p.name)
            .filter(|n| !fleet.params().iter().any(|f| f.name == *n))
            .collect();
        // The route map's parameters (its plate needed unless --fleet), then the
        // fleet map's own (given only with --fleet).
        let route_args = spec_args(route).into_iter().map(|a| {
            if a.is_positional() && a.is_required_set() {
                a.required(false).required_unless_present("fleet")
            } else {
                a
            }
        });
        let fleet_args = spec_args(fleet)
            .into_iter()
            .filter(|a| !route.params().iter().any(|p| p.name == a.get_id().as_str()))
            .map(|a| a.requires("fleet").conflicts_with_all(route_only.clone()));
        let cmd = cmd
            .allow_negative_numbers(true)
            .args(route_args)
            .arg(
                Arg::new("fleet")
                    .long("fleet")
                    .action(clap::ArgAction::SetTrue)
                    // No implicit `false`: clap counts a default as present, and
                    // --at, which requires --fleet, would pass without it.
                    .default_value(None)
                    .conflicts_with_all(route_only.clone())
                    .help("Draw every vehicle at the data clock (or --at), coloured by state, instead of one route"),
            )
            .args(fleet_args.collect::<Vec<_>>());
        output_args(
            cmd,
            "Where to write the PNG (default: PLATE_DATE.png, or fleet_DATE_HHMM.png with --fleet, in the current folder); a file there is replaced, a folder, link, device or FIFO refused; - writes it to standard output",
            true,
        )
    }

    fn augment_args_for_update(cmd: Command) -> Command {
        Self::augment_args(cmd)
    }
}

impl FromArgMatches for MapArgs {
    fn from_arg_matches(m: &ArgMatches) -> Result<Self, clap::Error> {
        let tool = if m.get_one::<bool>("fleet").copied().unwrap_or(false) {
            "fleet_map"
        } else {
            "route_map"
        };
        Ok(MapArgs(draw_args_from(tool, m, true)))
    }

    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(m)?;
        Ok(())
    }
}

/// `fleetctl chart`: one vehicle's speed over a day (`speed_chart`).
#[derive(Debug, Clone)]
pub struct ChartArgs(pub DrawArgs);

impl clap::Args for ChartArgs {
    fn augment_args(cmd: Command) -> Command {
        output_args(
            cmd.allow_negative_numbers(true)
                .args(spec_args(drawing_spec("speed_chart"))),
            "Where to write the PNG (default: PLATE_DATE_speed.png in the current folder); a file there is replaced, a folder, link, device or FIFO refused; - writes it to standard output",
            false,
        )
    }

    fn augment_args_for_update(cmd: Command) -> Command {
        Self::augment_args(cmd)
    }
}

impl FromArgMatches for ChartArgs {
    fn from_arg_matches(m: &ArgMatches) -> Result<Self, clap::Error> {
        Ok(ChartArgs(draw_args_from("speed_chart", m, false)))
    }

    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(m)?;
        Ok(())
    }
}
