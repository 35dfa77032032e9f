//! The report registry as MCP tools: each report is listed with its schemas and
//! called through the same `report::call` the CLI uses. One helper turns a report's
//! answer or error into a tool result.

use crate::error::{Error, ErrorCode};
use crate::report::{self, Args, Db, ReportSpec};
use serde_json::{Value, json};

/// The tool definition `tools/list` returns for one report.
pub fn definition(spec: &ReportSpec) -> Value {
    json!({
        "name": spec.tool,
        "title": spec.title,
        "description": spec.description,
        "inputSchema": report::input_schema(spec),
        "outputSchema": (spec.output_schema)(),
        "annotations": {
            "title": spec.title,
            "readOnlyHint": true,
            "idempotentHint": true,
            "destructiveHint": false,
            "openWorldHint": false,
        },
    })
}

/// Every tool, in the registry's fixed order.
pub fn list() -> Vec<Value> {
    report::registry().iter().map(definition).collect()
}

/// A successful tool result: the answer as one line of text and as structured content.
pub fn success(value: Value) -> Value {
    json!({ "content": [{"type": "text", "text": value.to_string()}], "structuredContent": value, "isError": false })
}

/// A failed tool result the model can act on: a sentence, and the error object.
pub fn failure(e: &Error) -> Value {
    let mut text = format!("{} error: {}", e.code, e.message);
    if let Some(hint) = &e.hint {
        text.push_str(". ");
        text.push_str(hint);
    }
    json!({ "content": [{"type": "text", "text": text}], "structuredContent": e.to_json(), "isError": true })
}

/// Calls a tool: the result, or `None` when no tool has that name (a protocol error).
pub fn call(db: Result<&Db, &Error>, name: &str, arguments: &Args) -> Option<Value> {
    let spec = report::find(name)?;
    Some(match db {
        Ok(db) => match report::call(db, spec, arguments) {
            Ok(value) => success(value),
            Err(e) => failure(&e),
        },
        // Arguments are still checked first, so the model learns of both problems.
        Err(db_error) => match report::validate(spec, arguments) {
            Err(e) => failure(&e),
            Ok(()) => failure(db_error),
        },
    })
}

/// The error tools answer when the database could not be opened at start.
pub fn unavailable(e: Error) -> Error {
    match e.code {
        ErrorCode::DbUnavailable | ErrorCode::DbSchema => e,
        _ => Error::new(ErrorCode::DbUnavailable, e.message)
            .with_hint("run `fleetctl generate`, then restart the server"),
    }
}
