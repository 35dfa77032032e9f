//! Apache Parquet, read with polars one row group at a time (memory stays near one
//! row group whatever the file's size). Columns are found by name like CSV
//! columns; numbers and text become cells as written, and a timestamp column
//! becomes epoch time (a timestamp without a zone is taken as UTC, as Arrow means it).

use crate::{ColumnMap, Field, Source};
use fleetctl_core::error::{Error, Result};
use polars::prelude::{
    Column, DataFrame, DataType, FileMetadata, ParquetReader, SerReader, TimeUnit,
};
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
    let mut offset = 0usize;
    for group in &metadata.row_groups {
        let n = group.num_rows();
        let mut reader = ParquetReader::new(&mut file).with_columns(Some(wanted.clone()));
        reader.set_metadata(metadata.clone());
        let df = reader
            .with_slice(Some((offset, n)))
            .finish()
            .map_err(|e| src.bad(format!("row group at row {offset}: {e}")))?;
        rows_of(src, &df, offset as u64, &map, &header, &units)?;
        offset += n;
        (src.progress)(offset as f64 / total as f64);
    }
    Ok(())
}

/// A column as text cells: timestamps as epoch seconds with milliseconds.
fn as_text(col: &Column) -> polars::error::PolarsResult<Column> {
    match col.dtype() {
        DataType::Datetime(unit, _) => {
            let per_ms = match unit {
                TimeUnit::Nanoseconds => 1_000_000.0,
                TimeUnit::Microseconds => 1_000.0,
                TimeUnit::Milliseconds => 1.0,
            };
            let ms = col.cast(&DataType::Int64)?.cast(&DataType::Float64)? / per_ms;
            (ms / 1000.0).cast(&DataType::String)
        }
        _ => col.cast(&DataType::String),
    }
}

fn rows_of(
    src: &mut Source,
    df: &DataFrame,
    first_row: u64,
    map: &ColumnMap,
    header: &[String],
    units: &fleetctl_core::ingest::FileUnits,
) -> Result<()> {
    let mut texts = std::collections::BTreeMap::new();
    for (&field, &i) in &map.index {
        let col = df
            .column(&header[i])
            .and_then(as_text)
            .map_err(|e| src.bad(format!("column {}: {e}", header[i])))?;
        texts.insert(field, col);
    }
    let strings: std::collections::BTreeMap<Field, _> = texts
        .iter()
        .map(|(f, c)| c.str().map(|s| (*f, s.clone())))
        .collect::<polars::error::PolarsResult<_>>()
        .map_err(|e| src.bad(e))?;
    let by_index: std::collections::BTreeMap<usize, Field> =
        map.index.iter().map(|(f, i)| (*i, *f)).collect();
    // Cells by column index, looked up once per batch rather than per cell.
    let width = header.len();
    let columns: Vec<Option<&polars::prelude::StringChunked>> = (0..width)
        .map(|i| by_index.get(&i).and_then(|f| strings.get(f)))
        .collect();
    let mut raw = fleetctl_core::ingest::RawRow::default();
    for row in 0..df.height() {
        crate::fill_row(&mut raw, first_row + row as u64 + 1, map, |i| {
            columns.get(i).copied().flatten().and_then(|s| s.get(row))
        });
        src.row(&raw, units)?;
    }
    Ok(())
}
