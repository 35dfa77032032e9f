//! An Excel workbook for people (rust_xlsxwriter): one sheet per dataset, typed
//! cells (numbers, booleans, dates: the local `date` is an Excel date, every time an
//! Excel date-time in the fleet's own zone, so the `…_local` text twins of the CSV
//! are left out), a frozen and bold header row with a filter, and column widths set
//! from the contents.

use fleetctl_core::error::{Error, Result};
use fleetctl_core::export::{self, Cells, ColumnKind, Dataset, Order, Scope};
use fleetctl_core::report::Db;
use rust_xlsxwriter::{ExcelDateTime, Format, Workbook, XlsxError};
use std::path::Path;

/// Rows a sheet holds below its header (Excel's limit is 1,048,576 in all).
const MAX_SHEET_ROWS: u64 = 1_048_575;

fn xlsx_err(path: &Path) -> impl Fn(XlsxError) -> Error + '_ {
    move |e| Error::io(path, std::io::Error::other(e.to_string()))
}

/// Writes the workbook to `path`; `progress` gets the vehicle-days done so far.
pub(super) fn write(
    db: &Db,
    scope: &Scope,
    datasets: &[Dataset],
    path: &Path,
    progress: &mut dyn FnMut(usize),
) -> Result<Vec<(Dataset, u64)>> {
    let err = xlsx_err(path);
    let mut book = Workbook::new();
    let header = Format::new().set_bold();
    let when = Format::new().set_num_format("yyyy-mm-dd hh:mm:ss");
    let day = Format::new().set_num_format("yyyy-mm-dd");
    let mut counts = Vec::new();
    let mut done = 0usize;
    for &dataset in datasets {
        let specs = dataset.columns();
        // The sheet's columns: every column but the local-time text twins, by index.
        let kept: Vec<usize> = (0..specs.len())
            .filter(|&i| specs[i].kind != ColumnKind::TimeLocal)
            .collect();
        let sheet = book.add_worksheet();
        sheet.set_name(dataset.as_str()).map_err(&err)?;
        // Times are shown in the fleet's zone, and the header says so.
        let zone = db.zone.name.clone();
        let mut widths: Vec<usize> = Vec::with_capacity(kept.len());
        for (col, spec) in kept.iter().map(|&i| &specs[i]).enumerate() {
            let title = match spec.kind {
                ColumnKind::TimeUtc => format!("{} ({zone})", spec.name.trim_end_matches("_utc")),
                _ => spec.name.clone(),
            };
            widths.push(title.chars().count());
            sheet
                .write_string_with_format(0, col as u16, &title, &header)
                .map_err(&err)?;
        }
        let mut row: u64 = 0;
        let mut failed = None;
        export::for_each_chunk(db, dataset, scope, Order::ByVehicle, false, &mut |chunk| {
            done += 1;
            progress(done);
            let n = chunk.table.rows();
            if row + n as u64 > MAX_SHEET_ROWS {
                return Err(Error::invalid(format!(
                    "{} {} rows do not fit in one Excel sheet ({MAX_SHEET_ROWS} at most)",
                    row + n as u64,
                    dataset.as_str()
                ))
                .with_hint("narrow --from/--to or --plate, or export as csv or parquet"));
            }
            for i in 0..n {
                let r = (row + 1 + i as u64) as u32;
                for (col, &source) in kept.iter().enumerate() {
                    let cells = &chunk.table.cells[source];
                    let c = col as u16;
                    let is_date = specs[source].name == "date";
                    let shown = match cells {
                        Cells::Int(v) => v[i].map(|x| {
                            sheet
                                .write_number(r, c, x as f64)
                                .map(|_| x.to_string().len())
                        }),
                        Cells::Float(v) => {
                            v[i].map(|x| sheet.write_number(r, c, x).map(|_| format!("{x}").len()))
                        }
                        Cells::Bool(v) => v[i].map(|x| sheet.write_boolean(r, c, x).map(|_| 5)),
                        Cells::Text(_) | Cells::Runs(_) | Cells::Joined { .. } if is_date => {
                            cells.text(i).map(|x| {
                                ExcelDateTime::parse_from_str(x)
                                    .and_then(|d| sheet.write_datetime_with_format(r, c, d, &day))
                                    .map(|_| 10)
                            })
                        }
                        Cells::Text(_) | Cells::Runs(_) | Cells::Joined { .. } => {
                            cells.text(i).map(|x| {
                                sheet
                                    .write_string(r, c, x)
                                    .map(|_| x.chars().count().min(60))
                            })
                        }
                        Cells::TimeUtc(v) => v[i].map(|ms| {
                            let s = ms.div_euclid(1000);
                            ExcelDateTime::from_timestamp(s + db.zone.offset_s(s))
                                .and_then(|t| sheet.write_datetime_with_format(r, c, t, &when))
                                .map(|_| 19)
                        }),
                    };
                    match shown {
                        Some(Ok(w)) => widths[col] = widths[col].max(w),
                        Some(Err(e)) => failed = Some(e),
                        None => {}
                    }
                }
            }
            row += n as u64;
            Ok(())
        })?;
        if let Some(e) = failed {
            return Err(err(e));
        }
        sheet.set_freeze_panes(1, 0).map_err(&err)?;
        if row > 0 {
            sheet
                .autofilter(0, 0, row as u32, (kept.len() - 1) as u16)
                .map_err(&err)?;
        }
        for (col, w) in widths.iter().enumerate() {
            sheet
                .set_column_width(col as u16, (*w + 2) as f64)
                .map_err(&err)?;
        }
        counts.push((dataset, row));
    }
    book.save(path).map_err(&err)?;
    Ok(counts)
}
