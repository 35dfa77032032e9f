//! Apache Parquet, read with polars one row group at a time (memory stays near one
//! row group whatever the file's size). Columns are found by name like CSV
//! columns; numbers and text become cells as written, and a timestamp column
//! becomes epoch time (a timestamp without a zone is taken as UTC, as Arrow means it).

use crate::{ColumnMap, Source};
use fleetctl_core::error::{Error, Result};
use fleetctl_core::ingest::{CheckedBatch, RawRow};
use polars::prelude::{FileMetadata, ParquetReader, SerReader};
use std::sync::Arc;

pub(crate) fn read(src: &mut Source) -> Result<()> {
    let mut file = std::fs::File::open(src.path).map_err(|e| Error::io(src.path, e))?;
    let bad = |e: polars::error::PolarsError| src.bad(format!("not readable as Parquet: {e}"));
    let metadata: Arc<FileMetadata> = ParquetReader::new(&mut file)
        .get_metadata()
        .map_err(bad)?
        .clone();
    let schema = ParquetReader::new(&mut file)
        .with_slice(Some((0, 0)))
        .finish()
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
        let df = reader.with_slice(Some((offset, n))).finish().map_err(bad)?;
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
