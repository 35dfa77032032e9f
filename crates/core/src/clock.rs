//! The data clock and the fleet's time zone.
//!
//! Positions are stored in UTC epoch seconds; people think in local dates and times.
//! The fleet has one IANA zone (`meta.time_zone`) with its daylight-saving history,
//! read from the time-zone database compiled into the binary (jiff's bundled tzdb), so
//! no system files are needed. A local date is a calendar day in that zone: a day of
//! 23 or 25 hours is still one date, from [`FleetZone::day_start`] to the next one's.

use crate::error::{Error, Result};

/// The default fleet time zone.
pub const DEFAULT_TIME_ZONE: &str = "America/Guatemala";

/// Seconds in a day.
pub const DAY_S: i64 = 86_400;

/// A calendar date (proleptic Gregorian).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Date {
    /// Year, e.g. 2026.
    pub year: i32,
    /// Month 1..=12.
    pub month: u32,
    /// Day of month 1..=31.
    pub day: u32,
}

/// Day of the week.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Weekday {
    /// Monday.
    Mon,
    /// Tuesday.
    Tue,
    /// Wednesday.
    Wed,
    /// Thursday.
    Thu,
    /// Friday.
    Fri,
    /// Saturday.
    Sat,
    /// Sunday.
    Sun,
}

impl Date {
    /// Days since 1970-01-01 (negative before).
    pub fn days_since_epoch(self) -> i64 {
        // Howard Hinnant's days_from_civil.
        let y = i64::from(self.year) - i64::from(self.month <= 2);
        let era = y.div_euclid(400);
        let yoe = y - era * 400;
        let m = i64::from(self.month);
        let doy = (153 * (m + if m > 2 { -3 } else { 9 }) + 2) / 5 + i64::from(self.day) - 1;
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
        era * 146_097 + doe - 719_468
    }

    /// The date `days` days after 1970-01-01.
    pub fn from_days_since_epoch(days: i64) -> Date {
        let z = days + 719_468;
        let era = z.div_euclid(146_097);
        let doe = z - era * 146_097;
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        let mp = (5 * doy + 2) / 153;
        let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
        let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
        let year = (yoe + era * 400 + i64::from(month <= 2)) as i32;
        Date { year, month, day }
    }

    /// The date `n` days later (or earlier, for negative `n`).
    pub fn add_days(self, n: i64) -> Date {
        Date::from_days_since_epoch(self.days_since_epoch() + n)
    }

    /// Day of the week.
    pub fn weekday(self) -> Weekday {
        // 1970-01-01 was a Thursday.
        const ORDER: [Weekday; 7] = [
            Weekday::Thu,
            Weekday::Fri,
            Weekday::Sat,
            Weekday::Sun,
            Weekday::Mon,
            Weekday::Tue,
            Weekday::Wed,
        ];
        ORDER[self.days_since_epoch().rem_euclid(7) as usize]
    }

    /// Parses `YYYY-MM-DD`, checking that the day exists.
    pub fn parse(text: &str) -> Option<Date> {
        let b = text.as_bytes();
        if b.len() != 10 || !text.is_ascii() || b[4] != b'-' || b[7] != b'-' {
            return None;
        }
        let year: i32 = digits(&text[0..4])?;
        let month: u32 = digits(&text[5..7])?;
        let day: u32 = digits(&text[8..10])?;
        let date = Date { year, month, day };
        let exists = (1..=12).contains(&month)
            && day >= 1
            && Date::from_days_since_epoch(date.days_since_epoch()) == date;
        exists.then_some(date)
    }
}

impl std::fmt::Display for Date {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:04}-{:02}-{:02}", self.year, self.month, self.day)
    }
}

/// `value`'s last `width` decimal digits, zero-padded, at the end of `out`.
fn push_digits(out: &mut String, value: u32, width: u32) {
    for place in (0..width).rev() {
        let digit = value / 10u32.pow(place) % 10;
        out.push(char::from(b'0' + digit as u8));
    }
}

fn digits<T: std::str::FromStr>(s: &str) -> Option<T> {
    if s.bytes().all(|c| c.is_ascii_digit()) {
        s.parse().ok()
    } else {
        None
    }
}

/// What a wall time on a local date is in a zone (see [`FleetZone::resolve_local`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LocalTime {
    /// One instant, UTC seconds.
    Exact(i64),
    /// The clocks went back: the wall time happened twice.
    Repeated {
        /// Its first occurrence, UTC seconds.
        earlier: i64,
        /// Its second.
        later: i64,
    },
    /// The clocks went forward over it: it never happened.
    Skipped,
}

/// The fleet's zone: an IANA name and its rules.
#[derive(Debug, Clone)]
pub struct FleetZone {
    /// IANA name, e.g. `America/Guatemala`.
    pub name: String,
    rules: jiff::tz::TimeZone,
}

impl PartialEq for FleetZone {
    fn eq(&self, other: &FleetZone) -> bool {
        self.name == other.name
    }
}

impl Eq for FleetZone {}

impl Default for FleetZone {
    fn default() -> Self {
        FleetZone::named(DEFAULT_TIME_ZONE).expect("the bundled time-zone database knows Guatemala")
    }
}

/// The known IANA zone whose name is closest to `name` (at most a few letters off,
/// ignoring case), for a "did you mean".
fn closest_zone(name: &str) -> Option<String> {
    let wanted = name.to_ascii_lowercase();
    let most = (wanted.len() / 4).clamp(1, 3);
    jiff::tz::db()
        .available()
        .map(|zone| {
            let zone = zone.to_string();
            (edit_distance(&wanted, &zone.to_ascii_lowercase()), zone)
        })
        .filter(|(d, _)| *d <= most)
        .min()
        .map(|(_, zone)| zone)
}

/// Levenshtein distance, in characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (above + 1)
                .min(row[j] + 1)
                .min(diagonal + usize::from(ca != *cb));
            diagonal = above;
        }
    }
    row[b.len()]
}

impl FleetZone {
    /// The zone of an IANA name (`Europe/London`, `America/Guatemala`, `UTC`).
    pub fn named(name: &str) -> Result<FleetZone> {
        let rules = jiff::tz::db().get(name).map_err(|_| {
            let hint = match closest_zone(name) {
                Some(zone) => format!("did you mean {zone}?"),
                None => "use an IANA time-zone name such as America/Guatemala, Europe/London, \
                         America/New_York or UTC"
                    .to_string(),
            };
            Error::invalid(format!("{name:?} is not a time zone this fleetctl knows"))
                .with_hint(hint)
        })?;
        Ok(FleetZone {
            name: name.to_string(),
            rules,
        })
    }

    /// Offset from UTC at an instant, in seconds (negative west of Greenwich).
    pub fn offset_s(&self, ts: i64) -> i64 {
        match jiff::Timestamp::from_second(ts) {
            Ok(t) => i64::from(self.rules.to_offset(t).seconds()),
            Err(_) => 0,
        }
    }

    /// The local date of an instant.
    pub fn local_date(&self, ts: i64) -> Date {
        Date::from_days_since_epoch((ts + self.offset_s(ts)).div_euclid(DAY_S))
    }

    /// Seconds since local midnight of an instant, on the wall clock.
    pub fn local_seconds_of_day(&self, ts: i64) -> i64 {
        (ts + self.offset_s(ts)).rem_euclid(DAY_S)
    }

    /// The first instant of the local `date` (midnight, or the end of a
    /// daylight-saving gap that swallowed midnight).
    pub fn day_start(&self, date: Date) -> i64 {
        self.at(date, 0)
    }

    /// The first instant after the local `date`: the next date's start. A local day
    /// lasts 23, 24 or 25 hours.
    pub fn day_end(&self, date: Date) -> i64 {
        self.day_start(date.add_days(1))
    }

    /// The instant of a local date and wall-clock time of day. A time skipped by a
    /// daylight-saving change is read as if the clock had not moved yet (it lands
    /// after the gap); a repeated time is its first occurrence.
    pub fn at(&self, date: Date, seconds_of_day: i64) -> i64 {
        match self.resolve_local(date, seconds_of_day) {
            LocalTime::Exact(ts) | LocalTime::Repeated { earlier: ts, .. } => ts,
            // In a gap: the wall time does not exist; keep the earlier offset, which
            // lands the same distance past the change.
            LocalTime::Skipped => {
                let naive = date.days_since_epoch() * DAY_S + seconds_of_day;
                naive - self.offset_s(naive - DAY_S)
            }
        }
    }

    /// A wall time on a local date as it really is: one instant, two (the hour a
    /// clock change repeats), or none (the hour it skips).
    pub fn resolve_local(&self, date: Date, seconds_of_day: i64) -> LocalTime {
        let naive = date.days_since_epoch() * DAY_S + seconds_of_day;
        // The offsets in force a day either side of that wall time (zones change
        // offset at most a few times a year): the instant is one of the two.
        let before = self.offset_s(naive - DAY_S);
        let after = self.offset_s(naive + DAY_S);
        let mut candidates = [naive - before, naive - after];
        candidates.sort_unstable();
        let real = |ts: i64| ts + self.offset_s(ts) == naive;
        match (real(candidates[0]), real(candidates[1])) {
            (false, false) => LocalTime::Skipped,
            (true, true) if candidates[0] != candidates[1] => LocalTime::Repeated {
                earlier: candidates[0],
                later: candidates[1],
            },
            (true, _) => LocalTime::Exact(candidates[0]),
            (false, true) => LocalTime::Exact(candidates[1]),
        }
    }

    /// Parses a local `YYYY-MM-DDTHH:MM` (a space may replace the `T`) into an instant.
    pub fn parse_local_minute(&self, text: &str) -> Result<i64> {
        let bad = || {
            Error::invalid(format!("{text:?} is not a local date and time")).with_hint(format!(
                "use YYYY-MM-DDTHH:MM in {}, e.g. 2026-11-25T15:30",
                self.name
            ))
        };
        if text.len() != 16 || !text.is_ascii() {
            return Err(bad());
        }
        let (date, time) = (&text[..10], &text[11..]);
        let sep = text.as_bytes()[10];
        if sep != b'T' && sep != b' ' || time.as_bytes()[2] != b':' {
            return Err(bad());
        }
        let date = Date::parse(date).ok_or_else(bad)?;
        let hour: i64 = digits(&time[..2]).ok_or_else(bad)?;
        let minute: i64 = digits(&time[3..]).ok_or_else(bad)?;
        if hour > 23 || minute > 59 {
            return Err(bad());
        }
        Ok(self.at(date, hour * 3600 + minute * 60))
    }

    /// RFC 3339 with the offset in force at that instant, to the second:
    /// `2026-11-24T08:13:00-06:00`.
    pub fn rfc3339(&self, ts: i64) -> String {
        let mut text = String::with_capacity(25);
        self.push_rfc3339(ts, &mut text);
        text
    }

    /// [`FleetZone::rfc3339`] written at the end of `out`, digit by digit: an
    /// export writes one for every position (formatting machinery and a string
    /// each were a seventh of a 50 M-position export's time).
    pub fn push_rfc3339(&self, ts: i64, out: &mut String) {
        let offset_s = self.offset_s(ts);
        let date = Date::from_days_since_epoch((ts + offset_s).div_euclid(DAY_S));
        let sod = (ts + offset_s).rem_euclid(DAY_S);
        let off_min = offset_s.abs() / 60;
        match u32::try_from(date.year) {
            Ok(year) if year <= 9999 => push_digits(out, year, 4),
            // Five digits or a sign: as `Date` writes it.
            _ => {
                use std::fmt::Write;
                let _ = write!(out, "{:04}", date.year);
            }
        }
        for (before, value) in [
            ('-', i64::from(date.month)),
            ('-', i64::from(date.day)),
            ('T', sod / 3600),
            (':', sod / 60 % 60),
            (':', sod % 60),
            (if offset_s < 0 { '-' } else { '+' }, off_min / 60),
            (':', off_min % 60),
        ] {
            out.push(before);
            push_digits(out, value as u32, 2);
        }
    }

    /// Local `HH:MM` of an instant.
    pub fn hhmm(&self, ts: i64) -> String {
        let sod = self.local_seconds_of_day(ts);
        format!("{:02}:{:02}", sod / 3600, sod / 60 % 60)
    }
}

/// The wall clock, in epoch seconds. Only the generator's default `--ahora` uses it;
/// reports run on the data clock.
pub fn wall_clock_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_dates_round_trip_and_know_their_weekday() {
        let d = Date {
            year: 2026,
            month: 11,
            day: 25,
        };
        assert_eq!(Date::from_days_since_epoch(d.days_since_epoch()), d);
        assert_eq!(d.weekday(), Weekday::Wed);
        assert_eq!(
            Date {
                year: 1970,
                month: 1,
                day: 1
            }
            .days_since_epoch(),
            0
        );
        assert_eq!(
            Date {
                year: 2024,
                month: 2,
                day: 29
            }
            .add_days(1),
            Date {
                year: 2024,
                month: 3,
                day: 1
            }
        );
        for n in -1000..1000 {
            let d = Date::from_days_since_epoch(20_000 + n);
            assert_eq!(d.days_since_epoch(), 20_000 + n);
        }
    }

    #[test]
    fn parse_rejects_days_that_do_not_exist() {
        assert_eq!(Date::parse("2026-02-29"), None);
        assert_eq!(Date::parse("2026-13-01"), None);
        assert_eq!(
            Date::parse("2026-é-01"),
            None,
            "multibyte text is refused, not sliced"
        );
        assert_eq!(Date::parse("2026-1-01"), None);
        assert_eq!(
            Date::parse("2026-é-01"),
            None,
            "multibyte text is refused, not sliced"
        );
        assert_eq!(
            Date::parse("2028-02-29"),
            Some(Date {
                year: 2028,
                month: 2,
                day: 29
            })
        );
    }

    #[test]
    fn days_of_23_and_25_hours_are_one_local_date_each() {
        let london = FleetZone::named("Europe/London").unwrap();
        let spring = Date::parse("2026-03-29").unwrap();
        let autumn = Date::parse("2026-10-25").unwrap();
        assert_eq!(london.day_end(spring) - london.day_start(spring), 23 * 3600);
        assert_eq!(london.day_end(autumn) - london.day_start(autumn), 25 * 3600);
        let summer_noon = london.parse_local_minute("2026-07-01T12:00").unwrap();
        assert_eq!(london.rfc3339(summer_noon), "2026-07-01T12:00:00+01:00");
        let winter_noon = london.parse_local_minute("2026-12-01T12:00").unwrap();
        assert_eq!(london.rfc3339(winter_noon), "2026-12-01T12:00:00+00:00");
        // 01:30 on the autumn day happens twice: the first is meant (still +01:00).
        let twice = london.parse_local_minute("2026-10-25T01:30").unwrap();
        assert_eq!(london.rfc3339(twice), "2026-10-25T01:30:00+01:00");
        // 01:30 on the spring day never happens: it reads as 02:30 summer time.
        let skipped = london.parse_local_minute("2026-03-29T01:30").unwrap();
        assert_eq!(london.rfc3339(skipped), "2026-03-29T02:30:00+01:00");
        // Every instant of the long day has that date.
        let start = london.day_start(autumn);
        for ts in (start..london.day_end(autumn)).step_by(600) {
            assert_eq!(london.local_date(ts), autumn);
        }
        assert_eq!(
            london.local_date(london.day_end(autumn)),
            autumn.add_days(1)
        );
    }

    #[test]
    fn a_zone_whose_clocks_skip_midnight_starts_its_day_after_the_gap() {
        // Chile moved its clocks from 00:00 to 01:00 on 2026-09-06.
        let santiago = FleetZone::named("America/Santiago").unwrap();
        let date = Date::parse("2026-09-06").unwrap();
        let start = santiago.day_start(date);
        assert_eq!(santiago.rfc3339(start), "2026-09-06T01:00:00-03:00");
        assert_eq!(santiago.local_date(start - 1), date.add_days(-1));
    }

    #[test]
    fn unknown_zone_names_are_refused_with_examples() {
        let err = FleetZone::named("Mars/Olympus").unwrap_err();
        assert!(err.message.contains("Mars/Olympus"), "{err:?}");
        assert!(err.hint.unwrap_or_default().contains("Europe/London"));
        assert_eq!(FleetZone::named("UTC").unwrap().offset_s(0), 0);
    }

    #[test]
    fn local_times_are_written_end_to_end_digit_by_digit() {
        let kolkata = FleetZone::named("Asia/Kolkata").unwrap();
        let mut text = String::new();
        kolkata.push_rfc3339(0, &mut text);
        kolkata.push_rfc3339(1_795_000_000, &mut text);
        assert_eq!(text, "1970-01-01T05:30:00+05:302026-11-18T16:36:40+05:30");
        let utc = FleetZone::named("UTC").unwrap();
        // Past four digits of year, as a date writes it.
        assert_eq!(utc.rfc3339(253_402_300_800), "10000-01-01T00:00:00+00:00");
        assert_eq!(utc.rfc3339(-62_167_219_200), "0000-01-01T00:00:00+00:00");
    }

    #[test]
    fn local_minute_is_read_in_the_fleet_zone() {
        let zone = FleetZone::default();
        let ts = zone.parse_local_minute("2026-11-25T15:30").unwrap();
        assert_eq!(zone.rfc3339(ts), "2026-11-25T15:30:00-06:00");
        // 15:30 in Guatemala is 21:30 UTC.
        assert_eq!(ts.rem_euclid(DAY_S), 21 * 3600 + 30 * 60);
        assert_eq!(zone.local_date(ts).to_string(), "2026-11-25");
        for bad in [
            "2026-11-25",
            "2026-11-25T24:00",
            "2026-11-31T10:00",
            "25/11/2026 10:00",
            "2026-11-25T1:30x",
            "2026-11-0€2:30",
        ] {
            let err = zone.parse_local_minute(bad).unwrap_err();
            assert!(err.message.contains(bad), "{err:?}");
        }
    }
}
