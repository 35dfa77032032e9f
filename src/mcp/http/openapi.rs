//! The OpenAPI twin of the MCP tools, generated from the report registry, for models
//! with function calling but no MCP: `POST /api/v1/tools/{name}` for every tool.

use crate::report;
use serde_json::{Value, json};

/// The OpenAPI 3.1 document of the tools, generated from the report registry.
pub fn openapi() -> Value {
    let error = json!({"type": "object", "properties": {"error": {"type": "object", "properties": {
        "code": {"type": "string"}, "message": {"type": "string"}, "hint": {"type": ["string", "null"]}},
        "required": ["code", "message"]}}, "required": ["error"]});
    let mut paths = serde_json::Map::new();
    for spec in report::registry() {
        // A drawing tool's answer carries its picture, as base64 PNG.
        let mut answer = (spec.output_schema)();
        if spec.draws
            && let Some(properties) = answer.get_mut("properties").and_then(Value::as_object_mut)
        {
            properties.insert(
                "png_base64".into(),
                json!({"type": "string", "contentEncoding": "base64", "contentMediaType": "image/png",
                       "description": "The picture, a PNG image, base64-encoded."}),
            );
        }
        let error_ref = json!({"description": "The request was refused; the body says why and what would be accepted.",
                               "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}});
        paths.insert(
            format!("/api/v1/tools/{}", spec.tool),
            json!({"post": {
                "operationId": spec.tool,
                "summary": spec.title,
                "description": spec.description,
                "requestBody": {"required": true, "content": {"application/json": {"schema": report::input_schema(spec)}}},
                "responses": {
                    "200": {"description": spec.title, "content": {"application/json": {"schema": answer}}},
                    "400": error_ref.clone(), "401": error_ref.clone(), "403": error_ref.clone(),
                    "404": error_ref.clone(), "408": error_ref.clone(), "409": error_ref.clone(),
                    "413": error_ref.clone(), "429": error_ref.clone(), "500": error_ref.clone(),
                    "503": error_ref,
                },
            }}),
        );
    }
    json!({
        "openapi": "3.1.0",
        "info": {"title": "fleetctl", "version": env!("CARGO_PKG_VERSION"),
                 "description": "Fleet reports computed from GPS positions: the same tools `fleetctl serve` offers over MCP."},
        "servers": [{"url": "/"}],
        "security": [{"bearer": []}],
        "paths": paths,
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": {"Error": error},
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_openapi_document_has_one_path_per_tool() {
        let doc = openapi();
        assert_eq!(doc["openapi"], "3.1.0");
        assert_eq!(
            doc["paths"].as_object().unwrap().len(),
            report::registry().len()
        );
        assert!(doc["paths"]["/api/v1/tools/trip_summary"]["post"]["requestBody"]["content"]["application/json"]["schema"]["required"]
            .as_array()
            .unwrap()
            .contains(&json!("plate")));
    }
}
