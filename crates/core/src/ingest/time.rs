//! Reading the times that trackers and exports write: ISO 8601 with an offset (or
//! `Z`), a naive local date and time (read in the fleet's zone), or epoch seconds,
//! milliseconds or microseconds; fractions of a second are kept to the millisecond.
//! A naive time the clocks skipped is refused; one they repeated is read as its first
//! occurrence and marked, for the import to place by the vehicle's order.

use crate::clock::{Date, FleetZone, LocalTime};

/// An instant: whole UTC epoch seconds and the milliseconds past them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Instant {
    /// UTC epoch seconds (floor).
    pub ts: i64,
    /// Milliseconds past `ts`, 0..=999.
    pub ms: i64,
    /// For a naive local time that the clocks repeated (the night they go back):
    /// how many seconds later its second occurrence is; `ts` is the first. 0 for
    /// every other time.
    pub repeated_later_by_s: i64,
}

impl Instant {
    fn from_millis(total_ms: i64) -> Instant {
        Instant {
            ts: total_ms.div_euclid(1000),
            ms: total_ms.rem_euclid(1000),
            repeated_later_by_s: 0,
        }
    }
}

/// Why a time cell gives no instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeProblem {
    /// Not a time in any form fleetctl reads.
    Unparseable,
    /// A naive local time the clocks skipped (the night they go forward).
    Skipped,
}

/// The first instant a tracker's fix may have: 2000-01-01T00:00Z (consumer GPS began
/// in earnest that year, when selective availability was switched off).
pub const PLAUSIBLE_FROM_TS: i64 = 946_684_800;
/// The first instant past what a fix may have: 2100-01-01T00:00Z.
pub const PLAUSIBLE_UNTIL_TS: i64 = 4_102_444_800;

/// Refuses an instant no tracker's fix can have, saying which date it is and which
/// are accepted (a fix in 1970 is a tracker without a clock; one in 9999 a unit read
/// wrongly).
pub fn check_plausible(ts: i64) -> std::result::Result<(), String> {
    if (PLAUSIBLE_FROM_TS..PLAUSIBLE_UNTIL_TS).contains(&ts) {
        return Ok(());
    }
    let date = Date::from_days_since_epoch(ts.div_euclid(86_400));
    Err(format!(
        "{date} is outside 2000-01-01 .. 2099-12-31, the dates a fix can have"
    ))
}

/// For a time cell that is an epoch number, its readings as seconds and as
/// milliseconds and the rule (said when neither is a date a fix can have).
pub fn epoch_readings(text: &str) -> Option<String> {
    let value: f64 = text.trim().parse().ok()?;
    let date =
        |ms: f64| Date::from_days_since_epoch((ms / 86_400_000.0).floor() as i64).to_string();
    Some(format!(
        "{} read as seconds is {}, as milliseconds {}; an epoch number is read as seconds, milliseconds or microseconds, whichever falls in 2000..2099",
        text.trim(),
        date(value * 1000.0),
        date(value)
    ))
}

/// Epoch numbers: read as seconds, milliseconds or microseconds, whichever gives a
/// date a fix can have (2000–2099: the three ranges do not overlap, so a number has
/// at most one reading). A number with none keeps its reading by size (seconds below
/// 10^11, milliseconds below 10^14, microseconds below 10^17) and is then refused as
/// out of range by the caller.
fn epoch(text: &str) -> Option<Instant> {
    epoch_number(text.parse().ok()?)
}

/// An epoch number, in seconds, milliseconds or microseconds (see [`epoch`]); None
/// when negative, not finite or too large.
pub fn epoch_number(value: f64) -> Option<Instant> {
    if !(0.0..1e17).contains(&value) {
        return None;
    }
    let plausible = |ms: f64| {
        (PLAUSIBLE_FROM_TS as f64 * 1000.0..PLAUSIBLE_UNTIL_TS as f64 * 1000.0).contains(&ms)
    };
    let by_size = if value < 1e11 {
        value * 1000.0
    } else if value < 1e14 {
        value
    } else {
        value / 1000.0
    };
    let ms = [value * 1000.0, value, value / 1000.0]
        .into_iter()
        .find(|ms| plausible(*ms))
        .unwrap_or(by_size);
    Some(Instant::from_millis(ms.round() as i64))
}

/// Parses one time cell. A naive date and time is local time in `zone` (a repeated
/// one is its first occurrence, marked; a skipped one reads as if the clock had not
/// moved yet). See [`parse_time_strict`] for the import's reading.
pub fn parse_time(text: &str, zone: &FleetZone) -> Option<Instant> {
    match parse_time_strict(text, zone) {
        Ok(at) => Some(at),
        Err(TimeProblem::Unparseable) => None,
        Err(TimeProblem::Skipped) => {
            let (date, seconds, ms) = naive(text.trim())?;
            Some(Instant {
                ts: zone.at(date, seconds),
                ms,
                repeated_later_by_s: 0,
            })
        }
    }
}

/// Parses one time cell, refusing a naive local time the clocks skipped.
pub fn parse_time_strict(text: &str, zone: &FleetZone) -> Result<Instant, TimeProblem> {
    let text = text.trim();
    if text.is_empty() {
        return Err(TimeProblem::Unparseable);
    }
    if text.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return epoch(text).ok_or(TimeProblem::Unparseable);
    }
    if let Ok(t) = text.parse::<jiff::Timestamp>() {
        return Ok(Instant::from_millis(t.as_millisecond()));
    }
    // A naive date and time (T or a space between them), read in the fleet's zone.
    let (date, seconds_of_day, ms) = naive(text).ok_or(TimeProblem::Unparseable)?;
    match zone.resolve_local(date, seconds_of_day) {
        LocalTime::Exact(ts) => Ok(Instant {
            ts,
            ms,
            repeated_later_by_s: 0,
        }),
        LocalTime::Repeated { earlier, later } => Ok(Instant {
            ts: earlier,
            ms,
            repeated_later_by_s: later - earlier,
        }),
        LocalTime::Skipped => Err(TimeProblem::Skipped),
    }
}

/// A naive date and time: the date, the seconds of the day and the milliseconds.
fn naive(text: &str) -> Option<(Date, i64, i64)> {
    let dt: jiff::civil::DateTime = text.parse().ok()?;
    let date = Date {
        year: i32::from(dt.year()),
        month: dt.month() as u32,
        day: dt.day() as u32,
    };
    let seconds_of_day =
        i64::from(dt.hour()) * 3600 + i64::from(dt.minute()) * 60 + i64::from(dt.second());
    Some((
        date,
        seconds_of_day,
        i64::from(dt.subsec_nanosecond()) / 1_000_000,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_read_in_every_common_form() {
        let gt = FleetZone::default();
        let at = |t| parse_time(t, &gt);
        let noon_utc = Instant {
            ts: 1_795_000_000,
            ms: 0,
            repeated_later_by_s: 0,
        };
        assert_eq!(at("1795000000"), Some(noon_utc));
        assert_eq!(at("1795000000000"), Some(noon_utc));
        assert_eq!(at("1795000000000000"), Some(noon_utc));
        assert_eq!(
            at("1795000000.25"),
            Some(Instant {
                ts: 1_795_000_000,
                ms: 250,
                repeated_later_by_s: 0,
            })
        );
        let iso = at("2026-11-24T08:13:00-06:00").unwrap();
        assert_eq!(iso, at("2026-11-24T14:13:00Z").unwrap());
        assert_eq!(iso, at("2026-11-24T14:13:00.000+00:00").unwrap());
        // Naive times are the fleet's local time.
        assert_eq!(iso, at("2026-11-24 08:13:00").unwrap());
        assert_eq!(iso, at("2026-11-24T08:13:00").unwrap());
        let frac = at("2026-11-24T08:13:00.750-06:00").unwrap();
        assert_eq!((frac.ts, frac.ms), (iso.ts, 750));
        let london = FleetZone::named("Europe/London").unwrap();
        assert_eq!(
            parse_time("2026-07-01 12:00:00", &london).unwrap().ts,
            parse_time("2026-07-01T11:00:00Z", &gt).unwrap().ts,
            "summer time in London"
        );
        for bad in [
            "",
            "yesterday",
            "24/11/2026 08:13",
            "2026-11-31T08:00:00Z",
            "-5",
            "1e400",
        ] {
            assert_eq!(at(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn a_skipped_local_time_is_refused_and_a_repeated_one_marked() {
        let ny = FleetZone::named("America/New_York").unwrap();
        assert_eq!(
            parse_time_strict("2026-03-08 02:30:00", &ny),
            Err(TimeProblem::Skipped)
        );
        let first = parse_time_strict("2026-11-01 01:30:00", &ny).unwrap();
        assert_eq!(first.repeated_later_by_s, 3600);
        assert_eq!(
            first,
            parse_time_strict("2026-11-01T01:30:00-04:00", &ny)
                .map(|t| Instant {
                    repeated_later_by_s: 3600,
                    ..t
                })
                .unwrap()
        );
        let plain = parse_time_strict("2026-11-01 03:30:00", &ny).unwrap();
        assert_eq!(plain.repeated_later_by_s, 0);
        // Lord Howe Island moves its clocks by half an hour.
        let lh = FleetZone::named("Australia/Lord_Howe").unwrap();
        assert_eq!(
            parse_time_strict("2026-04-05 01:45:00", &lh)
                .unwrap()
                .repeated_later_by_s,
            1800
        );
    }
}
