//! Units checked, not trusted: an import compares each file's speeds with the speeds
//! its positions imply, and its odometer with the path its positions draw, and names
//! the unit the figures agree with when it is not the one they were read in. The
//! units themselves (`SpeedUnit`, `OdometerUnit`, a file's `FileUnits`) are here too.

use crate::geo::{LatLon, haversine_m};
use crate::store::import::Staged;

/// The unit a source writes speeds in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpeedUnit {
    /// Kilometres per hour.
    Kmh,
    /// Knots (Traccar's unit).
    Knots,
    /// Metres per second (GPX extensions, phones).
    Mps,
    /// Miles per hour.
    Mph,
}

impl SpeedUnit {
    /// The names `--speed-unit` accepts.
    pub const NAMES: &'static str = "kmh, knots, mps, mph";

    /// Reads a unit name.
    pub fn parse(text: &str) -> Option<SpeedUnit> {
        match text.trim().to_ascii_lowercase().as_str() {
            "kmh" | "kph" | "km/h" => Some(SpeedUnit::Kmh),
            "knots" | "knot" | "kn" | "kt" => Some(SpeedUnit::Knots),
            "mps" | "m/s" | "ms" => Some(SpeedUnit::Mps),
            "mph" => Some(SpeedUnit::Mph),
            _ => None,
        }
    }

    /// The unit's name.
    pub fn as_str(self) -> &'static str {
        match self {
            SpeedUnit::Kmh => "kmh",
            SpeedUnit::Knots => "knots",
            SpeedUnit::Mps => "mps",
            SpeedUnit::Mph => "mph",
        }
    }

    /// A speed in this unit, in km/h.
    pub fn to_kmh(self, value: f64) -> f64 {
        match self {
            SpeedUnit::Kmh => value,
            SpeedUnit::Knots => value * 1.852,
            SpeedUnit::Mps => value * 3.6,
            SpeedUnit::Mph => value * 1.609_344,
        }
    }
}

/// The unit a source writes odometer readings in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OdometerUnit {
    /// Kilometres.
    Km,
    /// Metres (Traccar's `odometer`).
    M,
    /// Miles.
    Mi,
}

impl OdometerUnit {
    /// The names `--odometer-unit` accepts.
    pub const NAMES: &'static str = "km, m, mi";

    /// Reads a unit name.
    pub fn parse(text: &str) -> Option<OdometerUnit> {
        match text.trim().to_ascii_lowercase().as_str() {
            "km" => Some(OdometerUnit::Km),
            "m" => Some(OdometerUnit::M),
            "mi" | "miles" => Some(OdometerUnit::Mi),
            _ => None,
        }
    }

    /// The unit's name.
    pub fn as_str(self) -> &'static str {
        match self {
            OdometerUnit::Km => "km",
            OdometerUnit::M => "m",
            OdometerUnit::Mi => "mi",
        }
    }

    /// A reading in this unit, in km.
    pub fn to_km(self, value: f64) -> f64 {
        match self {
            OdometerUnit::Km => value,
            OdometerUnit::M => value / 1000.0,
            OdometerUnit::Mi => value * 1.609_344,
        }
    }
}

/// How to read one file's values: its units, and the plate for a file that names no
/// vehicle.
#[derive(Debug, Clone, PartialEq)]
pub struct FileUnits {
    /// Unit of the speed cells.
    pub speed: SpeedUnit,
    /// Unit of the odometer cells.
    pub odometer: OdometerUnit,
    /// The vehicle of rows without a plate (`--plate`).
    pub plate: Option<String>,
    /// Naive times are UTC, not the fleet's local time: the time column's name says
    /// so (`time_utc`, `timestamp_utc`, `time_z`).
    pub naive_times_utc: bool,
}

/// Speed pairs kept per file (enough for a robust median; memory stays flat).
const MAX_SPEED_SAMPLES: usize = 4096;
/// A step is compared when its fixes are at most this far apart in time, seconds…
const MAX_STEP_S: i64 = 300;
/// …and its positions imply at least this speed, km/h (slower, GPS noise dominates).
const MIN_IMPLIED_KMH: f64 = 10.0;
/// Fewer pairs than this say nothing.
const MIN_SPEED_SAMPLES: usize = 20;
/// An odometer is compared over at least this GPS path, km.
const MIN_ODOMETER_PATH_KM: f64 = 2.0;
/// Past this much path with its speed samples full, a file has said enough: its
/// further rows are not looked at (an import of millions of rows pays for the first
/// thousand km only).
const ENOUGH_PATH_KM: f64 = 1000.0;
/// The figures agree with a unit when the ratio is within this factor of it (speed
/// units closest together, knots and mph, are 1.15 apart)…
const AGREES_SPEED: f64 = 1.07;
/// …(odometers run over or under a GPS path by more, and their units are 1.6 and
/// 1000 apart)…
const AGREES_ODOMETER: f64 = 1.25;
/// …and say another unit than the one read only when the unit read is this far off.
const DISAGREES: f64 = 1.25;

/// What one file's rows say about their units.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct UnitEvidence {
    /// The units the file was read in (set by the reader).
    pub read_in: Option<(SpeedUnit, OdometerUnit)>,
    /// Reported speed (as read, in km/h) over the speed its positions imply, per step.
    speed_ratios: Vec<f64>,
    /// Odometer distance (as read, km) over the steps compared, of vehicles whose
    /// readings never went down…
    odometer_km: f64,
    /// …and the GPS path over the same steps, km.
    path_km: f64,
    /// The GPS path of every step looked at, km.
    looked_km: f64,
}

/// A unit the figures of a file contradict.
#[derive(Debug, Clone, PartialEq)]
pub struct UnitSuspicion {
    /// `speed` or `odometer`.
    pub field: &'static str,
    /// The unit the file was read in.
    pub read_as: &'static str,
    /// The unit its figures agree with.
    pub likely: &'static str,
    /// The ratio of the figures as read to those the positions imply.
    pub ratio: f64,
    /// The flag that reads them right.
    pub flag: String,
}

impl std::fmt::Display for UnitSuspicion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} read as {} is {:.2} times what the positions imply; it agrees with {}: use {}",
            self.field, self.read_as, self.ratio, self.likely, self.flag
        )
    }
}

impl UnitEvidence {
    /// Takes in consecutive kept rows of one vehicle (time order), all from this file.
    pub fn observe(&mut self, rows: &[Staged]) {
        if self.speed_ratios.len() >= MAX_SPEED_SAMPLES && self.looked_km >= ENOUGH_PATH_KM {
            return;
        }
        // The odometer is compared step by step over the same steps as the path (a
        // gap's unseen driving is in neither).
        let mut odometer_ok = true;
        let (mut odometer_km, mut path_km) = (0.0, 0.0);
        let mut previous: Option<&Staged> = None;
        for s in rows {
            if let Some(p) = previous {
                let dt = s.fix.ts - p.fix.ts;
                let m = haversine_m(
                    LatLon::new(p.fix.lat, p.fix.lon),
                    LatLon::new(s.fix.lat, s.fix.lon),
                );
                if dt > 0 && dt <= MAX_STEP_S {
                    self.looked_km += m / 1000.0;
                    match (p.fix.odometer_km, s.fix.odometer_km) {
                        (Some(a), Some(b)) if b >= a => {
                            odometer_km += b - a;
                            path_km += m / 1000.0;
                        }
                        _ => odometer_ok = false,
                    }
                    let implied = m / dt as f64 * 3.6;
                    let reported = (p.fix.speed_kmh + s.fix.speed_kmh) / 2.0;
                    if implied >= MIN_IMPLIED_KMH
                        && !p.fix.speed_derived
                        && !s.fix.speed_derived
                        && reported > 0.0
                        && self.speed_ratios.len() < MAX_SPEED_SAMPLES
                    {
                        self.speed_ratios.push(reported / implied);
                    }
                }
            }
            previous = Some(s);
        }
        if odometer_ok {
            self.odometer_km += odometer_km;
            self.path_km += path_km;
        }
    }

    /// The units this file's figures contradict, with the flag for each.
    pub fn suspicions(&self) -> Vec<UnitSuspicion> {
        let Some((speed, odometer)) = self.read_in else {
            return Vec::new();
        };
        let mut out = Vec::new();
        if self.speed_ratios.len() >= MIN_SPEED_SAMPLES {
            let mut ratios = self.speed_ratios.clone();
            ratios.sort_by(f64::total_cmp);
            let ratio = ratios[ratios.len() / 2];
            let units = [
                SpeedUnit::Kmh,
                SpeedUnit::Knots,
                SpeedUnit::Mps,
                SpeedUnit::Mph,
            ];
            // Read in `speed`, a value v is v·k(speed) km/h; in truth v·k(u) km/h.
            if let Some(u) = likely(ratio, speed.to_kmh(1.0), &units, AGREES_SPEED, |u| {
                u.to_kmh(1.0)
            }) && u != speed
            {
                out.push(UnitSuspicion {
                    field: "speed",
                    read_as: speed.as_str(),
                    likely: u.as_str(),
                    ratio,
                    flag: format!("--speed-unit {}", u.as_str()),
                });
            }
        }
        if self.path_km >= MIN_ODOMETER_PATH_KM && self.odometer_km > 0.0 {
            let ratio = self.odometer_km / self.path_km;
            let units = [OdometerUnit::Km, OdometerUnit::M, OdometerUnit::Mi];
            if let Some(u) = likely(ratio, odometer.to_km(1.0), &units, AGREES_ODOMETER, |u| {
                u.to_km(1.0)
            }) && u != odometer
            {
                out.push(UnitSuspicion {
                    field: "odometer",
                    read_as: odometer.as_str(),
                    likely: u.as_str(),
                    ratio,
                    flag: format!("--odometer-unit {}", u.as_str()),
                });
            }
        }
        out
    }
}

/// The unit a measured ratio (figures as read over what the positions imply) says,
/// when the unit read (`read_factor`) is clearly off and one candidate clearly fits.
fn likely<U: Copy>(
    ratio: f64,
    read_factor: f64,
    units: &[U],
    agrees: f64,
    factor: impl Fn(U) -> f64,
) -> Option<U> {
    if ratio <= 0.0 || (1.0 / DISAGREES..=DISAGREES).contains(&ratio) {
        return None;
    }
    // Read with factor r, a value in truth of unit u gives ratio r / k(u).
    units
        .iter()
        .copied()
        .map(|u| (u, (ratio * factor(u) / read_factor).ln().abs()))
        .filter(|&(_, off)| off <= agrees.ln())
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(u, _)| u)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_unit_the_figures_agree_with_is_named() {
        let speeds = [
            SpeedUnit::Kmh,
            SpeedUnit::Knots,
            SpeedUnit::Mps,
            SpeedUnit::Mph,
        ];
        let k = |u: SpeedUnit| u.to_kmh(1.0);
        // mph read as m/s: 3.6 / 1.609 = 2.24 times too fast.
        assert_eq!(
            likely(2.16, 3.6, &speeds, AGREES_SPEED, k),
            Some(SpeedUnit::Mph)
        );
        // Right: nothing said.
        assert_eq!(likely(1.02, 3.6, &speeds, AGREES_SPEED, k), None);
        // Knots read as km/h: 0.54.
        assert_eq!(
            likely(0.54, 1.0, &speeds, AGREES_SPEED, k),
            Some(SpeedUnit::Knots)
        );
        // Off, but like no unit: nothing said (the data may simply be poor).
        assert_eq!(likely(1.45, 1.0, &speeds, AGREES_SPEED, k), None);
        let odometers = [OdometerUnit::Km, OdometerUnit::M, OdometerUnit::Mi];
        let k = |u: OdometerUnit| u.to_km(1.0);
        // Miles read as km: 0.62 of the path (0.67 with an odometer 8 % over it).
        assert_eq!(
            likely(0.67, 1.0, &odometers, AGREES_ODOMETER, k),
            Some(OdometerUnit::Mi)
        );
        // Metres read as km: a thousand times.
        assert_eq!(
            likely(1005.0, 1.0, &odometers, AGREES_ODOMETER, k),
            Some(OdometerUnit::M)
        );
    }
}
