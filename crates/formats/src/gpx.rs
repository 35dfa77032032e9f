//! GPX 1.0/1.1 tracks, read as a stream: each `trkpt` with its `time`, and speed
//! (m/s) and course when the file has them (GPX 1.0's own elements, or the common
//! extensions such as Garmin's `gpxtpx:speed`/`gpxtpx:course`). The vehicle is
//! `--plate`, else the track's `name`.

use crate::Source;
use fleetctl_core::error::{Error, Result};
use fleetctl_core::ingest::RawRow;
use quick_xml::XmlVersion;
use quick_xml::events::Event;

/// The child element whose text is being read.
#[derive(Clone, Copy, PartialEq)]
enum Capture {
    Time,
    Speed,
    Course,
    TrackName,
}

pub(crate) fn read(src: &mut Source, size: u64) -> Result<()> {
    let file = std::fs::File::open(src.path).map_err(|e| Error::io(src.path, e))?;
    let mut xml = quick_xml::Reader::from_reader(std::io::BufReader::with_capacity(1 << 16, file));
    let units = src.units(None);
    let mut buf = Vec::new();
    let mut point: Option<RawRow> = None;
    let mut capture: Option<Capture> = None;
    let mut text = String::new();
    let mut track_name: Option<String> = None;
    let mut in_track = false;
    let mut record = 0u64;
    loop {
        let event = xml.read_event_into(&mut buf).map_err(|e| {
            src.bad(format!(
                "not readable as XML at byte {}: {e}",
                xml.buffer_position()
            ))
        })?;
        match event {
            Event::Start(ref e) | Event::Empty(ref e) => {
                let empty = matches!(event, Event::Empty(_));
                match e.local_name().as_ref() {
                    "trk" => {
                        in_track = true;
                        track_name = None;
                    }
                    "trkpt" => {
                        record += 1;
                        let mut row = RawRow {
                            line: record,
                            ..RawRow::default()
                        };
                        for attr in e.attributes().flatten() {
                            let value = attr
                                .normalized_value(XmlVersion::Implicit1_0)
                                .map(|v| v.into_owned())
                                .ok();
                            match attr.key.local_name().as_ref() {
                                "lat" => row.lat = value,
                                "lon" => row.lon = value,
                                _ => {}
                            }
                        }
                        row.plate = src.opts.plate.clone().or_else(|| track_name.clone());
                        if empty {
                            if src.row(&row, &units)?.is_break() {
                                return Ok(());
                            }
                        } else {
                            point = Some(row);
                        }
                    }
                    "time" if point.is_some() => capture = Some(Capture::Time),
                    "speed" if point.is_some() => capture = Some(Capture::Speed),
                    "course" | "bearing" | "heading" if point.is_some() => {
                        capture = Some(Capture::Course)
                    }
                    "name" if in_track && point.is_none() => capture = Some(Capture::TrackName),
                    _ => {}
                }
                if empty {
                    capture = None;
                }
                text.clear();
            }
            Event::Text(ref t) if capture.is_some() => text.push_str(&t.xml10_content()),
            Event::CData(ref t) if capture.is_some() => text.push_str(t.as_ref()),
            Event::GeneralRef(ref r) if capture.is_some() => {
                if let Ok(Some(c)) = r.resolve_char_ref() {
                    text.push(c);
                } else if let Some(s) =
                    quick_xml::escape::resolve_predefined_entity(&r.xml10_content())
                {
                    text.push_str(s);
                }
            }
            Event::End(ref e) => {
                match (e.local_name().as_ref(), capture.take()) {
                    ("trkpt", _) => {
                        if let Some(row) = point.take() {
                            if src.row(&row, &units)?.is_break() {
                                return Ok(());
                            }
                            if record.is_multiple_of(16_384) {
                                let at = xml.buffer_position() as f64;
                                (src.progress)(at / size.max(1) as f64);
                            }
                        }
                    }
                    ("trk", _) => in_track = false,
                    (_, Some(c)) => {
                        let value = Some(text.trim().to_string());
                        match (c, point.as_mut()) {
                            (Capture::Time, Some(p)) => p.time = value,
                            (Capture::Speed, Some(p)) => p.speed = value,
                            (Capture::Course, Some(p)) => p.heading = value,
                            (Capture::TrackName, _) => track_name = value.filter(|v| !v.is_empty()),
                            _ => {}
                        }
                    }
                    _ => {}
                }
                text.clear();
            }
            Event::Eof => break,
            _ => {}
        }
        buf.clear();
    }
    if record == 0 {
        return Err(src.bad("no track points (trk/trkseg/trkpt) in it"));
    }
    Ok(())
}
