//! JSON sources: Traccar's positions API (an array of position objects, speed in
//! knots, `attributes` holding ignition and distances) and GeoJSON (Point features
//! with a time property, or LineStrings with a parallel list of times such as
//! `coordTimes`). Keys are found like CSV columns (see `columns`).

use crate::{ColumnMap, Field, Source, raw_row};
use fleetctl_core::error::{Error, Result};
use fleetctl_core::ingest::{FileUnits, Flow, RawRow};
use serde_json::{Map, Value};

fn load(src: &Source) -> Result<Value> {
    let bytes =
        fleetctl_core::untrusted::read_capped(src.path, crate::MAX_JSON_BYTES).map_err(|e| {
            Error::io(src.path, e).with_hint(
                "JSON is read whole, up to 256 MiB; export larger fleets as CSV, Parquet or GPX",
            )
        })?;
    serde_json::from_slice(&bytes).map_err(|e| src.bad(format!("not readable as JSON: {e}")))
}

/// A JSON value as a cell: numbers and strings as written, booleans as true/false.
fn cell(v: &Value) -> Option<String> {
    match v {
        Value::Null => None,
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        other => Some(other.to_string()),
    }
}

/// An object's keys and values, with those of a nested `attributes` object after
/// its own (Traccar keeps ignition and odometers there).
fn flatten(obj: &Map<String, Value>) -> (Vec<String>, Vec<Option<String>>) {
    let mut names = Vec::new();
    let mut values = Vec::new();
    for (k, v) in obj {
        if k == "attributes" {
            continue;
        }
        names.push(k.clone());
        values.push(cell(v));
    }
    if let Some(Value::Object(attrs)) = obj.get("attributes") {
        for (k, v) in attrs {
            names.push(k.clone());
            values.push(cell(v));
        }
    }
    (names, values)
}

fn object_row(
    src: &Source,
    record: u64,
    obj: &Map<String, Value>,
) -> Result<(RawRow, Option<ColumnMap>)> {
    object_row_with(src, record, obj, &mut None)
}

/// [`object_row`], reusing the column map of the object before when this one has the
/// same keys (as every position of an export has).
fn object_row_with(
    src: &Source,
    record: u64,
    obj: &Map<String, Value>,
    last: &mut Option<(Vec<String>, ColumnMap)>,
) -> Result<(RawRow, Option<ColumnMap>)> {
    let (names, values) = flatten(obj);
    let map = match last {
        Some((known, map)) if *known == names => map.clone(),
        _ => {
            let map = ColumnMap::from_header(&names, &src.opts.map)?;
            *last = Some((names.clone(), map.clone()));
            map
        }
    };
    let value_of = |name: &str| {
        names
            .iter()
            .position(|n| n.eq_ignore_ascii_case(name))
            .and_then(|i| values[i].clone())
    };
    let mut row = raw_row(record, &map, |i| values.get(i).cloned().flatten());
    row.received = value_of("serverTime");
    row.valid = value_of("valid");
    Ok((row, Some(map)))
}

/// Traccar's `/api/positions` answer (or any JSON array of position objects), read
/// one position at a time: memory holds one position, however long the array.
pub(crate) fn read_traccar(src: &mut Source) -> Result<()> {
    let file = std::fs::File::open(src.path).map_err(|e| Error::io(src.path, e))?;
    let size = file.metadata().map_or(0, |m| m.len()).max(1);
    let read = std::rc::Rc::new(std::cell::Cell::new(0u64));
    let reader = std::io::BufReader::with_capacity(
        1 << 20,
        Counted {
            inner: file,
            read: read.clone(),
        },
    );
    let mut record = 0u64;
    let mut failed = None;
    let mut last_map = None;
    let mut each = |item: Value| -> Result<Flow> {
        record += 1;
        if record.is_multiple_of(4096) {
            (src.progress)(read.get() as f64 / size as f64);
        }
        let Value::Object(obj) = item else {
            return src
                .ingest
                .malformed(src.file, record, "not a JSON object".to_string());
        };
        let (row, map) = object_row_with(src, record, &obj, &mut last_map)?;
        let units = src.units(map.as_ref());
        src.row(&row, &units)
    };
    let mut de = serde_json::Deserializer::from_reader(reader);
    let mut stopped = false;
    let streamed = serde::de::DeserializeSeed::deserialize(
        Elements {
            each: &mut each,
            failed: &mut failed,
            stopped: &mut stopped,
        },
        &mut de,
    )
    .and_then(|()| de.end());
    match (failed, streamed) {
        (Some(e), _) => Err(e),
        // The import asked for no more rows (see `Ingest::row`).
        (None, _) if stopped => Ok(()),
        (None, Ok(())) => Ok(()),
        (None, Err(e)) if e.is_data() && e.to_string().contains("expected a JSON array") => {
            Err(src.bad("not a JSON array of positions"))
        }
        (None, Err(e)) => Err(src.bad(format!("not readable as JSON: {e}"))),
    }
}

/// A reader that counts the bytes it has given (for progress).
struct Counted<R> {
    inner: R,
    read: std::rc::Rc<std::cell::Cell<u64>>,
}

impl<R: std::io::Read> std::io::Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read.set(self.read.get() + n as u64);
        Ok(n)
    }
}

/// A JSON array taken one element at a time: each is handed to `each` as soon as it
/// is read. An error there stops the reading and is kept in `failed`; a `Break`
/// stops it and sets `stopped`.
struct Elements<'a> {
    each: &'a mut dyn FnMut(Value) -> Result<Flow>,
    failed: &'a mut Option<Error>,
    stopped: &'a mut bool,
}

impl<'de> serde::de::DeserializeSeed<'de> for Elements<'_> {
    type Value = ();

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> std::result::Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> serde::de::Visitor<'de> for Elements<'_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON array of positions")
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(
        self,
        mut seq: A,
    ) -> std::result::Result<(), A::Error> {
        while let Some(item) = seq.next_element::<Value>()? {
            match (self.each)(item) {
                Ok(Flow::Continue(())) => {}
                Ok(Flow::Break(())) => {
                    *self.stopped = true;
                    return Err(serde::de::Error::custom("stopped"));
                }
                Err(e) => {
                    *self.failed = Some(e);
                    return Err(serde::de::Error::custom("stopped"));
                }
            }
        }
        Ok(())
    }
}

/// A GeoJSON FeatureCollection (or one Feature).
pub(crate) fn read_geojson(src: &mut Source) -> Result<()> {
    let doc = load(src)?;
    let features: Vec<&Value> = match doc.get("type").and_then(Value::as_str) {
        Some("FeatureCollection") => doc
            .get("features")
            .and_then(Value::as_array)
            .map(|f| f.iter().collect())
            .unwrap_or_default(),
        Some("Feature") => vec![&doc],
        _ => return Err(src.bad("not a GeoJSON Feature or FeatureCollection")),
    };
    let mut record = 0u64;
    let empty = Map::new();
    for feature in features {
        let props = feature
            .get("properties")
            .and_then(Value::as_object)
            .unwrap_or(&empty);
        let geometry = feature.get("geometry").unwrap_or(&Value::Null);
        let kind = geometry.get("type").and_then(Value::as_str).unwrap_or("");
        let coords = geometry.get("coordinates").unwrap_or(&Value::Null);
        match kind {
            "Point" => {
                record += 1;
                let (mut row, map) = object_row(src, record, props)?;
                set_position(&mut row, coords);
                let units = src.units(map.as_ref());
                if src.row(&row, &units)?.is_break() {
                    return Ok(());
                }
            }
            "LineString" | "MultiLineString" => {
                let lines: Vec<&Value> = if kind == "LineString" {
                    vec![coords]
                } else {
                    coords
                        .as_array()
                        .map(|a| a.iter().collect())
                        .unwrap_or_default()
                };
                let times = line_times(props, kind == "MultiLineString");
                let (names, values) = flatten(props);
                let map = ColumnMap::from_header(&names, &src.opts.map)?;
                let plate = map
                    .index
                    .get(&Field::Plate)
                    .and_then(|&i| values[i].clone())
                    .or_else(|| props.get("name").and_then(cell));
                let units: FileUnits = src.units(Some(&map));
                for (l, line) in lines.iter().enumerate() {
                    let points = line.as_array().map(Vec::as_slice).unwrap_or(&[]);
                    for (p, point) in points.iter().enumerate() {
                        record += 1;
                        let mut row = RawRow {
                            line: record,
                            plate: src.opts.plate.clone().or_else(|| plate.clone()),
                            time: times.get(l).and_then(|t| t.get(p)).and_then(cell),
                            ..RawRow::default()
                        };
                        set_position(&mut row, point);
                        if src.row(&row, &units)?.is_break() {
                            return Ok(());
                        }
                    }
                }
            }
            _ => {}
        }
    }
    if record == 0 {
        return Err(src.bad("no Point or LineString features in it"));
    }
    Ok(())
}

fn set_position(row: &mut RawRow, coords: &Value) {
    let at = |i: usize| coords.get(i).and_then(cell);
    row.lon = at(0);
    row.lat = at(1);
}

/// The times parallel to a line's points: `coordTimes` (togeojson), `times`, or
/// `coordinateProperties.times`; one list per line of a MultiLineString.
fn line_times(props: &Map<String, Value>, multi: bool) -> Vec<Vec<Value>> {
    let found = props
        .get("coordTimes")
        .or_else(|| props.get("times"))
        .or_else(|| {
            props
                .get("coordinateProperties")
                .and_then(|c| c.get("times"))
        });
    let Some(Value::Array(list)) = found else {
        return Vec::new();
    };
    if multi && list.iter().all(Value::is_array) {
        list.iter()
            .map(|l| l.as_array().cloned().unwrap_or_default())
            .collect()
    } else {
        vec![list.clone()]
    }
}
