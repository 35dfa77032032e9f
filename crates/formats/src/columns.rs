//! Which column holds which field: well-known names (case, spaces, `_` and `-`
//! ignored), unit suffixes (`speed_kmh`, `odometer_m`), and the user's `--map`.

use fleetctl_core::error::{Error, Result};
use fleetctl_core::ingest::{OdometerUnit, SpeedUnit};

/// A field of a position.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Field {
    /// The vehicle.
    Plate,
    /// The fix's time.
    Time,
    /// Latitude.
    Lat,
    /// Longitude.
    Lon,
    /// Ground speed.
    Speed,
    /// Heading.
    Heading,
    /// Ignition.
    Ignition,
    /// Odometer.
    Odometer,
}

impl Field {
    /// Every field.
    pub const ALL: [Field; 8] = [
        Field::Plate,
        Field::Time,
        Field::Lat,
        Field::Lon,
        Field::Speed,
        Field::Heading,
        Field::Ignition,
        Field::Odometer,
    ];

    /// The field's name in `--map FIELD=COLUMN`.
    pub fn as_str(self) -> &'static str {
        match self {
            Field::Plate => "plate",
            Field::Time => "time",
            Field::Lat => "lat",
            Field::Lon => "lon",
            Field::Speed => "speed",
            Field::Heading => "heading",
            Field::Ignition => "ignition",
            Field::Odometer => "odometer",
        }
    }

    /// The column names that mean this field, best first (normalised: lower case,
    /// no spaces, `_` or `-`). docs/import.md's "Columns" table lists the same.
    pub fn known_names(self) -> &'static [&'static str] {
        match self {
            Field::Plate => &[
                "plate",
                "vehicle",
                "vehicleid",
                "device",
                "deviceid",
                "uniqueid",
                "name",
                "unit",
                "imei",
            ],
            Field::Time => &[
                "time",
                "timestamp",
                "fixtime",
                "devicetime",
                "datetime",
                "ts",
            ],
            Field::Lat => &["lat", "latitude"],
            Field::Lon => &["lon", "lng", "long", "longitude"],
            Field::Speed => &["speed"],
            Field::Heading => &["course", "heading", "bearing"],
            Field::Ignition => &["ignition", "acc"],
            // Not Traccar's `totalDistance`: its server's own sum of the straight lines
            // between positions (gaps included), not a device odometer.
            Field::Odometer => &["odometer", "mileage"],
        }
    }
}

/// A column name as matched: lower case, without spaces, `_` and `-`.
pub fn normalise(name: &str) -> String {
    name.chars()
        .filter(|c| !matches!(c, ' ' | '_' | '-' | '\t'))
        .flat_map(char::to_lowercase)
        .collect()
}

/// Parses `--map FIELD=COLUMN`.
pub fn parse_map(text: &str) -> Result<(Field, String)> {
    let names = Field::ALL.map(Field::as_str).join(", ");
    let (field, column) = text.split_once('=').ok_or_else(|| {
        Error::invalid(format!("--map {text:?} is not FIELD=COLUMN")).with_hint(format!(
            "e.g. --map plate=unit_name; FIELD is one of {names}"
        ))
    })?;
    let field = Field::ALL
        .into_iter()
        .find(|f| f.as_str().eq_ignore_ascii_case(field.trim()))
        .ok_or_else(|| {
            Error::invalid(format!("--map: {field:?} is not a field"))
                .with_hint(format!("FIELD is one of {names}"))
        })?;
    Ok((field, column.trim().to_string()))
}

/// The columns a file's header gives each field, and the units its names say.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ColumnMap {
    /// Column index per field.
    pub index: std::collections::BTreeMap<Field, usize>,
    /// A speed unit named by the speed column (`speed_kmh`).
    pub speed_unit: Option<SpeedUnit>,
    /// An odometer unit named by the odometer column (`odometer_km`).
    pub odometer_unit: Option<OdometerUnit>,
    /// A `date` column beside a time column that holds only the time of day.
    pub date_index: Option<usize>,
    /// The time column's name says UTC (`time_utc`, `timestamp_utc`, `fix_time_z`):
    /// its naive times are UTC, not the fleet's local time.
    pub time_utc: bool,
    /// The plate column holds device ids (`deviceId`, `uniqueId`, `imei`): the
    /// vehicles it adds are known by them to the live feed.
    pub plate_is_device_id: bool,
}

impl ColumnMap {
    /// Maps a header: `--map` entries first (by exact name, case ignored), then the
    /// well-known names, each field's best match winning. A `--map` naming a column
    /// the file does not have is an error that lists the columns.
    pub fn from_header(header: &[String], overrides: &[(Field, String)]) -> Result<ColumnMap> {
        let mut map = ColumnMap::default();
        for (field, column) in overrides {
            let i = header
                .iter()
                .position(|h| h.trim().eq_ignore_ascii_case(column))
                .ok_or_else(|| {
                    Error::invalid(format!(
                        "--map {}={column}: the file has no column {column:?}",
                        field.as_str()
                    ))
                    .with_hint(format!("its columns are: {}", header.join(", ")))
                })?;
            map.index.insert(*field, i);
        }
        for field in Field::ALL {
            if map.index.contains_key(&field) {
                continue;
            }
            let mut best: Option<(usize, usize, Option<&str>)> = None;
            for (i, name) in header.iter().enumerate() {
                if map.index.values().any(|&taken| taken == i) {
                    continue;
                }
                let Some((rank, unit)) = match_name(field, name) else {
                    continue;
                };
                if best.is_none_or(|(r, _, _)| rank < r) {
                    best = Some((rank, i, unit));
                }
            }
            if let Some((_, i, unit)) = best {
                map.index.insert(field, i);
                match field {
                    Field::Speed => map.speed_unit = unit.and_then(SpeedUnit::parse),
                    Field::Odometer => map.odometer_unit = unit.and_then(OdometerUnit::parse),
                    _ => {}
                }
            }
        }
        map.time_utc = map
            .index
            .get(&Field::Time)
            .is_some_and(|&i| says_utc(&header[i]));
        map.plate_is_device_id = map.index.get(&Field::Plate).is_some_and(|&i| {
            matches!(
                normalise(&header[i]).as_str(),
                "deviceid" | "uniqueid" | "imei"
            )
        });
        map.date_index = header
            .iter()
            .position(|h| matches!(normalise(h).as_str(), "date" | "gpsdate" | "day"))
            .filter(|i| !map.index.values().any(|taken| taken == i));
        Ok(map)
    }

    /// The fields found that the import needs but the file lacks (time, lat, lon).
    pub fn missing_required(&self) -> Vec<Field> {
        [Field::Time, Field::Lat, Field::Lon]
            .into_iter()
            .filter(|f| !self.index.contains_key(f))
            .collect()
    }
}

/// A time column whose name says its naive times are UTC: it ends in `utc` or `gmt`
/// (`time_utc`, `Time (UTC)`, `timestamp GMT`), or in a separate `z` (`fix_time_z`).
fn says_utc(name: &str) -> bool {
    let lower = name.trim().to_lowercase();
    let key: String = normalise(&lower)
        .chars()
        .filter(|c| !matches!(c, '(' | ')' | '[' | ']'))
        .collect();
    key.ends_with("utc")
        || key.ends_with("gmt")
        || [" z", "_z", "-z", "(z)", "[z]"]
            .iter()
            .any(|s| lower.ends_with(s))
}

/// How well a column name means `field`: its rank in the known names, and the unit
/// suffix it carries (`speed_kmh` → `kmh`, `odometer (km)` → `km`).
fn match_name(field: Field, name: &str) -> Option<(usize, Option<&'static str>)> {
    let key = normalise(name);
    // Suffixes that say a unit (or, for times, the zone: `time_utc`, as `fleetctl
    // export` writes; the cells carry their offset anyway).
    let units: &[&'static str] = match field {
        Field::Speed => &["kmh", "kph", "knots", "kn", "mps", "mph"],
        Field::Odometer => &["km", "mi", "m"],
        Field::Heading => &["deg", "degrees"],
        Field::Time => &["utc", "gmt", "z"],
        _ => &[],
    };
    for (rank, known) in field.known_names().iter().enumerate() {
        if key == *known {
            return Some((rank, None));
        }
        let Some(rest) = key.strip_prefix(known) else {
            continue;
        };
        let rest = rest
            .trim_start_matches('(')
            .trim_end_matches(')')
            .replace('/', "");
        if let Some(unit) = units.iter().find(|u| **u == rest) {
            return Some((rank, Some(unit)));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn well_known_names_and_unit_suffixes_are_found() {
        let h = header(&[
            "Device ID",
            "Fix Time",
            "Latitude",
            "LNG",
            "speed_knots",
            "Bearing",
            "ACC",
            "odometer_m",
            "notes",
        ]);
        let m = ColumnMap::from_header(&h, &[]).unwrap();
        assert_eq!(m.index[&Field::Plate], 0);
        assert_eq!(m.index[&Field::Time], 1);
        assert_eq!(m.index[&Field::Lat], 2);
        assert_eq!(m.index[&Field::Lon], 3);
        assert_eq!(m.index[&Field::Speed], 4);
        assert_eq!(m.speed_unit, Some(SpeedUnit::Knots));
        assert_eq!(m.index[&Field::Heading], 5);
        assert_eq!(m.index[&Field::Ignition], 6);
        assert_eq!(m.odometer_unit, Some(OdometerUnit::M));
        assert!(m.missing_required().is_empty());
        let m = ColumnMap::from_header(&header(&["speed (km/h)", "odometer_km"]), &[]).unwrap();
        assert_eq!(m.speed_unit, Some(SpeedUnit::Kmh));
        assert_eq!(m.odometer_unit, Some(OdometerUnit::Km));
        assert_eq!(
            m.missing_required(),
            vec![Field::Time, Field::Lat, Field::Lon]
        );
        // What `fleetctl export positions` writes reads back.
        let exported = header(&[
            "plate",
            "date",
            "time_utc",
            "lat",
            "lon",
            "speed_kmh",
            "speed_derived",
            "heading_deg",
            "ignition",
            "odometer_km",
        ]);
        let m = ColumnMap::from_header(&exported, &[]).unwrap();
        assert_eq!(
            [Field::Time, Field::Speed, Field::Heading, Field::Odometer].map(|f| m.index[&f]),
            [2, 5, 7, 9]
        );
        assert_eq!(m.date_index, Some(1));
    }

    #[test]
    fn the_best_name_wins_and_map_overrides() {
        let h = header(&["deviceTime", "fixTime", "unit", "plate", "y", "x"]);
        let m = ColumnMap::from_header(&h, &[]).unwrap();
        assert_eq!(m.index[&Field::Time], 1, "fixTime before deviceTime");
        assert_eq!(m.index[&Field::Plate], 3, "plate before unit");
        let over = [parse_map("lat=Y").unwrap(), parse_map("LON = x").unwrap()];
        let m = ColumnMap::from_header(&h, &over).unwrap();
        assert_eq!((m.index[&Field::Lat], m.index[&Field::Lon]), (4, 5));
        let err = ColumnMap::from_header(&h, &[parse_map("speed=v").unwrap()]).unwrap_err();
        assert!(err.message.contains("no column \"v\""), "{err:?}");
        assert!(err.hint.unwrap().contains("deviceTime, fixTime"));
        assert!(parse_map("colour=x").is_err());
        assert!(parse_map("plate").is_err());
    }

    #[test]
    fn a_time_column_named_for_utc_holds_utc() {
        for (name, utc) in [
            ("time_utc", true),
            ("Time (UTC)", true),
            ("timestamp GMT", true),
            ("fix_time_z", true),
            ("time", false),
            ("Timestamp", false),
            ("fixtime", false),
        ] {
            let m = ColumnMap::from_header(&header(&[name, "lat", "lon"]), &[]).unwrap();
            assert_eq!(m.time_utc, utc, "{name}");
        }
        let mapped = ColumnMap::from_header(
            &header(&["GPS Time (UTC)", "lat", "lon"]),
            &[(Field::Time, "GPS Time (UTC)".into())],
        )
        .unwrap();
        assert!(mapped.time_utc);
    }

    #[test]
    fn a_plate_column_named_for_devices_holds_device_ids() {
        for (name, device) in [
            ("deviceId", true),
            ("uniqueId", true),
            ("IMEI", true),
            ("plate", false),
            ("device", false),
            ("name", false),
        ] {
            let m = ColumnMap::from_header(&header(&[name, "time", "lat", "lon"]), &[]).unwrap();
            assert_eq!(m.index[&Field::Plate], 0, "{name}");
            assert_eq!(m.plate_is_device_id, device, "{name}");
        }
    }
}
