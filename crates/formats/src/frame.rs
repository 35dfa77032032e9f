//! The rows of a polars DataFrame (a CSV block, a Parquet row group) as [`RawRow`]s:
//! numbers and flags stay typed (no text round trip), everything else is text.

use crate::{ColumnMap, Field};
use fleetctl_core::ingest::{RawRow, TypedCells};
use polars::prelude::{
    BooleanChunked, Column, DataFrame, DataType, Float64Chunked, PolarsResult, StringChunked,
    TimeUnit, polars_bail,
};
use std::fmt::Write;

/// One column's cells, as the frame types them: numbers and flags stay numbers,
/// timestamps become epoch seconds, anything else text.
enum Cells {
    Text(StringChunked),
    Number(Float64Chunked),
    Flag(BooleanChunked),
}

impl Cells {
    fn of(field: Field, col: &Column) -> PolarsResult<Cells> {
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

    /// The cells in row order (read once: a lookup by row index would find the
    /// cell's array again for every cell).
    fn values(&self) -> Values<'_> {
        match self {
            Cells::Text(c) => Values::Text(c.iter().collect()),
            Cells::Number(c) => Values::Number(c.iter().collect()),
            Cells::Flag(c) => Values::Flag(c.iter().collect()),
        }
    }
}

enum Values<'a> {
    Text(Vec<Option<&'a str>>),
    Number(Vec<Option<f64>>),
    Flag(Vec<Option<bool>>),
}

/// Calls `each` with every row of `df`, reusing `raw` (no allocation per cell once
/// warm); `line(i)` is the line or record number of row `i`. Columns are found in
/// `df` by their names in `header`; a field whose column `df` lacks is missing.
pub(crate) fn for_each_row(
    df: &DataFrame,
    map: &ColumnMap,
    header: &[String],
    line: impl Fn(usize) -> u64,
    raw: &mut RawRow,
    mut each: impl FnMut(&RawRow),
) -> PolarsResult<()> {
    // polars checks that a Parquet row group's columns have its number of rows only in
    // debug builds (found by fuzzing: a column chunk holding fewer values than its row
    // group has rows); a shorter column is a malformed file, not rows to index past.
    if let Some(short) = df.columns().iter().find(|c| c.len() != df.height()) {
        polars_bail!(
            ShapeMismatch: "column {:?} holds {} values for {} rows",
            short.name(), short.len(), df.height()
        );
    }
    let column = |i: usize| header.get(i).and_then(|name| df.column(name).ok());
    let mut cells = Vec::with_capacity(Field::ALL.len());
    for field in Field::ALL {
        let found = map.index.get(&field).and_then(|&i| column(i));
        cells.push(found.map(|c| Cells::of(field, c)).transpose()?);
    }
    let dates = map
        .date_index
        .and_then(column)
        .map(|c| Cells::of(Field::Plate, c))
        .transpose()?;
    let values: Vec<Option<Values>> = cells
        .iter()
        .map(|c| c.as_ref().map(Cells::values))
        .collect();
    let dates = match dates.as_ref().map(Cells::values) {
        Some(Values::Text(dates)) => Some(dates),
        _ => None,
    };
    // The text of an ignition number that is neither 1 nor 0.
    let mut odd = String::new();
    for row in 0..df.height() {
        raw.line = line(row);
        raw.typed = TypedCells::default();
        for (&field, values) in Field::ALL.iter().zip(&values) {
            let text = match values {
                Some(Values::Text(v)) => v[row],
                // An ignition of 1 and 0 (or 1.0 and 0.0, as a column with gaps is
                // often written) is on and off; any other number is written out, for
                // the checks to reject as they would the same cell in a CSV.
                Some(Values::Number(v)) if field == Field::Ignition => match v[row] {
                    Some(n) if n == 0.0 || n == 1.0 => {
                        raw.typed.ignition = Some(n == 1.0);
                        None
                    }
                    Some(n) => {
                        odd.clear();
                        write!(odd, "{n}").expect("a String takes any text");
                        Some(odd.as_str())
                    }
                    None => None,
                },
                Some(Values::Number(v)) => {
                    set_number(&mut raw.typed, field, v[row]);
                    None
                }
                Some(Values::Flag(v)) => {
                    raw.typed.ignition = v[row];
                    None
                }
                None => None,
            };
            set_text(text_slot(raw, field), text);
        }
        if let (Some(time), Some(date)) = (raw.time.as_mut(), dates.as_ref().and_then(|d| d[row]))
            && let Some(dated) = crate::dated_time(time, date)
        {
            *time = dated;
        }
        each(raw);
    }
    Ok(())
}

/// Refills a text cell, reusing its string's memory.
fn set_text(slot: &mut Option<String>, value: Option<&str>) {
    match (slot.as_mut(), value) {
        (Some(s), Some(v)) => {
            s.clear();
            s.push_str(v);
        }
        (None, Some(v)) => *slot = Some(v.to_string()),
        (_, None) => *slot = None,
    }
}

fn text_slot(raw: &mut RawRow, field: Field) -> &mut Option<String> {
    match field {
        Field::Plate => &mut raw.plate,
        Field::Time => &mut raw.time,
        Field::Lat => &mut raw.lat,
        Field::Lon => &mut raw.lon,
        Field::Speed => &mut raw.speed,
        Field::Heading => &mut raw.heading,
        Field::Ignition => &mut raw.ignition,
        Field::Odometer => &mut raw.odometer,
    }
}

fn set_number(typed: &mut TypedCells, field: Field, value: Option<f64>) {
    match field {
        Field::Time => typed.time_epoch = value,
        Field::Lat => typed.lat = value,
        Field::Lon => typed.lon = value,
        Field::Speed => typed.speed = value,
        Field::Heading => typed.heading = value,
        Field::Odometer => typed.odometer = value,
        // A plate is never a number (see `Cells::of`); an ignition is a flag (see
        // `for_each_row`).
        Field::Plate | Field::Ignition => {}
    }
}
