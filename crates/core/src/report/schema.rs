//! JSON Schemas for the reports' answers (the MCP tools' `outputSchema`), derived
//! from the report types (`derived`), and a checker for the subset used, so that
//! tests can hold every answer to its published schema.

use serde_json::{Value, json};

/// The output schema of a report type, derived from it: every object closed
/// (`additionalProperties: false`) with all its fields required (an `Option` field
/// is present and may be null), subschemas inlined (clients read one document),
/// doc comments as descriptions, and nothing else (no `$schema`, titles or formats).
pub fn derived<T: schemars::JsonSchema>() -> Value {
    let mut schema = derived_input::<T>();
    tighten(&mut schema);
    schema
}

fn tighten(schema: &mut Value) {
    let Some(obj) = schema.as_object_mut() else {
        return;
    };
    for value in obj.values_mut() {
        match value {
            Value::Object(_) => tighten(value),
            Value::Array(items) => items.iter_mut().for_each(tighten),
            _ => {}
        }
    }
    for noise in ["$schema", "title", "format"] {
        obj.remove(noise);
    }
    // A free-form object (an event's details) is just an object.
    if obj.get("additionalProperties") == Some(&Value::Bool(true)) {
        obj.remove("additionalProperties");
    }
    if let Some(properties) = obj.get("properties").and_then(Value::as_object) {
        let required: Vec<Value> = properties
            .keys()
            .map(|k| Value::String(k.clone()))
            .collect();
        obj.insert("required".into(), Value::Array(required));
        obj.insert("additionalProperties".into(), Value::Bool(false));
    }
    tighten_sets(schema);
}

/// Closed sets said plainly, at the top of `schema`: an enum of documented unit
/// variants comes as a `oneOf` of constants, and an optional one as that or null.
fn tighten_sets(schema: &mut Value) {
    let Some(obj) = schema.as_object_mut() else {
        return;
    };
    let constants: Option<Vec<Value>> =
        obj.get("oneOf")
            .and_then(Value::as_array)
            .and_then(|options| {
                options
                    .iter()
                    .map(|o| o.get("const").filter(|c| c.is_string()).cloned())
                    .collect()
            });
    if let Some(values) = constants {
        obj.remove("oneOf");
        obj.insert("type".into(), json!("string"));
        obj.insert("enum".into(), Value::Array(values));
    }
    let nullable_enum = obj
        .get("anyOf")
        .and_then(Value::as_array)
        .and_then(|options| {
            let [a, b] = options.as_slice() else {
                return None;
            };
            let null = json!({"type": "null"});
            let (set, other) = if b == &null { (a, b) } else { (b, a) };
            if other != &null {
                return None;
            }
            let mut set = set.clone();
            tighten_sets(&mut set);
            set.get("enum").is_some().then_some(set)
        });
    if let Some(set) = nullable_enum {
        obj.remove("anyOf");
        let mut values = set["enum"].as_array().cloned().unwrap_or_default();
        values.push(Value::Null);
        obj.insert("type".into(), json!(["string", "null"]));
        obj.insert("enum".into(), Value::Array(values));
    }
}

/// The schema of a type as schemars derives it, subschemas inlined: for a request
/// type, with fleetctl's `x-` keys (read by `report::params_from_schema`), properties
/// in their written order.
pub fn derived_input<T: schemars::JsonSchema>() -> Value {
    let generator = schemars::generate::SchemaSettings::draft2020_12()
        .with(|s| s.inline_subschemas = true)
        .into_generator();
    generator.into_root_schema_for::<T>().to_value()
}

/// Whether a schema's `type` is, or includes, `t`.
pub fn has_type(schema: &Value, t: &str) -> bool {
    match &schema["type"] {
        Value::String(s) => s == t,
        Value::Array(ts) => ts.iter().any(|x| x == t),
        _ => false,
    }
}

/// A property schema with its closed sets said plainly: a `oneOf` of constants (an
/// enum of documented variants), optional or not, becomes `enum`.
pub fn closed_sets(mut schema: Value) -> Value {
    tighten_sets(&mut schema);
    schema
}

/// Checks `value` against `schema` (the subset used: type, enum, anyOf, properties,
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
    if let Some(options) = schema.get("anyOf").and_then(Value::as_array)
        && !options.iter().any(|o| check_at(o, v, path).is_ok())
    {
        return Err(format!(
            "{path}: {v} matches none of {} options",
            options.len()
        ));
    }
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

    use serde_json::Map;

    // Hand-built schemas of the subset the checker reads.
    /// A string.
    fn string() -> Value {
        json!({"type": "string"})
    }

    /// A number.
    fn number() -> Value {
        json!({"type": "number"})
    }

    /// A whole number.
    fn integer() -> Value {
        json!({"type": "integer"})
    }

    /// A boolean.
    fn boolean() -> Value {
        json!({"type": "boolean"})
    }

    /// One of a closed set of strings.
    fn one_of(values: &[&str]) -> Value {
        json!({"type": "string", "enum": values})
    }

    /// The schema, or null.
    fn nullable(schema: Value) -> Value {
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
    fn object(fields: &[(&str, Value)]) -> Value {
        let properties: Map<String, Value> = fields
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect();
        let required: Vec<&str> = fields.iter().map(|(k, _)| *k).collect();
        json!({"type": "object", "properties": properties, "required": required, "additionalProperties": false})
    }

    /// An array of items.
    fn array(item: Value) -> Value {
        json!({"type": "array", "items": item})
    }

    /// A capped list: `{total, truncated, items}`.
    fn list(item: Value) -> Value {
        object(&[
            ("total", integer()),
            ("truncated", boolean()),
            ("items", array(item)),
        ])
    }

    /// A small report type, derived as the reports are.
    #[derive(serde::Serialize, schemars::JsonSchema)]
    #[allow(dead_code)]
    struct Sample {
        /// A plate.
        plate: String,
        /// Maybe a distance.
        km: Option<f64>,
        /// A state.
        state: Option<Mode>,
    }

    /// Modes.
    #[derive(serde::Serialize, schemars::JsonSchema)]
    #[serde(rename_all = "snake_case")]
    #[allow(dead_code)]
    enum Mode {
        /// Driving.
        Moving,
        /// Not.
        Parked,
    }

    #[test]
    fn derived_schemas_are_closed_with_every_field_required() {
        let s = derived::<Sample>();
        assert_eq!(s["additionalProperties"], false);
        assert_eq!(s["required"], json!(["plate", "km", "state"]));
        assert_eq!(s["properties"]["km"]["type"], json!(["number", "null"]));
        assert_eq!(
            s["properties"]["state"]["enum"],
            json!(["moving", "parked", null])
        );
        assert_eq!(s["properties"]["plate"]["description"], "A plate.");
        assert!(s.get("$schema").is_none() && s.get("title").is_none());
        assert_eq!(
            check(&s, &json!({"plate": "P", "km": null, "state": "moving"})),
            Ok(())
        );
        assert!(check(&s, &json!({"plate": "P", "km": 1, "state": "flying"})).is_err());
        assert!(check(&s, &json!({"plate": "P", "km": 1})).is_err());
    }

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
