//! Positions into PostgreSQL in bulk: binary `COPY` into the partitioned table, a
//! chunk at a time, each chunk's months given their partitions first. The values
//! are the ones SQLite keeps (store/positions.rs encodes both), so a fix reads back
//! the same from either store.

use super::Target;
use crate::error::Result;
use crate::model::Fix;
use crate::store::positions::Stored;
use postgres::binary_copy::BinaryCopyInWriter;
use postgres::types::Type;
use std::collections::HashSet;

/// Fixes one `COPY` statement carries.
pub(super) const CHUNK: usize = 65_536;

/// Appends `fixes` (each with its milliseconds past the second) to positions inside
/// the caller's transaction, making the partitions of their months as needed.
/// Returns how many were written. A fix already stored fails the whole unit (the
/// caller's transaction rolls back): bulk paths write new data.
pub fn copy_fixes<'f>(
    tx: &mut impl postgres::GenericClient,
    target: &Target,
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
                super::ensure_partitions(tx, target, ms, ms)?;
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
    let sink = tx
        .copy_in(
            "COPY fleetctl.positions (vehicle_id, ts_ms, lat_e7, lon_e7, motion, odometer_m) \
             FROM STDIN (FORMAT binary)",
        )
        .map_err(|e| target.failed("write", e))?;
    let mut writer = BinaryCopyInWriter::new(
        sink,
        &[
            Type::INT8,
            Type::INT8,
            Type::INT4,
            Type::INT4,
            Type::INT8,
            Type::INT8,
        ],
    );
    for row in rows {
        let (lat_e7, lon_e7) = (coordinate(row.lat_e7)?, coordinate(row.lon_e7)?);
        writer
            .write(&[
                &row.vehicle_id(),
                &row.instant_ms(),
                &lat_e7,
                &lon_e7,
                &row.motion(),
                &row.odometer_m,
            ])
            .map_err(|e| target.failed("write", e))?;
    }
    writer.finish().map_err(|e| target.failed("write", e))
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
