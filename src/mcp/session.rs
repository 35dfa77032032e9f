//! The MCP server's brain: which era a message belongs to, the legacy handshake, and
//! dispatch of every method to tools and prompts. Transport-free: it takes a line
//! and gives back the line to answer with (or none).
//!
//! Eras. A request whose `params._meta` names `io.modelcontextprotocol/protocolVersion`
//! is served statelessly under revision 2026-07-28. Anything else is the legacy
//! handshake era (2024-11-05 … 2025-11-25): `initialize` first (`ping` is allowed
//! before it; any other request before it is refused with -32600 "not initialized"),
//! then tools and prompts. Both eras may be served by one process.

use super::answers::{Answers, Kept, SharedAnswers};
use super::jsonrpc::{
    self, INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST, Incoming, METHOD_NOT_FOUND,
};
use super::{prompts, tools};
use crate::error::Error;
use crate::logging;
use crate::report::{Args, Db};
use serde_json::{Map, Value, json};
use std::time::Instant;

/// The handshake revisions, newest first.
pub const LEGACY_VERSIONS: [&str; 4] = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];
/// The stateless revision.
pub const MODERN_VERSION: &str = "2026-07-28";
/// The revision under which JSON-RPC batches are accepted.
const BATCH_VERSION: &str = "2025-03-26";
const META_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
const META_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
const META_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";
/// Tool and prompt lists never change while a binary runs.
const LIST_TTL_MS: u64 = 3_600_000;
/// The largest tool result sent, bytes; a larger one becomes a tool error.
pub const MAX_ANSWER_BYTES: usize = 4 * 1024 * 1024;
/// Once a batch's answers reach this many bytes, its remaining requests are not run.
pub const MAX_BATCH_ANSWER_BYTES: usize = 4 * 1024 * 1024;
/// -32022: the request's revision is not one this server speaks.
pub const UNSUPPORTED_VERSION: i64 = -32022;

/// One server process: the database (or why it is missing), the instructions made
/// from it, and the legacy session, if a client opened one.
pub struct Server {
    db: Result<Db, Error>,
    /// The database, to open again when it was unavailable.
    path: crate::store::Location,
    /// Tiles given while the database was unavailable, for when it is back.
    tiles_waiting: Option<crate::report::route_map::TileSource>,
    /// Made from the database when first asked for after a change (a live feed
    /// changes it many times a second; only `initialize` and `server/discover`
    /// say them).
    instructions: Option<String>,
    legacy_version: Option<String>,
    stateless: bool,
    /// Answers kept for the database's version (see [`Answers`]).
    answers: Answers,
    /// Answers kept with the process's other workers, on PostgreSQL.
    shared: Option<std::sync::Arc<SharedAnswers>>,
}

/// A JSON-RPC response: a value, or a tool result kept as JSON text (see
/// [`Answers`]), which is written out as it is.
#[derive(Debug)]
pub enum Response {
    /// Any response.
    Value(Value),
    /// A successful `tools/call`: `{"jsonrpc":"2.0","id":…,"result":…}` with the
    /// result's text, and under the stateless revision its fields after it.
    Kept {
        /// The request's id.
        id: Value,
        /// The tool result, JSON text.
        result: std::sync::Arc<str>,
        /// Under revision 2026-07-28 (`resultType` and `_meta` follow).
        modern: bool,
    },
}

impl Response {
    /// The response as one line of JSON.
    pub fn text(&self) -> String {
        match self {
            Response::Value(v) => v.to_string(),
            Response::Kept { id, result, modern } => {
                let mut text = format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":");
                match result.strip_suffix('}').filter(|_| *modern) {
                    Some(open) => {
                        text += open;
                        let mut after = Map::new();
                        modern_fields(&mut after);
                        let after = Value::Object(after).to_string();
                        text += if open.ends_with('{') { "" } else { "," };
                        text += &after[1..];
                    }
                    None => text += result,
                }
                text.push('}');
                text
            }
        }
    }
}

/// The fields revision 2026-07-28 adds to every result.
fn modern_fields(result: &mut Map<String, Value>) {
    result.insert("resultType".into(), json!("complete"));
    result.insert("_meta".into(), json!({ META_SERVER_INFO: server_info() }));
}

/// What a method answers: a result value, or a tool result kept as text.
enum Outcome {
    Value(Value),
    Kept(std::sync::Arc<str>),
}

/// Who we are, for `serverInfo`.
pub fn server_info() -> Value {
    json!({"name": "fleetctl", "title": "fleetctl — fleet telemetry", "version": env!("CARGO_PKG_VERSION")})
}

fn instructions_for(db: &Result<Db, Error>) -> String {
    let usage = "Dates may be YYYY-MM-DD, 'today' or 'yesterday' (resolved on the data clock and echoed back). \
Resolve a place by name with nearest_vehicles rather than inventing coordinates; plates are matched forgivingly. \
Use trip_summary for a vehicle's numbers on a day, stopped_vehicles for who is stopped now, alerts for speeding, \
long stops and signal losses. Every figure is computed from GPS positions; quote them, do not estimate.";
    match db {
        Ok(db) => {
            let active = db.vehicles.iter().filter(|(v, _)| v.active).count();
            let covers = match db.data_dates() {
                Ok(Some((from, to))) => format!("Data covers local dates {from} to {to}"),
                Ok(None) => "No vehicle has positions yet".to_string(),
                Err(e) => {
                    logging::info(&format!(
                        "serve: the data's date range could not be read: {}",
                        e.message
                    ));
                    "The data's date range could not be read".to_string()
                }
            };
            format!(
                "fleetctl answers questions about a fleet of {} vehicles ({active} active) from their GPS positions. \
{covers}; the data clock ('now') is {} in time zone {} . Alerts use these thresholds: speeding above {} km/h for at least {} s, long stops of {} min or more, signal losses over {} min. {usage}",
                db.vehicles.len(),
                db.time(db.now_ts),
                db.zone.name,
                db.thresholds.speed_limit_kmh,
                db.thresholds.speeding_min_s,
                db.thresholds.long_stop_min,
                db.thresholds.signal_loss_min,
            )
            .replace(" .", ".")
        }
        Err(e) => format!(
            "The fleet database is not available ({}): every tool will answer db_unavailable until `fleetctl generate` \
or `fleetctl import` has made it (the next call after that finds it; no restart needed). {usage}",
            e.message
        ),
    }
}

impl Server {
    /// A server over the database at `path` (read-only). A missing or broken
    /// database does not stop it: tools answer `db_unavailable`.
    pub fn new(path: &crate::store::Location) -> Server {
        let db = Db::open(path).map_err(tools::unavailable);
        if let Err(e) = &db {
            logging::info(&format!("serve: database unavailable: {}", e.message));
        }
        Server {
            db,
            path: path.clone(),
            tiles_waiting: None,
            instructions: None,
            legacy_version: None,
            stateless: false,
            answers: Answers::default(),
            shared: None,
        }
    }

    /// A server for a transport without sessions (HTTP): each legacy request stands
    /// alone, so `initialize` is always answered and nothing waits for it.
    pub fn stateless(path: &crate::store::Location) -> Server {
        Server {
            stateless: true,
            ..Server::new(path)
        }
    }

    /// Runs a tool outside JSON-RPC (the HTTP API): its answer or error, or `None`
    /// for an unknown tool.
    pub fn run_tool(
        &mut self,
        name: &str,
        arguments: &Args,
    ) -> Option<crate::error::Result<crate::report::Answer>> {
        self.refresh();
        let answer = self.answer(name, arguments)?;
        Some(answer.map(|kept| kept.answer.clone()))
    }

    /// A tool's answer on the database as last refreshed: kept from an earlier call
    /// on the same version, or run now.
    fn answer(
        &mut self,
        name: &str,
        arguments: &Args,
    ) -> Option<crate::error::Result<std::sync::Arc<Kept>>> {
        let run = |db| tools::run(Ok(db), name, arguments);
        match &self.db {
            Ok(db) => match (&self.shared, db.shared_version()) {
                (Some(shared), Some(version)) => {
                    shared.answer(version, name, arguments, MAX_ANSWER_BYTES, || run(db))
                }
                _ => self
                    .answers
                    .answer(db, name, arguments, MAX_ANSWER_BYTES, || run(db)),
            },
            Err(e) => tools::run(Err(e), name, arguments)
                .map(|r| r.map(|answer| std::sync::Arc::new(Kept::new(answer, MAX_ANSWER_BYTES)))),
        }
    }

    /// Keeps answers with the process's other workers where the database allows
    /// (PostgreSQL; see [`SharedAnswers`]).
    pub fn share_answers(&mut self, shared: std::sync::Arc<SharedAnswers>) {
        self.shared = Some(shared);
    }

    /// Raster tiles for the route map tool.
    pub fn set_tiles(&mut self, tiles: Option<crate::report::route_map::TileSource>) {
        match &mut self.db {
            Ok(db) => db.tiles = tiles,
            Err(_) => self.tiles_waiting = tiles,
        }
    }

    /// Every request sees the database as it is: the reference data (vehicles,
    /// geofences, places, thresholds, zone, data clock) is loaded again when the file
    /// changed since the last request (an import, an edit, `analyze`, `generate
    /// --force`), and a database that was unavailable is opened when it appears.
    fn refresh(&mut self) {
        let changed = match &mut self.db {
            Ok(db) => db.refresh(),
            Err(_) => Db::open(&self.path).map(|mut db| {
                db.tiles = self.tiles_waiting.take();
                self.db = Ok(db);
                true
            }),
        };
        if !matches!(changed, Ok(false)) {
            self.answers.clear();
        }
        match changed {
            Ok(false) => {}
            Ok(true) => {
                logging::info("serve: the database changed; reloaded");
                self.instructions = None;
            }
            Err(e) => {
                if let Ok(db) = &mut self.db {
                    self.tiles_waiting = db.tiles.take();
                }
                self.db = Err(tools::unavailable(e));
                self.instructions = None;
            }
        }
    }

    /// Readies a server whose answers are shared by the process's workers
    /// (PostgreSQL) before it takes requests. A fresh PostgreSQL connection pays
    /// for its first use of each report: every statement is prepared, and the
    /// server process reads the catalog for every table it touches. And the
    /// fleet-wide answers of the current version do not exist yet, so that the
    /// first clients of a replica started under load all wait for them. Here each
    /// report that draws nothing runs once on this connection for the first
    /// vehicle (the reports taking a plate), and once without arguments (those
    /// needing none; their answers are kept for every worker). Nothing is answered;
    /// failures are those of the first request, which will say them. The number of
    /// reports run.
    pub fn warm(&mut self) -> usize {
        self.refresh();
        let Ok(db) = &self.db else { return 0 };
        if self.shared.is_none() || db.shared_version().is_none() {
            return 0;
        }
        let plate = db.vehicles.first().map(|(v, _)| v.plate.clone());
        let mut ran = 0;
        let mut fleet_wide = Vec::new();
        for spec in crate::report::registry().iter().filter(|s| !s.draws) {
            use crate::report::ParamKind;
            let params = spec.params();
            let plate_param = params.iter().find(|p| p.kind == ParamKind::Plate);
            let needs_more = params
                .iter()
                .any(|p| p.required && p.kind != ParamKind::Plate);
            if let (Some(plate), Some(param), false) = (&plate, plate_param, needs_more) {
                let mut args = Args::new();
                args.insert(param.name.into(), Value::String(plate.clone()));
                let _ = tools::run(Ok(db), spec.tool, &args);
                ran += 1;
            }
            if !params.iter().any(|p| p.required) {
                fleet_wide.push(spec.tool);
            }
        }
        for tool in fleet_wide {
            let _ = self.answer(tool, &Args::new());
            ran += 1;
        }
        self.rest();
        ran
    }

    /// Ends what the last request left open for the next one (PostgreSQL's read
    /// transaction, see `Db::refresh`): to be called when no request is in hand.
    pub fn rest(&self) {
        if let Ok(db) = &self.db {
            db.rest();
        }
    }

    /// The instructions sent to clients.
    pub fn instructions(&mut self) -> &str {
        self.instructions
            .get_or_insert_with(|| instructions_for(&self.db))
    }

    /// Handles one line from the client; returns the line to answer with, if any.
    pub fn handle_line(&mut self, line: &[u8]) -> Option<String> {
        logging::verbose(|| format!("<- {}", String::from_utf8_lossy(line)));
        let text = match jsonrpc::parse(line) {
            Incoming::Batch(items) => self.handle_batch(items),
            message => self.handle(message).map(|r| r.text()),
        };
        if let Some(t) = &text {
            logging::verbose(|| format!("-> {t}"));
        }
        text
    }

    /// Answers a batch, in order. Once the answers reach `MAX_BATCH_ANSWER_BYTES`,
    /// the remaining requests are not run: each gets an error saying to send it again.
    fn handle_batch(&mut self, items: Vec<Value>) -> Option<String> {
        if self.legacy_version.as_deref() != Some(BATCH_VERSION) {
            return Some(
                jsonrpc::error(
                    &Value::Null,
                    INVALID_REQUEST,
                    "Invalid Request: JSON-RPC batches are accepted only in protocol revision 2025-03-26",
                    None,
                )
                .to_string(),
            );
        }
        let mut answers: Vec<String> = Vec::new();
        let mut bytes = 0;
        for item in items {
            let answer = match jsonrpc::classify(item) {
                Incoming::Batch(_) => Some(Response::Value(jsonrpc::error(
                    &Value::Null,
                    INVALID_REQUEST,
                    "Invalid Request: batches cannot nest",
                    None,
                ))),
                Incoming::Request { id, .. } if bytes >= MAX_BATCH_ANSWER_BYTES => {
                    Some(Response::Value(jsonrpc::error(
                        &id,
                        INVALID_REQUEST,
                        &format!(
                            "Invalid Request: not run, the batch's answers reached {MAX_BATCH_ANSWER_BYTES} bytes; send this request again"
                        ),
                        None,
                    )))
                }
                message => self.handle(message),
            };
            if let Some(answer) = answer {
                let text = answer.text();
                bytes += text.len();
                answers.push(text);
            }
        }
        (!answers.is_empty()).then(|| format!("[{}]", answers.join(",")))
    }

    /// Handles one parsed message; returns the response, if one is due.
    pub fn handle(&mut self, message: Incoming) -> Option<Response> {
        match message {
            Incoming::Request { id, method, params } => {
                let started = Instant::now();
                self.refresh();
                let tool = params
                    .as_ref()
                    .and_then(|p| p.get("name"))
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                let response = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    self.request(&id, &method, params)
                }))
                .unwrap_or_else(|_| {
                    Response::Value(jsonrpc::error(&id, INTERNAL_ERROR, "Internal error", None))
                });
                log_request(&method, tool.as_deref(), started, &response);
                Some(response)
            }
            Incoming::Notification { method, .. } => {
                logging::verbose(|| format!("serve: notification {method}"));
                None
            }
            Incoming::Response => None,
            Incoming::Invalid { id, code, message } => {
                logging::info(&format!("serve: refused a message: {message}"));
                Some(Response::Value(jsonrpc::error(&id, code, &message, None)))
            }
            Incoming::Batch(_) => unreachable!("batches are handled before"),
        }
    }

    fn request(&mut self, id: &Value, method: &str, params: Option<Value>) -> Response {
        let params = match params {
            None => Map::new(),
            Some(Value::Object(m)) => m,
            Some(_) => {
                return Response::Value(jsonrpc::error(
                    id,
                    INVALID_PARAMS,
                    "Invalid params: must be an object",
                    None,
                ));
            }
        };
        let meta = params.get("_meta").and_then(Value::as_object);
        if method != "initialize"
            && let Some(meta) = meta.filter(|m| m.contains_key(META_VERSION))
        {
            return self.modern(id, method, &params, meta);
        }
        self.legacy(id, method, &params)
    }

    /// Revision 2026-07-28: every request stands alone.
    fn modern(
        &mut self,
        id: &Value,
        method: &str,
        params: &Map<String, Value>,
        meta: &Map<String, Value>,
    ) -> Response {
        let requested = meta
            .get(META_VERSION)
            .and_then(Value::as_str)
            .unwrap_or_default();
        if requested != MODERN_VERSION {
            let mut supported = vec![MODERN_VERSION];
            supported.extend(LEGACY_VERSIONS);
            return Response::Value(jsonrpc::error(
                id,
                UNSUPPORTED_VERSION,
                "Unsupported protocol version",
                Some(json!({"supported": supported, "requested": meta.get(META_VERSION)})),
            ));
        }
        if !meta.get(META_CAPABILITIES).is_some_and(Value::is_object) {
            return Response::Value(jsonrpc::error(
                id,
                INVALID_PARAMS,
                &format!("Missing required _meta field {META_CAPABILITIES}"),
                None,
            ));
        }
        let result = match method {
            "server/discover" => {
                let mut supported = vec![MODERN_VERSION];
                supported.extend(LEGACY_VERSIONS);
                Ok(Outcome::Value(cacheable(json!({
                    "supportedVersions": supported,
                    "capabilities": capabilities(),
                    "instructions": self.instructions(),
                }))))
            }
            "tools/list" => self
                .list(params, "tools", tools::list())
                .map(|v| Outcome::Value(cacheable(v))),
            "prompts/list" => self
                .list(params, "prompts", prompts::list())
                .map(|v| Outcome::Value(cacheable(v))),
            "tools/call" => self.call_tool(params),
            "prompts/get" => get_prompt(params).map(Outcome::Value),
            _ => Err((METHOD_NOT_FOUND, format!("Method not found: {method}"))),
        };
        match result {
            Ok(Outcome::Value(mut value)) => {
                if let Some(fields) = value.as_object_mut() {
                    modern_fields(fields);
                }
                Response::Value(jsonrpc::success(id, value))
            }
            Ok(Outcome::Kept(result)) => Response::Kept {
                id: id.clone(),
                result,
                modern: true,
            },
            Err((code, message)) => Response::Value(jsonrpc::error(id, code, &message, None)),
        }
    }

    /// The handshake revisions.
    fn legacy(&mut self, id: &Value, method: &str, params: &Map<String, Value>) -> Response {
        let session = if self.stateless {
            Some("stateless")
        } else {
            self.legacy_version.as_deref()
        };
        let result = match (method, session) {
            ("initialize", Some(v)) if !self.stateless => Err((
                INVALID_REQUEST,
                format!("Invalid Request: already initialized (protocol {v})"),
            )),
            ("initialize", _) => {
                let requested = params
                    .get("protocolVersion")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                let version = LEGACY_VERSIONS
                    .iter()
                    .find(|v| **v == requested)
                    .copied()
                    .unwrap_or(LEGACY_VERSIONS[0]);
                if !self.stateless {
                    self.legacy_version = Some(version.to_string());
                    logging::info(&format!(
                        "serve: session opened, protocol {version} (client asked for {requested:?})"
                    ));
                }
                Ok(json!({
                    "protocolVersion": version,
                    "capabilities": capabilities(),
                    "serverInfo": server_info(),
                    "instructions": self.instructions(),
                }))
            }
            ("ping", _) => Ok(json!({})),
            ("server/discover", _) => Err((
                INVALID_PARAMS,
                format!(
                    "server/discover needs params._meta with {META_VERSION} \"{MODERN_VERSION}\" and {META_CAPABILITIES}"
                ),
            )),
            (_, None) => Err((
                INVALID_REQUEST,
                format!(
                    "Invalid Request: not initialized; send initialize first (or per-request _meta of revision {MODERN_VERSION})"
                ),
            )),
            ("tools/list", _) => self.list(params, "tools", tools::list()),
            ("prompts/list", _) => self.list(params, "prompts", prompts::list()),
            ("tools/call", _) => {
                return match self.call_tool(params) {
                    Ok(Outcome::Kept(result)) => Response::Kept {
                        id: id.clone(),
                        result,
                        modern: false,
                    },
                    Ok(Outcome::Value(value)) => Response::Value(jsonrpc::success(id, value)),
                    Err((code, message)) => {
                        Response::Value(jsonrpc::error(id, code, &message, None))
                    }
                };
            }
            ("prompts/get", _) => get_prompt(params),
            _ => Err((METHOD_NOT_FOUND, format!("Method not found: {method}"))),
        };
        Response::Value(match result {
            Ok(value) => jsonrpc::success(id, value),
            Err((code, message)) => jsonrpc::error(id, code, &message, None),
        })
    }

    fn list(
        &self,
        params: &Map<String, Value>,
        key: &str,
        items: Vec<Value>,
    ) -> Result<Value, (i64, String)> {
        if params.get("cursor").is_some_and(|c| !c.is_null()) {
            return Err((
                INVALID_PARAMS,
                "Invalid params: unknown cursor (the list has a single page)".into(),
            ));
        }
        Ok(json!({ key: items }))
    }

    /// A tool's result: kept as text when the answer was (and within the cap),
    /// else made now (a tool error, or an answer over the cap).
    fn call_tool(&mut self, params: &Map<String, Value>) -> Result<Outcome, (i64, String)> {
        let (name, arguments) = name_and_arguments(params)?;
        let answer = self.answer(name, &arguments);
        answer
            .map(|answer| match answer {
                Ok(kept) => match &kept.result_text {
                    Some(text) => Outcome::Kept(text.clone()),
                    None => Outcome::Value(tools::result(
                        name,
                        Ok(kept.answer.clone()),
                        MAX_ANSWER_BYTES,
                    )),
                },
                Err(e) => Outcome::Value(tools::failure(&e)),
            })
            .ok_or_else(|| {
                let names: Vec<&str> = crate::report::registry().iter().map(|s| s.tool).collect();
                (
                    INVALID_PARAMS,
                    format!("Unknown tool: {name}; tools: {}", names.join(", ")),
                )
            })
    }
}

/// The `name` and `arguments` of a `tools/call` or `prompts/get` (absent arguments
/// are an empty object; anything else is -32602).
fn name_and_arguments(params: &Map<String, Value>) -> Result<(&str, Args), (i64, String)> {
    let name = params.get("name").and_then(Value::as_str).ok_or((
        INVALID_PARAMS,
        "Invalid params: `name` must be a string".into(),
    ))?;
    match params.get("arguments") {
        None | Some(Value::Null) => Ok((name, Args::new())),
        Some(Value::Object(a)) => Ok((name, a.clone())),
        Some(_) => Err((
            INVALID_PARAMS,
            "Invalid params: `arguments` must be an object".into(),
        )),
    }
}

fn get_prompt(params: &Map<String, Value>) -> Result<Value, (i64, String)> {
    let (name, args) = name_and_arguments(params)?;
    prompts::get(name, &args).map_err(|m| (INVALID_PARAMS, m))
}

fn capabilities() -> Value {
    json!({"tools": {"listChanged": false}, "prompts": {"listChanged": false}})
}

fn cacheable(mut value: Value) -> Value {
    value["ttlMs"] = json!(LIST_TTL_MS);
    value["cacheScope"] = json!("public");
    value
}

fn log_request(method: &str, tool: Option<&str>, started: Instant, response: &Response) {
    let ms = started.elapsed().as_secs_f64() * 1000.0;
    let response = match response {
        Response::Value(v) => v,
        Response::Kept { .. } => &Value::Null,
    };
    let outcome = if let Some(e) = response.get("error") {
        format!("error {}", e["code"])
    } else if response["result"]["isError"] == Value::Bool(true) {
        // The error object is the result's text (see tools::failure).
        let error: Option<Value> = response["result"]["content"][0]["text"]
            .as_str()
            .and_then(|t| serde_json::from_str(t).ok());
        format!(
            "tool error {}",
            error
                .as_ref()
                .and_then(|e| e["error"]["code"].as_str())
                .unwrap_or("?")
        )
    } else {
        "ok".into()
    };
    let what = match (method, tool) {
        ("tools/call" | "prompts/get", Some(t)) => format!("{method} {t}"),
        _ => method.to_string(),
    };
    logging::info(&format!("serve: {what} {ms:.2} ms {outcome}"));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kept_result_is_written_as_the_result_value_would_be() {
        let result = json!({
            "content": [{"type": "text", "text": "{\"place\":\"Mixco \\\"Sur\\\" ñ\"}"}],
            "structuredContent": {"place": "Mixco \"Sur\" ñ"},
            "isError": false,
        });
        for id in [json!(7), json!("a\"b")] {
            for modern in [false, true] {
                let mut value = result.clone();
                if modern {
                    modern_fields(value.as_object_mut().unwrap());
                }
                let kept = Response::Kept {
                    id: id.clone(),
                    result: result.to_string().into(),
                    modern,
                };
                assert_eq!(kept.text(), jsonrpc::success(&id, value).to_string());
            }
        }
    }
}
