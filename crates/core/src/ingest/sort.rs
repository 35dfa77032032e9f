//! Putting an import's rows in vehicle and time order with flat memory: rows are
//! kept in memory up to a budget, then sorted and spilled as a run to a temporary
//! file beside the database; at the end the runs are merged, and each vehicle's
//! rows come out together in time order. A file larger than memory sorts in a
//! bounded amount of it, and rows are written once to the spill and read once back,
//! with no index to maintain.

use super::settle::Window;
use crate::error::{Error, Result};
use crate::model::Fix;
use crate::store::import::Staged;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::PathBuf;

/// Rows held in memory before a run is spilled (about 100 bytes each).
const BUDGET_ROWS: usize = 2_000_000;
/// Bytes per row in a run file.
const RECORD_BYTES: usize = 8 * 8 + 4 + 1 + 8 + 4;

/// The order rows are settled in: vehicle, time, then file and line (ties only).
pub(crate) fn order_key(s: &Staged) -> (i64, i64, i64, usize, u64) {
    (s.fix.vehicle_id, s.fix.ts, s.ts_ms, s.file_index, s.line)
}

/// Sorts staged rows by vehicle and time within a memory budget.
pub struct Sorter {
    rows: Vec<Staged>,
    budget: usize,
    runs: Vec<PathBuf>,
    dir: PathBuf,
    prefix: String,
}

impl Sorter {
    /// A sorter whose spill files go in `dir`, named after `prefix`.
    pub fn new(dir: PathBuf, prefix: &str) -> Sorter {
        Sorter::with_budget(dir, prefix, BUDGET_ROWS)
    }

    fn with_budget(dir: PathBuf, prefix: &str, budget: usize) -> Sorter {
        if !prefix.is_empty() {
            crate::scratch::remove_abandoned(&dir, prefix);
        }
        Sorter {
            rows: Vec::new(),
            budget,
            runs: Vec::new(),
            dir,
            prefix: format!("{prefix}{}-", std::process::id()),
        }
    }

    /// Adds a row.
    pub fn push(&mut self, row: Staged) -> Result<()> {
        self.rows.push(row);
        if self.rows.len() >= self.budget {
            self.spill()?;
        }
        Ok(())
    }

    fn spill(&mut self) -> Result<()> {
        self.rows.sort_unstable_by_key(order_key);
        let path = self.dir.join(format!("{}{}", self.prefix, self.runs.len()));
        self.runs.push(path.clone());
        let file = std::fs::File::create(&path).map_err(|e| Error::io(&path, e))?;
        let mut w = BufWriter::with_capacity(1 << 20, file);
        for s in self.rows.drain(..) {
            w.write_all(&encode(&s)).map_err(|e| Error::io(&path, e))?;
        }
        w.flush().map_err(|e| Error::io(&path, e))
    }

    /// Hands each vehicle's rows, in time order, to `each`, vehicle after vehicle, in
    /// windows (see [`Window`]): `each(rows, first, last)` says whether the window is
    /// its vehicle's first and last.
    pub fn for_each_window(
        &mut self,
        each: &mut dyn FnMut(Vec<Staged>, bool, bool) -> Result<()>,
    ) -> Result<()> {
        let mut window = Window::default();
        let mut first = true;
        let mut next_row = |row: Staged, window: &mut Window| -> Result<()> {
            match window.rows.last() {
                Some(last) if last.fix.vehicle_id != row.fix.vehicle_id => {
                    each(window.take(), first, true)?;
                    first = true;
                }
                Some(_) if window.full_before(&row) => {
                    each(window.take(), first, false)?;
                    first = false;
                }
                _ => {}
            }
            window.push(row);
            Ok(())
        };
        if self.runs.is_empty() {
            let mut rows = std::mem::take(&mut self.rows);
            rows.sort_unstable_by_key(order_key);
            for row in rows {
                next_row(row, &mut window)?;
            }
        } else {
            if !self.rows.is_empty() {
                self.spill()?;
            }
            let mut readers = Vec::with_capacity(self.runs.len());
            for path in &self.runs {
                let file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
                readers.push((path.clone(), BufReader::with_capacity(1 << 20, file)));
            }
            let mut heap = BinaryHeap::new();
            let mut heads: Vec<Option<Staged>> = Vec::with_capacity(readers.len());
            for (i, (path, r)) in readers.iter_mut().enumerate() {
                let head = read_one(r).map_err(|e| Error::io(path, e))?;
                if let Some(h) = &head {
                    heap.push(Reverse((order_key(h), i)));
                }
                heads.push(head);
            }
            while let Some(Reverse((_, i))) = heap.pop() {
                let row = heads[i].take().expect("a run in the heap has a head");
                let (path, r) = &mut readers[i];
                heads[i] = read_one(r).map_err(|e| Error::io(path, e))?;
                if let Some(h) = &heads[i] {
                    heap.push(Reverse((order_key(h), i)));
                }
                next_row(row, &mut window)?;
            }
        }
        if !window.rows.is_empty() {
            each(window.take(), first, true)?;
        }
        Ok(())
    }
}

impl Drop for Sorter {
    fn drop(&mut self) {
        for path in &self.runs {
            let _ = std::fs::remove_file(path);
        }
    }
}

fn opt(v: Option<f64>) -> f64 {
    v.unwrap_or(f64::NAN)
}

fn encode(s: &Staged) -> [u8; RECORD_BYTES] {
    let f = &s.fix;
    let mut out = [0u8; RECORD_BYTES];
    let words = [
        f.vehicle_id.to_le_bytes(),
        f.ts.to_le_bytes(),
        s.ts_ms.to_le_bytes(),
        f.lat.to_le_bytes(),
        f.lon.to_le_bytes(),
        (if f.speed_derived {
            f64::NAN
        } else {
            f.speed_kmh
        })
        .to_le_bytes(),
        opt(f.heading_deg).to_le_bytes(),
        opt(f.odometer_km).to_le_bytes(),
    ];
    for (i, w) in words.iter().enumerate() {
        out[i * 8..i * 8 + 8].copy_from_slice(w);
    }
    out[64..68].copy_from_slice(&(s.file_index as u32).to_le_bytes());
    out[68] = match f.ignition {
        None => 2,
        Some(on) => on as u8,
    };
    out[69..77].copy_from_slice(&s.line.to_le_bytes());
    out[77..81].copy_from_slice(&(s.repeated_later_by_s as i32).to_le_bytes());
    out
}

fn read_one(r: &mut impl Read) -> std::io::Result<Option<Staged>> {
    let mut buf = [0u8; RECORD_BYTES];
    match r.read_exact(&mut buf) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let word = |i: usize| <[u8; 8]>::try_from(&buf[i * 8..i * 8 + 8]).expect("8 bytes");
    let float = |i: usize| f64::from_le_bytes(word(i));
    let some = |v: f64| (!v.is_nan()).then_some(v);
    let speed = float(5);
    Ok(Some(Staged {
        fix: Fix {
            vehicle_id: i64::from_le_bytes(word(0)),
            ts: i64::from_le_bytes(word(1)),
            lat: float(3),
            lon: float(4),
            speed_kmh: if speed.is_nan() { 0.0 } else { speed },
            speed_derived: speed.is_nan(),
            heading_deg: some(float(6)),
            ignition: match buf[68] {
                0 => Some(false),
                1 => Some(true),
                _ => None,
            },
            odometer_km: some(float(7)),
        },
        ts_ms: i64::from_le_bytes(word(2)),
        file_index: u32::from_le_bytes(buf[64..68].try_into().expect("4 bytes")) as usize,
        line: u64::from_le_bytes(buf[69..77].try_into().expect("8 bytes")),
        repeated_later_by_s: i64::from(i32::from_le_bytes(
            buf[77..81].try_into().expect("4 bytes"),
        )),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(vehicle_id: i64, ts: i64, line: u64) -> Staged {
        Staged {
            fix: Fix {
                vehicle_id,
                ts,
                lat: 14.6 + ts as f64 * 1e-6,
                lon: -90.5,
                speed_kmh: 0.0,
                speed_derived: ts % 2 == 0,
                heading_deg: (ts % 3 == 0).then_some(90.0),
                ignition: [None, Some(true), Some(false)][(ts % 3) as usize],
                odometer_km: (ts % 5 == 0).then_some(12.5),
            },
            ts_ms: ts % 1000,
            file_index: (line % 2) as usize,
            line,
            repeated_later_by_s: if ts % 7 == 0 { 3600 } else { 0 },
        }
    }

    fn sorted_groups(budget: usize, rows: &[Staged]) -> (Vec<Vec<Staged>>, usize) {
        let dir = std::env::temp_dir();
        let mut s = Sorter::with_budget(dir, &format!("fleetctl-sort-test-{budget}-"), budget);
        for r in rows {
            s.push(r.clone()).unwrap();
        }
        let runs = s.runs.len();
        let mut out = Vec::new();
        s.for_each_window(&mut |g, _, _| {
            out.push(g);
            Ok(())
        })
        .unwrap();
        (out, runs)
    }

    #[test]
    fn runs_left_by_a_killed_import_are_removed_by_the_next() {
        let dir = std::env::temp_dir().join(format!("fleetctl-sort-left-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // A process id above Linux's largest (4 194 304) is surely gone.
        let left = dir.join(".fleet.db.import-999999999-0");
        let alive = dir.join(format!(".fleet.db.import-{}-7", std::process::id()));
        std::fs::write(&left, b"old run").unwrap();
        std::fs::write(&alive, b"a run of this process").unwrap();
        let _sorter = Sorter::new(dir.clone(), ".fleet.db.import-");
        if std::path::Path::new("/proc/self").exists() {
            assert!(!left.exists(), "an abandoned run is removed");
        }
        assert!(alive.exists(), "a live process's run is kept");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn spilled_runs_merge_into_the_same_groups_as_memory() {
        // Vehicles 3, 1, 2 interleaved, times descending.
        let rows: Vec<Staged> = (0..1000u64)
            .map(|i| row([3, 1, 2][(i % 3) as usize], 5000 - i as i64, i + 1))
            .collect();
        let (in_memory, runs) = sorted_groups(10_000, &rows);
        assert_eq!(runs, 0);
        let (spilled, runs) = sorted_groups(64, &rows);
        assert!(runs >= 15, "{runs} runs");
        assert_eq!(in_memory, spilled, "every field survives the spill");
        assert_eq!(spilled.len(), 3);
        assert_eq!(spilled[0][0].fix.vehicle_id, 1);
        for g in &spilled {
            assert!(g.windows(2).all(|w| order_key(&w[0]) < order_key(&w[1])));
        }
        assert_eq!(spilled.iter().map(Vec::len).sum::<usize>(), 1000);
    }
}
