//! Apache Parquet, read with polars one row group at a time (memory stays near one
//! row group whatever the file's size). Columns are found by name like CSV
//! columns; numbers and text become cells as written, and a timestamp column
//! becomes epoch time (a timestamp without a zone is taken as UTC, as Arrow means it).

use crate::{ColumnMap, Field, Source};
use fleetctl_core::error::{Error, Result};
use fleetctl_core::ingest::{CheckedBatch, RawRow, TypedCells};
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
        for_each_row(&df, offset as u64, &map, &header, &mut raw, |raw| {
            batch.check(&checker, raw, &units, file_index);
        })
        .map_err(bad)?;
        Ok(batch)
    };
    let (ingest, progress) = (&mut *src.ingest, &mut *src.progress);
    let mut done = 0usize;
    fleetctl_core::parallel::map_in_order(
        &read_group,
        &mut |submit| groups.iter().try_for_each(|g| submit(*g)),
        &mut |rows| {
            let batch = rows?;
            done += batch.len();
            ingest.accept_batch(file_index, 0, batch)?;
            progress(done as f64 / total as f64);
            Ok(())
        },
    )
}

/// One column's cells, as the file types them: numbers and flags stay numbers (no
/// text round trip), timestamps become epoch seconds, anything else text.
enum Cells {
    Text(polars::prelude::StringChunked),
    Number(polars::prelude::Float64Chunked),
    Flag(polars::prelude::BooleanChunked),
}

impl Cells {
    fn of(field: Field, col: &Column) -> polars::error::PolarsResult<Cells> {
        let dtype = col.dtype();
        Ok(match dtype {
            DataType::Datetime(unit, _) => {
                let per_second = match unit {
                    TimeUnit::Nanoseconds => 1e9,
                    TimeUnit::Microseconds => 1e6,
                    TimeUnit::Milliseconds => 1e3,
                };
                let ticks = col.cast(&DataType::Int64)?.cast(&DataType::Float64)?;
                Cells::Number((ticks / per_second).f64()?.clone())
            }
            DataType::Boolean if field == Field::Ignition => Cells::Flag(col.bool()?.clone()),
            // A plate that is a number (a device id) is still a name.
            _ if dtype.is_primitive_numeric() && field != Field::Plate => {
                Cells::Number(col.cast(&DataType::Float64)?.f64()?.clone())
            }
            _ => Cells::Text(col.cast(&DataType::String)?.str()?.clone()),
        })
    }
}

/// Calls `each` with every row of a row group, reusing `raw`.
fn for_each_row(
    df: &DataFrame,
    first_row: u64,
    map: &ColumnMap,
    header: &[String],
    raw: &mut RawRow,
    mut each: impl FnMut(&RawRow),
) -> polars::error::PolarsResult<()> {
    let mut by_field = std::collections::BTreeMap::new();
    for (&field, &i) in &map.index {
        by_field.insert(field, Cells::of(field, df.column(&header[i])?)?);
    }
    // Each column's cells read once, in order (a lookup by row index would find the
    // cell's array again for every cell).
    let texts: Vec<Option<Vec<Option<&str>>>> = (0..header.len())
        .map(|i| {
            map.index
                .iter()
                .find(|(_, c)| **c == i)
                .and_then(|(f, _)| match by_field.get(f) {
                    Some(Cells::Text(t)) => Some(t.iter().collect()),
                    _ => None,
                })
        })
        .collect();
    let numbers = |field: Field| -> Option<Vec<Option<f64>>> {
        match by_field.get(&field) {
            Some(Cells::Number(n)) => Some(n.iter().collect()),
            _ => None,
        }
    };
    let [time, lat, lon, speed, heading, odometer] = [
        Field::Time,
        Field::Lat,
        Field::Lon,
        Field::Speed,
        Field::Heading,
        Field::Odometer,
    ]
    .map(numbers);
    let ignition: Option<Vec<Option<bool>>> = match by_field.get(&Field::Ignition) {
        Some(Cells::Flag(b)) => Some(b.iter().collect()),
        _ => None,
    };
    let at = |cells: &Option<Vec<Option<f64>>>, row: usize| cells.as_ref().and_then(|c| c[row]);
    for row in 0..df.height() {
        crate::fill_row(raw, first_row + row as u64 + 1, map, |i| {
            texts
                .get(i)
                .and_then(|column| column.as_ref())
                .and_then(|column| column[row])
        });
        raw.typed = TypedCells {
            time_epoch: at(&time, row),
            lat: at(&lat, row),
            lon: at(&lon, row),
            speed: at(&speed, row),
            heading: at(&heading, row),
            odometer: at(&odometer, row),
            ignition: ignition.as_ref().and_then(|c| c[row]),
        };
        each(raw);
    }
    Ok(())
}
