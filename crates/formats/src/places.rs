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

fn read_json(path: &Path) -> Result<Value> {
    let bytes = fleetctl_core::untrusted::read_capped(path, crate::MAX_JSON_BYTES)
        .map_err(|e| Error::io(path, e))?;
    serde_json::from_slice(&bytes).map_err(|e| bad(path, format!("not readable as JSON: {e}")))
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
    let mut out = Loaded {
        items: Vec::new(),
        skipped: Vec::new(),
    };
    let file = fleetctl_core::untrusted::open_regular(path).map_err(|e| Error::io(path, e))?;
    let mut reader = std::io::BufReader::with_capacity(1 << 16, file);
    let head = std::io::BufRead::fill_buf(&mut reader).map_err(|e| Error::io(path, e))?;
    let is_json = head
        .iter()
        .find(|b| !b.is_ascii_whitespace())
        .is_some_and(|b| *b == b'{');
    if is_json {
        let doc = read_json(path)?;
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
        // A GeoNames dump may be large (allCountries.txt is 1.5 GB): read line by line.
        let mut bytes = Vec::new();
        let mut n = 0u64;
        loop {
            bytes.clear();
            if crate::read_line_capped(&mut reader, &mut bytes).map_err(|e| Error::io(path, e))?
                == 0
            {
                break;
            }
            n += 1;
            let text = String::from_utf8_lossy(&bytes);
            let line = text.trim_end_matches(['\n', '\r']);
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
    let doc = read_json(path)?;
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A test's own folder of files, removed when the test ends.
    struct Folder(std::path::PathBuf);

    impl Folder {
        fn new(test: &str) -> Folder {
            let dir =
                std::env::temp_dir().join(format!("fleetctl-places-{}-{test}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            Folder(dir)
        }

        fn write(&self, name: &str, text: &str) -> std::path::PathBuf {
            let path = self.0.join(name);
            std::fs::write(&path, text).unwrap();
            path
        }
    }

    impl Drop for Folder {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn geonames_lines_become_places_and_bad_lines_are_named() {
        let folder = Folder::new("geonames");
        // The GeoNames layout: id, name, asciiname, alternatenames, lat, lon, class,
        // code, country, cc2, admin1-4, population, elevation, dem, zone, date.
        let text = "\
3598132\tGuatemala City\tGuatemala City\tCiudad de Guatemala\t14.64072\t-90.51327\tP\tPPLC\tGT\t\t07\t\t\t\t994938\t\t1508\tAmerica/Guatemala\t2019-09-05
2643743\tLondon\tLondon\t\t51.50853\t-0.12574\tP\tPPLC\tGB\t\tENG\t\t\t\t8961989\t\t25\tEurope/London\t2019-09-18
999\tBroken\tBroken\t\tnorth\t-0.1\tP\tPPL\tGB
";
        let loaded = read_places(&folder.write("cities.txt", text)).unwrap();
        assert_eq!(loaded.items.len(), 2);
        assert_eq!(loaded.items[1].name, "London");
        assert_eq!(loaded.items[1].kind, "city");
        assert!((loaded.items[0].lat - 14.64072).abs() < 1e-9);
        assert_eq!(loaded.skipped.len(), 1);
        assert_eq!(loaded.skipped[0].0, 3);
        assert!(read_places(&folder.write("junk.txt", "hello\nworld\n")).is_err());
    }

    #[test]
    fn geofences_from_polygons_multipolygons_and_circles() {
        let folder = Folder::new("geofences");
        let text = r#"{"type": "FeatureCollection", "features": [
          {"type": "Feature", "properties": {"name": "Yard", "kind": "depot"},
           "geometry": {"type": "Polygon", "coordinates": [[[0,51],[0.01,51],[0.01,51.01],[0,51]]]}},
          {"type": "Feature", "properties": {"name": "Schools", "speed_limit_kmh": 30},
           "geometry": {"type": "MultiPolygon", "coordinates": [
             [[[1,51],[1.01,51],[1.01,51.01],[1,51]]], [[[2,51],[2.01,51],[2.01,51.01],[2,51]]]]}},
          {"type": "Feature", "properties": {"name": "Client", "radius_m": 150},
           "geometry": {"type": "Point", "coordinates": [-0.1, 51.5]}},
          {"type": "Feature", "properties": {"name": "No radius"},
           "geometry": {"type": "Point", "coordinates": [-0.1, 51.5]}},
          {"type": "Feature", "properties": {},
           "geometry": {"type": "Point", "coordinates": [-0.1, 51.5]}},
          {"type": "Feature", "properties": {"name": "Open ring"},
           "geometry": {"type": "Polygon", "coordinates": [[[0,51],[0.01,51],[0.01,51.01]]]}}
        ]}"#;
        let loaded = read_geofences(&folder.write("fences.geojson", text)).unwrap();
        let names: Vec<&str> = loaded.items.iter().map(|g| g.name.as_str()).collect();
        assert_eq!(names, ["Yard", "Schools (1/2)", "Schools (2/2)", "Client"]);
        assert_eq!(loaded.items[0].kind, "depot");
        assert_eq!(loaded.items[1].speed_limit_kmh, Some(30.0));
        assert_eq!(loaded.items[3].radius_m, Some(150.0));
        let skipped: Vec<u64> = loaded.skipped.iter().map(|s| s.0).collect();
        assert_eq!(skipped, [4, 5, 6], "{:?}", loaded.skipped);
    }
}
