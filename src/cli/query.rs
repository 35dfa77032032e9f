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
}

fn flag_name(param: &str) -> String {
    param.replace('_', "-")
}

fn report_command(spec: &'static ReportSpec) -> Command {
    let mut cmd = Command::new(spec.cli)
        .about(spec.title)
        .long_about(format!("{}\n\nMCP tool: {}", spec.description, spec.tool))
        .allow_negative_numbers(true);
    for p in spec.params {
        let mut arg = Arg::new(p.name).help(p.help).required(p.required);
        arg = if p.positional {
            arg.value_name(p.name.to_uppercase())
        } else {
            arg.long(flag_name(p.name)).value_name(match p.kind {
                ParamKind::Date => "DATE",
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
        cmd = cmd.arg(arg);
    }
    cmd
}

impl clap::Args for QueryArgs {
    fn augment_args(cmd: Command) -> Command {
        cmd.subcommand_required(true)
            .arg(
                Arg::new("format")
                    .long("format")
                    .global(true)
                    .value_parser(["table", "json", "csv"])
                    .help("Output: table (default on a terminal), json (default otherwise; the MCP answer), csv"),
            )
            .subcommands(report::registry().iter().map(report_command))
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
        let mut args = Args::new();
        for p in spec.params {
            let Some(text) = sub.get_one::<String>(p.name) else {
                continue;
            };
            // Numbers become JSON numbers when they parse; anything else stays text
            // for the core to refuse with the same message an MCP client gets.
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
        let format = sub
            .get_one::<String>("format")
            .or_else(|| m.get_one::<String>("format"))
            .map(|f| match f.as_str() {
                "json" => Format::Json,
                "csv" => Format::Csv,
                _ => Format::Table,
            });
        Ok(QueryArgs {
            tool: spec.tool,
            args,
            format,
        })
    }

    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(m)?;
        Ok(())
    }
}
