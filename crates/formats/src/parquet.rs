//! Apache Parquet, read with polars one row group at a time (memory stays near one
//! row group whatever the file's size). Columns are found by name like CSV
//! columns; numbers and text become cells as written, and a timestamp column
//! becomes epoch time (a timestamp without a zone is taken as UTC, as Arrow means it).

use crate::{ColumnMap, Source};
use fleetctl_core::error::{Error, Result};
use fleetctl_core::ingest::{CheckedBatch, RawRow};
use polars::prelude::{FileMetadata, ParquetReader, PolarsError, PolarsResult, SerReader};
use std::sync::Arc;

/// Runs one polars read of the file. polars is not ours: a panic inside it on a
/// malformed file (found by fuzzing: a column chunk holding fewer values than its row
/// group has rows, a height mismatch polars unwraps) is a file that cannot be read.
fn polars_read<T>(read: impl FnOnce() -> PolarsResult<T>) -> PolarsResult<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(read)).unwrap_or_else(|_| {
        Err(PolarsError::ComputeError(
            "the Parquet reader failed on it (a malformed file)".into(),
        ))
    })
}

pub(crate) fn read(src: &mut Source) -> Result<()> {
    let mut file = std::fs::File::open(src.path).map_err(|e| Error::io(src.path, e))?;
    let bad = |e: polars::error::PolarsError| src.bad(format!("not readable as Parquet: {e}"));
    let metadata: Arc<FileMetadata> =
        polars_read(|| ParquetReader::new(&mut file).get_metadata().cloned()).map_err(bad)?;
    let schema = polars_read(|| {
        ParquetReader::new(&mut file)
            .with_slice(Some((0, 0)))
            .finish()
    })
    .map_err(bad)?;
    let header: Vec<String> = schema
        .get_column_names()
        .iter()
        .map(|n| n.to_string())
        .collect();
    let map = ColumnMap::from_header(&header, &src.opts.map)?;
    if let Some(e) = src.missing_columns(&map, &header) {
        return Err(e);
    }
    let wanted: Vec<String> = map.index.values().map(|&i| header[i].clone()).collect();
    let units = src.units(Some(&map));
    let total = metadata.num_rows.max(1);
    // Row groups are read, converted and checked on every core (each worker opens
    // the file itself); this thread takes the rows back in file order.
    let mut groups = Vec::with_capacity(metadata.row_groups.len());
    let mut offset = 0usize;
    for group in &metadata.row_groups {
        groups.push((offset, group.num_rows()));
        offset += group.num_rows();
    }
    let checker = src.ingest.checker().clone();
    let (path, file_index) = (src.path, src.file);
    let read_group = |(offset, n): (usize, usize)| -> Result<CheckedBatch> {
        let bad = |e: polars::error::PolarsError| {
            Error::invalid(format!(
                "{}: row group at row {offset}: {e}",
                path.display()
            ))
        };
        let file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
        let mut reader = ParquetReader::new(file).with_columns(Some(wanted.clone()));
        reader.set_metadata(metadata.clone());
        let df = polars_read(|| reader.with_slice(Some((offset, n))).finish()).map_err(bad)?;
        let mut batch = CheckedBatch::with_capacity(n);
        let mut raw = RawRow::default();
        let line = |row: usize| (offset + row) as u64 + 1;
        crate::frame::for_each_row(&df, &map, &header, line, &mut raw, |raw| {
            batch.check(&checker, raw, &units, file_index);
        })
        .map_err(bad)?;
        Ok(batch)
    };
    let (ingest, progress) = (&mut *src.ingest, &mut *src.progress);
    let mut done = 0usize;
    fleetctl_core::parallel::map_in_order_until(
        fleetctl_core::parallel::cores(),
        &read_group,
        &mut |submit| {
            for g in &groups {
                if submit(*g)?.is_break() {
                    break;
                }
            }
            Ok(())
        },
        &mut |rows| {
            let batch = rows?;
            done += batch.len();
            let flow = ingest.accept_batch(file_index, 0, batch)?;
            progress(done as f64 / total as f64);
            Ok(flow)
        },
    )
}

#[cfg(test)]
mod tests {
    use crate::{Format, ReadOptions};
    use fleetctl_core::ingest::{self, ImportOptions, NoRejectsFile};

    /// Found by fuzzing (`fuzz/fuzz_targets/parquet.rs`): one row group of one row
    /// whose `lat` column chunk says it holds 0 values. polars panicked on the height
    /// mismatch; the file is refused instead.
    const SHORT_COLUMN: &[u8] =
        b"PAR1\x15\x00\x150\x150,\x15\x02\x15\x00\x15\x06\x15\x06\x00\x00\x14\x00\x00\x002\
        026-11-24T08:00:00Z\x15\x00\x15\x10\x15\x10,\x15\x02\x15\x00\x15\x06\x15\x06\x00\
        \x00\x00\x00\x00\x00\x00\x00\xf0?\x15\x00\x15\x10\x15\x10,\x15\x02\x15\x00\x15\
        \x06\x15\x06\x00\x00\x00\x00\x00\x00\x00\x00\x00@\x15\x02\x19LH\x06schema\x15\
        \x06\x00\x15\x0c%\x00\x18\x04time%\x00\x00\x15\x0a%\x00\x18\x03lat\x00\x15\x0a%\
        \x00\x18\x03lon\x00\x16\x02\x19\x1c\x19<&\x08\x1c\x15\x0c\x19%\x00\x06\x19\x18\
        \x04time\x15\x00\x16\x02\x16R\x16R&\x08\x00\x00&Z\x1c\x15\x0a\x19%\x00\x06\x19\
        \x18\x03lat\x15\x00\x16\x00\x162\x162&Z\x00\x00&\x8c\x01\x1c\x15\x0a\x19%\x00\
        \x06\x19\x18\x03lon\x15\x00\x16\x02\x162\x162&\x8c\x01\x00\x00\x16\xb6\x01\x16\
        \x02\x00\x00\x91\x00\x00\x00PAR1";

    #[test]
    fn a_column_chunk_shorter_than_its_row_group_is_refused_not_a_panic() {
        let dir = std::env::temp_dir().join(format!("fleetctl-parquet-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("short-column.parquet");
        std::fs::write(&path, SHORT_COLUMN).unwrap();
        let opts = ImportOptions {
            db: fleetctl_core::ingest::Location::File(dir.join("fleet.db")),
            time_zone: Some("UTC".to_string()),
            wall_now: 1_796_256_000,
            strict_units: false,
        };
        let read_opts = ReadOptions {
            format: Some(Format::Parquet),
            ..ReadOptions::default()
        };
        let mut read = |ingest: &mut ingest::Ingest| {
            crate::read_file(&path, &read_opts, ingest, &mut |_| {}).map(drop)
        };
        let e = ingest::import(&opts, &mut read, &mut NoRejectsFile, &mut |_| {}).unwrap_err();
        let left = dir.join("fleet.db").exists();
        let _ = std::fs::remove_dir_all(&dir);
        assert!(e.message.contains("a malformed file"), "{e}");
        assert!(!left, "no database is left behind");
    }
}
