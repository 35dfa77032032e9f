//! The report registry as MCP tools: each report is listed with its schemas and
//! called through the same `render::call` the CLI uses. One helper turns a report's
//! answer or error into a tool result.

use crate::error::{Error, ErrorCode};
use crate::report::{self, Answer, Args, Db, ReportSpec};
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

/// A successful tool result: the answer as one line of text and as structured
/// content, and the picture as an image block when there is one.
pub fn success(answer: Answer) -> Value {
    let mut content = vec![json!({"type": "text", "text": answer.value.to_string()})];
    if let Some(png) = &answer.png {
        content.push(json!({"type": "image", "data": base64(png), "mimeType": "image/png"}));
    }
    json!({ "content": content, "structuredContent": answer.value, "isError": false })
}

/// Standard base64 with padding (RFC 4648), for image blocks.
pub fn base64(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// A failed tool result the model can act on: the error object the CLI prints with
/// `--format json` (`{"error": {code, message, hint}}`), as the text block.
///
/// There is no `structuredContent`: a client may check it against the tool's
/// `outputSchema` even when `isError` is true (the TypeScript SDK 1.x does, and then
/// replaces the whole result by a protocol error), and an error object is not the
/// tool's output. A result with `isError` and no `structuredContent` passes every client.
pub fn failure(e: &Error) -> Value {
    json!({ "content": [{"type": "text", "text": e.to_json().to_string()}], "isError": true })
}

/// A tool's answer or error as a tool result. An answer over `max_bytes` becomes
/// a tool error, so no answer floods the client.
pub fn result(name: &str, answer: crate::error::Result<Answer>, max_bytes: usize) -> Value {
    match answer {
        Ok(answer) => capped(name, success(answer), max_bytes),
        Err(e) => failure(&e),
    }
}

/// A result over `max_bytes` (serialised) becomes a tool error saying so.
fn capped(name: &str, result: Value, max_bytes: usize) -> Value {
    match over_limit(name, &result, max_bytes) {
        None => result,
        Some(e) => failure(&e),
    }
}

/// The error for an answer of `name` larger than `max_bytes` once serialised, if it
/// is (the MCP tools and their REST twins answer it alike).
pub fn over_limit(name: &str, answer: &Value, max_bytes: usize) -> Option<Error> {
    let bytes = serde_json::to_vec(answer).map_or(usize::MAX, |b| b.len());
    (bytes > max_bytes).then(|| {
        Error::invalid(format!(
            "the answer of {name} would be {bytes} bytes, over the limit of {max_bytes}"
        ))
        .with_hint("ask for less: a smaller map (width, height), a shorter time window or a narrower range")
    })
}

/// Runs a tool: its answer or error, or `None` when no tool has that name.
pub fn run(
    db: Result<&Db, &Error>,
    name: &str,
    arguments: &Args,
) -> Option<crate::error::Result<Answer>> {
    let spec = report::find(name)?;
    Some(match db {
        Ok(db) => crate::render::call(db, spec, arguments),
        // Arguments are still checked first, so the model learns of both problems.
        Err(db_error) => report::validate(spec, arguments).and_then(|()| Err(db_error.clone())),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_over_the_cap_becomes_a_tool_error() {
        let answer = || Answer {
            value: json!({"rows": "x".repeat(1000)}),
            png: None,
            drawing: None,
        };
        assert_eq!(capped("alerts", success(answer()), 4096)["isError"], false);
        let refused = capped("alerts", success(answer()), 500);
        assert_eq!(refused["isError"], true);
        assert!(refused.get("structuredContent").is_none());
        let error: Value =
            serde_json::from_str(refused["content"][0]["text"].as_str().unwrap()).unwrap();
        let message = error["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("alerts") && message.contains("over the limit of 500"),
            "{message}"
        );
    }

    #[test]
    fn base64_matches_the_rfc_vectors() {
        let cases = [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ];
        for (plain, encoded) in cases {
            assert_eq!(base64(plain.as_bytes()), encoded);
        }
        assert_eq!(base64(&[0xff, 0xfe, 0x00]), "//4A");
    }
}
