//! Positions into PostgreSQL in bulk: binary `COPY` into the partitioned table, a
//! chunk at a time, each chunk's months given their partitions first. The values
//! are the ones SQLite keeps (store/positions.rs encodes both), so a fix reads back
//! the same from either store.

use super::Target;
use crate::error::Result;
use crate::model::Fix;
use crate::store::positions::Stored;
use std::collections::HashSet;

/// Fixes one `COPY` statement carries.
pub(super) const CHUNK: usize = 65_536;

/// Where the partitions of new months are made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Partitions {
    /// In the caller's transaction: its schema is new in it (`generate`, the first
    /// import into an empty database), so nobody else can see `positions` yet.
    InTransaction,
    /// Each in a short transaction of its own, on a connection of its own: the
    /// fleet is in use, and the exclusive lock on `positions` must not be held
    /// until the caller commits.
    Outside,
}

/// Appends `fixes` (each with its milliseconds past the second) to positions inside
/// the caller's transaction, making the partitions of their months as needed
/// (`partitions` says where). Returns how many were written. A fix already stored
/// fails the whole unit (the caller's transaction rolls back): bulk paths write new
/// data.
pub fn copy_fixes<'f>(
    tx: &mut impl postgres::GenericClient,
    target: &Target,
    partitions: Partitions,
    fixes: impl IntoIterator<Item = (&'f Fix, i64)>,
) -> Result<u64> {
    let mut months: HashSet<(i32, u32)> = HashSet::new();
    let mut chunk: Vec<Stored> = Vec::with_capacity(CHUNK);
    let mut written = 0;
    let mut fixes = fixes.into_iter().peekable();
    while fixes.peek().is_some() {
        chunk.clear();
        for (fix, ms) in fixes.by_ref().take(CHUNK) {
            chunk.push(Stored::of(fix, ms)?);
        }
        for stored in &chunk {
            let ms = stored.instant_ms();
            let month = super::month_of(ms)?;
            if months.insert(month) {
                match partitions {
                    Partitions::InTransaction => {
                        super::ensure_partitions(tx, target, ms, ms)?;
                    }
                    Partitions::Outside => super::make_partitions_outside(target, ms, ms)?,
                }
            }
        }
        written += copy_chunk(tx, target, &chunk)?;
    }
    Ok(written)
}

fn copy_chunk(
    tx: &mut impl postgres::GenericClient,
    target: &Target,
    rows: &[Stored],
) -> Result<u64> {
    let mut sink = tx
        .copy_in(
            "COPY fleetctl.positions (vehicle_id, ts_ms, lat_e7, lon_e7, motion, odometer_m) \
             FROM STDIN (FORMAT binary)",
        )
        .map_err(|e| target.failed("write", e))?;
    let mut out = BinaryRows::new();
    for row in rows {
        let (lat_e7, lon_e7) = (coordinate(row.lat_e7)?, coordinate(row.lon_e7)?);
        out.row(6);
        out.int8(Some(row.vehicle_id()));
        out.int8(Some(row.instant_ms()));
        out.int4(lat_e7);
        out.int4(lon_e7);
        out.int8(Some(row.motion()));
        out.int8(row.odometer_m);
        out.hand_over_when_full(&mut sink)
            .map_err(|e| io_failed(target, e))?;
    }
    out.finish(&mut sink).map_err(|e| io_failed(target, e))?;
    sink.finish().map_err(|e| target.failed("write", e))
}

/// A failed write into a `COPY` (the client hands the server's error over as an
/// I/O error's cause).
fn io_failed(target: &Target, e: std::io::Error) -> crate::error::Error {
    match e
        .into_inner()
        .map(|cause| cause.downcast::<postgres::Error>())
    {
        Some(Ok(pg)) => target.failed("write", *pg),
        Some(Err(other)) => crate::error::Error::new(
            crate::error::ErrorCode::DbUnavailable,
            format!("could not write {}: {other}", target.display()),
        ),
        None => crate::error::Error::new(
            crate::error::ErrorCode::DbUnavailable,
            format!("could not write {}", target.display()),
        ),
    }
}

/// Rows in PostgreSQL's binary `COPY` format, encoded here and handed to the client
/// in large pieces: the client's own row writer takes a trip through its runtime
/// for every row and sends a message every 4 KiB, which cost the import more than
/// the encoding does.
struct BinaryRows {
    bytes: Vec<u8>,
}

/// Bytes gathered before they are handed over.
const PIECE_BYTES: usize = 1 << 18;

impl BinaryRows {
    fn new() -> BinaryRows {
        let mut bytes = Vec::with_capacity(PIECE_BYTES + 64);
        // The signature, no flags, no header extension.
        bytes.extend_from_slice(b"PGCOPY\n\xff\r\n\0");
        bytes.extend_from_slice(&0i32.to_be_bytes());
        bytes.extend_from_slice(&0i32.to_be_bytes());
        BinaryRows { bytes }
    }

    /// Begins a row of `fields` values.
    fn row(&mut self, fields: i16) {
        self.bytes.extend_from_slice(&fields.to_be_bytes());
    }

    /// An `int8` value, or NULL.
    fn int8(&mut self, value: Option<i64>) {
        match value {
            Some(v) => {
                self.bytes.extend_from_slice(&8i32.to_be_bytes());
                self.bytes.extend_from_slice(&v.to_be_bytes());
            }
            None => self.bytes.extend_from_slice(&(-1i32).to_be_bytes()),
        }
    }

    /// An `int4` value.
    fn int4(&mut self, value: i32) {
        self.bytes.extend_from_slice(&4i32.to_be_bytes());
        self.bytes.extend_from_slice(&value.to_be_bytes());
    }

    /// Hands the bytes gathered to `sink` once they make a piece.
    fn hand_over_when_full(&mut self, sink: &mut impl std::io::Write) -> std::io::Result<()> {
        if self.bytes.len() >= PIECE_BYTES {
            sink.write_all(&self.bytes)?;
            self.bytes.clear();
        }
        Ok(())
    }

    /// Ends the rows and hands the rest over.
    fn finish(mut self, sink: &mut impl std::io::Write) -> std::io::Result<()> {
        self.bytes.extend_from_slice(&(-1i16).to_be_bytes());
        sink.write_all(&self.bytes)
    }
}

/// A coordinate × 10^7 as the 4-byte column keeps it (±180° × 10^7 fits); anything
/// beyond is refused, never clamped.
fn coordinate(e7: i64) -> Result<i32> {
    i32::try_from(e7).map_err(|_| {
        crate::error::Error::invalid(format!(
            "coordinate {}° is outside ±180°",
            super::super::positions::degrees(e7)
        ))
    })
}

/// Hands `each` one vehicle's positions in `[from_ms, to_ms)`, in time order, read
/// with binary `COPY … TO STDOUT`: the bulk reader of analysis, import and export
/// (several times faster than a query's rows, and never all in memory at once).
pub fn copy_positions_out(
    conn: &crate::store::pg::PgConn,
    vehicle_id: i64,
    (from_ms, to_ms): (i64, i64),
    each: &mut dyn FnMut(&crate::model::Fix, i64),
) -> Result<()> {
    use std::io::Read;
    let target = conn.target().clone();
    // Integers only, formatted here: COPY takes no parameters.
    let sql = format!(
        "COPY (SELECT ts_ms, lat_e7, lon_e7, motion, odometer_m FROM fleetctl.positions \
         WHERE vehicle_id = {vehicle_id} AND ts_ms >= {from_ms} AND ts_ms < {to_ms} ORDER BY ts_ms) \
         TO STDOUT (FORMAT binary)"
    );
    conn.with_client(|client| {
        let mut reader = client
            .copy_out(sql.as_str())
            .map_err(|e| target.failed("read", e))?;
        let mut data = Vec::new();
        let mut chunk = vec![0u8; 1 << 16];
        let mut at = 0usize;
        let mut header_done = false;
        loop {
            let n = reader.read(&mut chunk).map_err(|e| {
                crate::error::Error::new(
                    crate::error::ErrorCode::DbUnavailable,
                    format!("could not read {}: {e}", target.display()),
                )
            })?;
            data.drain(..at);
            at = 0;
            data.extend_from_slice(&chunk[..n]);
            if !header_done {
                // PGCOPY\n\377\r\n\0, flags (4 bytes), header extension length (4).
                if data.len() < 19 {
                    if n == 0 {
                        return Err(bad_copy(&target, "no header"));
                    }
                    continue;
                }
                let extension = u32::from_be_bytes(data[15..19].try_into().unwrap()) as usize;
                at = 19 + extension;
                header_done = true;
            }
            while let Some((fix, ms, used)) = tuple(&data[at..], vehicle_id) {
                match fix {
                    Some(fix) => each(&fix, ms),
                    None => return Ok(()), // the trailer
                }
                at += used;
            }
            if n == 0 {
                return Err(bad_copy(&target, "it ended inside a row"));
            }
        }
    })
}

fn bad_copy(target: &Target, why: &str) -> crate::error::Error {
    crate::error::Error::new(
        crate::error::ErrorCode::DbSchema,
        format!(
            "the positions {} sent are not binary COPY as expected: {why}",
            target.display()
        ),
    )
}

/// One row of the binary COPY at the start of `bytes`: the fix and its milliseconds
/// (None for the trailer) and the bytes it took, or None when more bytes are needed.
#[allow(clippy::type_complexity)]
fn tuple(bytes: &[u8], vehicle_id: i64) -> Option<(Option<crate::model::Fix>, i64, usize)> {
    let fields = i16::from_be_bytes(bytes.get(0..2)?.try_into().ok()?);
    if fields == -1 {
        return Some((None, 0, 2));
    }
    let mut at = 2;
    let mut values = [None::<i64>; 5];
    for value in values.iter_mut().take(fields.max(0) as usize) {
        let len = i32::from_be_bytes(bytes.get(at..at + 4)?.try_into().ok()?);
        at += 4;
        if len < 0 {
            continue;
        }
        let len = len as usize;
        let raw = bytes.get(at..at + len)?;
        *value = Some(match len {
            4 => i64::from(i32::from_be_bytes(raw.try_into().ok()?)),
            8 => i64::from_be_bytes(raw.try_into().ok()?),
            _ => return None,
        });
        at += len;
    }
    let [
        Some(ts_ms),
        Some(lat_e7),
        Some(lon_e7),
        Some(motion),
        odometer_m,
    ] = values
    else {
        return None;
    };
    let (fix, ms) = Stored::from_parts(vehicle_id, ts_ms, lat_e7, lon_e7, motion, odometer_m).fix();
    Some((Some(fix), ms, at))
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_binary_copy_row_reads_back_as_the_fix_and_waits_for_bytes_it_lacks() {
        let mut row = 5i16.to_be_bytes().to_vec();
        let mut field = |bytes: &[u8]| {
            row.extend((bytes.len() as i32).to_be_bytes());
            row.extend(bytes);
        };
        field(&1_764_106_200_250i64.to_be_bytes());
        field(&146_349_000i32.to_be_bytes());
        field(&(-905_069_000i32).to_be_bytes());
        let motion = crate::store::positions::Stored::of(
            &crate::model::Fix {
                vehicle_id: 3,
                ts: 1_764_106_200,
                lat: 14.6349,
                lon: -90.5069,
                speed_kmh: 42.5,
                speed_derived: false,
                heading_deg: Some(90.0),
                ignition: Some(true),
                odometer_km: None,
            },
            250,
        )
        .unwrap()
        .motion();
        field(&motion.to_be_bytes());
        row.extend((-1i32).to_be_bytes()); // odometer: NULL
        let (fix, ms, used) = super::tuple(&row, 3).unwrap();
        let fix = fix.unwrap();
        assert_eq!((fix.ts, ms, used), (1_764_106_200, 250, row.len()));
        assert_eq!((fix.lat, fix.lon, fix.speed_kmh), (14.6349, -90.5069, 42.5));
        assert_eq!(
            (fix.heading_deg, fix.ignition, fix.odometer_km),
            (Some(90.0), Some(true), None)
        );
        assert!(super::tuple(&row[..row.len() - 5], 3).is_none());
        assert!(matches!(
            super::tuple(&(-1i16).to_be_bytes(), 3),
            Some((None, 0, 2))
        ));
    }
}
