//! The map formats out — GeoJSON, GPX 1.1 and KML 2.2 — written as a stream:
//! positions as one line per vehicle-day with a time per point, trips as one line
//! each, stops and events as points, every row's figures as properties.

use super::Sink;
use fleetctl_core::error::{Error, Result};
use fleetctl_core::export::{Chunk, Dataset, Table, Track, utc_text};
use quick_xml::escape::escape;
use serde_json::{Map, Value};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

/// A buffered file that names itself in errors.
struct Out {
    file: BufWriter<File>,
    path: PathBuf,
}

impl Out {
    fn new(file: File, path: &Path) -> Out {
        Out {
            file: BufWriter::with_capacity(1 << 20, file),
            path: path.to_path_buf(),
        }
    }

    fn put(&mut self, text: &str) -> Result<()> {
        self.file
            .write_all(text.as_bytes())
            .map_err(|e| Error::io(&self.path, e))
    }

    fn close(mut self) -> Result<u64> {
        self.file.flush().map_err(|e| Error::io(&self.path, e))?;
        let file = self
            .file
            .into_inner()
            .map_err(|e| Error::io(&self.path, e.into_error()))?;
        file.sync_all().map_err(|e| Error::io(&self.path, e))?;
        Ok(std::fs::metadata(&self.path).map_or(0, |m| m.len()))
    }
}

/// A row's cells as JSON properties (times as RFC 3339 UTC).
fn properties(table: &Table, row: usize) -> Map<String, Value> {
    table
        .specs
        .iter()
        .zip(&table.cells)
        .map(|(spec, cells)| (spec.name.clone(), cells.json(row)))
        .collect()
}

/// Short words for a row, for a waypoint's or placemark's name and description.
fn label(dataset: Dataset, table: &Table, row: usize) -> (String, String) {
    let plate = table.text("plate", row).unwrap_or_default();
    let place = table.text("place", row).unwrap_or_default();
    match dataset {
        Dataset::Stops => (
            format!("{plate} stop"),
            format!(
                "{place}, {} min",
                table.float("minutes", row).unwrap_or_default()
            ),
        ),
        Dataset::Events => (
            format!("{plate} {}", table.text("kind", row).unwrap_or_default()),
            place.to_string(),
        ),
        _ => (
            format!("{plate} {}", table.text("date", row).unwrap_or_default()),
            String::new(),
        ),
    }
}

/// The rows that are places (stops, events): each row with its latitude and longitude.
fn places(table: &Table) -> impl Iterator<Item = (usize, f64, f64)> + '_ {
    (0..table.rows())
        .filter_map(|row| Some((row, table.float("lat", row)?, table.float("lon", row)?)))
}

/// The first time of a row (its start, or an event's `at`).
fn row_time(table: &Table, row: usize) -> Option<i64> {
    table
        .specs
        .iter()
        .find(|s| s.name.ends_with("_utc"))
        .and_then(|s| table.time_ms(&s.name, row))
}

fn track_name(chunk: &Chunk, track: &Track) -> String {
    match track.row {
        Some(row) => format!(
            "{} trip {}",
            chunk.plate,
            row_time(&chunk.table, row)
                .map(utc_text)
                .unwrap_or_default()
        ),
        None => format!("{} {}", chunk.plate, chunk.date),
    }
}

/// A GeoJSON FeatureCollection.
pub(super) struct GeoJsonSink {
    out: Out,
    dataset: Dataset,
    first: bool,
}

impl GeoJsonSink {
    pub(super) fn new(file: File, path: &Path, dataset: Dataset) -> Result<GeoJsonSink> {
        let mut out = Out::new(file, path);
        out.put("{\"type\":\"FeatureCollection\",\"features\":[\n")?;
        Ok(GeoJsonSink {
            out,
            dataset,
            first: true,
        })
    }

    fn feature(&mut self, geometry: Value, properties: Map<String, Value>) -> Result<()> {
        let feature = serde_json::json!({
            "type": "Feature",
            "geometry": geometry,
            "properties": properties,
        });
        let sep = if self.first { "" } else { ",\n" };
        self.first = false;
        self.out.put(&format!("{sep}{feature}"))
    }
}

fn line(track: &Track) -> Value {
    let coordinates: Vec<Value> = track
        .points
        .iter()
        .map(|p| serde_json::json!([p.lon, p.lat]))
        .collect();
    serde_json::json!({"type": "LineString", "coordinates": coordinates})
}

impl Sink for GeoJsonSink {
    fn write(&mut self, chunk: Chunk) -> Result<()> {
        match self.dataset {
            Dataset::Positions => {
                for track in &chunk.tracks {
                    let mut props = Map::new();
                    props.insert("plate".into(), chunk.plate.clone().into());
                    props.insert("date".into(), chunk.date.to_string().into());
                    props.insert("fixes".into(), track.points.len().into());
                    // `times` parallel to the coordinates, as togeojson's coordTimes.
                    props.insert(
                        "times".into(),
                        track.points.iter().map(|p| utc_text(p.time_ms)).collect(),
                    );
                    props.insert(
                        "speeds_kmh".into(),
                        track.points.iter().map(|p| p.speed_kmh).collect(),
                    );
                    self.feature(line(track), props)?;
                }
            }
            Dataset::Trips => {
                for track in &chunk.tracks {
                    let props = track
                        .row
                        .map(|row| properties(&chunk.table, row))
                        .unwrap_or_default();
                    self.feature(line(track), props)?;
                }
            }
            _ => {
                for (row, lat, lon) in places(&chunk.table) {
                    let point = serde_json::json!({"type": "Point", "coordinates": [lon, lat]});
                    self.feature(point, properties(&chunk.table, row))?;
                }
            }
        }
        Ok(())
    }

    fn finish(mut self: Box<Self>) -> Result<u64> {
        self.out.put("\n]}\n")?;
        self.out.close()
    }
}

/// A GPX 1.1 file: tracks, or waypoints.
pub(super) struct GpxSink {
    out: Out,
    dataset: Dataset,
}

impl GpxSink {
    pub(super) fn new(file: File, path: &Path, dataset: Dataset) -> Result<GpxSink> {
        let mut out = Out::new(file, path);
        out.put(concat!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n",
            "<gpx version=\"1.1\" creator=\"fleetctl\" xmlns=\"http://www.topografix.com/GPX/1/1\" ",
            "xmlns:gpxtpx=\"http://www.garmin.com/xmlschemas/TrackPointExtension/v2\">\n"
        ))?;
        Ok(GpxSink { out, dataset })
    }
}

impl Sink for GpxSink {
    fn write(&mut self, chunk: Chunk) -> Result<()> {
        let mut text = String::new();
        if matches!(self.dataset, Dataset::Positions | Dataset::Trips) {
            for track in &chunk.tracks {
                text.push_str(&format!(
                    "<trk><name>{}</name><trkseg>\n",
                    escape(track_name(&chunk, track))
                ));
                for p in &track.points {
                    text.push_str(&format!(
                        "<trkpt lat=\"{}\" lon=\"{}\"><time>{}</time><extensions><gpxtpx:TrackPointExtension><gpxtpx:speed>{:.2}</gpxtpx:speed>{}</gpxtpx:TrackPointExtension></extensions></trkpt>\n",
                        p.lat,
                        p.lon,
                        utc_text(p.time_ms),
                        p.speed_kmh / 3.6,
                        p.heading_deg
                            .map(|h| format!("<gpxtpx:course>{h:.1}</gpxtpx:course>"))
                            .unwrap_or_default()
                    ));
                }
                text.push_str("</trkseg></trk>\n");
            }
        } else {
            let t = &chunk.table;
            for (row, lat, lon) in places(t) {
                let (name, desc) = label(self.dataset, t, row);
                text.push_str(&format!(
                    "<wpt lat=\"{lat}\" lon=\"{lon}\"><time>{}</time><name>{}</name><desc>{}</desc><type>{}</type></wpt>\n",
                    row_time(t, row).map(utc_text).unwrap_or_default(),
                    escape(&name),
                    escape(&desc),
                    escape(t.text("kind", row).unwrap_or("stop"))
                ));
            }
        }
        self.out.put(&text)
    }

    fn finish(mut self: Box<Self>) -> Result<u64> {
        self.out.put("</gpx>\n")?;
        self.out.close()
    }
}

/// A KML 2.2 document: `gx:Track` placemarks (a time per point), or points.
pub(super) struct KmlSink {
    out: Out,
    dataset: Dataset,
}

impl KmlSink {
    pub(super) fn new(file: File, path: &Path, dataset: Dataset) -> Result<KmlSink> {
        let mut out = Out::new(file, path);
        out.put(&format!(
            concat!(
                "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n",
                "<kml xmlns=\"http://www.opengis.net/kml/2.2\" xmlns:gx=\"http://www.google.com/kml/ext/2.2\">\n",
                "<Document><name>fleetctl {}</name>\n"
            ),
            dataset.as_str()
        ))?;
        Ok(KmlSink { out, dataset })
    }
}

fn extended_data(table: &Table, row: usize) -> String {
    let mut text = String::from("<ExtendedData>");
    for (name, value) in properties(table, row) {
        let shown = match value {
            Value::Null => continue,
            Value::String(s) => s,
            other => other.to_string(),
        };
        text.push_str(&format!(
            "<Data name=\"{}\"><value>{}</value></Data>",
            escape(&name),
            escape(&shown)
        ));
    }
    text.push_str("</ExtendedData>");
    text
}

impl Sink for KmlSink {
    fn write(&mut self, chunk: Chunk) -> Result<()> {
        let mut text = String::new();
        if matches!(self.dataset, Dataset::Positions | Dataset::Trips) {
            for track in &chunk.tracks {
                text.push_str(&format!(
                    "<Placemark><name>{}</name>",
                    escape(track_name(&chunk, track))
                ));
                if let Some(row) = track.row {
                    text.push_str(&extended_data(&chunk.table, row));
                }
                text.push_str("<gx:Track>\n");
                for p in &track.points {
                    text.push_str(&format!("<when>{}</when>", utc_text(p.time_ms)));
                }
                text.push('\n');
                for p in &track.points {
                    text.push_str(&format!("<gx:coord>{} {} 0</gx:coord>", p.lon, p.lat));
                }
                text.push_str("\n</gx:Track></Placemark>\n");
            }
        } else {
            let t = &chunk.table;
            for (row, lat, lon) in places(t) {
                let (name, desc) = label(self.dataset, t, row);
                text.push_str(&format!(
                    "<Placemark><name>{}</name><description>{}</description><TimeStamp><when>{}</when></TimeStamp>{}<Point><coordinates>{lon},{lat}</coordinates></Point></Placemark>\n",
                    escape(&name),
                    escape(&desc),
                    row_time(t, row).map(utc_text).unwrap_or_default(),
                    extended_data(t, row)
                ));
            }
        }
        self.out.put(&text)
    }

    fn finish(mut self: Box<Self>) -> Result<u64> {
        self.out.put("</Document></kml>\n")?;
        self.out.close()
    }
}
