//! How a fix is kept in `positions`: one integer key for the vehicle and the
//! instant, and fixed-point integers for the figures, speed, heading, ignition and
//! whether the speed was derived packed into one (`motion`). SQLite stores an integer
//! in as few bytes as its value needs and spends a byte of each row's header per
//! column, so a fix takes about 31 bytes where eight-byte floats and a separate key
//! took 67 (docs/architecture.md, "How positions are kept"), and the table is the
//! rowid b-tree itself: a vehicle's range is one key range, and fixes written in key
//! order fill their pages.
//!
//! What a fix keeps (the store's precision, applied on the way in, so that every
//! reader, batch or live, sees the same values): latitude and longitude to 1e-7°
//! (1.1 cm), speed to 0.01 km/h, heading to 0.1°, the odometer to the metre.

use crate::error::{Error, Result};
use crate::model::Fix;

/// Bits of the key below the vehicle id: the UTC epoch milliseconds.
const TIME_BITS: u32 = 42;
const TIME_MASK: i64 = (1 << TIME_BITS) - 1;

/// The first instant a key holds, UTC epoch seconds: 1970-01-01.
pub const FIRST_TS: i64 = 0;
/// The last instant a key holds, UTC epoch seconds: 2109-05-15.
pub const LAST_TS: i64 = TIME_MASK / 1000 - 1;

/// The largest vehicle id a key holds.
const MAX_VEHICLE_ID: i64 = (1 << (63 - TIME_BITS)) - 1;

/// The columns a fix is read from, in `position_from_row`'s order.
pub(crate) const COLUMNS: &str = "vehicle_time, lat_e7, lon_e7, motion, odometer_m";

const INSERTED_COLUMNS: usize = 5;

/// `motion`, from its lowest bit up: 1 bit, the speed was derived; 2 bits, the
/// ignition (0 not reported, 1 off, 2 on); 12 bits, the heading × 10 (4095: unknown);
/// the rest, the speed × 100. A stopped vehicle's fix packs into 2 bytes, a moving
/// one's into 4 (below 655.36 km/h).
const IGNITION_SHIFT: u32 = 1;
const HEADING_SHIFT: u32 = 3;
const SPEED_SHIFT: u32 = 15;
const HEADING_UNKNOWN: i64 = 4095;

/// `INTO positions (…) VALUES (…), …` for `rows` rows, bound by [`Stored::bind`]
/// (after `INSERT` or `INSERT OR IGNORE`).
pub(crate) fn insert_sql(rows: usize) -> String {
    let one = format!("({})", ["?"; INSERTED_COLUMNS].join(","));
    format!(
        "INTO positions ({COLUMNS}) VALUES {}",
        vec![one; rows].join(",")
    )
}

/// The key of a vehicle's fix at `ts` s and `ts_ms` ms: vehicle_id × 2^42 + UTC epoch
/// milliseconds, so that keys sort by vehicle, then time.
pub fn key(vehicle_id: i64, ts: i64, ts_ms: i64) -> Result<i64> {
    if !(0..=MAX_VEHICLE_ID).contains(&vehicle_id) {
        return Err(Error::internal(format!(
            "vehicle id {vehicle_id} is beyond what the positions' key holds (0..={MAX_VEHICLE_ID})"
        )));
    }
    check_time(ts)?;
    Ok((vehicle_id << TIME_BITS) | (ts * 1000 + ts_ms.clamp(0, 999)))
}

/// Refuses an instant the positions' key cannot hold (before 1970 or after 2109).
pub fn check_time(ts: i64) -> Result<()> {
    if (FIRST_TS..=LAST_TS).contains(&ts) {
        Ok(())
    } else {
        Err(Error::invalid(format!(
            "time {ts} (UTC epoch seconds) is outside 1970-01-01 .. 2109-05-15, the instants a fleet database keeps"
        )))
    }
}

/// The keys of a vehicle's fixes in `[from_ts, to_ts)`, as `[from, to)`; times
/// outside what a key holds are brought to its bounds.
pub fn key_range(vehicle_id: i64, from_ts: i64, to_ts: i64) -> (i64, i64) {
    let at = |ts: i64| (vehicle_id << TIME_BITS) | (ts.clamp(FIRST_TS, LAST_TS + 1) * 1000);
    (at(from_ts), at(to_ts))
}

/// All the keys of a vehicle's fixes, as `[from, to)`.
pub fn vehicle_range(vehicle_id: i64) -> (i64, i64) {
    (vehicle_id << TIME_BITS, (vehicle_id + 1) << TIME_BITS)
}

/// A key's vehicle and UTC epoch milliseconds.
pub(crate) fn split_key(key: i64) -> (i64, i64) {
    (key >> TIME_BITS, key & TIME_MASK)
}

/// SQL: the UTC epoch seconds of the key `key` (an SQL expression).
pub(crate) fn ts_of_key_sql(key: &str) -> String {
    format!("((({key}) & {TIME_MASK}) / 1000)")
}

/// SQL: the first key of the vehicle `vehicle_id` (an SQL expression).
pub(crate) fn first_key_sql(vehicle_id: &str) -> String {
    format!("(({vehicle_id}) << {TIME_BITS})")
}

/// The fastest speed a fix may report: no road vehicle goes faster, and a tracker
/// that says so is wrong (often a unit: knots read as km/h only doubles a speed).
/// The packed `motion` column itself holds up to about 2.8 × 10^12 km/h.
pub const MAX_SPEED_KMH: f64 = 1_000.0;

/// The largest odometer a fix may report: a truck's life is a few million km.
pub const MAX_ODOMETER_KM: f64 = 10_000_000.0;

/// Checks a fix's figures against their real ranges, naming the field and the range:
/// lat −90..=90, lon −180..=180, speed 0..=[`MAX_SPEED_KMH`], heading 0..=360,
/// odometer 0..=[`MAX_ODOMETER_KM`]. Every way in (import, the three device
/// protocols) checks this before a fix is stored, and [`Stored::of`] once more, so
/// that no value is ever kept wrapped or cut.
pub fn check_figures(
    lat: f64,
    lon: f64,
    speed_kmh: Option<f64>,
    heading_deg: Option<f64>,
    odometer_km: Option<f64>,
) -> Result<()> {
    let outside = |field: &str, value: f64, range: &str| {
        Err(Error::invalid(format!(
            "{field} {value} is outside {range}, the values a fix can have"
        )))
    };
    if !(-90.0..=90.0).contains(&lat) {
        return outside("lat", lat, "-90..=90");
    }
    if !(-180.0..=180.0).contains(&lon) {
        return outside("lon", lon, "-180..=180");
    }
    if let Some(v) = speed_kmh.filter(|v| !(0.0..=MAX_SPEED_KMH).contains(v)) {
        return outside("speed_kmh", v, "0..=1000 km/h");
    }
    if let Some(v) = heading_deg.filter(|v| !(0.0..=360.0).contains(v)) {
        return outside("heading", v, "0..=360°");
    }
    if let Some(v) = odometer_km.filter(|v| !(0.0..=MAX_ODOMETER_KM).contains(v)) {
        return outside("odometer_km", v, "0..=10,000,000 km");
    }
    Ok(())
}

/// A fix at the store's precision, as its columns hold it (`motion` unpacked).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stored {
    pub vehicle_time: i64,
    pub lat_e7: i64,
    pub lon_e7: i64,
    pub speed_kmh_e2: i64,
    pub speed_derived: bool,
    pub heading_deg_e1: Option<i64>,
    pub ignition: Option<bool>,
    pub odometer_m: Option<i64>,
}

/// A latitude or longitude as the store keeps it: × 10^7, to the nearest integer.
pub(crate) fn e7(degrees: f64) -> i64 {
    fixed(degrees, 1e7)
}

/// Degrees from a coordinate kept × 10^7 ([`e7`]'s inverse).
pub(crate) fn degrees(e7: i64) -> f64 {
    e7 as f64 / 1e7
}

/// `x × scale`, to the nearest integer (halves away from zero).
fn fixed(x: f64, scale: f64) -> i64 {
    (x * scale).round() as i64
}

impl Stored {
    /// A fix and its milliseconds past the second, as stored.
    pub fn of(fix: &Fix, ts_ms: i64) -> Result<Stored> {
        check_figures(
            fix.lat,
            fix.lon,
            Some(fix.speed_kmh),
            fix.heading_deg,
            fix.odometer_km,
        )?;
        Ok(Stored {
            vehicle_time: key(fix.vehicle_id, fix.ts, ts_ms)?,
            lat_e7: e7(fix.lat),
            lon_e7: e7(fix.lon),
            speed_kmh_e2: fixed(fix.speed_kmh, 1e2),
            speed_derived: fix.speed_derived,
            heading_deg_e1: fix.heading_deg.map(|h| fixed(h, 1e1)),
            ignition: fix.ignition,
            odometer_m: fix.odometer_km.map(|km| fixed(km, 1e3)),
        })
    }

    /// The fix these columns give back, and its milliseconds past the second.
    pub fn fix(&self) -> (Fix, i64) {
        let ms = self.vehicle_time & TIME_MASK;
        let fix = Fix {
            vehicle_id: self.vehicle_time >> TIME_BITS,
            ts: ms / 1000,
            lat: degrees(self.lat_e7),
            lon: degrees(self.lon_e7),
            speed_kmh: self.speed_kmh_e2 as f64 / 1e2,
            speed_derived: self.speed_derived,
            heading_deg: self.heading_deg_e1.map(|h| h as f64 / 1e1),
            ignition: self.ignition,
            odometer_km: self.odometer_m.map(|m| m as f64 / 1e3),
        };
        (fix, ms % 1000)
    }

    /// The vehicle of the key.
    pub(crate) fn vehicle_id(&self) -> i64 {
        self.vehicle_time >> TIME_BITS
    }

    /// The instant of the key, UTC epoch milliseconds.
    pub(crate) fn instant_ms(&self) -> i64 {
        self.vehicle_time & TIME_MASK
    }

    /// The `motion` column: speed, heading, ignition and the derived-speed flag.
    pub(crate) fn motion(&self) -> i64 {
        let heading = self.heading_deg_e1.unwrap_or(HEADING_UNKNOWN);
        let ignition = match self.ignition {
            None => 0,
            Some(false) => 1,
            Some(true) => 2,
        };
        (self.speed_kmh_e2 << SPEED_SHIFT)
            | (heading << HEADING_SHIFT)
            | (ignition << IGNITION_SHIFT)
            | i64::from(self.speed_derived)
    }

    /// Binds these columns as row `row` of an [`insert_sql`] statement.
    pub(crate) fn bind(&self, st: &mut rusqlite::Statement, row: usize) -> rusqlite::Result<()> {
        let at = row * INSERTED_COLUMNS;
        st.raw_bind_parameter(at + 1, self.vehicle_time)?;
        st.raw_bind_parameter(at + 2, self.lat_e7)?;
        st.raw_bind_parameter(at + 3, self.lon_e7)?;
        st.raw_bind_parameter(at + 4, self.motion())?;
        st.raw_bind_parameter(at + 5, self.odometer_m)
    }

    pub(crate) fn from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Stored> {
        Ok(Stored::from_columns(
            r.get(0)?,
            r.get(1)?,
            r.get(2)?,
            r.get(3)?,
            r.get(4)?,
        ))
    }

    /// PostgreSQL's columns (the vehicle and its milliseconds apart), `motion` unpacked.
    pub(crate) fn from_parts(
        vehicle_id: i64,
        ts_ms: i64,
        lat_e7: i64,
        lon_e7: i64,
        motion: i64,
        odometer_m: Option<i64>,
    ) -> Stored {
        Stored::from_columns(
            (vehicle_id << TIME_BITS) | ts_ms,
            lat_e7,
            lon_e7,
            motion,
            odometer_m,
        )
    }

    /// The columns of [`COLUMNS`], `motion` unpacked.
    fn from_columns(
        vehicle_time: i64,
        lat_e7: i64,
        lon_e7: i64,
        motion: i64,
        odometer_m: Option<i64>,
    ) -> Stored {
        let heading = (motion >> HEADING_SHIFT) & HEADING_UNKNOWN;
        Stored {
            vehicle_time,
            lat_e7,
            lon_e7,
            speed_kmh_e2: motion >> SPEED_SHIFT,
            speed_derived: motion & 1 == 1,
            heading_deg_e1: (heading != HEADING_UNKNOWN).then_some(heading),
            ignition: match (motion >> IGNITION_SHIFT) & 3 {
                1 => Some(false),
                2 => Some(true),
                _ => None,
            },
            odometer_m,
        }
    }
}

/// A fix as a reader of the store will see it: at the store's precision.
pub fn as_stored(fix: &Fix) -> Result<Fix> {
    Ok(Stored::of(fix, 0)?.fix().0)
}

/// Reads a fix (and its milliseconds) from a row of [`COLUMNS`].
pub(crate) fn from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<(Fix, i64)> {
    Stored::from_row(r).map(|s| s.fix())
}

/// Reads a fix (and its milliseconds) from a row of the columns [`columns`] names,
/// on either backend.
pub(crate) fn from_sql_row(r: &dyn super::sql::Row) -> Result<(Fix, i64)> {
    Ok(Stored::from_columns(r.int(0)?, r.int(1)?, r.int(2)?, r.int(3)?, r.opt_int(4)?).fix())
}

/// The columns a fix is read from on this backend, in [`from_sql_row`]'s order: in
/// PostgreSQL the vehicle and its milliseconds are two columns, put together here
/// into SQLite's key.
pub(crate) fn columns(dialect: super::sql::Dialect) -> String {
    match dialect {
        super::sql::Dialect::Sqlite => COLUMNS.to_string(),
        super::sql::Dialect::Postgres => format!(
            "(vehicle_id << {TIME_BITS}) | ts_ms AS vehicle_time, lat_e7, lon_e7, motion, odometer_m"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fix(vehicle_id: i64, ts: i64) -> Fix {
        Fix {
            vehicle_id,
            ts,
            lat: 14.626528,
            lon: -90.593236,
            speed_kmh: 37.8,
            speed_derived: false,
            heading_deg: Some(357.2),
            ignition: Some(true),
            odometer_km: Some(97831.157),
        }
    }

    #[test]
    fn a_fix_at_the_generators_precision_comes_back_bit_for_bit() {
        // The generator writes 1e-6°, 0.1 km/h, 0.1° and metres: all exact here, so a
        // generated database answers as it did with floating-point columns.
        let f = fix(7, 1_795_094_820);
        let (back, ms) = Stored::of(&f, 250).unwrap().fix();
        assert_eq!(back, f);
        assert_eq!(ms, 250);
    }

    #[test]
    fn keys_sort_by_vehicle_then_instant_and_ranges_hold_exactly_their_fixes() {
        let k = |v, ts, ms| key(v, ts, ms).unwrap();
        assert!(k(1, LAST_TS, 999) < k(2, 0, 0));
        assert!(k(2, 100, 999) < k(2, 101, 0));
        let (from, to) = key_range(2, 100, 101);
        assert!(from <= k(2, 100, 0) && k(2, 100, 999) < to && k(2, 101, 0) >= to);
        let (first, end) = vehicle_range(2);
        assert!(first <= k(2, 0, 0) && k(2, LAST_TS, 999) < end && end == k(3, 0, 0));
    }

    #[test]
    fn an_instant_or_vehicle_the_key_cannot_hold_is_refused() {
        assert!(key(1, -1, 0).is_err());
        assert!(key(1, LAST_TS + 1, 0).is_err());
        assert!(key(-1, 0, 0).is_err());
        assert!(key(MAX_VEHICLE_ID + 1, 0, 0).is_err());
        let said = check_time(-86_400).unwrap_err().to_string();
        assert!(said.contains("1970-01-01"), "{said}");
    }

    #[test]
    fn the_schemas_fixes_view_reads_what_the_store_reads() {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        conn.execute_batch(super::super::SCHEMA_SQL).unwrap();
        let mut f = fix(3, 1_795_094_835);
        f.heading_deg = None;
        f.ignition = None;
        let stored = Stored::of(&f, 480).unwrap();
        let mut insert = conn.prepare(&format!("INSERT {}", insert_sql(1))).unwrap();
        stored.bind(&mut insert, 0).unwrap();
        insert.raw_execute().unwrap();
        let through_view = conn
            .query_row(
                "SELECT vehicle_id, ts, lat, lon, speed_kmh, speed_derived, heading_deg, ignition, odometer_km, ts_ms FROM fixes",
                [],
                |r| Ok((super::super::fix_from_row(r)?, r.get::<_, i64>(9)?)),
            )
            .unwrap();
        let through_table = conn
            .query_row(&format!("SELECT {COLUMNS} FROM positions"), [], from_row)
            .unwrap();
        assert_eq!(through_view, through_table);
        assert_eq!(through_table, (f, 480));
    }

    #[test]
    fn every_speed_heading_and_ignition_comes_back_from_the_packed_motion() {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        conn.execute_batch(super::super::SCHEMA_SQL).unwrap();
        let mut insert = conn.prepare(&format!("INSERT {}", insert_sql(1))).unwrap();
        let mut written = Vec::new();
        for (i, (speed_kmh, heading_deg)) in [(0.0, Some(0.0)), (0.01, Some(360.0)), (999.99, None)]
            .into_iter()
            .enumerate()
        {
            for (j, ignition) in [None, Some(false), Some(true)].into_iter().enumerate() {
                for speed_derived in [false, true] {
                    let mut f = fix(
                        1,
                        1000 + 10 * i as i64 + 2 * j as i64 + i64::from(speed_derived),
                    );
                    (f.speed_kmh, f.heading_deg, f.ignition, f.speed_derived) =
                        (speed_kmh, heading_deg, ignition, speed_derived);
                    Stored::of(&f, 0).unwrap().bind(&mut insert, 0).unwrap();
                    insert.raw_execute().unwrap();
                    written.push(f);
                }
            }
        }
        let read: Vec<Fix> = conn
            .prepare(&format!(
                "SELECT {COLUMNS} FROM positions ORDER BY vehicle_time"
            ))
            .unwrap()
            .query_map([], |r| from_row(r).map(|(f, _)| f))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert_eq!(read, written);
        let through_view: Vec<Fix> = conn
            .prepare("SELECT vehicle_id, ts, lat, lon, speed_kmh, speed_derived, heading_deg, ignition, odometer_km FROM fixes ORDER BY ts")
            .unwrap()
            .query_map([], super::super::fix_from_row)
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert_eq!(through_view, written, "the fixes view unpacks it alike");
        let mut wrong = fix(1, 1000);
        wrong.heading_deg = Some(410.0);
        let said = Stored::of(&wrong, 0).unwrap_err().to_string();
        assert!(said.contains("heading 410"), "{said}");
    }

    /// Property: every fix within the real ranges, random and at each limit, comes
    /// back from the columns as stored (key, coordinates, packed `motion`, odometer),
    /// and every value past a limit is refused naming its field, never wrapped.
    #[test]
    fn the_packed_columns_round_trip_at_their_limits_and_refuse_past_them() {
        use rand::rngs::Xoshiro256PlusPlus;
        use rand::{RngExt, SeedableRng};
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(50);
        let edges = |lo: f64, hi: f64, r: f64| -> f64 {
            match (r * 10.0) as u32 {
                0 => lo,
                1 => hi,
                _ => lo + (hi - lo) * r,
            }
        };
        for _ in 0..20_000 {
            let f = Fix {
                vehicle_id: rng.random_range(0..=MAX_VEHICLE_ID),
                ts: edges(FIRST_TS as f64, LAST_TS as f64, rng.random()).round() as i64,
                lat: edges(-90.0, 90.0, rng.random()),
                lon: edges(-180.0, 180.0, rng.random()),
                speed_kmh: edges(0.0, MAX_SPEED_KMH, rng.random()),
                speed_derived: rng.random(),
                heading_deg: rng
                    .random::<bool>()
                    .then(|| edges(0.0, 360.0, rng.random())),
                ignition: [None, Some(false), Some(true)][rng.random_range(0..3)],
                odometer_km: rng
                    .random::<bool>()
                    .then(|| edges(0.0, MAX_ODOMETER_KM, rng.random())),
            };
            let ms = rng.random_range(0..1000);
            let kept = as_stored(&f).unwrap();
            let stored = Stored::of(&kept, ms).unwrap();
            let back = Stored::from_columns(
                stored.vehicle_time,
                stored.lat_e7,
                stored.lon_e7,
                stored.motion(),
                stored.odometer_m,
            );
            assert_eq!(back, stored, "{f:?}");
            assert_eq!(back.fix(), (kept, ms), "{f:?}");
            assert!((kept.speed_kmh - f.speed_kmh).abs() <= 0.005, "{f:?}");
        }
        let base = fix(1, 1000);
        let wrong: [(&str, Fix); 7] = [
            (
                "speed_kmh 1000.01",
                Fix {
                    speed_kmh: 1000.01,
                    ..base
                },
            ),
            (
                "speed_kmh 1852000000000000",
                Fix {
                    speed_kmh: 1e15 * 1.852,
                    ..base
                },
            ),
            (
                "speed_kmh -0.5",
                Fix {
                    speed_kmh: -0.5,
                    ..base
                },
            ),
            (
                "speed_kmh NaN",
                Fix {
                    speed_kmh: f64::NAN,
                    ..base
                },
            ),
            (
                "heading 409.4",
                Fix {
                    heading_deg: Some(409.4),
                    ..base
                },
            ),
            (
                "odometer_km -1",
                Fix {
                    odometer_km: Some(-1.0),
                    ..base
                },
            ),
            (
                "lat inf",
                Fix {
                    lat: f64::INFINITY,
                    ..base
                },
            ),
        ];
        for (field, f) in wrong {
            let said = Stored::of(&f, 0).unwrap_err().to_string();
            assert!(said.contains(field), "{field}: {said}");
        }
    }

    #[test]
    fn finer_figures_are_kept_to_the_stores_precision() {
        let mut f = fix(1, 1000);
        f.lat = 14.123456789;
        f.speed_kmh = 18.519999;
        f.odometer_km = Some(12.3456);
        let s = as_stored(&f).unwrap();
        assert_eq!(
            (s.lat, s.speed_kmh, s.odometer_km),
            (14.1234568, 18.52, Some(12.346))
        );
        assert_eq!(
            as_stored(&s).unwrap(),
            s,
            "stored once, stored again: the same"
        );
    }
}
