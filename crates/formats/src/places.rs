//! A fleet's own places and geofences from files: places as GeoJSON points with a
//! name or GeoNames tab-separated dumps (cities1000.txt and the like), geofences as
//! GeoJSON polygons, multipolygons, or points with a `radius_m` (circles).

use fleetctl_core::error::{Error, Result};
use fleetctl_core::geo::{Place, Shape, atlas::GeofenceDef};
use serde_json::Value;
use std::path::Path;

/// What a places or geofences file gave: the items, and the entries left out with
/// their line (or feature) number and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Loaded<T> {
    /// The items read.
    pub items: Vec<T>,
    /// Entries left out: (line or feature number, why).
    pub skipped: Vec<(u64, String)>,
}

fn read_text(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).map_err(|e| Error::io(path, e))
}

fn bad(path: &Path, message: impl std::fmt::Display) -> Error {
    Error::invalid(format!("{}: {message}", path.display()))
}

fn features<'v>(path: &Path, doc: &'v Value) -> Result<Vec<&'v Value>> {
    match doc.get("type").and_then(Value::as_str) {
        Some("FeatureCollection") => Ok(doc
            .get("features")
            .and_then(Value::as_array)
            .map(|f| f.iter().collect())
            .unwrap_or_default()),
        Some("Feature") => Ok(vec![doc]),
        _ => Err(bad(path, "not a GeoJSON Feature or FeatureCollection")
            .with_hint("places: Point features with a \"name\" property, or a GeoNames .txt dump")),
    }
}

fn name_of(props: &Value) -> Option<String> {
    props
        .get("name")
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .map(str::to_string)
}

fn in_range(lat: f64, lon: f64) -> bool {
    (-90.0..=90.0).contains(&lat) && (-180.0..=180.0).contains(&lon) && lat.is_finite()
}

/// Reads places: a GeoJSON FeatureCollection of named Points, or a GeoNames dump
/// (tab-separated: id, name, asciiname, alternatenames, latitude, longitude,
/// feature class, …).
pub fn read_places(path: &Path) -> Result<Loaded<Place>> {
    let text = read_text(path)?;
    let mut out = Loaded {
        items: Vec::new(),
        skipped: Vec::new(),
    };
    if text.trim_start().starts_with('{') {
        let doc: Value = serde_json::from_str(&text)
            .map_err(|e| bad(path, format!("not readable as JSON: {e}")))?;
        for (i, f) in features(path, &doc)?.into_iter().enumerate() {
            let n = i as u64 + 1;
            let props = f.get("properties").unwrap_or(&Value::Null);
            let geometry = f.get("geometry").unwrap_or(&Value::Null);
            if geometry.get("type").and_then(Value::as_str) != Some("Point") {
                out.skipped.push((n, "not a Point".to_string()));
                continue;
            }
            let c = geometry.get("coordinates");
            let at = |k| c.and_then(|c| c.get(k)).and_then(Value::as_f64);
            let (Some(lon), Some(lat)) = (at(0), at(1)) else {
                out.skipped.push((n, "no coordinates".to_string()));
                continue;
            };
            let Some(name) = name_of(props) else {
                out.skipped.push((n, "no \"name\" property".to_string()));
                continue;
            };
            if !in_range(lat, lon) {
                out.skipped
                    .push((n, format!("coordinates {lon}, {lat} out of range")));
                continue;
            }
            let kind = props
                .get("kind")
                .and_then(Value::as_str)
                .unwrap_or("place")
                .to_string();
            out.items.push(Place {
                name,
                kind,
                lat,
                lon,
            });
        }
    } else {
        for (i, line) in text.lines().enumerate() {
            let n = i as u64 + 1;
            if line.trim().is_empty() || line.starts_with('#') {
                continue;
            }
            let cells: Vec<&str> = line.split('\t').collect();
            if cells.len() < 8 {
                out.skipped.push((
                    n,
                    format!(
                        "{} tab-separated cells, a GeoNames line has 19",
                        cells.len()
                    ),
                ));
                continue;
            }
            let (lat, lon) = (
                cells[4].trim().parse::<f64>(),
                cells[5].trim().parse::<f64>(),
            );
            let (Ok(lat), Ok(lon)) = (lat, lon) else {
                out.skipped.push((
                    n,
                    format!("latitude {:?}, longitude {:?}", cells[4], cells[5]),
                ));
                continue;
            };
            if !in_range(lat, lon) || cells[1].trim().is_empty() {
                out.skipped
                    .push((n, "no name, or coordinates out of range".to_string()));
                continue;
            }
            let kind = match cells[6] {
                "P" => "city",
                "S" => "landmark",
                "L" => "area",
                _ => "place",
            };
            out.items.push(Place {
                name: cells[1].trim().to_string(),
                kind: kind.to_string(),
                lat,
                lon,
            });
        }
        if out.items.is_empty() && !out.skipped.is_empty() {
            return Err(bad(path, "no line reads as a GeoNames entry").with_hint(
                "places are GeoJSON Point features with a name, or a GeoNames tab-separated dump",
            ));
        }
    }
    Ok(out)
}

fn ring_wkt(ring: &Value) -> Option<String> {
    let points: Option<Vec<String>> = ring
        .as_array()?
        .iter()
        .map(|p| {
            let (lon, lat) = (p.get(0)?.as_f64()?, p.get(1)?.as_f64()?);
            in_range(lat, lon).then(|| format!("{lon} {lat}"))
        })
        .collect();
    Some(format!("POLYGON(({}))", points?.join(", ")))
}

/// Reads geofences from GeoJSON: Polygons (the outer ring; holes are not kept),
/// MultiPolygons (one geofence per part, `Name (1/2)`), and Points with a
/// `radius_m` property (circles). Properties: `name` (required), `kind` (default
/// `zone`), `speed_limit_kmh` (optional).
pub fn read_geofences(path: &Path) -> Result<Loaded<GeofenceDef>> {
    let text = read_text(path)?;
    let doc: Value =
        serde_json::from_str(&text).map_err(|e| bad(path, format!("not readable as JSON: {e}")))?;
    let mut out = Loaded {
        items: Vec::new(),
        skipped: Vec::new(),
    };
    for (i, f) in features(path, &doc)?.into_iter().enumerate() {
        let n = i as u64 + 1;
        let props = f.get("properties").unwrap_or(&Value::Null);
        let Some(name) = name_of(props) else {
            out.skipped.push((n, "no \"name\" property".to_string()));
            continue;
        };
        let kind = props
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or("zone")
            .to_string();
        let speed_limit_kmh = props.get("speed_limit_kmh").and_then(Value::as_f64);
        if speed_limit_kmh.is_some_and(|v| !(5.0..=200.0).contains(&v)) {
            out.skipped
                .push((n, format!("{name}: speed_limit_kmh outside 5..=200")));
            continue;
        }
        let geometry = f.get("geometry").unwrap_or(&Value::Null);
        let coords = geometry.get("coordinates").unwrap_or(&Value::Null);
        let mut shapes: Vec<(String, Option<f64>)> = Vec::new();
        match geometry.get("type").and_then(Value::as_str) {
            Some("Polygon") => shapes.extend(coords.get(0).and_then(ring_wkt).map(|w| (w, None))),
            Some("MultiPolygon") => {
                for part in coords.as_array().map(Vec::as_slice).unwrap_or(&[]) {
                    shapes.extend(part.get(0).and_then(ring_wkt).map(|w| (w, None)));
                }
            }
            Some("Point") => {
                let radius = props.get("radius_m").and_then(Value::as_f64);
                let (lon, lat) = (
                    coords.get(0).and_then(Value::as_f64),
                    coords.get(1).and_then(Value::as_f64),
                );
                match (lon, lat, radius) {
                    (Some(lon), Some(lat), Some(r)) if in_range(lat, lon) && r > 0.0 => {
                        shapes.push((format!("POINT({lon} {lat})"), Some(r)))
                    }
                    _ => {
                        out.skipped
                            .push((n, format!("{name}: a Point needs a positive radius_m")));
                        continue;
                    }
                }
            }
            other => {
                out.skipped.push((
                    n,
                    format!("{name}: geometry {other:?} is not a Polygon, MultiPolygon or Point"),
                ));
                continue;
            }
        }
        let parts = shapes.len();
        for (k, (wkt, radius_m)) in shapes.into_iter().enumerate() {
            if let Err(e) = Shape::from_wkt(&wkt, radius_m) {
                out.skipped.push((n, format!("{name}: {}", e.message)));
                continue;
            }
            out.items.push(GeofenceDef {
                name: if parts > 1 {
                    format!("{name} ({}/{parts})", k + 1)
                } else {
                    name.clone()
                },
                kind: kind.clone(),
                wkt,
                radius_m,
                speed_limit_kmh,
            });
        }
    }
    Ok(out)
}
