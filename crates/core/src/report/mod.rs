//! THE DOMAIN API: one file per report, each the same shape — a `…Request` in, a
//! `…Report` out, `pub fn run(&Db, &Request) -> Result<Report>`, and a `SPEC` that
//! describes it. This file holds what they share: the open database with its data
//! clock, lists capped at 200 rows, argument validation, and the registry that both
//! front ends (the CLI's `query` and the MCP tools) are generated from.

pub mod alerts;
pub mod daily_summary;
pub mod events;
pub mod fleet_map;
pub mod geofence_report;
pub mod geofence_visits;
pub mod list_geofences;
pub mod list_vehicles;
pub mod mileage_ranking;
pub mod nearest_vehicles;
pub mod resolve;
pub mod route_map;
pub mod schema;
pub mod speed_chart;
pub mod stopped_vehicles;
pub mod stops;
pub mod trip_summary;
pub mod trips;
pub mod vehicle_position;

use crate::analyze::Thresholds;
use crate::clock::{Date, FleetZone};
use crate::error::{Context, Error, ErrorCode, Result};
use crate::geo::{Geofence, LatLon, places::Namer};
use crate::model::Vehicle;
use crate::store;
use rusqlite::Connection;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};
use std::path::Path;

/// Lists in reports hold at most this many rows.
pub const MAX_ROWS: usize = 200;
/// Date ranges span at most this many days.
pub const MAX_RANGE_DAYS: i64 = 92;
/// No fix for longer than this at the data clock means offline, seconds.
pub const OFFLINE_AFTER_S: i64 = 10 * 60;

/// Where a distance came from: the vehicle's odometer, or the GPS track (with
/// jitter filtered).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum DistanceSource {
    /// The odometer's readings.
    Odometer,
    /// The GPS track.
    Gps,
    /// A range whose days differ: the odometer on the days it earned its use, the
    /// GPS track on the others.
    Mixed,
}

impl DistanceSource {
    /// The source of a span's km: the odometer when it was used, else GPS.
    pub fn of(d: &crate::analyze::distance::SpanDistance) -> DistanceSource {
        if d.odometer_km.is_some() {
            DistanceSource::Odometer
        } else {
            DistanceSource::Gps
        }
    }
}

/// Why a span's odometer was not used, as answers say it.
pub fn odometer_rejected(d: &crate::analyze::distance::SpanDistance) -> Option<String> {
    d.odometer_rejected.map(|r| r.as_str().to_string())
}

/// A capped list: the first rows, how many there are in all, and whether some
/// were left out.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct List<T> {
    /// Rows in all.
    pub total: usize,
    /// True when `items` holds fewer than `total`.
    pub truncated: bool,
    /// The rows (at most 200).
    pub items: Vec<T>,
}

impl<T> List<T> {
    /// Caps `rows` at `MAX_ROWS`.
    pub fn capped(mut rows: Vec<T>) -> List<T> {
        let total = rows.len();
        rows.truncate(MAX_ROWS);
        List {
            total,
            truncated: total > MAX_ROWS,
            items: rows,
        }
    }
}

/// One page of a long list: the rows from a cursor on, how many there are in all
/// over every page, and the cursor of the page after.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Page<T> {
    /// Rows in all, over every page (as counted for the first page).
    pub total: usize,
    /// True when more rows follow this page.
    pub truncated: bool,
    /// Give it as `cursor` for the next page; null on the last page.
    pub next_cursor: Option<String>,
    /// This page's rows (at most 200).
    pub items: Vec<T>,
}

impl<T> Page<T> {
    /// The page made of `rows`, read one past a page (at most `MAX_ROWS + 1`, in the
    /// report's order) from where the cursor pointed: a row past the page means one
    /// follows, and its cursor is the key (`key`) of this page's last row, with the
    /// total (so that later pages need not count again).
    pub fn keyed(total: usize, mut rows: Vec<T>, key: impl Fn(&T) -> [i64; 3]) -> Page<T> {
        let more = rows.len() > MAX_ROWS;
        rows.truncate(MAX_ROWS);
        let next_cursor = if more {
            rows.last().map(|r| {
                Cursor {
                    after: key(r),
                    total: Some(total),
                }
                .to_text()
            })
        } else {
            None
        };
        Page {
            total,
            truncated: more,
            next_cursor,
            items: rows,
        }
    }

    /// The same page with each row made into what the report shows.
    pub fn map<U>(self, f: impl FnMut(T) -> U) -> Page<U> {
        Page {
            total: self.total,
            truncated: self.truncated,
            next_cursor: self.next_cursor,
            items: self.items.into_iter().map(f).collect(),
        }
    }
}

/// Where a page starts: just after the row whose sort key is `after` (the last row
/// of the page before). A deep page is then found through an index as fast as the
/// first, and rows added meanwhile never shift a page. It carries the total counted
/// for the first page, so a walk through the pages counts once. Clients see it as
/// the text of `next_cursor` (`a.b.c.total`, integers); the first page has none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cursor {
    /// The sort key of the last row already shown.
    pub after: [i64; 3],
    /// Rows in all, as counted for the first page.
    pub total: Option<usize>,
}

impl Cursor {
    /// Before every row, nothing counted yet.
    pub const START: Cursor = Cursor {
        after: [i64::MIN; 3],
        total: None,
    };

    /// The cursor a client gave back (none: the first page).
    pub fn parse(cursor: Option<&str>) -> Result<Cursor> {
        let Some(text) = cursor else {
            return Ok(Cursor::START);
        };
        let parts: Vec<Option<i64>> = text.trim().split('.').map(|p| p.parse().ok()).collect();
        match parts.as_slice() {
            [Some(a), Some(b), Some(c), Some(total)] if *total >= 0 => Ok(Cursor {
                after: [*a, *b, *c],
                total: Some(*total as usize),
            }),
            _ => Err(
                Error::invalid(format!("cursor {text:?} is not one this report gave")).with_hint(
                    "leave cursor out for the first page, then pass each answer's next_cursor",
                ),
            ),
        }
    }

    /// The text a client is given.
    pub fn to_text(self) -> String {
        let [a, b, c] = self.after;
        format!("{a}.{b}.{c}.{}", self.total.unwrap_or(0))
    }

    /// The first two parts of the key, for the reports whose rows a pair orders.
    pub fn pair(self) -> [i64; 2] {
        [self.after[0], self.after[1]]
    }

    /// The total the first page counted, else `count()`.
    pub fn total_or(self, count: impl FnOnce() -> Result<usize>) -> Result<usize> {
        match self.total {
            Some(total) => Ok(total),
            None => count(),
        }
    }
}

/// An open fleet database with what every report needs loaded once: the data
/// clock, the zone, the vehicles, the geofences and the point namer.
pub struct Db {
    conn: Connection,
    /// The database file (exports read it on several connections at once).
    pub path: std::path::PathBuf,
    /// The fleet's time zone.
    pub zone: FleetZone,
    /// The data clock's "now", UTC epoch seconds.
    pub now_ts: i64,
    /// Vehicles, by id, with their route slug if synthetic.
    pub vehicles: Vec<(Vehicle, Option<String>)>,
    /// Geofences, by id.
    pub geofences: Vec<Geofence>,
    /// Names points for people.
    pub namer: Namer,
    /// Named places a place name can resolve to.
    pub places: Vec<resolve::ResolvedPlace>,
    /// The thresholds detection used.
    pub thresholds: Thresholds,
    /// Raster tiles for maps, when the user gave some.
    pub tiles: Option<route_map::TileSource>,
}

impl Db {
    /// Opens the database read-only.
    pub fn open(path: &Path) -> Result<Db> {
        let conn = store::open_read_only(path)?;
        let zone = store::read_zone(&conn)?;
        // The data clock: meta.data_now, or (a database without one) the newest fix.
        let now_ts = match store::read_meta(&conn, "data_now")? {
            Some(v) => v.trim().parse().map_err(|_| {
                Error::new(
                    ErrorCode::DbSchema,
                    format!("meta.data_now is {v:?}, not UTC epoch seconds"),
                )
                .with_hint("regenerate the database, or set data_now to epoch seconds")
            })?,
            None => store::read::newest_fix_ts(&conn)?.unwrap_or(0),
        };
        let vehicles = store::read::vehicles(&conn)?;
        let geofences = store::read_geofences(&conn)?;
        let known_places = store::read_places(&conn)?;
        let namer = Namer::for_geofences(&geofences, &known_places);
        let thresholds = crate::pipeline::stored_thresholds(&conn)?;
        let places = resolve::place_candidates(&geofences, &known_places);
        Ok(Db {
            conn,
            path: path.to_path_buf(),
            zone,
            now_ts,
            vehicles,
            geofences,
            namer,
            places,
            thresholds,
            tiles: None,
        })
    }

    /// The first and last local dates with data over the whole fleet (`None` when no
    /// vehicle has any).
    pub fn data_dates(&self) -> Result<Option<(String, String)>> {
        let days = store::read::data_days_by_vehicle(&self.conn)?;
        let from = days.iter().map(|d| d.1.clone()).min();
        let to = days.iter().map(|d| d.2.clone()).max();
        Ok(from.zip(to))
    }

    /// The connection, for the store's typed reads: the reports' alone (front ends,
    /// outside this crate, ask the domain functions).
    pub(crate) fn conn(&self) -> &Connection {
        &self.conn
    }

    /// The data clock's local date.
    pub fn today(&self) -> Date {
        self.zone.local_date(self.now_ts)
    }

    /// RFC 3339 in the fleet's zone.
    pub fn time(&self, ts: i64) -> String {
        self.zone.rfc3339(ts)
    }

    /// `[start, end)` of a local date, UTC epoch seconds.
    pub fn day_bounds(&self, date: Date) -> (i64, i64) {
        let start = self.zone.day_start(date);
        (start, self.zone.day_end(date))
    }

    /// Names a point for people.
    pub fn place(&self, lat: f64, lon: f64) -> String {
        self.namer.name(LatLon::new(lat, lon))
    }

    /// Says why a vehicle has nothing to report on a day: out of service, or which
    /// days do have data. `None` when there is data.
    pub fn no_data_note(&self, v: &Vehicle, empty: bool, date: &str) -> Result<Option<String>> {
        if !v.active {
            return Ok(Some(format!(
                "{} is out of service (inactive) and reports no positions",
                v.plate
            )));
        }
        if !empty {
            return Ok(None);
        }
        let days = store::read::days_with_data(&self.conn, v.id)?;
        Ok(Some(match (days.first(), days.last()) {
            (Some(first), Some(last)) => format!(
                "{} has no fixes on {date}; it has data from {first} to {last}",
                v.plate
            ),
            _ => format!("{} has no positions in this database", v.plate),
        }))
    }

    /// The vehicle with this store id.
    pub fn vehicle(&self, id: i64) -> Option<&Vehicle> {
        // The store lists vehicles by id.
        self.vehicles
            .binary_search_by_key(&id, |(v, _)| v.id)
            .ok()
            .map(|i| &self.vehicles[i].0)
    }
}

/// Rounds to one decimal (km, minutes, km/h in answers); never answers `-0.0`.
pub fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0 + 0.0
}

/// Rounds to two decimals; never answers `-0.0`.
pub fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0 + 0.0
}

// ---- The registry ---------------------------------------------------------------

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

/// Validates the arguments and runs the report; a panic inside a report becomes an
/// `internal` error rather than taking the caller down. An answer whose `drawing` is
/// set is not finished: `render::call` draws it and fills in the picture's own
/// figures (`png_bytes`, `zoom`, `bounds`), which are zeros until then.
pub fn call(db: &Db, spec: &ReportSpec, args: &Args) -> Result<Answer> {
    validate(spec, args)?;
    let run = || {
        // Debug builds only: lets the tests prove that a panicking report does not
        // take a front end down.
        #[cfg(debug_assertions)]
        if std::env::var("FLEETCTL_TEST_PANIC_IN").is_ok_and(|t| t == spec.tool) {
            panic!("injected test panic in {}", spec.tool);
        }
        // Debug builds only: a report that holds its worker until the test lets it
        // go, so that a full queue can be tested without racing the clock. It writes
        // `held` in the folder, then waits for `release` to appear there.
        #[cfg(debug_assertions)]
        if std::env::var("FLEETCTL_TEST_HOLD_IN").is_ok_and(|t| t == spec.tool)
            && let Some(dir) = std::env::var_os("FLEETCTL_TEST_HOLD_DIR")
        {
            let dir = std::path::PathBuf::from(dir);
            let _ = std::fs::write(dir.join(format!("held-{}", std::process::id())), "");
            while !dir.join("release").exists() {
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
        }
        let _snapshot = Snapshot::begin(&db.conn)?;
        (spec.run)(db, args)
    };
    catch_panic(spec.tool, run)
}

/// A report's queries in one read transaction: they see one state of the database
/// (a concurrent import or analyze cannot show them half its rows), and SQLite
/// takes its file lock once rather than once per query. Ends when dropped. Inside a
/// transaction already open (a writer's), nothing is done.
struct Snapshot<'c>(Option<&'c Connection>);

impl<'c> Snapshot<'c> {
    fn begin(conn: &'c Connection) -> Result<Snapshot<'c>> {
        if !conn.is_autocommit() {
            return Ok(Snapshot(None));
        }
        conn.execute_batch("BEGIN").map_err(crate::store::db_err)?;
        Ok(Snapshot(Some(conn)))
    }
}

impl Drop for Snapshot<'_> {
    fn drop(&mut self) {
        if let Some(conn) = self.0 {
            // A read transaction has nothing to keep: ending it cannot lose data.
            let _ = conn.execute_batch("COMMIT");
        }
    }
}

/// Runs `f`; a panic inside becomes an `internal` error naming `tool` and the panic's
/// words, rather than taking the caller down.
pub fn catch_panic<T>(tool: &str, f: impl FnOnce() -> Result<T>) -> Result<T> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(result) => result,
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            Err(
                Error::new(ErrorCode::Internal, format!("{tool} failed: {what}"))
                    .with_hint("this is a bug in fleetctl; other tools still work"),
            )
        }
    }
}

/// What a report answers: the report object, and for a report that draws its picture.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    /// The report object (the CLI's JSON, the MCP `structuredContent`).
    pub value: Value,
    /// A PNG image, for reports that draw one (made by `render::call`).
    pub png: Option<Vec<u8>>,
    /// What to draw, for reports that draw: `render::call` turns it into `png`.
    pub drawing: Option<Drawing>,
}

/// The data of a picture, one kind per report that draws. The domain gathers it;
/// `render::call` draws it (the domain never draws).
#[derive(Debug, Clone, PartialEq)]
pub enum Drawing {
    /// `route_map`: one vehicle's track on a map.
    Route(route_map::MapInput),
    /// `speed_chart`: one vehicle's speed over a day.
    Speed(speed_chart::ChartInput),
    /// `fleet_map`: every vehicle's position at an instant, on a map.
    Fleet(fleet_map::FleetMapInput),
}

/// Adapts a typed report function to the registry's JSON signature.
pub fn invoke<R: DeserializeOwned, O: Serialize>(
    db: &Db,
    args: &Args,
    run: fn(&Db, &R) -> Result<O>,
) -> Result<Answer> {
    let request: R = request_of(args)?;
    let report = run(db, &request)?;
    let value = serde_json::to_value(report)
        .context(ErrorCode::Internal, || "report did not serialise".into())?;
    Ok(Answer {
        value,
        png: None,
        drawing: None,
    })
}

/// A drawing report's answer: its summary, with what `render::call` is to draw.
pub fn drawn(summary: impl Serialize, drawing: Drawing) -> Result<Answer> {
    let value = serde_json::to_value(summary).context(ErrorCode::Internal, || {
        "a picture's summary did not serialise".into()
    })?;
    Ok(Answer {
        value,
        png: None,
        drawing: Some(drawing),
    })
}

/// Adapts a typed drawing report (which answers with its picture still to draw) to
/// the registry's JSON signature.
pub fn invoke_drawing<R: DeserializeOwned>(
    db: &Db,
    args: &Args,
    run: fn(&Db, &R) -> Result<Answer>,
) -> Result<Answer> {
    run(db, &request_of(args)?)
}

/// A report's typed request from validated JSON arguments.
fn request_of<R: DeserializeOwned>(args: &Args) -> Result<R> {
    serde_json::from_value(Value::Object(args.clone())).map_err(|e| Error::invalid(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_s_parameters_come_from_its_request_type() {
        let params = nearest_vehicles::SPEC.params();
        let names: Vec<&str> = params.iter().map(|p| p.name).collect();
        assert_eq!(names, ["place", "lat", "lon", "limit"]);
        let place = &params[0];
        assert!(place.positional && !place.required);
        assert_eq!(
            (place.kind, place.conflicts),
            (ParamKind::Text, Some("lat"))
        );
        assert!(place.help.starts_with("Place name"));
        assert_eq!(
            params[1].kind,
            ParamKind::Number {
                min: -90.0,
                max: 90.0
            }
        );
        assert_eq!(params[1].pair, Some("lon"));
        assert_eq!(params[3].kind, ParamKind::Integer { min: 1, max: 50 });
        let alerts = alerts::SPEC.params();
        assert_eq!(alerts[2].name, "type");
        assert_eq!(
            alerts[2].kind,
            ParamKind::Enum(&["speeding", "long_stop", "signal_loss"])
        );
        let trip = trip_summary::SPEC.params();
        assert!(trip[0].required && trip[0].positional && trip[0].kind == ParamKind::Plate);
        assert_eq!(trip[1].kind, ParamKind::Date);
        assert!(list_vehicles::SPEC.params().is_empty());
        let fleet = fleet_map::SPEC.params();
        assert_eq!((fleet[0].name, fleet[0].kind), ("at", ParamKind::DateTime));
        assert!(!fleet[0].required && !fleet[0].positional);
        let mut args = Args::new();
        args.insert("at".into(), "2026-11-24T10:30".into());
        assert!(validate(&fleet_map::SPEC, &args).is_ok());
        args.insert("at".into(), "10:30".into());
        assert!(validate(&fleet_map::SPEC, &args).is_ok());
        args.insert("at".into(), "half past ten".into());
        let e = validate(&fleet_map::SPEC, &args).unwrap_err();
        assert!(e.hint.unwrap().contains("YYYY-MM-DDTHH:MM"));
    }
}
