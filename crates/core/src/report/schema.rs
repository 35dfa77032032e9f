//! JSON Schemas for the reports' answers (the MCP tools' `outputSchema`), built from
//! a few helpers, and a checker for the subset used, so that tests can hold every
//! answer to its published schema.

use serde_json::{Map, Value, json};

/// A string.
pub fn string() -> Value {
    json!({"type": "string"})
}

/// A number.
pub fn number() -> Value {
    json!({"type": "number"})
}

/// A whole number.
pub fn integer() -> Value {
    json!({"type": "integer"})
}

/// A boolean.
pub fn boolean() -> Value {
    json!({"type": "boolean"})
}

/// A free-form object (kind-specific details).
pub fn any_object() -> Value {
    json!({"type": "object"})
}

/// One of a closed set of strings.
pub fn one_of(values: &[&str]) -> Value {
    json!({"type": "string", "enum": values})
}

/// The schema, or null.
pub fn nullable(schema: Value) -> Value {
    let mut s = schema;
    if let Some(t) = s.get("type").and_then(Value::as_str).map(str::to_owned) {
        s["type"] = json!([t, "null"]);
    }
    if let Some(values) = s.get_mut("enum").and_then(Value::as_array_mut) {
        values.push(Value::Null);
    }
    s
}

/// An object with exactly these fields, all present (possibly null).
pub fn object(fields: &[(&str, Value)]) -> Value {
    let properties: Map<String, Value> = fields
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect();
    let required: Vec<&str> = fields.iter().map(|(k, _)| *k).collect();
    json!({"type": "object", "properties": properties, "required": required, "additionalProperties": false})
}

/// An array of items.
pub fn array(item: Value) -> Value {
    json!({"type": "array", "items": item})
}

/// A capped list: `{total, truncated, items}`.
pub fn list(item: Value) -> Value {
    object(&[
        ("total", integer()),
        ("truncated", boolean()),
        ("items", array(item)),
    ])
}

/// Checks `value` against `schema` (the subset above: type, enum, properties,
/// required, additionalProperties false, items). Returns the first mismatch's path.
pub fn check(schema: &Value, value: &Value) -> Result<(), String> {
    check_at(schema, value, "$")
}

fn type_ok(t: &str, v: &Value) -> bool {
    match t {
        "string" => v.is_string(),
        "number" => v.is_number(),
        "integer" => v.is_i64() || v.is_u64(),
        "boolean" => v.is_boolean(),
        "object" => v.is_object(),
        "array" => v.is_array(),
        "null" => v.is_null(),
        _ => false,
    }
}

fn check_at(schema: &Value, v: &Value, path: &str) -> Result<(), String> {
    match schema.get("type") {
        Some(Value::String(t)) if !type_ok(t, v) => {
            return Err(format!("{path}: expected {t}, got {v}"));
        }
        Some(Value::Array(ts)) if !ts.iter().filter_map(Value::as_str).any(|t| type_ok(t, v)) => {
            return Err(format!("{path}: expected one of {ts:?}, got {v}"));
        }
        _ => {}
    }
    if let Some(values) = schema.get("enum").and_then(Value::as_array)
        && !values.contains(v)
    {
        return Err(format!("{path}: {v} is not one of {values:?}"));
    }
    if let (Some(props), Some(obj)) = (
        schema.get("properties").and_then(Value::as_object),
        v.as_object(),
    ) {
        for req in schema
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
        {
            if !obj.contains_key(req) {
                return Err(format!("{path}: missing {req}"));
            }
        }
        for (k, field) in obj {
            match props.get(k) {
                Some(s) => check_at(s, field, &format!("{path}.{k}"))?,
                None if schema.get("additionalProperties") == Some(&Value::Bool(false)) => {
                    return Err(format!("{path}: unexpected field {k}"));
                }
                None => {}
            }
        }
    }
    if let (Some(item), Some(items)) = (schema.get("items"), v.as_array()) {
        for (i, x) in items.iter().enumerate() {
            check_at(item, x, &format!("{path}[{i}]"))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_checker_catches_what_a_client_would() {
        let s = object(&[
            ("plate", string()),
            ("km", nullable(number())),
            ("rows", list(object(&[("n", integer())]))),
        ]);
        let good = json!({"plate": "P-1", "km": null, "rows": {"total": 1, "truncated": false, "items": [{"n": 2}]}});
        assert_eq!(check(&s, &good), Ok(()));
        assert!(
            check(&s, &json!({"plate": "P-1", "km": 1.0}))
                .unwrap_err()
                .contains("missing rows")
        );
        let bad =
            json!({"plate": 5, "km": 1.0, "rows": {"total": 1, "truncated": false, "items": []}});
        assert!(check(&s, &bad).unwrap_err().starts_with("$.plate"));
        let extra = json!({"plate": "P", "km": 1, "rows": {"total": 0, "truncated": false, "items": [{"n": 1.5}]}});
        assert!(
            check(&s, &extra)
                .unwrap_err()
                .starts_with("$.rows.items[0].n")
        );
        assert!(check(&one_of(&["a"]), &json!("b")).is_err());
    }
}
