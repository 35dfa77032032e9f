//! Turning what people type into things in the store: dates against the data clock,
//! plates and names matched forgivingly. Ambiguity answers with the candidates;
//! nothing is ever a silent first pick.

use super::{Db, MAX_RANGE_DAYS};
use crate::clock::Date;
use crate::error::{Error, ErrorCode, Result};
use crate::geo::Geofence;
use crate::geo::LatLon;
use crate::model::Vehicle;
use serde::Serialize;
use std::collections::HashMap;

/// A date word before resolution.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum DateWord {
    /// The data clock's day.
    Today,
    /// The day before it.
    Yesterday,
    /// A calendar date.
    On(Date),
}

/// Parses `YYYY-MM-DD`, `today` or `yesterday` (any case).
pub fn parse_date_word(text: &str) -> Option<DateWord> {
    match text.trim().to_ascii_lowercase().as_str() {
        "today" => Some(DateWord::Today),
        "yesterday" => Some(DateWord::Yesterday),
        other => Date::parse(other).map(DateWord::On),
    }
}

/// Parses a local time of day `HH:MM` into seconds after midnight.
pub fn parse_hhmm(text: &str) -> Option<i64> {
    let (h, m) = text.trim().split_once(':')?;
    if h.len() != 2 || m.len() != 2 || !h.bytes().chain(m.bytes()).all(|b| b.is_ascii_digit()) {
        return None;
    }
    let (h, m): (i64, i64) = (h.parse().ok()?, m.parse().ok()?);
    (h < 24 && m < 60).then_some(h * 3600 + m * 60)
}

/// Parses a local instant: `YYYY-MM-DDTHH:MM` (a space may replace the `T`), or
/// `HH:MM` alone for that time on the data clock's day. Returns the date, if one was
/// given, and the seconds after local midnight.
pub fn parse_local_time(text: &str) -> Option<(Option<Date>, i64)> {
    let text = text.trim();
    if let Some(seconds) = parse_hhmm(text) {
        return Some((None, seconds));
    }
    if text.len() != 16 || !text.is_ascii() || !matches!(text.as_bytes()[10], b'T' | b't' | b' ') {
        return None;
    }
    Some((Some(Date::parse(&text[..10])?), parse_hhmm(&text[11..])?))
}

impl Db {
    /// Resolves a local instant (`YYYY-MM-DDTHH:MM`, or `HH:MM` on the data clock's
    /// day) to UTC epoch seconds; `None` means the data clock itself.
    pub fn resolve_time(&self, text: Option<&str>) -> Result<i64> {
        let Some(text) = text else {
            return Ok(self.now_ts);
        };
        let (date, seconds) = parse_local_time(text).ok_or_else(|| {
            Error::invalid(format!("time {text:?} is not understood")).with_hint(format!(
                "use YYYY-MM-DDTHH:MM or HH:MM (today), local time in {}",
                self.zone.name
            ))
        })?;
        Ok(self.zone.at(date.unwrap_or_else(|| self.today()), seconds))
    }

    /// Resolves a date word on the data clock; `None` means today.
    pub fn resolve_date(&self, text: Option<&str>) -> Result<Date> {
        let Some(text) = text else {
            return Ok(self.today());
        };
        match parse_date_word(text) {
            Some(DateWord::Today) => Ok(self.today()),
            Some(DateWord::Yesterday) => Ok(self.today().add_days(-1)),
            Some(DateWord::On(d)) => Ok(d),
            None => Err(Error::invalid(format!("date {text:?} is not understood"))
                .with_hint("use YYYY-MM-DD, today or yesterday")),
        }
    }

    /// Resolves an inclusive range; missing ends default to the last 7 days.
    pub fn resolve_range(&self, from: Option<&str>, to: Option<&str>) -> Result<(Date, Date)> {
        let to = self.resolve_date(to)?;
        let from = match from {
            Some(_) => self.resolve_date(from)?,
            None => to.add_days(-6),
        };
        if from > to {
            return Err(Error::invalid(format!("from {from} is after to {to}"))
                .with_hint("give from on or before to"));
        }
        let days = to.days_since_epoch() - from.days_since_epoch() + 1;
        if days > MAX_RANGE_DAYS {
            return Err(
                Error::invalid(format!("the range {from} to {to} spans {days} days"))
                    .with_hint(format!("ask for at most {MAX_RANGE_DAYS} days at a time")),
            );
        }
        Ok((from, to))
    }

    /// What a range report is asked for: its dates (see `resolve_range`), its
    /// vehicle if one is named, and where its cursor starts the page.
    pub fn resolve_scope(
        &self,
        from: Option<&str>,
        to: Option<&str>,
        plate: Option<&str>,
        cursor: Option<&str>,
    ) -> Result<(Date, Date, Option<&Vehicle>, super::Cursor)> {
        let (from, to) = self.resolve_range(from, to)?;
        let vehicle = plate.map(|p| self.resolve_plate(p)).transpose()?;
        Ok((from, to, vehicle, super::Cursor::parse(cursor)?))
    }

    /// Finds a vehicle by plate, ignoring case, spaces and dashes; a unique partial
    /// plate (`123BCD`) is accepted.
    pub fn resolve_plate(&self, text: &str) -> Result<&Vehicle> {
        let wanted = plate_key(text);
        if let Some(v) = self.vehicle_by_plate_key(&wanted) {
            return Ok(v);
        }
        let mut all: Vec<&Vehicle> = self.vehicles.iter().map(|(v, _)| v).collect();
        all.sort_by(|a, b| a.plate.cmp(&b.plate));
        let partial: Vec<&&Vehicle> = if wanted.len() >= 3 {
            all.iter()
                .filter(|v| plate_key(&v.plate).contains(&wanted))
                .collect()
        } else {
            vec![]
        };
        match partial.as_slice() {
            [one] => Ok(one),
            [] => Err(Error::new(
                ErrorCode::NotFound,
                format!("no vehicle with plate {text:?}"),
            )
            .with_hint(format!(
                "valid plates: {}",
                all.iter()
                    .map(|v| v.plate.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))),
            many => Err(Error::new(
                ErrorCode::Ambiguous,
                format!("plate {text:?} matches {} vehicles", many.len()),
            )
            .with_hint(format!(
                "candidates: {}",
                many.iter()
                    .map(|v| v.plate.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))),
        }
    }

    /// Finds a geofence by name, forgivingly.
    pub fn resolve_geofence(&self, text: &str) -> Result<&Geofence> {
        let names: Vec<&str> = self.geofences.iter().map(|g| g.name.as_str()).collect();
        let i = match_name(text, &names).map_err(|e| match e.code {
            ErrorCode::NotFound => {
                Error::new(ErrorCode::NotFound, format!("no geofence named {text:?}"))
                    .with_hint(format!("valid geofences: {}", names.join(", ")))
            }
            _ => e,
        })?;
        Ok(&self.geofences[i])
    }

    /// Resolves a place name through the geofences, then the places.
    pub fn resolve_place(&self, text: &str) -> Result<ResolvedPlace> {
        let names: Vec<&str> = self.places.iter().map(|c| c.name.as_str()).collect();
        let i = match_name(text, &names).map_err(|e| match e.code {
            ErrorCode::NotFound => Error::new(
                ErrorCode::NotFound,
                format!("no place named {text:?} in the geofences or the places"),
            )
            .with_hint("try a zone (\"Zona 10\"), a depot, a landmark, or give lat and lon"),
            _ => e,
        })?;
        Ok(self.places[i].clone())
    }
}

/// Every named place a name can resolve to: the geofences first, then the places
/// that are not also geofences.
pub fn place_candidates(
    geofences: &[Geofence],
    places: &[crate::geo::Place],
) -> Vec<ResolvedPlace> {
    let round5 = |x: f64| (x * 1e5).round() / 1e5;
    let mut candidates: Vec<ResolvedPlace> = geofences
        .iter()
        .map(|g| {
            let c = g.shape.center();
            ResolvedPlace {
                name: g.name.clone(),
                kind: g.kind.clone(),
                source: PlaceSource::Geofence,
                lat: round5(c.lat),
                lon: round5(c.lon),
            }
        })
        .collect();
    let taken: std::collections::HashSet<String> =
        candidates.iter().map(|c| fold(&c.name)).collect();
    for p in places.iter().filter(|p| !taken.contains(&fold(&p.name))) {
        candidates.push(ResolvedPlace {
            name: p.name.clone(),
            kind: p.kind.clone(),
            source: PlaceSource::Gazetteer,
            lat: p.lat,
            lon: p.lon,
        });
    }
    candidates
}

/// Where a resolved place came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PlaceSource {
    /// A geofence of the database.
    Geofence,
    /// One of the database's places (the demo's gazetteer, or a fleet's own).
    Gazetteer,
    /// Coordinates given by the caller.
    Coordinates,
}

/// A place a name resolved to.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct ResolvedPlace {
    /// The name chosen.
    pub name: String,
    /// Its kind (`depot`, `zone`, `landmark`, …).
    pub kind: String,
    /// Where it came from: `geofence`, `gazetteer` or `coordinates`.
    pub source: PlaceSource,
    /// Latitude.
    pub lat: f64,
    /// Longitude.
    pub lon: f64,
}

impl ResolvedPlace {
    /// The point.
    pub fn point(&self) -> LatLon {
        LatLon::new(self.lat, self.lon)
    }
}

/// Each vehicle's index by its plate's key; of two plates with one key, the first
/// in plate order (the one a look-up over the sorted plates found first).
pub(super) fn plate_keys(vehicles: &[(Vehicle, Option<String>)]) -> HashMap<String, usize> {
    let mut keys: HashMap<String, usize> = HashMap::with_capacity(vehicles.len());
    for (i, (vehicle, _)) in vehicles.iter().enumerate() {
        keys.entry(plate_key(&vehicle.plate))
            .and_modify(|kept| {
                if vehicle.plate < vehicles[*kept].0.plate {
                    *kept = i;
                }
            })
            .or_insert(i);
    }
    keys
}

fn plate_key(text: &str) -> String {
    text.chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .map(|c| c.to_ascii_uppercase())
        .collect()
}

/// Lower case, accents removed, punctuation as spaces, single-spaced.
pub fn fold(text: &str) -> String {
    let mapped: String = text
        .chars()
        .flat_map(char::to_lowercase)
        .map(|c| match c {
            'á' | 'à' | 'ä' | 'â' => 'a',
            'é' | 'è' | 'ë' | 'ê' => 'e',
            'í' | 'ì' | 'ï' | 'î' => 'i',
            'ó' | 'ò' | 'ö' | 'ô' => 'o',
            'ú' | 'ù' | 'ü' | 'û' => 'u',
            'ñ' => 'n',
            c if c.is_alphanumeric() => c,
            _ => ' ',
        })
        .collect();
    mapped.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Picks the one name `text` means: an exact (folded) match; else the only name in
/// which every word typed is a whole word; else the only name in which every word
/// typed starts a word (numbers always whole: "Zona 1" never means "Zona 18").
/// Several → `ambiguous` with the candidates.
pub fn match_name(text: &str, names: &[&str]) -> Result<usize> {
    let wanted = fold(text);
    if wanted.is_empty() {
        return Err(Error::invalid("an empty name").with_hint("type part of a name"));
    }
    let folded: Vec<String> = names.iter().map(|n| fold(n)).collect();
    if let Some(i) = folded.iter().position(|n| *n == wanted) {
        return Ok(i);
    }
    let words: Vec<&str> = wanted.split(' ').collect();
    let matches = |name: &str, partial: bool| {
        words.iter().all(|w| {
            let number = w.bytes().all(|b| b.is_ascii_digit());
            name.split(' ')
                .any(|nw| nw == *w || (partial && !number && nw.starts_with(w)))
                || (partial && !number && w.len() >= 4 && name.contains(w))
        })
    };
    let whole: Vec<usize> = (0..names.len())
        .filter(|&i| matches(&folded[i], false))
        .collect();
    let hits = if whole.is_empty() {
        (0..names.len())
            .filter(|&i| matches(&folded[i], true))
            .collect()
    } else {
        whole
    };
    match hits.as_slice() {
        [one] => Ok(*one),
        [] => Err(Error::new(
            ErrorCode::NotFound,
            format!("nothing named {text:?}"),
        )),
        many => Err(Error::new(
            ErrorCode::Ambiguous,
            format!("{text:?} matches {} names", many.len()),
        )
        .with_hint(format!(
            "candidates: {}",
            many.iter()
                .map(|&i| names[i])
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plates_key_names_the_first_vehicle_in_plate_order() {
        let vehicle = |id: i64, plate: &str| {
            let v = Vehicle {
                id,
                plate: plate.into(),
                kind: "van".into(),
                driver: String::new(),
                active: true,
            };
            (v, None)
        };
        // By id, as the store lists them; "P-123BCD" sorts before "P123BCD".
        let fleet = [
            vehicle(1, "P123BCD"),
            vehicle(2, "P-123BCD"),
            vehicle(3, "c-9 x"),
        ];
        let keys = plate_keys(&fleet);
        assert_eq!(keys.len(), 2);
        assert_eq!(keys[&plate_key("p 123-bcd")], 1);
        assert_eq!(keys[&plate_key("C9X")], 2);
    }

    #[test]
    fn local_instants_are_a_date_and_time_or_a_time_alone() {
        let d = Date::parse("2026-11-24");
        assert_eq!(parse_local_time("10:30"), Some((None, 37_800)));
        assert_eq!(parse_local_time("2026-11-24T10:30"), Some((d, 37_800)));
        assert_eq!(parse_local_time(" 2026-11-24 00:00 "), Some((d, 0)));
        for bad in [
            "",
            "9am",
            "24:00",
            "10:60",
            "2026-11-24",
            "2026-11-31T10:00",
            "2026-11-24X10:00",
            "2026-11-24T10:00:00",
            "tomorrow",
        ] {
            assert_eq!(parse_local_time(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn names_match_forgivingly_and_ambiguity_lists_candidates() {
        let names = [
            "Bodega Mixco",
            "Centro Histórico",
            "Zona 10 (Oakland)",
            "Zona 1",
            "Mixco",
        ];
        assert_eq!(match_name("centro historico", &names).unwrap(), 1);
        assert_eq!(match_name("CENTRO HISTÓRICO", &names).unwrap(), 1);
        assert_eq!(match_name("bodega", &names).unwrap(), 0);
        assert_eq!(
            match_name("mixco", &names).unwrap(),
            4,
            "an exact name beats a partial one"
        );
        assert_eq!(match_name("zona 1", &names).unwrap(), 3);
        assert_eq!(match_name("oakland", &names).unwrap(), 2);
        let e = match_name("zona", &names).unwrap_err();
        assert_eq!(e.code, ErrorCode::Ambiguous);
        assert!(e.hint.unwrap().contains("Zona 10 (Oakland), Zona 1"));
        assert_eq!(
            match_name("Petapa", &names).unwrap_err().code,
            ErrorCode::NotFound
        );
    }

    #[test]
    fn plates_ignore_case_spaces_and_dashes() {
        assert_eq!(plate_key("p-123 bcd"), "P123BCD");
        assert_eq!(plate_key("P123BCD"), "P123BCD");
    }

    #[test]
    fn date_words() {
        assert_eq!(parse_date_word("Today"), Some(DateWord::Today));
        assert_eq!(parse_date_word("yesterday"), Some(DateWord::Yesterday));
        assert!(matches!(
            parse_date_word("2026-11-24"),
            Some(DateWord::On(_))
        ));
        assert_eq!(parse_date_word("tomorrow"), None);
        assert_eq!(parse_date_word("2026-11-31"), None);
    }
}
