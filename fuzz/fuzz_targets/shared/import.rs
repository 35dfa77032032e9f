//! What the import targets share: each input is written to one file and read by
//! `formats::read_file` in a forced format, inside an import into a database made
//! once per run; the import is then rolled back, so no input changes what the next
//! one meets and a crash replays alone.
//!
//! fleetctl turns a panic inside polars on a malformed Parquet file into an error (one
//! was found here: a column chunk shorter than its row group). libFuzzer's panic hook
//! would abort even on that caught panic, so Rust's default hook is put back, as in
//! `tile.rs`: a panic that escapes the reader still reaches libfuzzer-sys, which
//! aborts on it (a crash).

use fleetctl::error::{Error, ErrorCode};
use fleetctl::formats::{self, Format, ReadOptions};
use fleetctl::ingest::{self, ImportOptions, NoRejectsFile, Reject, RejectSink};
use std::path::PathBuf;

/// The computer's clock for every import (2026-12-03 00:00 UTC), so that the
/// future-time check gives the same answer on every run.
const WALL_NOW: i64 = 1_796_256_000;

/// The message that stops each import once its file has been read, rolling it back.
const ROLL_BACK: &str = "fuzz: roll back";

/// A row that imports, to create the database the inputs are read into.
const FIRST_ROW: &[u8] = b"plate,time,lat,lon\nFUZZ-1,2026-12-01T00:00:00Z,14.6,-90.5\n";

/// The run's scratch folder: the database, and the file each input is written to.
struct Scratch {
    db: PathBuf,
    input: PathBuf,
}

thread_local! {
    static SCRATCH: Scratch = {
        drop(std::panic::take_hook());
        // One polars thread: the machine is shared, and libFuzzer runs one input at a time.
        // SAFETY: set before polars starts its pool, while this is the only thread.
        unsafe { std::env::set_var("POLARS_MAX_THREADS", "1") };
        let dir = std::env::temp_dir().join(format!("fleetctl-fuzz-import-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("a scratch folder");
        let scratch = Scratch { db: dir.join("fleet.db"), input: dir.join("input") };
        std::fs::write(&scratch.input, FIRST_ROW).expect("the first row is written");
        let opts = ImportOptions {
            db: scratch.db.clone(),
            time_zone: Some("UTC".to_string()),
            wall_now: WALL_NOW,
            strict_units: false,
        };
        let read_opts = ReadOptions { format: Some(Format::Csv), ..ReadOptions::default() };
        let mut read = |ingest: &mut ingest::Ingest| {
            formats::read_file(&scratch.input, &read_opts, ingest, &mut |_| {}).map(drop)
        };
        ingest::import(&opts, &mut read, &mut NoRejectsFile, &mut |_| {})
            .expect("the database is created");
        scratch
    };
}

/// Rejected rows must say where they were.
struct CheckedRejects;

impl RejectSink for CheckedRejects {
    fn reject(&mut self, reject: &Reject) -> fleetctl::error::Result<()> {
        assert!(reject.line >= 1, "a row rejected at line 0: {reject:?}");
        Ok(())
    }
    fn restart(&mut self) -> fleetctl::error::Result<()> {
        Ok(())
    }
}

/// Reads `data` as a file of `format` (after letting `Format::detect` sniff it),
/// inside an import that is rolled back. No panic; a refusal has a message.
pub fn read_as(format: Format, data: &[u8]) {
    SCRATCH.with(|scratch| {
        std::fs::write(&scratch.input, data).expect("the input is written");
        let _ = Format::detect(&scratch.input);
        let opts = ImportOptions {
            db: scratch.db.clone(),
            time_zone: None,
            wall_now: WALL_NOW,
            strict_units: false,
        };
        let read_opts = ReadOptions {
            format: Some(format),
            ..ReadOptions::default()
        };
        let mut read = |ingest: &mut ingest::Ingest| {
            let read_as = formats::read_file(&scratch.input, &read_opts, ingest, &mut |_| {})?;
            assert_eq!(read_as, format, "read in another format than forced");
            Err(Error::new(ErrorCode::Internal, ROLL_BACK))
        };
        match ingest::import(&opts, &mut read, &mut CheckedRejects, &mut |_| {}) {
            Ok(summary) => panic!("an import meant to roll back was kept: {summary:?}"),
            Err(e) => assert!(
                !e.message.trim().is_empty(),
                "a refusal without a message: {e:?}"
            ),
        }
    });
}
