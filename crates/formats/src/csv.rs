//! Delimited text: a generic CSV/TSV read with polars in bounded chunks of whole
//! records (memory stays flat whatever the file's size), and Traccar's export,
//! whose unquoted cells polars cannot read (an address with a comma adds cells).

use crate::{ColumnMap, Field, Source, raw_row};
use fleetctl_core::error::{Error, Result};
use fleetctl_core::ingest::{CheckedBatch, Checker, FileUnits};
use polars::prelude::{
    CsvParseOptions, CsvReadOptions, DataFrame, DataType, Field as PlField, Schema, SerReader,
};
use std::io::{BufReader, Cursor, Read};
use std::sync::Arc;

/// Bytes of records parsed at a time.
const CHUNK_BYTES: usize = 8 << 20;

/// Reads a file in blocks of about [`CHUNK_BYTES`], each cut after its last whole
/// record (a newline inside double quotes does not end one), so that workers can
/// number and parse the blocks on their own.
struct Blocks<R> {
    file: R,
    /// [`CHUNK_BYTES`], smaller in tests.
    block_bytes: usize,
    /// The start of the next block: what followed the last record end.
    carry: Vec<u8>,
    eof: bool,
    read_bytes: u64,
}

impl<R: Read> Blocks<R> {
    fn new(file: R, block_bytes: usize) -> Self {
        Blocks {
            file,
            block_bytes,
            carry: Vec::new(),
            eof: false,
            read_bytes: 0,
        }
    }

    /// The next block, ending with a newline; None at the end of the file. A record
    /// longer than a block (a quote never closed) is cut at a line end: its pieces are
    /// then rejected as malformed, and memory stays bounded.
    fn next_block(&mut self) -> std::io::Result<Option<Vec<u8>>> {
        let mut bytes = Vec::with_capacity(self.block_bytes + (64 << 10));
        bytes.append(&mut self.carry);
        if !self.eof && bytes.len() < self.block_bytes {
            let want = self.block_bytes - bytes.len();
            let n = (&mut self.file).take(want as u64).read_to_end(&mut bytes)?;
            self.read_bytes += n as u64;
            self.eof = n < want;
        }
        if bytes.is_empty() {
            return Ok(None);
        }
        if !self.eof {
            let end = last_record_end(&bytes)
                .or_else(|| memchr::memrchr(b'\n', &bytes).map(|i| i + 1))
                .unwrap_or(bytes.len());
            self.carry = bytes[end..].to_vec();
            bytes.truncate(end);
        }
        if !bytes.ends_with(b"\n") {
            bytes.push(b'\n');
        }
        Ok(Some(bytes))
    }
}

/// Just past the last newline outside double quotes (a block starts outside them).
fn last_record_end(bytes: &[u8]) -> Option<usize> {
    if memchr::memchr(b'"', bytes).is_none() {
        return memchr::memrchr(b'\n', bytes).map(|i| i + 1);
    }
    let mut in_quotes = false;
    let mut end = None;
    for i in memchr::memchr2_iter(b'"', b'\n', bytes) {
        if bytes[i] == b'"' {
            in_quotes = !in_quotes;
        } else if !in_quotes {
            end = Some(i + 1);
        }
    }
    end
}

/// The records of a block: where each starts and ends, and on which of the block's
/// lines (from 1) it starts. Blank lines are no records.
#[derive(Default)]
struct Records {
    spans: Vec<(usize, usize, u64)>,
    /// The block's newlines: the next block's lines start after them.
    newlines: u64,
    /// Some blank line was left out (the records are not one run of bytes).
    gaps: bool,
    /// The first line over [`crate::MAX_LINE_BYTES`].
    long_line: Option<u64>,
}

fn records(bytes: &[u8]) -> Records {
    let mut out = Records::default();
    let (mut line, mut line_start) = (1u64, 0usize);
    let (mut start, mut start_line) = (0usize, 1u64);
    let mut in_quotes = false;
    let end_record = |out: &mut Records, from: usize, to: usize, line: u64| {
        if bytes[from..to].iter().all(u8::is_ascii_whitespace) {
            out.gaps = true;
        } else {
            out.spans.push((from, to, line));
        }
    };
    for i in memchr::memchr2_iter(b'"', b'\n', bytes) {
        if bytes[i] == b'"' {
            in_quotes = !in_quotes;
            continue;
        }
        if (i - line_start) as u64 > crate::MAX_LINE_BYTES && out.long_line.is_none() {
            out.long_line = Some(line);
        }
        line += 1;
        line_start = i + 1;
        if !in_quotes {
            end_record(&mut out, start, i + 1, start_line);
            start = i + 1;
            start_line = line;
        }
    }
    if start < bytes.len() {
        // A quote never closed runs to the end of the block.
        end_record(&mut out, start, bytes.len(), start_line);
    }
    out.newlines = line - 1;
    out
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
    let mut blocks = Blocks::new(file, CHUNK_BYTES);
    let io = |e| Error::io(src.path, e);
    let mut first = blocks.next_block().map_err(io)?.unwrap_or_default();
    if first.starts_with("\u{feff}".as_bytes()) {
        first.drain(..3);
    }
    let found = records(&first);
    if let Some(line) = found.long_line {
        return Err(Error::io(src.path, crate::long_line(Some(line))));
    }
    let Some(&(start, end, _)) = found.spans.first() else {
        return Err(src.bad("the file is empty"));
    };
    let head = &first[start..end];
    let separator = sniff_separator(head);
    let header_df = options(separator)
        .with_has_header(true)
        .with_infer_schema_length(Some(0))
        .into_reader_with_file_handle(Cursor::new(head))
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
    let units = src.units(Some(&map));
    // Blocks are read on a thread of their own, parsed and checked on the other
    // cores, and their rows taken back on this thread in file order. Numeric columns
    // are parsed as numbers (no text copied and parsed again); a block with a cell
    // that is no number is parsed again all as text.
    let job = Job {
        separator,
        typed_schema: schema(&header, |i| number_column(&map, i)),
        text_schema: schema(&header, |_| false),
        header,
        map,
        units,
        checker: src.ingest.checker().clone(),
        file: src.file,
    };
    let (ingest, progress, file) = (&mut *src.ingest, &mut *src.progress, src.file);
    let path = src.path;
    let mut lines_before = memchr::memchr_iter(b'\n', &first[..end]).count() as u64;
    first.drain(..end);
    let mut first = Some(first);
    std::thread::scope(|scope| {
        // A thread of its own reads the blocks, two ahead at most, so that the thread
        // taking the rows (the database's) does not also wait for the file.
        let (block_tx, block_rx) = std::sync::mpsc::sync_channel(2);
        scope.spawn(move || {
            loop {
                let next = blocks.next_block().transpose();
                let last = !matches!(next, Some(Ok(_)));
                let Some(next) = next else { break };
                if block_tx.send(next.map(|b| (b, blocks.read_bytes))).is_err() || last {
                    break;
                }
            }
        });
        // One core fewer than there are: taking the rows (settling and appending them)
        // costs more than parsing and checking them, and this thread keeps a core of
        // its own. On 2 cores, 9.9 M rows took as long with one worker as with two
        // (5.8-6.1 s), with 250-265 MiB at peak against 360-390.
        let workers = fleetctl_core::parallel::cores().saturating_sub(1);
        let result = fleetctl_core::parallel::map_in_order_until(
            workers,
            &|bytes: Vec<u8>| job.rows(&bytes),
            &mut |submit| {
                if let Some(rest) = first.take()
                    && submit(rest)?.is_break()
                {
                    return Ok(());
                }
                for next in block_rx.iter() {
                    let (block, read_bytes) = next.map_err(|e| Error::io(path, e))?;
                    if submit(block)?.is_break() {
                        return Ok(());
                    }
                    progress(read_bytes as f64 / size.max(1) as f64);
                }
                Ok(())
            },
            &mut |rows| {
                let rows = rows?;
                if let Some(line) = rows.long_line {
                    return Err(Error::io(path, crate::long_line(Some(lines_before + line))));
                }
                let base = lines_before;
                lines_before += rows.newlines;
                ingest.accept_batch(file, base, rows.batch)
            },
        );
        // A reader still waiting to hand over a block stops when no one takes it.
        drop(block_rx);
        result
    })
}

/// A schema of the header's columns, each a number (`Float64`) where `number(i)`,
/// else text.
fn schema(header: &[String], number: impl Fn(usize) -> bool) -> Arc<Schema> {
    Arc::new(Schema::from_iter(header.iter().enumerate().map(
        |(i, n)| {
            let dtype = if number(i) {
                DataType::Float64
            } else {
                DataType::String
            };
            PlField::new(n.as_str().into(), dtype)
        },
    )))
}

/// True when column `i` holds only numeric fields (coordinates, speed, heading,
/// odometer), which polars may parse as numbers. Times stay text: an epoch time is
/// told from a date by its characters, as in every other format.
fn number_column(map: &ColumnMap, i: usize) -> bool {
    let mut fields = map.index.iter().filter(|(_, c)| **c == i).map(|(f, _)| *f);
    let numeric = |f: Field| {
        matches!(
            f,
            Field::Lat | Field::Lon | Field::Speed | Field::Heading | Field::Odometer
        )
    };
    fields.clone().next().is_some() && fields.all(numeric)
}

/// True when a numeric column holds a NaN or an infinity, which polars reads as
/// numbers: the block is then read as text, so that the row is rejected with the
/// cell as written (`"nan"`, `"1e999"`), as every other cell that is no number.
fn has_non_finite(df: &DataFrame) -> bool {
    df.columns()
        .iter()
        .filter_map(|c| c.f64().ok())
        .any(|c| c.iter().flatten().any(|v| !v.is_finite()))
}

/// What parsing and checking a block needs, shared by the worker threads.
struct Job {
    separator: u8,
    /// Numeric fields as numbers: the schema tried first.
    typed_schema: Arc<Schema>,
    /// Every column as text: for a block with a cell that is not a number, so that
    /// the row is rejected with the cell as written, and the rest kept.
    text_schema: Arc<Schema>,
    header: Vec<String>,
    map: ColumnMap,
    units: FileUnits,
    checker: Checker,
    file: usize,
}

/// A block's rows, checked, their lines counted from the block's start.
struct BlockRows {
    batch: CheckedBatch,
    newlines: u64,
    long_line: Option<u64>,
}

impl Job {
    fn rows(&self, bytes: &[u8]) -> Result<BlockRows> {
        let found = records(bytes);
        let mut batch = CheckedBatch::with_capacity(found.spans.len());
        if found.long_line.is_none() && !found.spans.is_empty() {
            // Blank lines are left out of what polars reads.
            let joined: Vec<u8>;
            let records_only = if found.gaps {
                joined = found
                    .spans
                    .iter()
                    .flat_map(|&(a, b, _)| &bytes[a..b])
                    .copied()
                    .collect();
                &joined[..]
            } else {
                &bytes[found.spans[0].0..]
            };
            let lines: Vec<u64> = found.spans.iter().map(|s| s.2).collect();
            let whole = |schema| match parse(records_only, self.separator, schema) {
                Ok(df) if df.height() == lines.len() => Some(df),
                _ => None,
            };
            let typed = whole(&self.typed_schema).filter(|df| !has_non_finite(df));
            match typed.or_else(|| whole(&self.text_schema)) {
                Some(df) => self.rows_of(&df, &lines, &mut batch)?,
                None => self.records_one_by_one(bytes, &found.spans, &mut batch)?,
            }
        }
        Ok(BlockRows {
            batch,
            newlines: found.newlines,
            long_line: found.long_line,
        })
    }

    /// A block polars refused: each record alone, so that only the broken ones go;
    /// a broken record of several lines (a quote never closed) line by line, so that
    /// the lines after the stray quote are read as the records they are.
    fn records_one_by_one(
        &self,
        bytes: &[u8],
        spans: &[(usize, usize, u64)],
        batch: &mut CheckedBatch,
    ) -> Result<()> {
        for &(a, b, line) in spans {
            let record = &bytes[a..b];
            let Err(why) = self.one_record(record, line, batch)? else {
                continue;
            };
            if memchr::memchr_iter(b'\n', record).count() < 2 {
                batch.malformed(line, why);
                continue;
            }
            let mut at = a;
            for (k, end) in memchr::memchr_iter(b'\n', record).enumerate() {
                let piece = &bytes[at..a + end + 1];
                at = a + end + 1;
                if piece.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                if let Err(why) = self.one_record(piece, line + k as u64, batch)? {
                    batch.malformed(line + k as u64, why);
                }
            }
        }
        Ok(())
    }

    /// Parses and checks one record; Ok(Err(why)) when polars cannot read it.
    fn one_record(
        &self,
        record: &[u8],
        line: u64,
        batch: &mut CheckedBatch,
    ) -> Result<std::result::Result<(), String>> {
        match parse(record, self.separator, &self.text_schema) {
            Ok(df) if df.height() == 1 => self.rows_of(&df, &[line], batch).map(Ok),
            Ok(_) => Ok(Err("not one record".to_string())),
            Err(e) => {
                let mut why = e.to_string();
                why.truncate(200);
                Ok(Err(why))
            }
        }
    }

    fn rows_of(&self, df: &DataFrame, lines: &[u64], batch: &mut CheckedBatch) -> Result<()> {
        let mut row = fleetctl_core::ingest::RawRow::default();
        crate::frame::for_each_row(
            df,
            &self.map,
            &self.header,
            |i| lines[i],
            &mut row,
            |row| batch.check(&self.checker, row, &self.units, self.file),
        )
        .map_err(|e| Error::invalid(e.to_string()))
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
                if src.ingest.malformed(src.file, number, detail)?.is_break() {
                    return Ok(());
                }
                continue;
            };
            let extra = cells.len() - header.len();
            cells.drain(a + 1..=a + extra);
        }
        let cell = |i: usize| cells.get(i).map(|c| c.to_string());
        let mut row = raw_row(number, &map, cell);
        row.received = received.and_then(cell);
        row.valid = valid.and_then(cell);
        if src.row(&row, &units)?.is_break() {
            return Ok(());
        }
        if number.is_multiple_of(65_536) {
            (src.progress)(read_bytes as f64 / size.max(1) as f64);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every record of `text` with the line it starts on, read in blocks of `size`.
    fn records_in_blocks(text: &str, size: usize) -> Vec<(String, u64)> {
        let mut blocks = Blocks::new(text.as_bytes(), size);
        let (mut out, mut lines_before) = (Vec::new(), 0);
        while let Some(block) = blocks.next_block().unwrap() {
            let found = records(&block);
            for &(a, b, line) in &found.spans {
                let record = String::from_utf8(block[a..b].to_vec()).unwrap();
                out.push((record, lines_before + line));
            }
            lines_before += found.newlines;
        }
        out
    }

    #[test]
    fn blocks_end_between_records_never_inside_quotes() {
        let text = "plate,note\nP-1,\"two\nlines\"\n\nP-2,plain\r\nP-3,\"a \"\"quoted\"\" word\nand, more\"\nP-4,last";
        let whole = records_in_blocks(text, 1 << 20);
        let expected: Vec<(String, u64)> = [
            ("plate,note\n", 1),
            ("P-1,\"two\nlines\"\n", 2),
            ("P-2,plain\r\n", 5),
            ("P-3,\"a \"\"quoted\"\" word\nand, more\"\n", 6),
            ("P-4,last\n", 8),
        ]
        .iter()
        .map(|&(r, l)| (r.to_string(), l))
        .collect();
        assert_eq!(whole, expected);
        // Any block size down to the longest record (38 bytes) cuts the same records.
        for size in [64, 48, 40, 39, 38] {
            assert_eq!(
                records_in_blocks(text, size),
                expected,
                "blocks of {size} bytes"
            );
        }
    }

    #[test]
    fn a_quote_never_closed_costs_a_bounded_block_not_the_file() {
        // The stray quote would swallow every following line into one record; a block
        // still ends at a line end, so memory stays within the block size.
        let mut text = String::from("plate,note\nP-1,\"open\n");
        for i in 0..100 {
            text.push_str(&format!("P-{i},fine\n"));
        }
        let mut blocks = Blocks::new(text.as_bytes(), 256);
        let mut largest = 0;
        while let Some(block) = blocks.next_block().unwrap() {
            assert!(block.ends_with(b"\n"));
            largest = largest.max(block.len());
        }
        assert!(largest <= 256, "a block of {largest} bytes");
    }

    #[test]
    fn a_line_over_the_cap_is_found_with_its_number() {
        let text = format!(
            "plate,time\nP-1,1\n{}\n",
            "x".repeat(crate::MAX_LINE_BYTES as usize + 1)
        );
        assert_eq!(records(text.as_bytes()).long_line, Some(3));
        assert_eq!(records(b"plate,time\nP-1,1\n").long_line, None);
    }
}
