//! The registry of reports and their parameters: what both front ends (the CLI's
//! `query` and the MCP tools) are generated from, and argument validation.

use super::*;
use crate::error::{Error, Result};
use serde_json::{Map, Value};

/// Arguments as both front ends deliver them: a JSON object.
pub type Args = Map<String, Value>;

/// What a parameter accepts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ParamKind {
    /// A plate, matched forgivingly.
    Plate,
    /// `YYYY-MM-DD`, `today` or `yesterday`.
    Date,
    /// Free text (a name, resolved by the report).
    Text,
    /// One of a closed set.
    Enum(&'static [&'static str]),
    /// A local time of day, `HH:MM`.
    TimeOfDay,
    /// A local instant: `YYYY-MM-DDTHH:MM`, or `HH:MM` on the data clock's day.
    DateTime,
    /// A whole number within bounds.
    Integer {
        /// Smallest accepted.
        min: i64,
        /// Largest accepted.
        max: i64,
    },
    /// A number within bounds.
    Number {
        /// Smallest accepted.
        min: f64,
        /// Largest accepted.
        max: f64,
    },
}

/// One parameter of a report.
#[derive(Debug, Clone, Copy)]
pub struct Param {
    /// Name in JSON and, with dashes, as a CLI flag.
    pub name: &'static str,
    /// What it accepts.
    pub kind: ParamKind,
    /// Must be given.
    pub required: bool,
    /// A positional argument on the command line.
    pub positional: bool,
    /// What it means (units, defaults).
    pub help: &'static str,
    /// Given only together with this other parameter.
    pub pair: Option<&'static str>,
    /// Never given together with this other parameter.
    pub conflicts: Option<&'static str>,
}

/// A report as the front ends see it.
pub struct ReportSpec {
    /// MCP tool name, e.g. `trip_summary`.
    pub tool: &'static str,
    /// CLI name: `fleetctl query <cli>`; for a report that draws, the words after
    /// `fleetctl` (`map`, `chart`, `map --fleet`).
    pub cli: &'static str,
    /// Short title.
    pub title: &'static str,
    /// For the model and `--help`: what it returns, when to use it, units.
    pub description: &'static str,
    /// The JSON Schema of its request type, as derived (with fleetctl's `x-` keys):
    /// the one description of its parameters, from which `params` are read.
    pub input: fn() -> Value,
    /// The field holding the report's main list (CSV output writes its rows).
    pub rows: &'static str,
    /// The columns a person reads in a table (`fleetctl query` on a terminal), by list
    /// field; a list not named here shows every field. `--wide`, JSON and CSV keep
    /// every field.
    pub columns: &'static [(&'static str, &'static [&'static str])],
    /// Runs the report on validated arguments.
    pub run: fn(&Db, &Args) -> Result<Answer>,
    /// The JSON Schema of its answer.
    pub output_schema: fn() -> Value,
    /// It draws a picture (its CLI twin writes a PNG; its tool adds an image block).
    pub draws: bool,
}

impl ReportSpec {
    /// The report's parameters, in CLI order, read once from its request type (see
    /// `params_from_schema`).
    pub fn params(&self) -> &'static [Param] {
        static PARAMS: std::sync::OnceLock<
            std::sync::Mutex<std::collections::HashMap<&'static str, &'static [Param]>>,
        > = std::sync::OnceLock::new();
        let mut known = PARAMS
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        known
            .entry(self.tool)
            .or_insert_with(|| Box::leak(params_from_schema(&(self.input)()).into_boxed_slice()))
    }
}

/// The parameters a request type's derived schema describes: each property in
/// order, its doc line as help, its kind from `x-kind` (`plate`, `date`, `time`,
/// `datetime`, `text`), a closed set, or an integer or number range; `x-positional`, `x-pair`
/// and `x-conflicts` for the command line and the pairing rules. Names and help are
/// leaked once per report (they live as long as the program).
pub fn params_from_schema(schema: &Value) -> Vec<Param> {
    let leak = |s: &str| -> &'static str { Box::leak(s.to_string().into_boxed_str()) };
    let required: Vec<&str> = schema["required"]
        .as_array()
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let Some(properties) = schema["properties"].as_object() else {
        return Vec::new();
    };
    properties
        .iter()
        .map(|(name, p)| {
            let p = schema::closed_sets(p.clone());
            let bound = |k: &str| p[k].as_f64();
            let kind = match p["x-kind"].as_str() {
                Some("plate") => ParamKind::Plate,
                Some("date") => ParamKind::Date,
                Some("time") => ParamKind::TimeOfDay,
                Some("datetime") => ParamKind::DateTime,
                Some("text") => ParamKind::Text,
                Some(other) => panic!("{name}: unknown x-kind {other}"),
                None => match p["enum"].as_array() {
                    Some(values) => {
                        let names: Vec<&'static str> =
                            values.iter().filter_map(Value::as_str).map(leak).collect();
                        ParamKind::Enum(Box::leak(names.into_boxed_slice()))
                    }
                    None if schema::has_type(&p, "integer") => ParamKind::Integer {
                        min: bound("minimum").map_or(i64::MIN, |v| v as i64),
                        max: bound("maximum").map_or(i64::MAX, |v| v as i64),
                    },
                    None if schema::has_type(&p, "number") => ParamKind::Number {
                        min: bound("minimum").unwrap_or(f64::MIN),
                        max: bound("maximum").unwrap_or(f64::MAX),
                    },
                    None => panic!("{name}: give it an x-kind, a closed set or a range"),
                },
            };
            Param {
                name: leak(name),
                kind,
                required: required.contains(&name.as_str()),
                positional: p["x-positional"] == Value::Bool(true),
                help: leak(p["description"].as_str().unwrap_or_default()),
                pair: p["x-pair"].as_str().map(leak),
                conflicts: p["x-conflicts"].as_str().map(leak),
            }
        })
        .collect()
}

/// Every report, in the fixed order tools are listed in.
pub fn registry() -> &'static [ReportSpec] {
    static REGISTRY: [ReportSpec; 17] = [
        vehicle_position::SPEC,
        stopped_vehicles::SPEC,
        trip_summary::SPEC,
        trips::SPEC,
        stops::SPEC,
        daily_summary::SPEC,
        events::SPEC,
        alerts::SPEC,
        geofence_visits::SPEC,
        geofence_report::SPEC,
        mileage_ranking::SPEC,
        list_vehicles::SPEC,
        list_geofences::SPEC,
        nearest_vehicles::SPEC,
        route_map::SPEC,
        speed_chart::SPEC,
        fleet_map::SPEC,
    ];
    &REGISTRY
}

/// The report with this tool name.
pub fn find(tool: &str) -> Option<&'static ReportSpec> {
    registry().iter().find(|s| s.tool == tool)
}

fn describe(kind: ParamKind) -> String {
    match kind {
        ParamKind::Plate => "a plate such as P-123BCD".into(),
        ParamKind::Date => "YYYY-MM-DD, today or yesterday".into(),
        ParamKind::TimeOfDay => "a local time HH:MM".into(),
        ParamKind::DateTime => "a local time YYYY-MM-DDTHH:MM, or HH:MM for today".into(),
        ParamKind::Text => "text".into(),
        ParamKind::Enum(values) => format!("one of {}", values.join(", ")),
        ParamKind::Integer { min, max } => format!("a whole number from {min} to {max}"),
        ParamKind::Number { min, max } => format!("a number from {min} to {max}"),
    }
}

/// The JSON Schema of a report's arguments (the MCP tool's `inputSchema`): closed
/// enums, bounds, required fields, pairs, and nothing else accepted.
pub fn input_schema(spec: &ReportSpec) -> Value {
    let mut properties = Map::new();
    for p in spec.params() {
        let mut s = match p.kind {
            ParamKind::Plate | ParamKind::Text => {
                serde_json::json!({"type": "string", "minLength": 1})
            }
            ParamKind::Date => {
                serde_json::json!({"type": "string", "pattern": "^([0-9]{4}-[0-9]{2}-[0-9]{2}|today|yesterday)$"})
            }
            ParamKind::TimeOfDay => {
                serde_json::json!({"type": "string", "pattern": "^([01][0-9]|2[0-3]):[0-5][0-9]$"})
            }
            ParamKind::DateTime => {
                serde_json::json!({"type": "string", "pattern": "^([0-9]{4}-[0-9]{2}-[0-9]{2}[T ])?([01][0-9]|2[0-3]):[0-5][0-9]$"})
            }
            ParamKind::Enum(values) => serde_json::json!({"type": "string", "enum": values}),
            ParamKind::Integer { min, max } => {
                serde_json::json!({"type": "integer", "minimum": min, "maximum": max})
            }
            ParamKind::Number { min, max } => {
                serde_json::json!({"type": "number", "minimum": min, "maximum": max})
            }
        };
        s["description"] = Value::from(p.help);
        properties.insert(p.name.to_string(), s);
    }
    let required: Vec<&str> = spec
        .params()
        .iter()
        .filter(|p| p.required)
        .map(|p| p.name)
        .collect();
    let mut schema = serde_json::json!({"type": "object", "properties": properties, "additionalProperties": false});
    if !required.is_empty() {
        schema["required"] = Value::from(required);
    }
    let pairs: Map<String, Value> = spec
        .params()
        .iter()
        .filter_map(|p| {
            p.pair
                .map(|other| (p.name.to_string(), serde_json::json!([other])))
        })
        .collect();
    if !pairs.is_empty() {
        schema["dependentRequired"] = Value::Object(pairs);
    }
    schema
}

/// Checks arguments against a report's parameters: names, types, bounds, closed
/// sets, required ones and pairs. Every refusal names the field and what it accepts.
pub fn validate(spec: &ReportSpec, args: &Args) -> Result<()> {
    let accepted = || {
        spec.params()
            .iter()
            .map(|p| p.name)
            .collect::<Vec<_>>()
            .join(", ")
    };
    for key in args.keys() {
        if !spec.params().iter().any(|p| p.name == key) {
            let list = accepted();
            return Err(
                Error::invalid(format!("unknown argument `{key}` for {}", spec.tool)).with_hint(
                    if list.is_empty() {
                        "it takes no arguments".to_string()
                    } else {
                        format!("accepted: {list}")
                    },
                ),
            );
        }
    }
    for p in spec.params() {
        let Some(v) = args.get(p.name).filter(|v| !v.is_null()) else {
            if p.required {
                return Err(
                    Error::invalid(format!("`{}` is required for {}", p.name, spec.tool))
                        .with_hint(format!("{}: {}", p.name, describe(p.kind))),
                );
            }
            continue;
        };
        let bad =
            |shown: String| {
                Error::invalid(format!("`{}` = {shown} is not accepted", p.name))
                    .with_hint(format!("{}: {}", p.name, describe(p.kind)))
            };
        let ok = match p.kind {
            ParamKind::Plate | ParamKind::Text => v.as_str().is_some_and(|s| !s.trim().is_empty()),
            ParamKind::Date => v
                .as_str()
                .is_some_and(|s| resolve::parse_date_word(s).is_some()),
            ParamKind::TimeOfDay => v.as_str().is_some_and(|s| resolve::parse_hhmm(s).is_some()),
            ParamKind::DateTime => v
                .as_str()
                .is_some_and(|s| resolve::parse_local_time(s).is_some()),
            ParamKind::Enum(values) => v.as_str().is_some_and(|s| values.contains(&s)),
            ParamKind::Integer { min, max } => v.as_i64().is_some_and(|n| (min..=max).contains(&n)),
            ParamKind::Number { min, max } => v.as_f64().is_some_and(|n| (min..=max).contains(&n)),
        };
        if !ok {
            return Err(bad(v.to_string()));
        }
        if let Some(other) = p.pair
            && args.get(other).is_none_or(Value::is_null)
        {
            return Err(Error::invalid(format!(
                "`{}` needs `{other}`: they are given together",
                p.name
            ))
            .with_hint(format!("give both {} and {other}, or neither", p.name)));
        }
        if let Some(other) = p.conflicts
            && args.get(other).is_some_and(|v| !v.is_null())
        {
            return Err(Error::invalid(format!(
                "`{}` and `{other}` cannot be given together",
                p.name
            ))
            .with_hint(format!("give either {} or {other}", p.name)));
        }
    }
    Ok(())
}
