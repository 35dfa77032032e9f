//! JSON-RPC 2.0 on the wire: reading one message from a line of bytes and writing
//! responses. It knows nothing of MCP or fleets; the session decides what a method
//! means.

use serde_json::{Map, Value, json};

/// Invalid JSON (the id could not be read).
pub const PARSE_ERROR: i64 = -32700;
/// Not a valid request object.
pub const INVALID_REQUEST: i64 = -32600;
/// No such method.
pub const METHOD_NOT_FOUND: i64 = -32601;
/// Bad parameters (also: an unknown tool, or `arguments` that is not an object).
pub const INVALID_PARAMS: i64 = -32602;
/// Something broke inside the server.
pub const INTERNAL_ERROR: i64 = -32603;

/// One message read from the wire.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    /// A call that wants an answer; `id` is a string or an integer, as sent.
    Request {
        /// The id, echoed exactly.
        id: Value,
        /// The method name.
        method: String,
        /// The params (an object or absent).
        params: Option<Value>,
    },
    /// A call that wants no answer, ever.
    Notification {
        /// The method name.
        method: String,
        /// The params.
        params: Option<Value>,
    },
    /// A response to something we never send; ignored.
    Response,
    /// A JSON array of messages (allowed by revision 2025-03-26 only).
    Batch(Vec<Value>),
    /// Not a message we can serve: answer with this error.
    Invalid {
        /// The id, when it could be read (`null` otherwise).
        id: Value,
        /// The JSON-RPC error code.
        code: i64,
        /// Why.
        message: String,
    },
}

/// The largest message read, bytes (a stdio line or an HTTP body). Tool arguments
/// are a few hundred bytes; the bound keeps a parsed message (up to some 40 bytes of
/// memory per byte of `[1,1,…]`) near ten megabytes.
pub const MAX_MESSAGE_BYTES: usize = 256 * 1024;
/// The most JSON values (scalars, arrays, objects and keys) in one message. A parsed value
/// takes some 80 bytes, so `[1,1,1,…]` would otherwise cost 40 times its length; a
/// real request holds a few dozen.
pub const MAX_MESSAGE_VALUES: usize = 10_000;
/// The most messages in one batch.
pub const MAX_BATCH_MESSAGES: usize = 64;

/// Parses one line (without its line ending). A batch is counted before it is built,
/// so a line of a million `{}` costs nothing but the count.
pub fn parse(line: &[u8]) -> Incoming {
    let first = line.iter().find(|b| !b.is_ascii_whitespace());
    if first == Some(&b'[')
        && let Ok(BatchSize(n)) =
            serde::Deserialize::deserialize(&mut serde_json::Deserializer::from_slice(line))
        && n > MAX_BATCH_MESSAGES
    {
        return invalid(
            Value::Null,
            &format!("Invalid Request: a batch may hold at most {MAX_BATCH_MESSAGES} messages"),
        );
    }
    match parse_bounded(line) {
        Ok(value) => classify(value),
        Err(Unreadable::TooManyValues) => invalid(
            Value::Null,
            &format!("Invalid Request: {}", Unreadable::TooManyValues),
        ),
        Err(Unreadable::NotJson(e)) => Incoming::Invalid {
            id: Value::Null,
            code: PARSE_ERROR,
            message: format!("Parse error: {e}"),
        },
    }
}

/// Why bytes did not parse as a message.
#[derive(Debug)]
pub enum Unreadable {
    /// More than `MAX_MESSAGE_VALUES` JSON values.
    TooManyValues,
    /// Not JSON (the parser says where).
    NotJson(serde_json::Error),
}

impl std::fmt::Display for Unreadable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unreadable::TooManyValues => write!(
                f,
                "a message may hold at most {MAX_MESSAGE_VALUES} JSON values"
            ),
            Unreadable::NotJson(e) => write!(f, "not JSON: {e}"),
        }
    }
}

/// Parses JSON within the message bounds: the values are counted first, without
/// building any, so that a message of too many is refused before it costs memory.
pub fn parse_bounded(bytes: &[u8]) -> Result<Value, Unreadable> {
    if count_values(bytes).is_ok_and(|n| n > MAX_MESSAGE_VALUES) {
        return Err(Unreadable::TooManyValues);
    }
    // Malformed JSON: the full parse says where.
    serde_json::from_slice(bytes).map_err(Unreadable::NotJson)
}

/// Reads a parsed JSON value as a message.
pub fn classify(value: Value) -> Incoming {
    let obj = match value {
        Value::Array(items) if !items.is_empty() => return Incoming::Batch(items),
        Value::Object(obj) => obj,
        _ => return invalid(Value::Null, "Invalid Request: expected a JSON-RPC object"),
    };
    let id = obj.get("id").cloned();
    let id_ok = match &id {
        Some(Value::String(_)) => true,
        Some(Value::Number(n)) => n.is_i64() || n.is_u64(),
        _ => false,
    };
    // Only a readable id is echoed in an error.
    let echo = if id_ok {
        id.clone().unwrap_or(Value::Null)
    } else {
        Value::Null
    };
    if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return invalid(echo, "Invalid Request: \"jsonrpc\" must be \"2.0\"");
    }
    if obj.contains_key("result") || obj.contains_key("error") {
        // A response to something we never send is ignored; one that also names a
        // method is neither a request nor a response.
        return if obj.contains_key("method") {
            invalid(
                echo,
                "Invalid Request: a message cannot carry both method and result/error",
            )
        } else {
            Incoming::Response
        };
    }
    let Some(method) = obj.get("method").and_then(Value::as_str).map(str::to_owned) else {
        return invalid(echo, "Invalid Request: \"method\" must be a string");
    };
    let params = obj.get("params").cloned();
    if params
        .as_ref()
        .is_some_and(|p| !p.is_object() && !p.is_array())
    {
        return Incoming::Invalid {
            id: echo,
            code: INVALID_PARAMS,
            message: "Invalid params: must be an object".into(),
        };
    }
    match id {
        None => Incoming::Notification { method, params },
        Some(Value::Null) => invalid(Value::Null, "Invalid Request: id must not be null"),
        Some(_) if !id_ok => invalid(
            Value::Null,
            "Invalid Request: id must be a string or an integer",
        ),
        Some(id) => Incoming::Request { id, method, params },
    }
}

/// The length of a JSON array, counted up to one past the batch limit without
/// keeping its elements.
struct BatchSize(usize);

impl<'de> serde::Deserialize<'de> for BatchSize {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Count;
        impl<'de> serde::de::Visitor<'de> for Count {
            type Value = BatchSize;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an array")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<BatchSize, A::Error> {
                let mut n = 0;
                while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {
                    n += 1;
                    if n > MAX_BATCH_MESSAGES {
                        // Stop reading: the caller refuses the batch whatever follows.
                        return Err(serde::de::Error::custom(BATCH_TOO_LONG));
                    }
                }
                Ok(BatchSize(n))
            }
        }
        d.deserialize_seq(Count).or_else(|e: D::Error| {
            if e.to_string().starts_with(BATCH_TOO_LONG) {
                Ok(BatchSize(MAX_BATCH_MESSAGES + 1))
            } else {
                Err(e)
            }
        })
    }
}

const BATCH_TOO_LONG: &str = "batch too long";

/// Counts the JSON values in `bytes` without keeping any, stopping one past
/// `MAX_MESSAGE_VALUES`.
fn count_values(bytes: &[u8]) -> Result<usize, serde_json::Error> {
    let counter = std::cell::Cell::new(0usize);
    let seed = CountValues(&counter);
    match serde::de::DeserializeSeed::deserialize(
        seed,
        &mut serde_json::Deserializer::from_slice(bytes),
    ) {
        Ok(()) => Ok(counter.get()),
        Err(_) if counter.get() > MAX_MESSAGE_VALUES => Ok(counter.get()),
        Err(e) => Err(e),
    }
}

/// Counts one value and everything inside it.
#[derive(Clone, Copy)]
struct CountValues<'c>(&'c std::cell::Cell<usize>);

impl CountValues<'_> {
    fn one<E: serde::de::Error>(&self) -> Result<(), E> {
        self.0.set(self.0.get() + 1);
        if self.0.get() > MAX_MESSAGE_VALUES {
            return Err(E::custom("too many values"));
        }
        Ok(())
    }
}

impl<'de> serde::de::DeserializeSeed<'de> for CountValues<'_> {
    type Value = ();
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for CountValues<'_> {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<(), E> {
        self.one()
    }
    fn visit_i64<E: serde::de::Error>(self, _: i64) -> Result<(), E> {
        self.one()
    }
    fn visit_u64<E: serde::de::Error>(self, _: u64) -> Result<(), E> {
        self.one()
    }
    fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<(), E> {
        self.one()
    }
    fn visit_str<E: serde::de::Error>(self, _: &str) -> Result<(), E> {
        self.one()
    }
    fn visit_unit<E: serde::de::Error>(self) -> Result<(), E> {
        self.one()
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        self.one()?;
        while seq.next_element_seed(self)?.is_some() {}
        Ok(())
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        self.one()?;
        while map.next_key_seed(self)?.is_some() {
            map.next_value_seed(self)?;
        }
        Ok(())
    }
}

fn invalid(id: Value, message: &str) -> Incoming {
    Incoming::Invalid {
        id,
        code: INVALID_REQUEST,
        message: message.into(),
    }
}

/// A success response.
pub fn success(id: &Value, result: Value) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "result": result })
}

/// An error response, with optional `data`.
pub fn error(id: &Value, code: i64, message: &str, data: Option<Value>) -> Value {
    let mut err = Map::new();
    err.insert("code".into(), code.into());
    err.insert("message".into(), message.into());
    if let Some(data) = data {
        err.insert("data".into(), data);
    }
    json!({ "jsonrpc": "2.0", "id": id, "error": err })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_notifications_and_ids_of_every_legal_type() {
        for id in [
            json!(0),
            json!(7),
            json!(-3),
            json!("abc"),
            json!(""),
            json!(u64::MAX),
        ] {
            let line = json!({"jsonrpc": "2.0", "id": id, "method": "ping"}).to_string();
            assert_eq!(
                parse(line.as_bytes()),
                Incoming::Request {
                    id,
                    method: "ping".into(),
                    params: None
                }
            );
        }
        let n = parse(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        assert!(matches!(n, Incoming::Notification { .. }));
    }

    #[test]
    fn malformed_messages_get_the_right_codes() {
        let code = |line: &[u8]| match parse(line) {
            Incoming::Invalid { code, id, .. } => (code, id),
            other => panic!("{other:?}"),
        };
        assert_eq!(code(b"{not json"), (PARSE_ERROR, Value::Null));
        assert_eq!(code(b"\xff\xfe"), (PARSE_ERROR, Value::Null));
        assert_eq!(
            code(br#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#),
            (INVALID_REQUEST, Value::Null)
        );
        assert_eq!(
            code(br#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#),
            (INVALID_REQUEST, Value::Null)
        );
        assert_eq!(
            code(br#"{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}"#),
            (INVALID_REQUEST, Value::Null)
        );
        assert_eq!(
            code(br#"{"jsonrpc":"1.0","id":4,"method":"ping"}"#),
            (INVALID_REQUEST, json!(4))
        );
        assert_eq!(
            code(br#"{"jsonrpc":"2.0","id":"x","method":7}"#),
            (INVALID_REQUEST, json!("x"))
        );
        assert_eq!(
            code(br#"{"jsonrpc":"2.0","id":5,"method":"ping","params":"p"}"#),
            (INVALID_PARAMS, json!(5))
        );
        assert_eq!(code(b"[]"), (INVALID_REQUEST, Value::Null));
        assert_eq!(
            code(br#"{"jsonrpc":"2.0","id":8,"method":"ping","result":1}"#),
            (INVALID_REQUEST, json!(8))
        );
        assert_eq!(code(b"42"), (INVALID_REQUEST, Value::Null));
        let deep = "[".repeat(100_000);
        assert_eq!(
            code(deep.as_bytes()).0,
            PARSE_ERROR,
            "deep nesting is refused, not a stack overflow"
        );
    }

    #[test]
    fn a_batch_over_the_limit_is_refused_before_it_is_built() {
        let batch = |n: usize| format!("[{}]", vec!["{}"; n].join(","));
        assert!(
            matches!(parse(batch(MAX_BATCH_MESSAGES).as_bytes()), Incoming::Batch(b) if b.len() == MAX_BATCH_MESSAGES)
        );
        match parse(batch(1_000_000).as_bytes()) {
            Incoming::Invalid { code, message, .. } => {
                assert_eq!(code, INVALID_REQUEST);
                assert!(message.contains("at most 64"), "{message}");
            }
            _ => panic!("a batch of a million was not refused"),
        }
        // A broken batch is still a parse error.
        assert!(matches!(
            parse(b"[{},"),
            Incoming::Invalid {
                code: PARSE_ERROR,
                ..
            }
        ));
    }

    #[test]
    fn a_message_of_too_many_values_is_refused_before_it_is_built() {
        let line = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"ping","params":{{"x":[{}]}}}}"#,
            vec!["1"; MAX_MESSAGE_VALUES].join(",")
        );
        match parse(line.as_bytes()) {
            Incoming::Invalid { code, message, .. } => {
                assert_eq!(code, INVALID_REQUEST);
                assert!(message.contains("at most 10000 JSON values"), "{message}");
            }
            _ => panic!("not refused"),
        }
        let fine = r#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":[1,2,{"a":[true,null,"s"]}]}}"#;
        assert_eq!(count_values(fine.as_bytes()).unwrap(), 19, "keys count too");
        assert!(matches!(parse(fine.as_bytes()), Incoming::Request { .. }));
    }

    #[test]
    fn responses_echo_the_id_exactly() {
        assert_eq!(
            success(&json!("a"), json!({})).to_string(),
            r#"{"jsonrpc":"2.0","id":"a","result":{}}"#
        );
        assert_eq!(
            error(&json!(9), METHOD_NOT_FOUND, "Method not found: x", None).to_string(),
            r#"{"jsonrpc":"2.0","id":9,"error":{"code":-32601,"message":"Method not found: x"}}"#
        );
    }
}
