//! Rejected rows: why a row was not imported (a stable, snake_case reason), and where
//! rejects are reported (the CLI's `--rejects` file).

use crate::error::Result;

/// Why a row was not imported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RejectReason {
    /// No plate in the row and no `--plate`.
    MissingPlate,
    /// A plate that is empty, over 64 characters or holds control characters.
    BadPlate,
    /// No time, or one that reads as no known form.
    UnparseableTime,
    /// A naive local time the clocks skipped (the night they go forward): it never
    /// happened in the fleet's zone.
    NonexistentLocalTime,
    /// A naive local time the clocks repeated (the night they go back) that the
    /// vehicle's own order of rows does not place in either occurrence.
    AmbiguousLocalTime,
    /// A line the CSV reader cannot split into the header's cells (broken
    /// quoting, more cells than the header).
    MalformedRow,
    /// The tracker marked the fix invalid (no satellite lock).
    InvalidFix,
    /// Missing latitude or longitude.
    MissingCoordinates,
    /// Latitude outside −90..90 or longitude outside −180..180.
    CoordinatesOutOfRange,
    /// Exactly 0, 0: a tracker's "no fix".
    ZeroZero,
    /// A value that is not a number (or, for ignition, not true/false).
    NonNumeric,
    /// A negative speed.
    NegativeSpeed,
    /// A heading outside 0..=360.
    HeadingOutOfRange,
    /// A speed over 1000 km/h (`store::positions::MAX_SPEED_KMH`).
    SpeedOutOfRange,
    /// An odometer below 0 or over 10,000,000 km.
    OdometerOutOfRange,
    /// A time ahead of the file's own data clock (the server's receipt time), or
    /// more than a day ahead of the computer's clock when the file has none.
    FutureTime,
    /// A time before 2000-01-01 or after 2099-12-31, which no tracker's fix has
    /// (`ingest::time::check_plausible`).
    TimeOutOfRange,
    /// Reaching it from the vehicle's previous fix would take over 250 km/h.
    ImpossibleJump,
    /// A lone fix that leaves the track and comes back: far and fast from the fixes
    /// on both sides, which are close to each other.
    Spike,
    /// The same vehicle, time and place as another row of this import.
    ExactDuplicate,
    /// The same vehicle, time and place as a fix already in the database.
    AlreadyStored,
    /// The same vehicle and time as another row (or a stored fix), another place:
    /// neither can be trusted, so every row of this import at that instant goes.
    ConflictingDuplicate,
}

impl RejectReason {
    /// Every reason, in the order summaries list them.
    pub const ALL: [RejectReason; 22] = [
        RejectReason::MalformedRow,
        RejectReason::MissingPlate,
        RejectReason::BadPlate,
        RejectReason::UnparseableTime,
        RejectReason::NonexistentLocalTime,
        RejectReason::AmbiguousLocalTime,
        RejectReason::InvalidFix,
        RejectReason::MissingCoordinates,
        RejectReason::CoordinatesOutOfRange,
        RejectReason::ZeroZero,
        RejectReason::NonNumeric,
        RejectReason::NegativeSpeed,
        RejectReason::HeadingOutOfRange,
        RejectReason::SpeedOutOfRange,
        RejectReason::OdometerOutOfRange,
        RejectReason::FutureTime,
        RejectReason::TimeOutOfRange,
        RejectReason::ImpossibleJump,
        RejectReason::Spike,
        RejectReason::ExactDuplicate,
        RejectReason::AlreadyStored,
        RejectReason::ConflictingDuplicate,
    ];

    /// The reason's stable name (in summaries and the rejects file).
    pub fn as_str(self) -> &'static str {
        match self {
            RejectReason::MalformedRow => "malformed_row",
            RejectReason::InvalidFix => "invalid_fix",
            RejectReason::MissingPlate => "missing_plate",
            RejectReason::BadPlate => "bad_plate",
            RejectReason::UnparseableTime => "unparseable_time",
            RejectReason::NonexistentLocalTime => "nonexistent_local_time",
            RejectReason::AmbiguousLocalTime => "ambiguous_local_time",
            RejectReason::MissingCoordinates => "missing_coordinates",
            RejectReason::CoordinatesOutOfRange => "coordinates_out_of_range",
            RejectReason::ZeroZero => "zero_zero",
            RejectReason::NonNumeric => "non_numeric",
            RejectReason::NegativeSpeed => "negative_speed",
            RejectReason::HeadingOutOfRange => "heading_out_of_range",
            RejectReason::SpeedOutOfRange => "speed_out_of_range",
            RejectReason::OdometerOutOfRange => "odometer_out_of_range",
            RejectReason::FutureTime => "future_time",
            RejectReason::TimeOutOfRange => "time_out_of_range",
            RejectReason::ImpossibleJump => "impossible_jump",
            RejectReason::Spike => "spike",
            RejectReason::ExactDuplicate => "exact_duplicate",
            RejectReason::AlreadyStored => "already_stored",
            RejectReason::ConflictingDuplicate => "conflicting_duplicate",
        }
    }
}

/// A rejected row, for the rejects file: where it was, why, and what it held.
#[derive(Debug, Clone, PartialEq)]
pub struct Reject<'a> {
    /// The file, as named on the command line.
    pub file: &'a str,
    /// Its line or record number.
    pub line: u64,
    /// Why.
    pub reason: RejectReason,
    /// The offending value, or what it clashed with.
    pub detail: String,
}

/// Where rejected rows are reported (the CLI's `--rejects` file).
pub trait RejectSink {
    /// Reports one rejected row.
    fn reject(&mut self, reject: &Reject) -> Result<()>;
    /// Forgets every row reported so far: the import reads its files again from the
    /// start (its rows turned out not to be in vehicle and time order).
    fn restart(&mut self) -> Result<()>;
}

/// Rejects reported nowhere (the summary still counts them).
pub struct NoRejectsFile;

impl RejectSink for NoRejectsFile {
    fn reject(&mut self, _: &Reject) -> Result<()> {
        Ok(())
    }
    fn restart(&mut self) -> Result<()> {
        Ok(())
    }
}
