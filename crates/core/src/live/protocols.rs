//! What trackers and phone apps push, read into fixes: the OsmAnd protocol (query
//! string or form fields, as Traccar Client, OsmAnd and GPSLogger send them, and
//! Traccar Client 9's JSON body), Traccar's JSON position forwarding, and OwnTracks'
//! HTTP mode. Pure functions: a request's parts in, fixes or the reason out. Each
//! unit is the one its sender's source or documentation gives (named at each
//! reader), never a guess. The HTTP endpoints that call them are not served yet.

use crate::clock::FleetZone;
use crate::error::{Error, Result};
use crate::ingest::time::{TimeProblem, parse_time_strict};
use crate::ingest::units::SpeedUnit;
use serde_json::Value;

/// A fix from the future by more than this is refused, seconds (a device whose clock
/// or zone is wrong; a few seconds of drift are normal).
pub const FUTURE_TOLERANCE_S: i64 = 600;

/// A device's id as it sends it: at most this many characters.
pub const MAX_DEVICE_ID_CHARS: usize = 64;

pub use crate::model::Pushed;

/// What one request carried.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Batch {
    /// The fixes to store.
    pub fixes: Vec<Pushed>,
    /// Messages that carry no fix and were ignored on purpose (an OwnTracks card, a
    /// fix its device marked invalid), with why.
    pub ignored: Vec<String>,
}

/// Splits `a=1&b=2` (a query string or an `application/x-www-form-urlencoded`
/// body) into decoded pairs; `+` is a space.
pub fn form_pairs(text: &str) -> Vec<(String, String)> {
    text.split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (percent_decode(k), percent_decode(v))
        })
        .collect()
}

fn percent_decode(text: &str) -> String {
    let hex = |b: u8| (b as char).to_digit(16).map(|d| d as u8);
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => match (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                (Some(hi), Some(lo)) => {
                    out.push(hi << 4 | lo);
                    i += 2;
                }
                _ => out.push(b'%'),
            },
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// How a request's fixes are read: the fleet's zone (for naive local times), the
/// wall clock (no fix from the future), and the unit of OsmAnd's `speed` field.
#[derive(Debug, Clone)]
pub struct Reading<'z> {
    /// The fleet's zone.
    pub zone: &'z FleetZone,
    /// The wall clock, UTC epoch seconds.
    pub now: i64,
    /// The unit of the OsmAnd protocol's `speed` (knots: Traccar Client's and
    /// Traccar's own; the OsmAnd app and GPSLogger send m/s).
    pub osmand_speed: SpeedUnit,
}

impl Reading<'_> {
    /// A time as the OsmAnd protocol sends it: epoch seconds or milliseconds, ISO
    /// 8601, or `yyyy-MM-dd HH:mm:ss` in the fleet's zone.
    fn time(&self, field: &str, text: &str) -> Result<(i64, i64)> {
        let normalized = offset_with_colon(text.trim());
        let at = parse_time_strict(&normalized, self.zone).map_err(|p| match p {
            TimeProblem::Unparseable => Error::invalid(format!(
                "{field} {text:?} is not a time (epoch seconds or milliseconds, ISO 8601, or yyyy-MM-dd HH:mm:ss)"
            )),
            TimeProblem::Skipped => Error::invalid(format!(
                "{field} {text:?} is a local time the clocks of {} skipped",
                self.zone.name
            )),
        })?;
        if let Err(why) = crate::ingest::time::check_plausible(at.ts) {
            let why = crate::ingest::time::epoch_readings(text).unwrap_or(why);
            return Err(Error::invalid(format!("{field} {text:?}: {why}")));
        }
        Ok((at.ts, at.ms))
    }

    /// Checks a fix's time and place.
    fn checked(&self, fix: Pushed) -> Result<Pushed> {
        if fix.device_id.trim().is_empty() {
            return Err(Error::invalid("no device id (id, deviceid or device_id)"));
        }
        if fix.device_id.chars().count() > MAX_DEVICE_ID_CHARS
            || fix.device_id.chars().any(char::is_control)
        {
            return Err(Error::invalid(format!(
                "device id {:?} is over {MAX_DEVICE_ID_CHARS} characters or holds control characters",
                fix.device_id
            )));
        }
        if fix.ts > self.now + FUTURE_TOLERANCE_S {
            return Err(Error::invalid(format!(
                "the fix's time is {} s ahead of this server's clock (over {FUTURE_TOLERANCE_S} s): check the device's clock and time zone",
                fix.ts - self.now
            )));
        }
        crate::ingest::time::check_plausible(fix.ts)
            .map_err(|why| Error::invalid(format!("the fix's time: {why}")))?;
        let (lat, lon) = (fix.lat, fix.lon);
        if !lat.is_finite() || !lon.is_finite() || lat.abs() > 90.0 || lon.abs() > 180.0 {
            return Err(Error::invalid(format!(
                "lat {lat}, lon {lon} is not a place (lat -90..90, lon -180..180)"
            )));
        }
        if lat == 0.0 && lon == 0.0 {
            return Err(Error::invalid(
                "lat 0, lon 0: the device has no position yet",
            ));
        }
        crate::store::positions::check_figures(
            lat,
            lon,
            fix.speed_kmh,
            fix.heading_deg,
            fix.odometer_km,
        )?;
        Ok(fix)
    }
}

/// `+0000` → `+00:00` at the end of a time (Traccar writes both).
fn offset_with_colon(text: &str) -> String {
    let b = text.as_bytes();
    let n = b.len();
    if n > 5
        && matches!(b[n - 5], b'+' | b'-')
        && b[n - 4..].iter().all(u8::is_ascii_digit)
        && text.contains('T')
    {
        format!("{}:{}", &text[..n - 2], &text[n - 2..])
    } else {
        text.to_string()
    }
}

fn number(field: &str, text: &str) -> Result<f64> {
    text.trim()
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite())
        .ok_or_else(|| Error::invalid(format!("{field} {text:?} is not a number")))
}

/// A speed or heading the sender marks unknown with a negative value.
fn known(value: Option<f64>) -> Option<f64> {
    value.filter(|v| *v >= 0.0)
}

fn flag(text: &str) -> Option<bool> {
    match text.trim().to_ascii_lowercase().as_str() {
        "true" | "1" => Some(true),
        "false" | "0" => Some(false),
        _ => None,
    }
}

/// The OsmAnd protocol's fields (from the query string, or the form body when the
/// query has none): `id`/`deviceid`, `timestamp` (now when missing), `lat` and `lon`
/// or `location=lat,lon`, `speed` (in `reading.osmand_speed`), `bearing`/`heading`,
/// `ignition`, `odometer` (metres, as Traccar keeps it), `valid`. Other fields
/// (`altitude`, `accuracy`, `batt`, `hdop`…) are not kept.
pub fn osmand_fields(pairs: &[(String, String)], reading: &Reading) -> Result<Batch> {
    let get = |names: &[&str]| {
        pairs
            .iter()
            .find(|(k, _)| names.iter().any(|n| k.eq_ignore_ascii_case(n)))
            .map(|(_, v)| v.as_str())
    };
    let device_id = get(&["id", "deviceid"])
        .ok_or_else(|| Error::invalid("no device id: send id=… (or deviceid=…)"))?;
    if get(&["valid"]).and_then(flag) == Some(false) {
        return Ok(Batch {
            fixes: Vec::new(),
            ignored: vec![format!("device {device_id}: a fix it marked valid=false")],
        });
    }
    let (ts, ts_ms) = match get(&["timestamp"]) {
        Some(t) => reading.time("timestamp", t)?,
        None => (reading.now, 0),
    };
    let (lat, lon) = match (get(&["lat"]), get(&["lon"]), get(&["location"])) {
        (Some(lat), Some(lon), _) => (number("lat", lat)?, number("lon", lon)?),
        (_, _, Some(both)) => {
            let (lat, lon) = both
                .split_once(',')
                .ok_or_else(|| Error::invalid(format!("location {both:?} is not lat,lon")))?;
            (number("lat", lat)?, number("lon", lon)?)
        }
        _ => {
            return Err(Error::invalid(
                "no position: send lat=…&lon=… (or location=lat,lon)",
            ));
        }
    };
    let optional = |names: &[&str]| -> Result<Option<f64>> {
        get(names)
            .filter(|v| !v.trim().is_empty())
            .map(|v| number(names[0], v))
            .transpose()
    };
    let fix = Pushed {
        device_id: device_id.trim().to_string(),
        ts,
        ts_ms,
        lat,
        lon,
        speed_kmh: known(optional(&["speed"])?).map(|v| reading.osmand_speed.to_kmh(v)),
        heading_deg: known(optional(&["bearing", "heading"])?),
        ignition: get(&["ignition"]).and_then(flag),
        odometer_km: optional(&["odometer"])?.map(|m| m / 1000.0),
    };
    Ok(Batch {
        fixes: vec![reading.checked(fix)?],
        ignored: Vec::new(),
    })
}

fn json(body: &[u8]) -> Result<Value> {
    serde_json::from_slice(body).map_err(|e| Error::invalid(format!("the body is not JSON: {e}")))
}

fn text_of(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

fn time_of(v: &Value, field: &str, reading: &Reading) -> Result<(i64, i64)> {
    match v {
        Value::Number(n) => reading.time(field, &n.to_string()),
        Value::String(s) => reading.time(field, s),
        _ => Err(Error::invalid(format!("no {field}"))),
    }
}

/// Traccar Client 9's JSON body (the OsmAnd endpoint with `Content-Type:
/// application/json`): `{"location": {...} or [...], "device_id": "…"}`, each
/// location with `timestamp` (ISO 8601) and `coords` (`latitude`, `longitude`,
/// `speed` m/s, `heading` °; negative means unknown), and `odometer` in metres.
pub fn osmand_json(body: &[u8], reading: &Reading) -> Result<Batch> {
    let root = json(body)?;
    let device_id = root
        .get("device_id")
        .and_then(text_of)
        .ok_or_else(|| Error::invalid("no device_id in the JSON body"))?;
    let locations: Vec<&Value> = match root.get("location") {
        Some(Value::Array(items)) => items.iter().collect(),
        Some(one @ Value::Object(_)) => vec![one],
        _ => return Err(Error::invalid("no location object in the JSON body")),
    };
    let mut batch = Batch::default();
    for location in locations {
        let coords = location
            .get("coords")
            .ok_or_else(|| Error::invalid("a location without coords"))?;
        let coord = |name: &str| coords.get(name).and_then(Value::as_f64);
        let (Some(lat), Some(lon)) = (coord("latitude"), coord("longitude")) else {
            return Err(Error::invalid("coords without latitude and longitude"));
        };
        let (ts, ts_ms) = match location.get("timestamp") {
            Some(t) => time_of(t, "timestamp", reading)?,
            None => (reading.now, 0),
        };
        batch.fixes.push(
            reading.checked(Pushed {
                device_id: device_id.clone(),
                ts,
                ts_ms,
                lat,
                lon,
                speed_kmh: known(coord("speed")).map(|v| SpeedUnit::Mps.to_kmh(v)),
                heading_deg: known(coord("heading")),
                ignition: None,
                odometer_km: location
                    .get("odometer")
                    .and_then(Value::as_f64)
                    .map(|m| m / 1000.0),
            })?,
        );
    }
    Ok(batch)
}

/// Traccar's position forwarding (`forward.type=json`): `{"position": {...},
/// "device": {...}}`; the device is its `uniqueId` (what the tracker reports), the
/// time `fixTime`, `speed` in knots, `course` in degrees, and the attributes'
/// `ignition` and `odometer` (metres). A position Traccar marks invalid is ignored.
pub fn traccar_forward(body: &[u8], reading: &Reading) -> Result<Batch> {
    let root = json(body)?;
    let position = root
        .get("position")
        .ok_or_else(|| Error::invalid("no position object (Traccar's forward.type=json)"))?;
    let device_id = root
        .get("device")
        .and_then(|d| d.get("uniqueId"))
        .and_then(text_of)
        .ok_or_else(|| Error::invalid("no device.uniqueId in the forwarded position"))?;
    if position.get("valid").and_then(Value::as_bool) == Some(false) {
        return Ok(Batch {
            fixes: Vec::new(),
            ignored: vec![format!(
                "device {device_id}: a position Traccar marks invalid"
            )],
        });
    }
    let field = |name: &str| position.get(name).and_then(Value::as_f64);
    let (Some(lat), Some(lon)) = (field("latitude"), field("longitude")) else {
        return Err(Error::invalid("a position without latitude and longitude"));
    };
    let time = position
        .get("fixTime")
        .or_else(|| position.get("deviceTime"))
        .ok_or_else(|| Error::invalid("a position without fixTime"))?;
    let (ts, ts_ms) = time_of(time, "fixTime", reading)?;
    let attributes = position.get("attributes");
    let attribute = |name: &str| attributes.and_then(|a| a.get(name));
    let fix = Pushed {
        device_id,
        ts,
        ts_ms,
        lat,
        lon,
        speed_kmh: known(field("speed")).map(|v| SpeedUnit::Knots.to_kmh(v)),
        heading_deg: known(field("course")),
        ignition: attribute("ignition").and_then(Value::as_bool),
        odometer_km: attribute("odometer")
            .and_then(Value::as_f64)
            .map(|m| m / 1000.0),
    };
    Ok(Batch {
        fixes: vec![reading.checked(fix)?],
        ignored: Vec::new(),
    })
}

/// OwnTracks' HTTP mode: one JSON message (or an array of them); a `location`
/// gives `lat`, `lon`, `tst` (epoch s), `vel` (km/h), `cog` (°); the device is its
/// `topic` (`owntracks/user/device`), else its `tid`. Other message types and empty
/// bodies carry no fix and are ignored, as OwnTracks expects.
pub fn owntracks(body: &[u8], reading: &Reading) -> Result<Batch> {
    let mut batch = Batch::default();
    if body.iter().all(u8::is_ascii_whitespace) {
        batch.ignored.push("an empty message".into());
        return Ok(batch);
    }
    let root = json(body)?;
    let messages: Vec<&Value> = match &root {
        Value::Array(items) => items.iter().collect(),
        one => vec![one],
    };
    for m in messages {
        let kind = m.get("_type").and_then(Value::as_str).unwrap_or("");
        if kind != "location" {
            batch.ignored.push(format!("an OwnTracks {kind:?} message"));
            continue;
        }
        let device_id = m
            .get("topic")
            .and_then(text_of)
            .or_else(|| m.get("tid").and_then(text_of))
            .ok_or_else(|| Error::invalid("a location without topic or tid"))?;
        let field = |name: &str| m.get(name).and_then(Value::as_f64);
        let (Some(lat), Some(lon)) = (field("lat"), field("lon")) else {
            return Err(Error::invalid("a location without lat and lon"));
        };
        let tst = m
            .get("tst")
            .ok_or_else(|| Error::invalid("a location without tst"))?;
        let (ts, ts_ms) = time_of(tst, "tst", reading)?;
        batch.fixes.push(reading.checked(Pushed {
            device_id,
            ts,
            ts_ms,
            lat,
            lon,
            speed_kmh: known(field("vel")),
            heading_deg: known(field("cog")),
            ignition: None,
            odometer_km: None,
        })?);
    }
    Ok(batch)
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_764_700_000; // 2025-12-02T18:26:40Z

    fn reading(zone: &FleetZone) -> Reading<'_> {
        Reading {
            zone,
            now: NOW,
            osmand_speed: SpeedUnit::Knots,
        }
    }

    #[test]
    fn traccar_clients_query_is_read_in_knots_and_the_osmand_apps_in_mps() {
        let zone = FleetZone::default();
        // As Traccar Client for Android sends it (its Position.java: m/s × 1.943844, knots).
        let q = "id=48241179&timestamp=1764699990&lat=14.6349&lon=-90.5069&speed=10.0&bearing=90.0&altitude=1500.0&accuracy=5.0&batt=80.0";
        let b = osmand_fields(&form_pairs(q), &reading(&zone)).unwrap();
        let f = &b.fixes[0];
        assert_eq!(
            (f.device_id.as_str(), f.ts, f.lat),
            ("48241179", 1_764_699_990, 14.6349)
        );
        assert!((f.speed_kmh.unwrap() - 18.52).abs() < 1e-9);
        assert_eq!(f.heading_deg, Some(90.0));
        let mps = Reading {
            osmand_speed: SpeedUnit::Mps,
            ..reading(&zone)
        };
        let f = &osmand_fields(&form_pairs(q), &mps).unwrap().fixes[0];
        assert!((f.speed_kmh.unwrap() - 36.0).abs() < 1e-9);
        // location=lat,lon, a local time in the fleet's zone, milliseconds.
        let q = "deviceid=a%20b&location=14.6%2C-90.5&timestamp=2025-12-02+12%3A00%3A00";
        let f = &osmand_fields(&form_pairs(q), &reading(&zone))
            .unwrap()
            .fixes[0];
        assert_eq!(f.device_id, "a b");
        assert_eq!(f.ts, 1_764_698_400); // 12:00 in Guatemala is 18:00 UTC
        let f = &osmand_fields(
            &form_pairs("id=x&lat=1&lon=2&timestamp=1764699990123"),
            &reading(&zone),
        )
        .unwrap()
        .fixes[0];
        assert_eq!((f.ts, f.ts_ms), (1_764_699_990, 123));
    }

    #[test]
    fn bad_fields_are_refused_with_the_field_named() {
        let zone = FleetZone::default();
        let refused = |q: &str| {
            osmand_fields(&form_pairs(q), &reading(&zone))
                .unwrap_err()
                .to_string()
        };
        assert!(refused("lat=1&lon=2").contains("device id"));
        assert!(refused("id=x&lat=abc&lon=2").contains("lat \"abc\""));
        assert!(refused("id=x&lat=91&lon=2").contains("not a place"));
        assert!(refused("id=x&lat=0&lon=0").contains("no position yet"));
        assert!(refused("id=x&lat=1&lon=2&timestamp=yesterday").contains("timestamp"));
        assert!(refused("id=x&lat=1&lon=2&timestamp=1764709999").contains("ahead"));
        assert!(refused("id=x&lon=2").contains("no position"));
        let invalid = osmand_fields(&form_pairs("id=x&lat=1&lon=2&valid=false"), &reading(&zone));
        assert!(invalid.unwrap().fixes.is_empty());
    }

    #[test]
    fn traccar_client_9_json_is_read_in_mps() {
        let zone = FleetZone::default();
        let body = br#"{"location":{"timestamp":"2025-12-02T18:26:00.000Z","coords":{"latitude":14.6,"longitude":-90.5,"accuracy":5,"speed":10,"heading":-1,"altitude":1500},"is_moving":true,"odometer":12345,"event":"motionchange","battery":{"level":0.8,"is_charging":false},"activity":{"type":"in_vehicle"},"extras":{}},"device_id":"48241179"}"#;
        let b = osmand_json(body, &reading(&zone)).unwrap();
        let f = &b.fixes[0];
        assert_eq!(
            (f.ts, f.speed_kmh, f.heading_deg),
            (1_764_699_960, Some(36.0), None)
        );
        assert_eq!(f.odometer_km, Some(12.345));
    }

    #[test]
    fn traccar_forwarding_is_read_in_knots_with_its_offsets() {
        let zone = FleetZone::default();
        let body = br#"{"position":{"id":1,"attributes":{"ignition":true,"odometer":5000.0,"motion":true},"deviceId":3,"protocol":"osmand","serverTime":"2025-12-02T18:26:01.000+0000","deviceTime":"2025-12-02T18:26:00.000+0000","fixTime":"2025-12-02T18:26:00.000+0000","valid":true,"latitude":14.6,"longitude":-90.5,"altitude":0.0,"speed":10.0,"course":180.0,"accuracy":0.0},"device":{"id":3,"name":"Truck 7","uniqueId":"860000000000001","status":"online"}}"#;
        let f = &traccar_forward(body, &reading(&zone)).unwrap().fixes[0];
        assert_eq!(f.device_id, "860000000000001");
        assert_eq!(
            (f.ts, f.ignition, f.odometer_km),
            (1_764_699_960, Some(true), Some(5.0))
        );
        assert!((f.speed_kmh.unwrap() - 18.52).abs() < 1e-9);
    }

    #[test]
    fn owntracks_locations_are_kept_and_other_messages_ignored() {
        let zone = FleetZone::default();
        let body = br#"{"_type":"location","tid":"JJ","tst":1764699960,"lat":14.6,"lon":-90.5,"acc":10,"alt":1500,"vel":42,"cog":270,"batt":80,"t":"u","topic":"owntracks/jane/phone"}"#;
        let f = &owntracks(body, &reading(&zone)).unwrap().fixes[0];
        assert_eq!(f.device_id, "owntracks/jane/phone");
        assert_eq!((f.speed_kmh, f.heading_deg), (Some(42.0), Some(270.0)));
        let card = owntracks(br#"{"_type":"card","name":"Jane"}"#, &reading(&zone)).unwrap();
        assert!(card.fixes.is_empty() && card.ignored.len() == 1);
        assert!(owntracks(b"", &reading(&zone)).unwrap().fixes.is_empty());
    }
}
