//! Delimited text: a generic CSV/TSV read with polars in bounded chunks of whole
//! records (memory stays flat whatever the file's size), and Traccar's export,
//! whose unquoted cells polars cannot read (an address with a comma adds cells).

use crate::{ColumnMap, Source, raw_row};
use fleetctl_core::error::{Error, Result};
use fleetctl_core::ingest::{Checked, Checker, FileUnits, RejectReason};
use polars::prelude::{
    CsvParseOptions, CsvReadOptions, DataFrame, DataType, Field as PlField, Schema, SerReader,
};
use std::io::{BufRead, BufReader, Cursor};
use std::sync::Arc;

/// Bytes of records parsed at a time.
const CHUNK_BYTES: usize = 8 << 20;

/// Whole records, with the line each starts on.
struct Chunk {
    bytes: Vec<u8>,
    lines: Vec<u64>,
}

/// Reads records (a newline inside double quotes does not end one) until `target`
/// bytes; blank lines are skipped. None at the end of the file.
struct Records<R> {
    reader: R,
    line: u64,
    read_bytes: u64,
}

impl<R: BufRead> Records<R> {
    fn next_chunk(&mut self, target: usize) -> std::io::Result<Option<Chunk>> {
        let mut chunk = Chunk {
            bytes: Vec::new(),
            lines: Vec::new(),
        };
        let mut in_quotes = false;
        let mut record_start = 0;
        loop {
            let start = chunk.bytes.len();
            let n = crate::read_line_capped(&mut self.reader, &mut chunk.bytes)?;
            if n == 0 {
                break;
            }
            self.read_bytes += n as u64;
            self.line += 1;
            if !in_quotes {
                record_start = start;
                if chunk.bytes[start..].iter().all(|b| b.is_ascii_whitespace()) {
                    chunk.bytes.truncate(start);
                    continue;
                }
                chunk.lines.push(self.line);
            }
            if memchr::memchr_iter(b'"', &chunk.bytes[start..]).count() % 2 == 1 {
                in_quotes = !in_quotes;
            }
            if !in_quotes && !chunk.bytes.ends_with(b"\n") {
                chunk.bytes.push(b'\n');
            }
            if !in_quotes && chunk.bytes.len() >= target {
                break;
            }
        }
        if in_quotes {
            // An unclosed quote runs to the end of the file: the reader names it.
            let _ = record_start;
            chunk.bytes.push(b'\n');
        }
        Ok((!chunk.lines.is_empty()).then_some(chunk))
    }
}

/// The separator of a header line: the most frequent of `,` `;` tab `|`.
fn sniff_separator(header: &[u8]) -> u8 {
    [b',', b';', b'\t', b'|']
        .into_iter()
        .max_by_key(|sep| header.iter().filter(|b| *b == sep).count())
        .unwrap_or(b',')
}

fn options(separator: u8) -> CsvReadOptions {
    CsvReadOptions::default()
        .with_raise_if_empty(false)
        .map_parse_options(move |p: CsvParseOptions| {
            p.with_separator(separator)
                .with_quote_char(Some(b'"'))
                .with_truncate_ragged_lines(false)
        })
}

fn parse(
    bytes: &[u8],
    separator: u8,
    schema: &Arc<Schema>,
) -> polars::error::PolarsResult<DataFrame> {
    options(separator)
        .with_has_header(false)
        .with_schema(Some(schema.clone()))
        .into_reader_with_file_handle(Cursor::new(bytes))
        .finish()
}

/// A generic CSV/TSV with a header row.
pub(crate) fn read_csv(src: &mut Source, size: u64) -> Result<()> {
    let file = std::fs::File::open(src.path).map_err(|e| Error::io(src.path, e))?;
    let mut records = Records {
        reader: BufReader::with_capacity(1 << 20, file),
        line: 0,
        read_bytes: 0,
    };
    let io = |e| Error::io(src.path, e);
    let Some(mut head) = records.next_chunk(1).map_err(io)? else {
        return Err(src.bad("the file is empty"));
    };
    if head.bytes.starts_with("\u{feff}".as_bytes()) {
        head.bytes.drain(..3);
    }
    let separator = sniff_separator(&head.bytes);
    let header_df = options(separator)
        .with_has_header(true)
        .with_infer_schema_length(Some(0))
        .into_reader_with_file_handle(Cursor::new(head.bytes))
        .finish()
        .map_err(|e| src.bad(format!("its header cannot be read: {e}")))?;
    let header: Vec<String> = header_df
        .get_column_names()
        .iter()
        .map(|n| n.to_string())
        .collect();
    let map = ColumnMap::from_header(&header, &src.opts.map)?;
    if let Some(e) = src.missing_columns(&map, &header) {
        return Err(e);
    }
    let schema = Arc::new(Schema::from_iter(
        header
            .iter()
            .map(|n| PlField::new(n.as_str().into(), DataType::String)),
    ));
    let units = src.units(Some(&map));
    // Chunks are parsed and checked on every core; this thread reads them from the
    // file and takes the rows back in file order.
    let job = Job {
        separator,
        schema,
        map,
        units,
        checker: src.ingest.checker().clone(),
        file: src.file,
    };
    let (ingest, progress, file) = (&mut *src.ingest, &mut *src.progress, src.file);
    let path = src.path;
    fleetctl_core::parallel::map_in_order(
        &|chunk: Chunk| job.rows(&chunk),
        &mut |submit| {
            while let Some(chunk) = records
                .next_chunk(CHUNK_BYTES)
                .map_err(|e| Error::io(path, e))?
            {
                submit(chunk)?;
                progress(records.read_bytes as f64 / size.max(1) as f64);
            }
            Ok(())
        },
        &mut |rows| {
            for (line, checked) in rows? {
                ingest.accept(file, line, checked)?;
            }
            Ok(())
        },
    )
}

/// What parsing and checking a chunk needs, shared by the worker threads.
struct Job {
    separator: u8,
    schema: Arc<Schema>,
    map: ColumnMap,
    units: FileUnits,
    checker: Checker,
    file: usize,
}

impl Job {
    /// The chunk's rows, checked, each with its line.
    fn rows(&self, chunk: &Chunk) -> Result<Vec<(u64, Checked)>> {
        let parsed = parse(&chunk.bytes, self.separator, &self.schema)
            .ok()
            .filter(|df| df.height() == chunk.lines.len());
        let mut out = Vec::with_capacity(chunk.lines.len());
        match parsed {
            Some(df) => self.rows_of(&df, &chunk.lines, &mut out)?,
            None => self.records_one_by_one(chunk, &mut out)?,
        }
        Ok(out)
    }

    /// A chunk polars refused: each record alone, so that only the broken ones go.
    fn records_one_by_one(&self, chunk: &Chunk, out: &mut Vec<(u64, Checked)>) -> Result<()> {
        let mut starts: Vec<usize> = Vec::with_capacity(chunk.lines.len() + 1);
        let mut in_quotes = false;
        let mut at_start = true;
        for (i, &b) in chunk.bytes.iter().enumerate() {
            if at_start {
                starts.push(i);
                at_start = false;
            }
            if b == b'"' {
                in_quotes = !in_quotes;
            } else if b == b'\n' && !in_quotes {
                at_start = true;
            }
        }
        starts.push(chunk.bytes.len());
        for (k, w) in starts.windows(2).enumerate() {
            let line = chunk.lines.get(k).copied().unwrap_or(0);
            let record = &chunk.bytes[w[0]..w[1]];
            let malformed = |why: String| (line, Err((RejectReason::MalformedRow, why)));
            match parse(record, self.separator, &self.schema) {
                Ok(df) if df.height() == 1 => self.rows_of(&df, &[line], out)?,
                Ok(_) => out.push(malformed("not one record".to_string())),
                Err(e) => {
                    let mut why = e.to_string();
                    why.truncate(200);
                    out.push(malformed(why));
                }
            }
        }
        Ok(())
    }

    fn rows_of(&self, df: &DataFrame, lines: &[u64], out: &mut Vec<(u64, Checked)>) -> Result<()> {
        // Each column's cells read once, in order (a lookup by row index would find
        // the cell's array again for every cell).
        let cells: Vec<Vec<Option<&str>>> = df
            .columns()
            .iter()
            .map(|c| {
                c.str()
                    .map(|s| s.iter().collect())
                    .map_err(|e| Error::invalid(e.to_string()))
            })
            .collect::<Result<_>>()?;
        let mut row = fleetctl_core::ingest::RawRow::default();
        for (i, &line) in lines.iter().enumerate() {
            crate::fill_row(&mut row, line, &self.map, |c| {
                cells
                    .get(c)
                    .and_then(|column| column.get(i).copied().flatten())
            });
            out.push((line, self.checker.check(&row, &self.units, self.file)));
        }
        Ok(())
    }
}

/// Traccar's positions export: a header, then one line per position, cells never
/// quoted; the `address` cell may hold commas, which add cells that belong to it.
pub(crate) fn read_traccar(src: &mut Source, size: u64) -> Result<()> {
    let file = std::fs::File::open(src.path).map_err(|e| Error::io(src.path, e))?;
    let mut reader = BufReader::with_capacity(1 << 20, file);
    let mut bytes = Vec::new();
    let mut read_bytes = crate::read_line_capped(&mut reader, &mut bytes)
        .map_err(|e| Error::io(src.path, e))? as u64;
    let mut line = String::from_utf8_lossy(&bytes).into_owned();
    if read_bytes == 0 {
        return Err(src.bad("the file is empty"));
    }
    let header: Vec<String> = line
        .trim_start_matches('\u{feff}')
        .trim_end()
        .split(',')
        .map(str::to_string)
        .collect();
    let map = ColumnMap::from_header(&header, &src.opts.map)?;
    if let Some(e) = src.missing_columns(&map, &header) {
        return Err(e);
    }
    let find = |name: &str| header.iter().position(|h| h.eq_ignore_ascii_case(name));
    let (address, received, valid) = (find("address"), find("serverTime"), find("valid"));
    let units = src.units(Some(&map));
    let mut number = 1u64;
    loop {
        bytes.clear();
        let n =
            crate::read_line_capped(&mut reader, &mut bytes).map_err(|e| Error::io(src.path, e))?;
        if n == 0 {
            break;
        }
        line = String::from_utf8_lossy(&bytes).into_owned();
        read_bytes += n as u64;
        number += 1;
        let text = line.trim_end_matches(['\n', '\r']);
        if text.trim().is_empty() {
            continue;
        }
        let mut cells: Vec<&str> = text.split(',').collect();
        if cells.len() > header.len() {
            // The extra cells are the address's commas; the address is not stored.
            let Some(a) = address else {
                let detail = format!("{} cells, the header has {}", cells.len(), header.len());
                src.ingest.malformed(src.file, number, detail)?;
                continue;
            };
            let extra = cells.len() - header.len();
            cells.drain(a + 1..=a + extra);
        }
        let cell = |i: usize| cells.get(i).map(|c| c.to_string());
        let mut row = raw_row(number, &map, cell);
        row.received = received.and_then(cell);
        row.valid = valid.and_then(cell);
        src.row(&row, &units)?;
        if number.is_multiple_of(65_536) {
            (src.progress)(read_bytes as f64 / size.max(1) as f64);
        }
    }
    Ok(())
}
