//! `make bench`: the speed and memory figures the issues set targets for, measured
//! on this machine and printed. Generation and analysis run in a fresh child process
//! (this same binary, re-executed) so that each peak memory figure is its own.

use fleetctl::analyze::Thresholds;
use fleetctl::clock::FleetZone;
use fleetctl::report::{self, Args, Db};
use fleetctl::store;
use fleetctl::synth::{self, GenerateOptions};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const AHORA: &str = "2026-11-25T15:30";

fn main() {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("--child-generate") => return child_generate(&args[2..]),
        Some("--child-analyze") => return child_analyze(&args[2]),
        Some("--child-import") => return child_import(&args[2], &args[3]),
        Some("--child-export") => return child_export(&args[2..]),
        // Only the report timings, on a database already made (a quick check).
        Some("--reports") => return bench_reports(Path::new(&args[2]), "given", 50.0),
        _ => {}
    }
    let quick = std::env::var_os("FLEETCTL_BENCH_QUICK").is_some();
    let dir = std::env::temp_dir().join(format!("fleetctl-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    // One section alone (FLEETCTL_BENCH_ONLY=NAME), for a quicker look at one figure.
    if let Ok(only) = std::env::var("FLEETCTL_BENCH_ONLY") {
        let demo = || {
            let db = dir.join("default.db");
            generate_in_child(&db, 15, 7, false);
            db
        };
        match only.as_str() {
            "import-memory" => bench_import_memory(&dir),
            "http-non-readers" => bench_http_non_readers(&demo()),
            "hostile" => bench_hostile(&demo()),
            "pages" => bench_pages(&dir),
            "live-analysis" => bench_incremental(&dir, quick),
            "live-history" => bench_live_history(&dir, quick),
            "ingest" => bench_live(&dir, quick),
            "storage" => bench_storage(&dir, &[("15 × 7", &demo())]),
            "postgres" => bench_postgres(&dir, quick),
            "import" => bench_import(&dir, quick),
            "replicas" => match std::env::var("FLEETCTL_BENCH_DB") {
                Ok(fleet) => bench_replica_clients(&fleet),
                Err(_) => eprintln!(
                    "FLEETCTL_BENCH_ONLY=replicas needs FLEETCTL_BENCH_DB (a fleet's URL or file)"
                ),
            },
            other => eprintln!(
                "FLEETCTL_BENCH_ONLY={other}: not a section; one of import-memory, http-non-readers, hostile, pages, live-analysis, live-history, ingest, storage, postgres, import, replicas"
            ),
        }
        let _ = std::fs::remove_dir_all(&dir);
        return;
    }
    println!(
        "fleetctl benchmarks (release build, {} cores)",
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    println!();
    println!("generate (in a child process)");
    let default: Vec<Figures> = (0..5)
        .map(|i| generate_in_child(&dir.join(format!("default-{i}.db")), 15, 7, i > 0))
        .collect();
    report("15 vehicles × 7 days (median of 5)", &default, 0.5);
    if !quick {
        let mid = generate_in_child(&dir.join("100x30.db"), 100, 30, true);
        report("100 vehicles × 30 days", &[mid], f64::NAN);
        let big = generate_in_child(&dir.join("1000x30.db"), 1000, 30, false);
        report("1000 vehicles × 30 days", &[big], 120.0);
    }

    println!();
    let (small, big) = (dir.join("default-0.db"), dir.join("1000x30.db"));
    let mut stored = vec![("15 × 7", small.as_path())];
    if !quick {
        stored.push(("1000 × 30", big.as_path()));
    }
    bench_storage(&dir, &stored);
    println!();
    bench_postgres(&dir, quick);

    println!();
    println!("analyze (re-run detection, in a child process)");
    let runs: Vec<Figures> = (0..5)
        .map(|_| analyze_in_child(&dir.join("default-0.db")))
        .collect();
    report("15 vehicles × 7 days (median of 5)", &runs, 0.3);
    if !quick {
        report(
            "1000 vehicles × 30 days",
            &[analyze_in_child(&dir.join("1000x30.db"))],
            30.0,
        );
    }

    println!();
    bench_import(&dir, quick);
    if !quick {
        println!();
        bench_import_memory(&dir);
    }

    println!();
    println!("export (in a child process: read, columns, encode, write)");
    bench_export(&dir, quick);

    println!();
    println!("reports (in-process, median of 50 calls)");
    bench_reports(&dir.join("default-0.db"), "15 × 7", 2.0);
    if !quick {
        bench_reports(&dir.join("1000x30.db"), "1000 × 30", 50.0);
    }

    if !quick {
        println!();
        bench_pages(&dir);
    }

    println!();
    println!("route map, speed chart and fleet map (in-process, median of 20 renders)");
    bench_map(&dir.join("default-0.db"));

    println!();
    println!("serve (the release binary over stdio)");
    bench_serve(&dir.join("default-0.db"));

    println!();
    println!("serve --http (the release binary over loopback, keep-alive connections)");
    bench_http(&dir.join("default-0.db"));
    bench_http_non_readers(&dir.join("default-0.db"));

    println!();
    bench_live(&dir, quick);

    println!();
    println!("serve under hostile input (peak resident memory of the server process)");
    bench_hostile(&dir.join("default-0.db"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// Starts the release binary's `serve --http` on a free loopback port; returns the
/// process and its address once it says it listens.
fn start_http_server(db: &Path, token: &str) -> (std::process::Child, String) {
    start_server(db, &[], &[("FLEETCTL_TOKEN", token)])
}

/// Starts `serve --http` on a free loopback port with more arguments and
/// environment; the process and its address once it listens.
fn start_server(db: &Path, args: &[&str], env: &[(&str, &str)]) -> (std::process::Child, String) {
    use std::io::BufRead;
    let mut child = Command::new(env!("CARGO_BIN_EXE_fleetctl"))
        .args([
            "--db",
            db.to_str().unwrap(),
            "serve",
            "--http",
            "127.0.0.1:0",
        ])
        .args(args)
        .envs(env.iter().copied())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("serve --http starts");
    let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    let addr = loop {
        line.clear();
        assert!(stderr.read_line(&mut line).unwrap() > 0, "server exited");
        if let Some(rest) = line.split("listening on http://").nth(1) {
            break rest.split_whitespace().next().unwrap().to_string();
        }
    };
    std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
    (child, addr)
}

/// Peak resident memory of another process, MiB (Linux; 0 elsewhere).
fn peak_rss_of(pid: u32) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .map(str::to_owned)
        })
        .and_then(|l| {
            l.split_whitespace()
                .nth(1)
                .and_then(|kb| kb.parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

/// The messages a hostile client sends: the largest accepted line of tiny values, a
/// batch of a million `{}` (over the limit), 64 maps of 2048² in one batch, deep
/// nesting, a 5 MB line, invalid UTF-8, and many bad tool calls.
fn hostile_lines(plate: &str) -> Vec<Vec<u8>> {
    let mut lines: Vec<Vec<u8>> = Vec::new();
    lines.push(format!("[{}]", vec!["{}"; 1_000_000].join(",")).into_bytes());
    let numbers = vec!["1"; 125_000].join(",");
    lines.push(format!(r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"alerts","arguments":{{"x":[{numbers}]}}}}}}"#).into_bytes());
    let empties = vec!["{}"; 80_000].join(",");
    lines.push(
        format!(r#"{{"jsonrpc":"2.0","id":2,"method":"ping","params":{{"x":[{empties}]}}}}"#)
            .into_bytes(),
    );
    let maps: Vec<serde_json::Value> = (0..64)
        .map(|i| json!({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": "route_map", "arguments": {"plate": plate, "date": "2026-11-24", "width": 2048, "height": 2048}}}))
        .collect();
    lines.push(serde_json::Value::Array(maps).to_string().into_bytes());
    lines.push("[".repeat(100_000).into_bytes());
    lines.push(vec![b'x'; 5 * 1024 * 1024]);
    lines.push(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"p\xffing\"}".to_vec());
    for i in 0..1000 {
        lines.push(json!({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": "trip_summary", "arguments": {"plate": "x".repeat(1000), "date": "31/31/31"}}}).to_string().into_bytes());
    }
    lines
}

fn bench_hostile(db: &Path) {
    use std::io::{BufRead, Read, Write};
    let plate = Db::open(&store::Location::parse(db).expect("location"))
        .expect("open")
        .vehicles[0]
        .0
        .plate
        .clone();
    // stdio, under the 2025-03-26 revision (which allows batches).
    let mut child = Command::new(env!("CARGO_BIN_EXE_fleetctl"))
        .args(["--db", db.to_str().unwrap(), "serve"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("serve starts");
    let stdout = child.stdout.take().unwrap();
    let (done_tx, done) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut largest = 0;
        for line in std::io::BufReader::new(stdout).split(b'\n') {
            let Ok(line) = line else { break };
            largest = largest.max(line.len());
            if line.starts_with(br#"{"jsonrpc":"2.0","id":"last""#) {
                break;
            }
        }
        let _ = done_tx.send(largest);
    });
    let mut stdin = child.stdin.take().unwrap();
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}});
    let mut sent = 0usize;
    for line in std::iter::once(init.to_string().into_bytes()).chain(hostile_lines(&plate)) {
        sent += line.len();
        stdin.write_all(&line).expect("send");
        stdin.write_all(b"\n").expect("send");
    }
    stdin
        .write_all(br#"{"jsonrpc":"2.0","id":"last","method":"ping"}"#)
        .expect("send");
    stdin.write_all(b"\n").expect("send");
    let largest = done.recv().unwrap_or(0);
    let rss = peak_rss_of(child.id());
    drop(stdin);
    let _ = child.wait();
    let verdict = if rss > 0.0 && rss <= 64.0 {
        "met"
    } else {
        "MISSED"
    };
    println!(
        "  stdio: {:.0} MiB of hostile lines, largest answer line {:.2} MiB: peak {rss:.1} MiB  (target ≤ 64 MB: {verdict})",
        sent as f64 / 1048576.0,
        largest as f64 / 1048576.0
    );

    // HTTP: the same bodies, 8 clients at once, plus idle and non-reading connections.
    let token = "bench-token-0123456789abcdef";
    let (mut child, addr) = start_http_server(db, token);
    let mut held: Vec<std::net::TcpStream> = (0..200)
        .filter_map(|_| std::net::TcpStream::connect(&addr).ok())
        .collect();
    for s in held.iter_mut().take(50) {
        let _ = s.write_all(
            "GET /openapi.json HTTP/1.1\r\nHost: localhost\r\n\r\n"
                .repeat(100)
                .as_bytes(),
        );
    }
    let bodies = std::sync::Arc::new(hostile_lines(&plate));
    let map =
        json!({"plate": plate, "date": "2026-11-24", "width": 2048, "height": 2048}).to_string();
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let (addr, bodies, map) = (addr.clone(), bodies.clone(), map.clone());
            std::thread::spawn(move || {
                for (i, body) in bodies.iter().enumerate().filter(|(i, _)| i % 8 == t) {
                    let path = if i % 16 == 3 { "/api/v1/tools/route_map" } else { "/mcp" };
                    let body = if path == "/mcp" { body.clone() } else { map.clone().into_bytes() };
                    let Ok(mut s) = std::net::TcpStream::connect(&addr) else { continue };
                    let head = format!(
                        "POST {path} HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {token}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                        body.len()
                    );
                    let _ = s.write_all(head.as_bytes());
                    let _ = s.write_all(&body);
                    let _ = s.read_to_end(&mut Vec::new());
                }
            })
        })
        .collect();
    for t in threads {
        let _ = t.join();
    }
    let rss = peak_rss_of(child.id());
    drop(held);
    let _ = child.kill();
    let _ = child.wait();
    let verdict = if rss > 0.0 && rss <= 64.0 {
        "met"
    } else {
        "MISSED"
    };
    println!(
        "  HTTP: the same bodies from 8 clients, 200 idle and 50 non-reading connections: peak {rss:.1} MiB  (target ≤ 64 MB: {verdict})"
    );
}

/// Wall seconds, rows handled, peak resident memory in MiB.
#[derive(Clone, Copy)]
struct Figures {
    seconds: f64,
    rows: u64,
    peak_mib: f64,
}

fn report(label: &str, runs: &[Figures], target_s: f64) {
    let mut sorted = runs.to_vec();
    sorted.sort_by(|a, b| a.seconds.total_cmp(&b.seconds));
    let m = sorted[sorted.len() / 2];
    let verdict = if target_s.is_nan() {
        String::new()
    } else if m.seconds <= target_s {
        format!("  (target ≤ {target_s} s: met)")
    } else {
        format!("  (target ≤ {target_s} s: MISSED)")
    };
    println!(
        "  {label:<36} {:>8.2} s  {:>12} rows  {:>6.2} M rows/s  peak {:>6.1} MiB{verdict}",
        m.seconds,
        fleetctl::render::thousands(m.rows),
        m.rows as f64 / m.seconds / 1e6,
        m.peak_mib
    );
}

fn child(args: &[&str]) -> Figures {
    let v = child_numbers(args);
    Figures {
        seconds: v[0],
        rows: v[1] as u64,
        peak_mib: v[2],
    }
}

fn generate_in_child(path: &Path, vehicles: u32, days: u32, discard: bool) -> Figures {
    let figures = child(&[
        "--child-generate",
        path.to_str().unwrap(),
        &vehicles.to_string(),
        &days.to_string(),
    ]);
    if discard {
        let _ = std::fs::remove_file(path);
    }
    figures
}

fn analyze_in_child(path: &Path) -> Figures {
    child(&["--child-analyze", path.to_str().unwrap()])
}

fn child_generate(args: &[String]) {
    let zone = FleetZone::default();
    let opts = GenerateOptions {
        path: PathBuf::from(&args[0]),
        now_ts: zone.parse_local_minute(AHORA).unwrap(),
        seed: 7,
        vehicles: args[1].parse().unwrap(),
        days: args[2].parse().unwrap(),
        force: true,
        zone,
    };
    let started = Instant::now();
    let summary = synth::generate(&opts, &mut |_| {}).expect("generate");
    println!(
        "{} {} {}",
        started.elapsed().as_secs_f64(),
        summary.positions,
        peak_rss_mib()
    );
}

fn child_analyze(path: &str) {
    let started = Instant::now();
    let summary = store::with_write_transaction(Path::new(path), |conn| {
        fleetctl::pipeline::detect_into(conn, Thresholds::default(), &mut |_| {})
    })
    .expect("analyze");
    println!(
        "{} {} {}",
        started.elapsed().as_secs_f64(),
        summary.fixes,
        peak_rss_mib()
    );
}

/// Writes a generated fleet's positions as a CSV and a Parquet file (10 M rows from
/// 200 vehicles × 30 days; the default fleet when quick) and times `import` of each
/// into a fresh database.
fn bench_import(dir: &Path, quick: bool) {
    println!("import (in a child process: dedup, staging, indexes; detection timed apart)");
    let source = if quick {
        dir.join("default-0.db")
    } else {
        let path = dir.join("200x30.db");
        generate_in_child(&path, 200, 30, false);
        path
    };
    let conn =
        rusqlite::Connection::open_with_flags(&source, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .expect("open");
    let mut st = conn
        .prepare(
            "SELECT v.plate, p.ts, p.lat, p.lon, p.speed_kmh, p.heading_deg, p.ignition, p.odometer_km \
             FROM fixes p JOIN vehicles v ON v.id = p.vehicle_id",
        )
        .expect("query");
    let mut rows = st.query([]).expect("rows");
    let csv_path = dir.join("fixes.csv");
    let mut csv = std::io::BufWriter::new(std::fs::File::create(&csv_path).expect("csv"));
    use std::io::Write;
    writeln!(
        csv,
        "plate,ts,lat,lon,speed_kmh,heading,ignition,odometer_km"
    )
    .unwrap();
    let (mut plates, mut ts, mut lat, mut lon, mut speed, mut heading, mut ignition, mut odo) = (
        vec![],
        vec![],
        vec![],
        vec![],
        vec![],
        vec![],
        vec![],
        vec![],
    );
    while let Some(r) = rows.next().expect("row") {
        let p: String = r.get(0).unwrap();
        let t: i64 = r.get(1).unwrap();
        let (a, b, s, h): (f64, f64, f64, f64) = (
            r.get(2).unwrap(),
            r.get(3).unwrap(),
            r.get(4).unwrap(),
            r.get(5).unwrap(),
        );
        let (i, o): (i64, f64) = (r.get(6).unwrap(), r.get(7).unwrap());
        writeln!(csv, "{p},{t},{a},{b},{s},{h},{i},{o}").unwrap();
        plates.push(p);
        ts.push(t);
        lat.push(a);
        lon.push(b);
        speed.push(s);
        heading.push(h);
        ignition.push(i == 1);
        odo.push(o);
    }
    csv.flush().unwrap();
    drop(csv);
    let n = ts.len();
    use polars::prelude::*;
    let mut df = df!(
        "plate" => plates, "ts" => ts, "lat" => lat, "lon" => lon, "speed_kmh" => speed,
        "heading" => heading, "ignition" => ignition, "odometer_km" => odo
    )
    .expect("frame");
    let parquet_path = dir.join("fixes.parquet");
    ParquetWriter::new(std::fs::File::create(&parquet_path).expect("parquet"))
        .with_row_group_size(Some(256 * 1024))
        .finish(&mut df)
        .expect("write parquet");
    drop(df);
    let mib = |p: &Path| std::fs::metadata(p).map_or(0.0, |m| m.len() as f64 / 1048576.0);
    // Every file of the bench on disk before the clock starts (the input at rest, as
    // a user's file would be): the write-back of the gigabytes generated and analysed
    // before is not the import's time.
    for entry in std::fs::read_dir(dir).expect("bench dir").flatten() {
        let _ = std::fs::File::open(entry.path()).and_then(|f| f.sync_all());
    }
    // Three imports of each file (this machine is shared and noisy): the median is
    // the figure, the range beside it.
    let runs = if quick { 1 } else { 3 };
    for (label, file) in [("CSV", &csv_path), ("Parquet", &parquet_path)] {
        let db = dir.join(format!("import-{label}.db"));
        let mut figures: Vec<(f64, f64, f64)> = (0..runs)
            .map(|_| {
                let _ = std::fs::remove_file(&db);
                let (import_s, analyze_s, imported, peak) = import_in_child(&db, file);
                assert_eq!(imported, n, "every row imported");
                (import_s, analyze_s, peak)
            })
            .collect();
        let _ = std::fs::remove_file(&db);
        figures.sort_by(|a, b| a.0.total_cmp(&b.0));
        let (import_s, analyze_s, _) = figures[figures.len() / 2];
        let peak = figures.iter().map(|f| f.2).fold(0.0, f64::max);
        let rate = n as f64 / import_s / 1e6;
        let verdict = if rate >= 1.0 && peak <= 1024.0 {
            "met"
        } else {
            "MISSED"
        };
        let range = if runs > 1 {
            format!(
                " (runs {:.2}–{:.2} s)",
                figures[0].0,
                figures[figures.len() - 1].0
            )
        } else {
            String::new()
        };
        println!(
            "  {label:<8} {:>12} rows ({:.0} MiB): import {import_s:>6.2} s = {rate:.2} M rows/s{range}, detection {analyze_s:.2} s, peak {peak:.0} MiB  (target ≥ 1 M rows/s, ≤ 1 GB: {verdict})",
            fleetctl::render::thousands(n as u64),
            mib(file)
        );
    }
}

/// One `import` of `file` into a new database `db`, in a child process: seconds of
/// import, seconds of detection, rows imported, peak MiB.
fn import_in_child(db: &Path, file: &Path) -> (f64, f64, usize, f64) {
    let v = import_in_child_phases(db, file);
    (v.0, v.1, v.2, v.3)
}

/// [`import_in_child`], with the peak before detection began (sampled) as well.
fn import_in_child_phases(db: &Path, file: &Path) -> (f64, f64, usize, f64, f64) {
    let v = child_numbers(&[
        "--child-import",
        db.to_str().unwrap(),
        file.to_str().unwrap(),
    ]);
    (v[0], v[1], v[2] as usize, v[3], v[4])
}

/// This process's resident memory now, MiB.
fn rss_mib_now() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

/// Runs this binary with `args` and reads the numbers it prints.
fn child_numbers(args: &[&str]) -> Vec<f64> {
    let out = Command::new(std::env::current_exe().expect("own path"))
        .args(args)
        .output()
        .expect("child runs");
    assert!(
        out.status.success(),
        "child failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .map(|x| x.parse().unwrap())
        .collect()
}

/// Exports from the 15 × 7 database, and (unless quick) the 1000 × 30 one's
/// positions (about 50 M) to Parquet and CSV: rows/s and peak memory against the
/// targets (≥ 2 M rows/s, ≤ 500 MB for Parquet).
fn bench_export(dir: &Path, quick: bool) {
    let verdict = |f: &Figures, rate_target: f64, mib_target: f64| {
        let rate = f.rows as f64 / f.seconds / 1e6;
        let ok = rate >= rate_target && f.peak_mib <= mib_target;
        format!(
            "  (target ≥ {rate_target} M rows/s, ≤ {mib_target} MiB: {})",
            if ok { "met" } else { "MISSED" }
        )
    };
    let mut cases: Vec<(&str, &str, &str, &[&str])> = vec![
        ("default-0.db", "positions", "parquet", &[]),
        ("default-0.db", "trips", "xlsx", &[]),
    ];
    if !quick {
        cases.extend([
            ("1000x30.db", "positions", "parquet", &[][..]),
            (
                "1000x30.db",
                "positions",
                "parquet",
                &["--partition-by", "date"][..],
            ),
            ("1000x30.db", "positions", "csv", &[][..]),
        ]);
    }
    for (db, dataset, format, extra) in cases {
        let out = dir.join(format!("export-{dataset}.{format}"));
        let db_path = dir.join(db);
        let mut args = vec![
            "--child-export",
            db_path.to_str().unwrap(),
            dataset,
            format,
            out.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        let refs = args;
        let f = child(&refs);
        let label = format!("{dataset} → {format} {} ({db})", extra.join(" "));
        let target = if dataset == "positions" && format == "parquet" && db == "1000x30.db" {
            verdict(&f, 2.0, 500.0)
        } else {
            String::new()
        };
        println!(
            "  {label:<52} {:>8.2} s  {:>12} rows  {:>6.2} M rows/s  peak {:>6.1} MiB{target}",
            f.seconds,
            fleetctl::render::thousands(f.rows),
            f.rows as f64 / f.seconds / 1e6,
            f.peak_mib
        );
        let _ = std::fs::remove_dir_all(&out);
        let _ = std::fs::remove_file(&out);
    }
}

fn child_export(args: &[String]) {
    use fleetctl::formats::export::{ExportOptions, OutFormat, Partition};
    let db = report::Db::open(&store::Location::parse(Path::new(&args[0])).expect("location"))
        .expect("open");
    let dataset = fleetctl::export::Dataset::parse(&args[1]).expect("dataset");
    let opts = ExportOptions {
        datasets: vec![dataset],
        format: OutFormat::parse(&args[2]).expect("format"),
        partition: (args.get(4).map(String::as_str) == Some("--partition-by"))
            .then(|| Partition::parse(&args[5]).expect("partition")),
        output: PathBuf::from(&args[3]),
        force: true,
    };
    let scope = fleetctl::export::Scope::resolve(&db, None, None, None).expect("scope");
    let started = Instant::now();
    let summary =
        fleetctl::formats::export::export(&db, &scope, &opts, &mut |_| {}).expect("export");
    let rows: u64 = summary.rows.iter().map(|r| r.1).sum();
    println!(
        "{} {} {}",
        started.elapsed().as_secs_f64(),
        rows,
        peak_rss_mib()
    );
}

fn child_import(db: &str, file: &str) {
    let opts = fleetctl::ingest::ImportOptions {
        db: store::Location::parse(Path::new(db)).expect("location"),
        time_zone: Some("America/Guatemala".into()),
        wall_now: fleetctl::clock::wall_clock_now(),
        strict_units: false,
    };
    let read_opts = fleetctl::formats::ReadOptions::default();
    let started = Instant::now();
    // Resident memory sampled every 20 ms, to tell the import's own peak from
    // detection's (which runs last).
    let samples = std::sync::Arc::new(std::sync::Mutex::new(Vec::<(f64, f64)>::new()));
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sampler = {
        let (samples, done) = (samples.clone(), done.clone());
        std::thread::spawn(move || {
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                let rss = rss_mib_now();
                samples
                    .lock()
                    .unwrap()
                    .push((started.elapsed().as_secs_f64(), rss));
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
        })
    };
    let summary = fleetctl::ingest::import(
        &opts,
        &mut |ingest| {
            fleetctl::formats::read_file(Path::new(file), &read_opts, ingest, &mut |_| {}).map(drop)
        },
        &mut fleetctl::ingest::NoRejectsFile,
        &mut |_| {},
    )
    .expect("import");
    let total = started.elapsed().as_secs_f64();
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    sampler.join().unwrap();
    let analyze_s = summary.analysis.as_ref().map_or(0.0, |a| a.seconds);
    let imported: u64 = summary.files.iter().map(|f| f.imported).sum();
    let before_detection = samples
        .lock()
        .unwrap()
        .iter()
        .filter(|(t, _)| *t < total - analyze_s)
        .map(|(_, rss)| *rss)
        .fold(0.0, f64::max);
    println!(
        "{} {} {} {} {}",
        total - analyze_s,
        analyze_s,
        imported,
        peak_rss_mib(),
        before_detection
    );
}

/// The arguments each report is timed with: a busy vehicle, its depot, yesterday.
fn report_cases(db: &Db) -> Vec<(&'static str, Args)> {
    let (vehicle, route) = db
        .vehicles
        .iter()
        .find(|(v, _)| v.active)
        .expect("an active vehicle");
    let depot = route
        .as_deref()
        .and_then(|slug| {
            fleetctl::geo::atlas::routes()
                .iter()
                .find(|r| r.slug == slug)
        })
        .map_or("Bodega Mixco".to_string(), |r| r.depot.clone());
    let args = |v: serde_json::Value| v.as_object().cloned().unwrap_or_default();
    vec![
        ("vehicle_position", args(json!({"plate": vehicle.plate}))),
        ("stopped_vehicles", args(json!({}))),
        (
            "trip_summary",
            args(json!({"plate": vehicle.plate, "date": "yesterday"})),
        ),
        ("trips", args(json!({}))),
        ("stops", args(json!({"min_minutes": 20, "geofence": depot}))),
        ("daily_summary", args(json!({}))),
        ("events", args(json!({}))),
        ("geofence_report", args(json!({"geofence": depot}))),
        ("alerts", args(json!({}))),
        (
            "geofence_visits",
            args(json!({"plate": vehicle.plate, "geofence": depot, "date": "yesterday"})),
        ),
        ("mileage_ranking", args(json!({}))),
        ("list_vehicles", args(json!({}))),
        ("list_geofences", args(json!({}))),
        ("nearest_vehicles", args(json!({"place": "Bodega Mixco"}))),
    ]
}

fn bench_reports(path: &Path, label: &str, target_ms: f64) {
    let db = Db::open(&store::Location::parse(path).expect("location")).expect("open");
    for (tool, args) in report_cases(&db) {
        let spec = report::find(tool).expect("registered");
        let mut times: Vec<f64> = (0..50)
            .map(|_| {
                let t = Instant::now();
                fleetctl::render::call(&db, spec, &args).expect("report runs");
                t.elapsed().as_secs_f64() * 1000.0
            })
            .collect();
        times.sort_by(f64::total_cmp);
        let median = times[times.len() / 2];
        let verdict = if median <= target_ms { "met" } else { "MISSED" };
        println!(
            "  {label:<10} {tool:<18} median {median:>8.3} ms  max {:>8.3} ms  (target ≤ {target_ms} ms: {verdict})",
            times[times.len() - 1]
        );
    }
}

/// Renders the busiest vehicle-day of the database (most fixes) as a route map and a
/// speed chart, and the fleet at the data clock, as the CLI would.
fn bench_map(path: &Path) {
    let db = Db::open(&store::Location::parse(path).expect("location")).expect("open");
    let spec = report::find("route_map").expect("registered");
    // The vehicle-day with the most fixes, read straight from the file (the domain
    // keeps its connection to itself).
    let conn =
        rusqlite::Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .expect("open");
    let (busiest, date, fixes): (String, String, usize) = conn
        .query_row(
            "SELECT v.plate, d.date, COUNT(*) AS n FROM daily d \
             JOIN vehicles v ON v.id = d.vehicle_id \
             JOIN positions p ON p.vehicle_time BETWEEN (d.vehicle_id << 42) + d.first_ts * 1000 \
                 AND (d.vehicle_id << 42) + d.last_ts * 1000 + 999 \
             GROUP BY d.vehicle_id, d.date ORDER BY n DESC LIMIT 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get::<_, i64>(2)? as usize)),
        )
        .expect("a vehicle-day");
    let args = json!({"plate": busiest, "date": date})
        .as_object()
        .cloned()
        .unwrap_or_default();
    let (median, bytes) = median_render(&db, spec, &args);
    let verdict = if median <= 30.0 { "met" } else { "MISSED" };
    println!(
        "  busiest vehicle-day ({busiest} {date}, {fixes} fixes)  median {median:>6.1} ms  PNG {} KiB  (target ≤ 30 ms: {verdict})",
        bytes / 1024
    );
    // The same vehicle-day as a speed chart.
    let chart = report::find("speed_chart").expect("registered");
    let (median, bytes) = median_render(&db, chart, &args);
    let verdict = if median <= 30.0 { "met" } else { "MISSED" };
    println!(
        "  speed_chart, the same vehicle-day             median {median:>6.1} ms  PNG {} KiB  (target ≤ 30 ms: {verdict})",
        bytes / 1024
    );
    // Every vehicle at the data clock.
    let fleet = report::find("fleet_map").expect("registered");
    let (median, bytes) = median_render(&db, fleet, &Args::new());
    let verdict = if median <= 30.0 { "met" } else { "MISSED" };
    println!(
        "  fleet_map at the data clock ({} vehicles)      median {median:>6.1} ms  PNG {} KiB  (target ≤ 30 ms: {verdict})",
        db.vehicles.len(),
        bytes / 1024
    );
}

/// Draws a picture 20 times as the CLI would: the median in milliseconds, and the
/// PNG's size in bytes.
fn median_render(db: &Db, spec: &report::ReportSpec, args: &Args) -> (f64, usize) {
    let mut bytes = 0;
    let mut times: Vec<f64> = (0..20)
        .map(|_| {
            let t = Instant::now();
            let answer = fleetctl::render::call(db, spec, args).expect("the picture renders");
            bytes = answer.png.map_or(0, |p| p.len());
            t.elapsed().as_secs_f64() * 1000.0
        })
        .collect();
    times.sort_by(f64::total_cmp);
    (times[times.len() / 2], bytes)
}

/// A `fleetctl serve` child spoken to line by line.
struct Server {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    stdout: std::io::BufReader<std::process::ChildStdout>,
}

impl Server {
    fn start(db: &Path) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_fleetctl"))
            .args(["--db", db.to_str().unwrap(), "serve"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("serve starts");
        let stdin = child.stdin.take().unwrap();
        let stdout = std::io::BufReader::new(child.stdout.take().unwrap());
        Server {
            child,
            stdin,
            stdout,
        }
    }

    fn ask(&mut self, message: &serde_json::Value) -> serde_json::Value {
        use std::io::{BufRead, Write};
        writeln!(self.stdin, "{message}").unwrap();
        self.stdin.flush().unwrap();
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        serde_json::from_str(&line).expect("a JSON answer")
    }

    fn rss_mib(&self) -> (f64, f64) {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .unwrap_or_default();
        let field = |name: &str| {
            status
                .lines()
                .find(|l| l.starts_with(name))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<f64>().ok())
                .map_or(0.0, |kb| kb / 1024.0)
        };
        (field("VmRSS:"), field("VmHWM:"))
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn initialize() -> serde_json::Value {
    json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
           "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}})
}

fn bench_serve(db: &Path) {
    let mut starts: Vec<f64> = (0..20)
        .map(|_| {
            let t = Instant::now();
            let mut server = Server::start(db);
            let answer = server.ask(&initialize());
            assert!(answer["result"]["protocolVersion"].is_string());
            t.elapsed().as_secs_f64() * 1000.0
        })
        .collect();
    starts.sort_by(f64::total_cmp);
    let median = starts[starts.len() / 2];
    let verdict = if median <= 10.0 { "met" } else { "MISSED" };
    println!(
        "  process start to initialize response   median {median:>7.2} ms  (target ≤ 10 ms: {verdict})"
    );

    let mut server = Server::start(db);
    server.ask(&initialize());
    let report_db = Db::open(&store::Location::parse(db).expect("location")).expect("open");
    let mut calls = 0;
    for (tool, args) in report_cases(&report_db) {
        let mut times: Vec<f64> = (0..100)
            .map(|i| {
                let request = json!({"jsonrpc": "2.0", "id": i + 1, "method": "tools/call", "params": {"name": tool, "arguments": args}});
                let t = Instant::now();
                let answer = server.ask(&request);
                assert_eq!(answer["result"]["isError"], false, "{tool}: {answer}");
                t.elapsed().as_secs_f64() * 1000.0
            })
            .collect();
        calls += times.len();
        times.sort_by(f64::total_cmp);
        let median = times[times.len() / 2];
        // The 2 ms target is the first tools' (one vehicle, or a short list); the
        // range reports (those with pages: a `cursor`) answer a whole page (200 rows,
        // about 100 KB of JSON), and their target is a first page within 50 ms
        // (issue 12).
        let range_report =
            report::find(tool).is_some_and(|spec| spec.params().iter().any(|p| p.name == "cursor"));
        let target_ms = if range_report { 50.0 } else { 2.0 };
        let verdict = if median <= target_ms { "met" } else { "MISSED" };
        println!(
            "  tools/call {tool:<18} round trip median {median:>7.3} ms  (target ≤ {target_ms} ms: {verdict})"
        );
    }
    let mut id = 10_000;
    while calls < 1000 {
        id += 1;
        server.ask(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "list_vehicles", "arguments": {}}}));
        calls += 1;
    }
    let (rss, peak) = server.rss_mib();
    let verdict = if rss <= 20.0 { "met" } else { "MISSED" };
    println!(
        "  resident memory after {calls} calls       {rss:>7.1} MiB (peak {peak:.1} MiB)  (target ≤ 20 MB: {verdict})"
    );
}

/// One keep-alive HTTP/1.1 request; returns the status.
fn http_post(stream: &mut std::net::TcpStream, buf: &mut Vec<u8>, request: &[u8]) -> u16 {
    use std::io::{Read, Write};
    stream.write_all(request).expect("send");
    buf.clear();
    let mut chunk = [0u8; 8192];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_string();
            let len: usize = head
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length:")
                        .map(|v| v.trim().parse().unwrap_or(0))
                })
                .unwrap_or(0);
            while buf.len() < end + 4 + len {
                let n = stream.read(&mut chunk).expect("read");
                assert!(n > 0, "connection closed");
                buf.extend_from_slice(&chunk[..n]);
            }
            return head[9..12].parse().unwrap_or(0);
        }
        let n = stream.read(&mut chunk).expect("read");
        assert!(n > 0, "connection closed");
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// The HTTP request of an MCP `vehicle_position` call (the stateless revision).
fn vehicle_position_request(addr: &str, token: &str, plate: &str) -> String {
    tool_request(addr, token, "vehicle_position", &json!({"plate": plate}))
}

fn bench_http(db: &Path) {
    let token = "bench-token-0123456789abcdef";
    let (mut child, addr) = start_http_server(db, token);
    let plate = Db::open(&store::Location::parse(db).expect("location"))
        .expect("open")
        .vehicles[0]
        .0
        .plate
        .clone();
    let request = vehicle_position_request(&addr, token, &plate);
    let (connections, per_connection) = (10, 400);
    let started = Instant::now();
    let threads: Vec<_> = (0..connections)
        .map(|_| {
            let (addr, request) = (addr.clone(), request.clone());
            std::thread::spawn(move || {
                let mut stream = std::net::TcpStream::connect(&addr).expect("connect");
                stream.set_nodelay(true).ok();
                let mut buf = Vec::new();
                (0..per_connection)
                    .map(|_| {
                        let t = Instant::now();
                        assert_eq!(http_post(&mut stream, &mut buf, request.as_bytes()), 200);
                        t.elapsed().as_secs_f64() * 1000.0
                    })
                    .collect::<Vec<f64>>()
            })
        })
        .collect();
    let mut times: Vec<f64> = threads
        .into_iter()
        .flat_map(|t| t.join().expect("client"))
        .collect();
    let wall = started.elapsed().as_secs_f64();
    times.sort_by(f64::total_cmp);
    let (p50, p99) = (times[times.len() / 2], times[times.len() * 99 / 100]);
    let rps = times.len() as f64 / wall;
    let verdict = if rps >= 10_000.0 && p99 <= 5.0 {
        "met"
    } else {
        "MISSED"
    };
    println!(
        "  vehicle_position, {connections} connections × {per_connection}, one vehicle (answers kept while the database is unchanged): {rps:>7.0} requests/s  p50 {p50:.2} ms  p99 {p99:.2} ms  (target ≥ 10000/s, p99 ≤ 5 ms: {verdict})"
    );
    let _ = child.kill();
    let _ = child.wait();
}

/// 128 token holders (two client addresses, each at its cap of 64 connections) who
/// pipeline requests for a week of trips (~100 KB answers) and never read: the
/// server's peak memory, and how long another token holder waits to be answered.
fn bench_http_non_readers(db: &Path) {
    use std::io::{Read, Write};
    let token = "bench-token-0123456789abcdef";
    let (mut child, addr) = start_http_server(db, token);
    let server: std::net::SocketAddr = addr.parse().expect("address");
    let ask = |close: &str| {
        format!(
            "POST /api/v1/tools/trips HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\n\
             Content-Type: application/json\r\n{close}Content-Length: 2\r\n\r\n{{}}"
        )
    };
    let pipeline = ask("").repeat(200);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
        .expect("runtime");
    let started = Instant::now();
    let never_reading: Vec<std::net::TcpStream> = (0..128)
        .filter_map(|i| {
            let local: std::net::SocketAddr = format!("127.0.0.{}:0", 1 + i / 64).parse().ok()?;
            let stream = runtime
                .block_on(async {
                    let socket = tokio::net::TcpSocket::new_v4()?;
                    socket.bind(local)?;
                    socket.connect(server).await
                })
                .ok()?
                .into_std()
                .ok()?;
            stream.set_nonblocking(false).ok()?;
            stream
                .set_write_timeout(Some(Duration::from_secs(5)))
                .ok()?;
            let mut stream = stream;
            let _ = stream.write_all(pipeline.as_bytes());
            Some(stream)
        })
        .collect();
    // Another token holder, from a third address, retrying on 503 as told.
    let request = ask("Connection: close\r\n");
    let mut turned_away = 0;
    let waited_s = loop {
        let answered = runtime.block_on(async {
            let socket = tokio::net::TcpSocket::new_v4().ok()?;
            socket.bind("127.0.0.3:0".parse().ok()?).ok()?;
            socket.connect(server).await.ok()?.into_std().ok()
        });
        if let Some(mut s) = answered {
            let _ = s.set_nonblocking(false);
            let _ = s.set_read_timeout(Some(Duration::from_secs(60)));
            let _ = s.write_all(request.as_bytes());
            let mut answer = Vec::new();
            let _ = s.read_to_end(&mut answer);
            if answer.starts_with(b"HTTP/1.1 200") {
                break started.elapsed().as_secs_f64();
            }
        }
        turned_away += 1;
        if started.elapsed() > Duration::from_secs(120) {
            break f64::NAN;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    // Let the server work through what it was sent before reading its peak.
    std::thread::sleep(Duration::from_secs(5));
    let peak = peak_rss_of(child.id());
    let verdict = if peak <= 64.0 && waited_s <= 2.0 {
        "met"
    } else {
        "MISSED"
    };
    println!(
        "  {} token holders pipelining and never reading: server peak {peak:.1} MiB; another token holder answered after {waited_s:.2} s ({turned_away} × 503 first)  (target ≤ 64 MB, no lock-out: {verdict})",
        never_reading.len()
    );
    drop(never_reading);
    let _ = child.kill();
    let _ = child.wait();
}

/// Peak resident set size of this process, from /proc (Linux); 0 elsewhere.
fn peak_rss_mib() -> f64 {
    peak_rss_of(std::process::id())
}

/// The range reports' first and 50th pages over 92 days × 1000 vehicles: a generated
/// day of 1000 vehicles whose stops, trips, events, visits and daily rollups are
/// copied onto the 91 days before it (these reports read no positions).
fn bench_pages(dir: &Path) {
    println!(
        "range reports, first and 50th page (in-process, 92 days × 1000 vehicles, median of 20 calls)"
    );
    let path = dir.join("pages.db");
    generate_in_child(&path, 1000, 1, false);
    let conn = rusqlite::Connection::open(&path).expect("open");
    for table in ["stops", "trips", "events", "visits", "daily"] {
        let columns: Vec<String> = conn
            .prepare(&format!(
                "SELECT name FROM pragma_table_info('{table}') WHERE name != 'id'"
            ))
            .and_then(|mut st| st.query_map([], |r| r.get(0))?.collect())
            .expect("columns");
        let shifted: Vec<String> = columns
            .iter()
            .map(|c| match c.as_str() {
                "date" => "date(date, '-' || k.n || ' days')".to_string(),
                c if c.ends_with("_ts") => format!("{c} - k.n * 86400"),
                c => c.to_string(),
            })
            .collect();
        conn.execute_batch(&format!(
            "WITH RECURSIVE k(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM k WHERE n < 91) \
             INSERT INTO {table} ({}) SELECT {} FROM {table}, k",
            columns.join(", "),
            shifted.join(", ")
        ))
        .expect("copy rows");
    }
    drop(conn);
    let db = Db::open(&store::Location::parse(&path).expect("location")).expect("open");
    let depot = "Bodega Mixco";
    let range = json!({"from": "2026-08-26", "to": "2026-11-25"});
    let with = |extra: serde_json::Value| {
        let mut args = range.as_object().cloned().unwrap_or_default();
        args.extend(extra.as_object().cloned().unwrap_or_default());
        args
    };
    let cases = [
        ("trips", with(json!({}))),
        ("stops", with(json!({}))),
        ("stops", with(json!({"geofence": depot}))),
        ("events", with(json!({}))),
        ("daily_summary", with(json!({}))),
        ("geofence_report", with(json!({"geofence": depot}))),
    ];
    for (tool, args) in cases {
        let spec = report::find(tool).expect("registered");
        let median_ms = |args: &Args| {
            let mut times: Vec<f64> = (0..20)
                .map(|_| {
                    let t = Instant::now();
                    report::call(&db, spec, args).expect("report runs");
                    t.elapsed().as_secs_f64() * 1000.0
                })
                .collect();
            times.sort_by(f64::total_cmp);
            times[times.len() / 2]
        };
        let first = median_ms(&args);
        // Walk to the 50th page by each answer's next_cursor.
        let mut page = args.clone();
        let mut total = 0;
        let mut reached = 1;
        while reached < 50 {
            let answer = report::call(&db, spec, &page).expect("report runs");
            let list = answer
                .value
                .as_object()
                .and_then(|o| o.values().find(|v| v.get("next_cursor").is_some()));
            total = list.and_then(|l| l["total"].as_u64()).unwrap_or(0);
            match list.and_then(|l| l["next_cursor"].as_str()) {
                Some(cursor) => page.insert("cursor".into(), json!(cursor)),
                None => break,
            };
            reached += 1;
        }
        let fiftieth = (reached == 50).then(|| median_ms(&page));
        let worst = fiftieth.unwrap_or(first).max(first);
        println!(
            "  {tool:<16} {:<22} {total:>8} rows  page 1 {first:>7.2} ms  page 50 {}  (target ≤ 50 ms: {})",
            if args.contains_key("geofence") {
                "--geofence Bodega Mixco"
            } else {
                ""
            },
            fiftieth.map_or_else(
                || format!("(only {reached} pages)"),
                |ms| format!("{ms:>7.2} ms")
            ),
            if worst <= 50.0 { "met" } else { "MISSED" }
        );
    }
}

/// Peak memory of importing one tracker's long history (30 M fixes, one a second, in
/// one CSV) and a Traccar JSON export of 1 M positions: the files are written here,
/// then each imported into a new database in a child process.
fn bench_import_memory(dir: &Path) {
    use std::io::Write;
    println!(
        "import memory (in a child process: one vehicle's 30 M-row CSV, a 1 M-position Traccar JSON)"
    );
    // A car driving loops around Guatemala City, a fix a second, from 2025-01-01.
    let start_ts = 1_735_711_200i64;
    let point = |i: i64| {
        let angle = (i % 3600) as f64 / 3600.0 * std::f64::consts::TAU;
        (14.62 + 0.02 * angle.sin(), -90.52 + 0.02 * angle.cos())
    };
    // The tracker's car drives three hours, then parks for one (still reporting
    // every second): 347 days of it, 2,083 stops.
    let drives = |i: i64| i % 14_400 < 10_800;
    let csv_path = dir.join("one-tracker.csv");
    let rows = 30_000_000i64;
    {
        let mut csv = std::io::BufWriter::with_capacity(
            1 << 20,
            std::fs::File::create(&csv_path).expect("csv"),
        );
        writeln!(csv, "plate,ts,lat,lon,speed_kmh").unwrap();
        for i in 0..rows {
            let (lat, lon, speed_kmh) = if drives(i) {
                let (lat, lon) = point(i);
                (lat, lon, 46.0)
            } else {
                let (lat, lon) = point(0);
                (lat, lon, 0.0)
            };
            writeln!(
                csv,
                "P-100AAA,{},{lat:.6},{lon:.6},{speed_kmh:.1}",
                start_ts + i
            )
            .unwrap();
        }
        csv.flush().unwrap();
    }
    let json_path = dir.join("traccar.json");
    let positions = 1_000_000i64;
    {
        let mut json = std::io::BufWriter::with_capacity(
            1 << 20,
            std::fs::File::create(&json_path).expect("json"),
        );
        write!(json, "[").unwrap();
        for i in 0..positions {
            // 20 devices, each a fix every 15 s along the loop.
            let (lat, lon) = point(i / 20 * 15);
            let device = 1 + i % 20;
            let ts = start_ts + (i / 20) * 15;
            let sep = if i == 0 { "" } else { "," };
            write!(
                json,
                "{sep}{{\"id\":{},\"deviceId\":{device},\"protocol\":\"osmand\",\"fixTime\":\"{}\",\"valid\":true,\"latitude\":{lat:.6},\"longitude\":{lon:.6},\"altitude\":1500.0,\"speed\":24.8,\"course\":90.0,\"attributes\":{{\"ignition\":true,\"motion\":true}}}}",
                i + 1,
                iso_utc(ts)
            )
            .unwrap();
        }
        write!(json, "]").unwrap();
        json.flush().unwrap();
    }
    let mib = |p: &Path| std::fs::metadata(p).map_or(0.0, |m| m.len() as f64 / 1048576.0);
    for (label, file, n) in [
        ("CSV, one vehicle", &csv_path, rows),
        ("Traccar JSON", &json_path, positions),
    ] {
        let db = dir.join("import-memory.db");
        let _ = std::fs::remove_file(&db);
        let size_mib = mib(file);
        let (import_s, analyze_s, imported, peak, before_detection) =
            import_in_child_phases(&db, file);
        let _ = std::fs::remove_file(&db);
        let _ = std::fs::remove_file(file);
        let verdict = if peak <= 1024.0 && imported as i64 == n {
            "met"
        } else {
            "MISSED"
        };
        println!(
            "  {label:<17} {:>12} rows ({:.0} MiB): imported {}, import {import_s:.1} s, detection {analyze_s:.1} s, peak {peak:.0} MiB ({before_detection:.0} MiB before detection)  (target ≤ 1 GB: {verdict})",
            fleetctl::render::thousands(n as u64),
            size_mib,
            fleetctl::render::thousands(imported as u64),
        );
    }
}

/// `ts` as `YYYY-MM-DDTHH:MM:SSZ`.
fn iso_utc(ts: i64) -> String {
    let date = fleetctl::clock::Date::from_days_since_epoch(ts.div_euclid(86_400));
    let secs = ts.rem_euclid(86_400);
    format!(
        "{date}T{:02}:{:02}:{:02}Z",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    )
}

/// The live feed: sustained ingest with freshness and tool latency under it, and
/// the cost per fix against fleet size and history.
fn bench_live(dir: &Path, quick: bool) {
    println!(
        "live ingest (the release binary: serve --http --ingest, fed by fleetctl replay over loopback keep-alive)"
    );
    bench_ingest(dir, quick);
    println!();
    println!(
        "live analysis, in-process: each vehicle pushes one fix a round, 20 rounds (analysis: the detection; commit: fixes and rows stored)"
    );
    bench_incremental(dir, quick);
    println!();
    bench_live_history(dir, quick);
}

/// The ingest token of the live benchmarks' servers.
const INGEST_TOKEN: &str = "bench-ingest-token-0123456789";
/// Their MCP token.
const MCP_TOKEN: &str = "bench-token-0123456789abcdef";

/// Starts the release binary's `serve --http --ingest --auto-register` on a free
/// loopback port; the process and its address once it listens.
fn start_ingest_server(db: &Path, realtime: bool) -> (std::process::Child, String) {
    let realtime: &[&str] = if realtime { &["--realtime-tools"] } else { &[] };
    start_server(
        db,
        &[
            &["--ingest", "--auto-register", "--max-connections", "2048"],
            realtime,
        ]
        .concat(),
        &[
            ("FLEETCTL_TOKEN", MCP_TOKEN),
            ("FLEETCTL_INGEST_TOKEN", INGEST_TOKEN),
        ],
    )
}

/// `fleetctl replay --speed 0` of `source` into the server at `addr`.
fn replay(source: &Path, addr: &str, connections: usize, limit: usize) -> Command {
    let mut replay = Command::new(env!("CARGO_BIN_EXE_fleetctl"));
    replay
        .args(["--db", source.to_str().unwrap(), "replay", "--speed", "0"])
        .args(["--to", &format!("http://{addr}")])
        .args(["--devices", &connections.to_string()])
        .args(["--limit", &limit.to_string()])
        .env("FLEETCTL_INGEST_TOKEN", INGEST_TOKEN)
        .stderr(std::process::Stdio::inherit());
    replay
}

/// Every vehicle's plate in the fleet at `db` (a file or a URL).
fn plates_of(db: &Path) -> Vec<String> {
    Db::open(&store::Location::parse(db).expect("location"))
        .expect("open")
        .vehicles
        .iter()
        .map(|(v, _)| v.plate.clone())
        .collect()
}

/// A number in replay's summary line, found after `label`.
fn figure_after(line: &str, label: &str) -> f64 {
    line.split(label)
        .nth(1)
        .and_then(|rest| {
            rest.trim_start_matches(['(', ' '])
                .split(|c: char| !(c.is_ascii_digit() || c == '.'))
                .next()
        })
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no {label:?} in {line:?}"))
}

/// One MCP `vehicle_position` call on a kept-alive connection: its latitude, and
/// how long the answer took, ms.
fn position_lat(
    stream: &mut std::net::TcpStream,
    buf: &mut Vec<u8>,
    addr: &str,
    plate: &str,
) -> (Option<f64>, f64) {
    let request = vehicle_position_request(addr, MCP_TOKEN, plate);
    let t = Instant::now();
    let status = http_post(stream, buf, request.as_bytes());
    let ms = t.elapsed().as_secs_f64() * 1000.0;
    let start = buf.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    let answer: serde_json::Value = serde_json::from_slice(&buf[start..]).unwrap_or_default();
    let lat = (status == 200)
        .then(|| answer["result"]["structuredContent"]["lat"].as_f64())
        .flatten();
    (lat, ms)
}

fn percentile(times: &mut [f64], p: usize) -> f64 {
    times.sort_by(f64::total_cmp);
    times[(times.len() * p / 100).min(times.len() - 1)]
}

/// Sustained ingest over HTTP keep-alive (`fleetctl replay` of a generated
/// 1,000-vehicle day into an `init` database), and meanwhile: how soon a pushed fix
/// shows in `vehicle_position`, and how long that tool takes, against idle. Twice:
/// as `serve --http --ingest` runs by default, then with `--realtime-tools` when
/// this process may ask for a real-time policy.
fn bench_ingest(dir: &Path, quick: bool) {
    // One in fifteen generated vehicles is out of service: 1,072 give 1,000 devices.
    let (vehicles, fixes) = if quick {
        (107, 100_000)
    } else {
        (1072, 1_200_000)
    };
    let source = dir.join("ingest-source.db");
    generate_in_child(&source, vehicles, 1, false);
    println!("  as serve runs by default:");
    ingest_pass(dir, &source, vehicles, fixes, false);
    match std::thread::spawn(|| make_this_thread_realtime(2))
        .join()
        .expect("asked")
    {
        Ok(()) => {
            println!(
                "  with --realtime-tools, and the probe real-time too (a client elsewhere would not wait for these cores):"
            );
            let dir = dir.to_path_buf();
            std::thread::spawn(move || {
                make_this_thread_realtime(2).expect("allowed a moment ago");
                ingest_pass(&dir, &source, vehicles, fixes, true);
            })
            .join()
            .expect("the real-time pass");
        }
        Err(why) => println!(
            "  with --realtime-tools: not measured, the system refused a real-time policy ({why})"
        ),
    }
}

/// Puts the calling thread under the round-robin real-time policy at `priority`,
/// the processes it starts under the ordinary one.
fn make_this_thread_realtime(priority: i32) -> Result<(), String> {
    let param = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: `param` outlives the call, which only reads it.
    let status =
        unsafe { libc::sched_setscheduler(0, libc::SCHED_RR | libc::SCHED_RESET_ON_FORK, &param) };
    if status == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error().to_string())
    }
}

/// One pass of [`bench_ingest`] into a fresh live database, with the server's
/// `--realtime-tools` when `realtime`.
fn ingest_pass(dir: &Path, source: &Path, vehicles: u32, fixes: usize, realtime: bool) {
    use std::io::Write;
    let live = dir.join(if realtime {
        "ingest-live-rt.db"
    } else {
        "ingest-live.db"
    });
    let made = Command::new(env!("CARGO_BIN_EXE_fleetctl"))
        .args([
            "--db",
            live.to_str().unwrap(),
            "init",
            "--time-zone",
            "America/Guatemala",
        ])
        .output()
        .expect("init runs");
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let (mut server, addr) = start_ingest_server(&live, realtime);
    // Every device registers (auto-register) before the figures are taken.
    let warm = replay(source, &addr, 60, vehicles as usize * 2)
        .output()
        .expect("replay runs");
    assert!(
        warm.status.success(),
        "{}",
        String::from_utf8_lossy(&warm.stderr)
    );

    let mut probe = std::net::TcpStream::connect(&addr).expect("connect");
    probe.set_nodelay(true).ok();
    let mut mcp = std::net::TcpStream::connect(&addr).expect("connect");
    mcp.set_nodelay(true).ok();
    let (mut buf, mut answer_buf) = (Vec::new(), Vec::new());
    let probe_at = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
        - 7200;
    // Push the probe's k-th fix; its latitude tells it apart.
    let mut push_probe = |k: usize| -> f64 {
        let lat = 14.6 + k as f64 * 1e-4;
        let request = format!(
            "GET /ingest/osmand?id=bench-probe&timestamp={}&lat={lat:.4}&lon=-90.5&speed=0&token={INGEST_TOKEN} HTTP/1.1\r\nHost: {addr}\r\n\r\n",
            probe_at + k as i64 * 15
        );
        probe.write_all(request.as_bytes()).expect("push");
        assert_eq!(http_post(&mut probe, &mut buf, b""), 200, "the probe's fix");
        lat
    };
    push_probe(0);
    // Idle, each call names another device: a server keeps an answer while the
    // database is unchanged, and the figure is the report's, as it is under load
    // (where every group commit changes the database).
    let devices = plates_of(&live);
    let mut asked = devices.iter().cycle();
    let mut idle = Vec::new();
    while idle.len() < 200 {
        let device = asked.next().expect("devices");
        let (lat, ms) = position_lat(&mut mcp, &mut answer_buf, &addr, device);
        if lat.is_some() {
            idle.push(ms);
        }
    }

    // A connection per device, as a real fleet's trackers each hold theirs.
    let mut load = replay(source, &addr, vehicles as usize, fixes)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("replay runs");
    let (mut freshness, mut loaded) = (Vec::new(), Vec::new());
    let mut k = 1;
    while load.try_wait().expect("replay").is_none() && k < 400 {
        let pushed = Instant::now();
        let lat = push_probe(k);
        loop {
            let (seen, _) = position_lat(&mut mcp, &mut answer_buf, &addr, "bench-probe");
            if seen.is_some_and(|s| (s - lat).abs() < 1e-6) {
                break;
            }
            // Asked every millisecond: a tighter loop would make the probe's own
            // calls the heaviest load on the tools' threads.
            std::thread::sleep(Duration::from_millis(1));
        }
        freshness.push(pushed.elapsed().as_secs_f64() * 1000.0);
        // The tool's latency: calls like the idle ones, each on another device
        // (the probe's own polling is answered from kept answers between commits).
        for device in asked.by_ref().take(5) {
            loaded.push(position_lat(&mut mcp, &mut answer_buf, &addr, device).1);
        }
        k += 1;
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = load.wait_with_output().expect("replay ends");
    let line = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(out.status.success() && line.contains("refused 0"), "{line}");
    let _ = server.kill();
    let _ = server.wait();

    let pushed = figure_after(&line, "s (");
    let p99 = figure_after(&line, "p99");
    let verdict = |ok: bool| if ok { "met" } else { "MISSED" };
    println!("    {line}");
    println!(
        "    sustained ingest: {pushed:.0} fixes/s, p99 {p99:.1} ms  (target ≥ 20000/s, p99 ≤ 100 ms: {})",
        verdict(pushed >= 20_000.0 && p99 <= 100.0)
    );
    let fresh_p99 = percentile(&mut freshness, 99);
    println!(
        "    freshness under that load (push → vehicle_position shows it), {} probes: p50 {:.0} ms  p99 {fresh_p99:.0} ms  (target p99 ≤ 1000 ms: {})",
        freshness.len(),
        percentile(&mut freshness, 50),
        verdict(fresh_p99 <= 1000.0)
    );
    let (idle_p50, load_p50) = (percentile(&mut idle, 50), percentile(&mut loaded, 50));
    let (idle_p99, load_p99) = (percentile(&mut idle, 99), percentile(&mut loaded, 99));
    println!(
        "    MCP vehicle_position: idle p50 {idle_p50:.2} ms, p99 {idle_p99:.2} ms; under load p50 {load_p50:.2} ms, p99 {load_p99:.2} ms  (target ≤ 2× idle: p50 {}, p99 {})",
        verdict(load_p50 <= 2.0 * idle_p50),
        verdict(load_p99 <= 2.0 * idle_p99)
    );
}

/// The live feed's cost per fix (commit, analysis, rows stored), in-process: every
/// vehicle of a generated fleet pushes one fix per round, as a fleet reporting
/// every 15 s does; the first round (each vehicle analysed whole) is not counted.
fn bench_incremental(dir: &Path, quick: bool) {
    use fleetctl::live::{self, Endpoint, Request};
    let cases: &[(u32, u32)] = if quick {
        &[(15, 7), (100, 7), (15, 30)]
    } else {
        &[(15, 7), (1000, 7), (15, 90)]
    };
    let rounds = 20;
    for &(vehicles, days) in cases {
        let db = dir.join(format!("incremental-{vehicles}x{days}.db"));
        generate_in_child(&db, vehicles, days, false);
        let (last, mut writer, mut analyser) = open_feed(&db);
        let mut pending = Vec::new();
        let (mut committing, mut analysing) = (Duration::ZERO, Duration::ZERO);
        // Round 0 analyses each vehicle whole and round 1's commit stores that:
        // neither is counted.
        let warm = 2;
        for round in 0..rounds + warm {
            let group: Vec<Request> = last
                .iter()
                .map(|(plate, ts, lat, lon)| Request {
                    endpoint: Endpoint::Osmand,
                    query: live::protocols::form_pairs(&format!(
                        "id={plate}&timestamp={}&lat={:.6}&lon={lon}&speed=25",
                        ts + 15 * (round + 1) as i64,
                        lat + 1e-3 * (round + 1) as f64
                    )),
                    body: Vec::new(),
                    json: false,
                })
                .collect();
            let started = Instant::now();
            let committed = writer.commit(
                &group,
                std::mem::take(&mut pending),
                &[],
                fleetctl::clock::wall_clock_now(),
            );
            let analysis_started = Instant::now();
            assert!(committed.outcomes.iter().all(Result::is_ok), "pushed");
            if let Some(epoch) = committed.restart {
                analyser.restart(epoch).expect("restart");
            }
            let (rows, _) = analyser.analyse(&committed.added).expect("analysed");
            pending.push(rows);
            if round >= warm {
                committing += analysis_started - started;
                analysing += analysis_started.elapsed();
            }
        }
        // The last round's rows.
        let started = Instant::now();
        let flushed = writer.commit(&[], pending, &[], fleetctl::clock::wall_clock_now());
        assert_eq!(flushed.rows_failed, None);
        committing += started.elapsed();
        let fixes = rounds * last.len();
        let per_fix = |d: Duration| d.as_secs_f64() * 1e6 / fixes as f64;
        println!(
            "  {vehicles:>4} vehicles × {days:>2} days: analysis {:>5.1} µs per fix; commit {:>6.1} µs per fix (one sync per round of {} fixes)",
            per_fix(analysing),
            per_fix(committing),
            last.len()
        );
    }
}

/// Bytes per fix of generated databases (SQLite): the whole file, and the positions
/// alone (a copy without the derived tables, vacuumed).
fn bench_storage(dir: &Path, dbs: &[(&str, &Path)]) {
    println!("storage (SQLite, bytes per fix; target ≤ 40 with derived tables and indexes)");
    for (label, db) in dbs {
        let fixes: i64 = rusqlite::Connection::open(db)
            .expect("open")
            .query_row("SELECT COUNT(*) FROM positions", [], |r| r.get(0))
            .expect("count");
        let whole = std::fs::metadata(db).expect("size").len() as f64;
        let alone = dir.join("positions-alone.db");
        std::fs::copy(db, &alone).expect("copy");
        rusqlite::Connection::open(&alone)
            .expect("open")
            .execute_batch(
                "DROP TABLE stops; DROP TABLE trips; DROP TABLE events; DROP TABLE latest_fix; \
                 DROP TABLE visits; DROP TABLE daily; DROP TABLE injected_events; VACUUM;",
            )
            .expect("drop the derived tables");
        let positions = std::fs::metadata(&alone).expect("size").len() as f64;
        let _ = std::fs::remove_file(&alone);
        let per_fix = whole / fixes as f64;
        println!(
            "  {label}: {fixes} fixes; {:.1} bytes per fix in all ({:.1} MB), positions alone {:.1}  ({})",
            per_fix,
            whole / 1e6,
            positions / fixes as f64,
            if per_fix <= 40.0 { "met" } else { "MISSED" }
        );
    }
}

/// The two backends side by side, each figure from the commands a user runs: for
/// each fleet size, `generate`, `analyze` (and two `--shard`s at once on
/// PostgreSQL), `import` of the fleet's positions as a CSV, bytes per fix, and the
/// tools' latency under 50 HTTP clients on two `serve --http` replicas. Sizes in
/// FLEETCTL_BENCH_PG_SIZES (default `15x7,100x30`; add `1000x30` for the issue's
/// size). Needs the server of `.ci/postgres` (FLEETCTL_TEST_PG); says so and skips
/// without one.
fn bench_postgres(dir: &Path, quick: bool) {
    println!("PostgreSQL against SQLite (the release binary; PostgreSQL 15 on this machine)");
    let Ok(server) = std::env::var("FLEETCTL_TEST_PG") else {
        println!(
            "  skipped: FLEETCTL_TEST_PG is not set (.ci/postgres starts a server and prints it)"
        );
        return;
    };
    let sizes = std::env::var("FLEETCTL_BENCH_PG_SIZES")
        .unwrap_or_else(|_| if quick { "15x7" } else { "15x7,100x30" }.to_string());
    for size in sizes.split(',') {
        let Some((vehicles, days)) = size
            .split_once('x')
            .and_then(|(v, d)| Some((v.parse::<u32>().ok()?, d.parse::<u32>().ok()?)))
        else {
            println!("  FLEETCTL_BENCH_PG_SIZES: {size:?} is not VEHICLESxDAYS");
            continue;
        };
        bench_postgres_size(dir, &server, vehicles, days);
    }
}

fn bench_postgres_size(dir: &Path, server: &str, vehicles: u32, days: u32) {
    let label = format!("{vehicles} × {days}");
    let (v, d) = (vehicles.to_string(), days.to_string());
    let file = dir.join(format!("pg-{vehicles}x{days}.db"));
    let _ = std::fs::remove_file(&file);
    let fleet = PgDatabase::new(server, &format!("fleet_{vehicles}x{days}"));
    let generate = ["generate", "--vehicles", &v, "--days", &d, "--ahora", AHORA];
    let on_file = timed(file.to_str().unwrap(), &generate);
    let on_pg = timed(&fleet.url, &generate);
    let fixes: i64 = rusqlite::Connection::open(&file)
        .expect("open")
        .query_row("SELECT COUNT(*) FROM positions", [], |r| r.get(0))
        .expect("count");
    println!(
        "  {label} ({} fixes)",
        fleetctl::render::thousands(fixes as u64)
    );
    let line = |what: &str, sqlite: (f64, f64), postgres: (f64, f64)| {
        println!(
            "    {what:<34} SQLite {:>7.2} s {:>7.1} MiB   PostgreSQL {:>7.2} s {:>7.1} MiB",
            sqlite.0, sqlite.1, postgres.0, postgres.1
        );
    };
    line("generate", on_file, on_pg);
    let analyse = ["analyze"];
    line(
        "analyze",
        timed(file.to_str().unwrap(), &analyse),
        timed(&fleet.url, &analyse),
    );
    let started = Instant::now();
    let shards: Vec<_> = ["1/2", "2/2"]
        .iter()
        .map(|shard| {
            let url = fleet.url.clone();
            let shard = shard.to_string();
            std::thread::spawn(move || timed(&url, &["analyze", "--shard", &shard]))
        })
        .collect();
    let peak = shards
        .into_iter()
        .map(|t| t.join().expect("shard").1)
        .fold(0.0, f64::max);
    println!(
        "    {:<34} {:>58}",
        "analyze --shard 1/2 + 2/2 at once",
        format!(
            "PostgreSQL {:>7.2} s {:>7.1} MiB",
            started.elapsed().as_secs_f64(),
            peak
        )
    );

    // Serving the fleet just analysed, before the import below writes 50 M rows
    // into another database: for a minute after it the server's disk is busy and
    // its caches hold the import's pages (run right after it, the 50 clients gave
    // 57.6–90.0 ms, and 37.5–37.9 on the same fleet 45 s later).
    settle(&fleet.url);
    bench_replica_clients(&fleet.url);

    // Import: the fleet's positions as a CSV, into a new database of each kind.
    let csv = dir.join("pg-positions.csv");
    let _ = std::fs::remove_file(&csv);
    let exported = Command::new(env!("CARGO_BIN_EXE_fleetctl"))
        .args([
            "--db",
            file.to_str().unwrap(),
            "export",
            "positions",
            "-o",
            csv.to_str().unwrap(),
        ])
        .output()
        .expect("export");
    assert!(
        exported.status.success(),
        "{}",
        String::from_utf8_lossy(&exported.stderr)
    );
    let into_file = dir.join("pg-imported.db");
    let _ = std::fs::remove_file(&into_file);
    let into_pg = PgDatabase::new(server, &format!("import_{vehicles}x{days}"));
    let import = [
        "import",
        csv.to_str().unwrap(),
        "--time-zone",
        "America/Guatemala",
    ];
    let (a, b) = (
        timed(into_file.to_str().unwrap(), &import),
        timed(&into_pg.url, &import),
    );
    let rate = |(seconds, _): (f64, f64)| fixes as f64 / seconds;
    // A rate for bulk loads: a small fleet's import is mostly what any import
    // costs (a process, a connection, the schema's checks, its analysis).
    let verdict = if fixes < 1_000_000 {
        format!(
            "a bulk target, judged from 1 M rows; {:.2} s in all here",
            b.0
        )
    } else if rate(b) >= 500_000.0 && b.1 <= 1024.0 {
        "met".to_string()
    } else {
        "MISSED".to_string()
    };
    println!(
        "    {:<34} SQLite {:>7.0} rows/s {:>5.0} MiB   PostgreSQL {:>7.0} rows/s {:>5.0} MiB  (target ≥ 500000 rows/s, ≤ 1024 MiB: {})",
        "import (CSV, end to end)",
        rate(a),
        a.1,
        rate(b),
        b.1,
        verdict
    );
    let _ = std::fs::remove_file(&csv);
    let _ = std::fs::remove_file(&into_file);
    drop(into_pg);

    // Bytes per fix.
    let whole = std::fs::metadata(&file).expect("size").len() as f64 / fixes as f64;
    let mut client = postgres::Client::connect(&fleet.url, postgres::NoTls).expect("connect");
    let sizes = client
        .query_one(
            "SELECT \
               (SELECT sum(pg_total_relation_size(inhrelid))::int8 FROM pg_inherits \
                WHERE inhparent = 'fleetctl.positions'::regclass), \
               (SELECT sum(pg_total_relation_size(c.oid))::int8 FROM pg_class c \
                JOIN pg_namespace n ON n.oid = c.relnamespace \
                WHERE n.nspname = 'fleetctl' AND c.relkind = 'r')",
            &[],
        )
        .expect("sizes");
    let (positions, all): (i64, i64) = (sizes.get(0), sizes.get(1));
    println!(
        "    {:<34} SQLite {:>5.1} in all   PostgreSQL {:>5.1} positions alone, {:>5.1} in all",
        "bytes per fix",
        whole,
        positions as f64 / fixes as f64,
        all as f64 / fixes as f64
    );
    drop(client);
    let _ = std::fs::remove_file(&file);
}

/// Settles the fleet at `url` and says how long it took: vacuums its positions
/// (which autovacuum does on its own within minutes of a bulk load: it read a
/// 25 M-row partition under the 50 clients of a run, whose second pass then gave
/// 88.7 ms against 41.4 in the first), checkpoints (the steps' WAL started one
/// that ran under the clients of a run; its fsyncs leave no dirty pages of the
/// fleet for the kernel to write back under them either), then waits (at most
/// five minutes) until no autovacuum worker is busy with the fleet. The 50 clients
/// measure serving a settled fleet, not the background work the steps before left
/// (the bulk load's fixes, the analyses' rewritten rows), which a deployment pays
/// once after loading.
fn settle(url: &str) {
    let mut client = postgres::Client::connect(url, postgres::NoTls).expect("connect");
    let vacuuming = Instant::now();
    client
        .batch_execute("VACUUM fleetctl.positions")
        .expect("vacuum the positions");
    let vacuumed_s = vacuuming.elapsed().as_secs_f64();
    // A checkpoint that the steps' writes started ran under the clients of a run
    // (`pg_checkpoint`, granted by .ci/postgres; without it the bench says so).
    let checkpointing = Instant::now();
    let checkpoint = match client.batch_execute("CHECKPOINT") {
        Ok(()) => format!(
            "checkpoint in {:.0} s",
            checkpointing.elapsed().as_secs_f64()
        ),
        Err(e) => format!(
            "no checkpoint ({})",
            e.as_db_error()
                .map_or(e.to_string(), |d| d.message().to_string())
        ),
    };
    print!("    (vacuumed the positions in {vacuumed_s:.0} s; {checkpoint}; ");
    let started = Instant::now();
    let mut seen: Vec<String> = Vec::new();
    loop {
        let busy: Vec<String> = client
            .query(
                "SELECT coalesce(query, '') FROM pg_stat_activity \
                 WHERE backend_type = 'autovacuum worker' AND datname = current_database()",
                &[],
            )
            .expect("activity")
            .iter()
            .map(|r| r.get(0))
            .collect();
        for q in &busy {
            if !seen.contains(q) {
                seen.push(q.clone());
            }
        }
        if busy.is_empty() || started.elapsed() > Duration::from_secs(300) {
            break;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    println!(
        "waited {:.0} s for autovacuum to finish with the fleet{})",
        started.elapsed().as_secs_f64(),
        if seen.is_empty() {
            String::new()
        } else {
            format!(": {}", seen.join("; "))
        }
    );
}

/// Each tool's latency under 50 HTTP clients on two `serve --http` replicas of
/// the fleet at `fleet_url` (a PostgreSQL URL, or a file). Alone on a fleet of
/// one's own: FLEETCTL_BENCH_ONLY=replicas FLEETCTL_BENCH_DB=URL. Two passes, each
/// on replicas of their own: the first meets the database's caches as the steps
/// before left them, the second, the target's, serves a fleet the server has
/// read.
fn bench_replica_clients(fleet_url: &str) {
    let tools: Vec<(&str, serde_json::Value)> = vec![
        ("vehicle_position", json!({})),
        ("stopped_vehicles", json!({})),
        ("trip_summary", json!({"date": "yesterday"})),
        ("daily_summary", json!({})),
        ("mileage_ranking", json!({})),
        ("alerts", json!({})),
    ];
    let figures = |all: &[(usize, f64)]| -> (f64, Vec<String>) {
        let mut worst = 0.0f64;
        let each = tools
            .iter()
            .enumerate()
            .map(|(k, (name, _))| {
                let mut times: Vec<f64> = all
                    .iter()
                    .filter(|(j, _)| *j == k)
                    .map(|(_, t)| *t)
                    .collect();
                let (p50, p99) = (percentile(&mut times, 50), percentile(&mut times, 99));
                worst = worst.max(p99);
                format!("{name} {p50:.1}/{p99:.1}")
            })
            .collect();
        (worst, each)
    };
    let clients = 50;
    let (first_worst, _) = figures(&replica_clients_pass(fleet_url, &tools, clients));
    let (worst, each) = figures(&replica_clients_pass(fleet_url, &tools, clients));
    println!(
        "    {clients} HTTP clients on 2 replicas, p50/p99 ms: {}  (target p99 ≤ 50 ms: {}; the first pass, caches as found: worst p99 {first_worst:.1})",
        each.join(", "),
        if worst <= 50.0 { "met" } else { "MISSED" }
    );
}

/// One pass of `clients` HTTP clients over two fresh `serve --http` replicas, 20
/// rounds of `tools` each: every call's tool (its index) and milliseconds.
fn replica_clients_pass(
    fleet_url: &str,
    tools: &[(&'static str, serde_json::Value)],
    clients: usize,
) -> Vec<(usize, f64)> {
    let token = "bench-token-0123456789abcdef";
    let fleet_path = PathBuf::from(fleet_url);
    let replicas: Vec<_> = (0..2)
        .map(|_| start_http_server(&fleet_path, token))
        .collect();
    // The fleet-wide tools are asked as an assistant asks them (the same question
    // by every client, which a server answers once per database version); the
    // per-vehicle ones name a different vehicle at every call, so that their
    // figures are reports run, not answers kept.
    let plates = plates_of(&fleet_path);
    let per_vehicle = ["vehicle_position", "trip_summary", "daily_summary"];
    let rounds = 20;
    let addrs: Vec<String> = replicas.iter().map(|(_, a)| a.clone()).collect();
    let threads: Vec<_> = (0..clients)
        .map(|i| {
            let addr = addrs[i % addrs.len()].clone();
            let tools = tools.to_vec();
            let plates = plates.clone();
            std::thread::spawn(move || {
                let mut stream = std::net::TcpStream::connect(&addr).expect("connect");
                stream.set_nodelay(true).ok();
                let mut buf = Vec::new();
                let mut times: Vec<(usize, f64)> = Vec::new();
                for round in 0..rounds {
                    for (k, (name, args)) in tools.iter().enumerate() {
                        let mut args = args.clone();
                        if per_vehicle.contains(name) {
                            // Calls spread over the fleet, no two clients alike.
                            let pick = (i * rounds + round) * 7919 + k * 104_729;
                            args["plate"] = json!(plates[pick % plates.len()]);
                        }
                        let request = tool_request(&addr, token, name, &args);
                        let t = Instant::now();
                        assert_eq!(http_post(&mut stream, &mut buf, request.as_bytes()), 200);
                        times.push((k, t.elapsed().as_secs_f64() * 1000.0));
                    }
                }
                times
            })
        })
        .collect();
    let all = threads
        .into_iter()
        .flat_map(|t| t.join().expect("client"))
        .collect();
    for (mut child, _) in replicas {
        let _ = child.kill();
        let _ = child.wait();
    }
    all
}

/// A database made for one bench step, dropped afterwards.
struct PgDatabase {
    server: String,
    name: String,
    url: String,
}

impl PgDatabase {
    fn new(server: &str, tag: &str) -> PgDatabase {
        let name = format!("fleetctl_bench_{}_{tag}", std::process::id());
        let mut admin = postgres::Client::connect(server, postgres::NoTls).expect("server");
        admin
            .batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
            .expect("drop");
        admin
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .expect("create");
        let url = format!("{}/{name}", server.rsplit_once('/').expect("a URL").0);
        PgDatabase {
            server: server.to_string(),
            name,
            url,
        }
    }
}

impl Drop for PgDatabase {
    fn drop(&mut self) {
        if let Ok(mut admin) = postgres::Client::connect(&self.server, postgres::NoTls) {
            let _ = admin.batch_execute(&format!(
                "DROP DATABASE IF EXISTS {} WITH (FORCE)",
                self.name
            ));
        }
    }
}

/// Runs `fleetctl --db DB WORDS…`; its wall time, s, and peak resident memory, MiB
/// (read from /proc while it runs: the high-water mark it last showed).
fn timed(db: &str, words: &[&str]) -> (f64, f64) {
    let started = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_fleetctl"))
        .arg("--db")
        .arg(db)
        .args(words)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("fleetctl starts");
    let mut peak = 0.0f64;
    let status = loop {
        peak = peak.max(peak_rss_of(child.id()));
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let seconds = started.elapsed().as_secs_f64();
    if !status.success() {
        let mut said = String::new();
        use std::io::Read;
        let _ = child.stderr.take().map(|mut e| e.read_to_string(&mut said));
        panic!("fleetctl --db … {words:?} failed: {said}");
    }
    (seconds, peak)
}

/// The HTTP request of an MCP `tools/call` (the stateless revision).
fn tool_request(addr: &str, token: &str, name: &str, arguments: &serde_json::Value) -> String {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": name, "arguments": arguments,
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}}})
    .to_string();
    format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\n\
         MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\nMcp-Name: {name}\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
}

/// A vehicle's newest fix: plate, UTC epoch seconds, lat, lon.
type LastFix = (String, i64, f64, f64);

/// Each vehicle's device id made its plate, its newest fix (plate, ts, lat, lon),
/// and the live feed opened on `db` in-process.
fn open_feed(
    db: &Path,
) -> (
    Vec<LastFix>,
    fleetctl::live::Writer,
    fleetctl::live::Analyser,
) {
    let last = {
        let conn = rusqlite::Connection::open(db).expect("open");
        conn.execute_batch("UPDATE vehicles SET device_id = plate")
            .expect("device ids");
        let mut st = conn
            .prepare("SELECT v.plate, f.ts, f.lat, f.lon FROM latest_fix f JOIN vehicles v ON v.id = f.vehicle_id")
            .expect("query");
        st.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
            .expect("rows")
            .collect::<rusqlite::Result<_>>()
            .expect("rows")
    };
    let (writer, analyser) = fleetctl::live::open(
        &store::Location::File(db.to_path_buf()),
        fleetctl::live::Options {
            auto_register: None,
            osmand_speed: fleetctl::ingest::units::SpeedUnit::Kmh,
            outbox: false,
        },
    )
    .expect("open the feed");
    (last, writer, analyser)
}

/// Live analysis against a vehicle's history: one parked for the whole span (a fix
/// every 15 s, one stop going on) and one that works every day (8 hours of driving
/// with a stop every hour, parked overnight), 1 and 90 days of it imported, then
/// pushed a fix a round in order, then a fix 5 to 10 minutes late a round. The analysis's
/// cost per fix should not grow with the days held (it did: a parked vehicle's
/// every fix since it parked was re-run at each push, and a late fix re-ran all).
fn bench_live_history(dir: &Path, quick: bool) {
    use fleetctl::live::{self, Endpoint, Request};
    println!(
        "live analysis against history, in-process (a vehicle parked throughout and one working daily; analysis per fix; target: flat from 1 to 90 days)"
    );
    let spans: &[i64] = if quick { &[1, 30] } else { &[1, 90] };
    for &days in spans {
        let csv = dir.join(format!("history-{days}.csv"));
        let end_ts = 1_790_000_000;
        write_history_csv(&csv, end_ts, days);
        let db = dir.join(format!("history-{days}.db"));
        let (_, _, rows, _) = import_in_child(&db, &csv);
        let (last, mut writer, mut analyser) = open_feed(&db);
        let mut pending = Vec::new();
        // One round: each vehicle's fix at `ts_of(its newest)`; the analysis's time.
        let mut round = |ts_of: &dyn Fn(i64) -> i64| {
            let group: Vec<Request> = last
                .iter()
                .map(|(plate, ts, lat, lon)| Request {
                    endpoint: Endpoint::Osmand,
                    query: live::protocols::form_pairs(&format!(
                        "id={plate}&timestamp={}&lat={lat:.6}&lon={lon:.6}&speed=0",
                        ts_of(*ts)
                    )),
                    body: Vec::new(),
                    json: false,
                })
                .collect();
            let committed = writer.commit(
                &group,
                std::mem::take(&mut pending),
                &[],
                fleetctl::clock::wall_clock_now(),
            );
            assert!(committed.outcomes.iter().all(Result::is_ok), "pushed");
            if let Some(epoch) = committed.restart {
                analyser.restart(epoch).expect("restart");
            }
            let started = Instant::now();
            let (rows, analysed) = analyser.analyse(&committed.added).expect("analysed");
            let took = started.elapsed();
            pending.push(rows);
            (took, analysed)
        };
        // Round 0 analyses each vehicle whole: not counted.
        let (whole, _) = round(&|ts| ts + 15);
        let (in_order, late) = (50i64, 20i64);
        let mut ordered = Duration::ZERO;
        for k in 1..=in_order {
            ordered += round(&|ts| ts + 15 * (k + 1)).0;
        }
        let newest = 15 * (in_order + 1);
        let (mut behind, mut rewound, mut rebuilt) = (Duration::ZERO, 0, 0);
        for k in 0..late {
            // 5 to 10 minutes behind the newest, off the 15-s grid.
            let (took, a) = round(&|ts| ts + newest - 293 - 15 * k);
            behind += took;
            (rewound, rebuilt) = (rewound + a.rewound, rebuilt + a.rebuilt);
        }
        let per_fix =
            |d: Duration, rounds: i64| d.as_secs_f64() * 1e6 / (rounds as f64 * last.len() as f64);
        println!(
            "  {days:>2} days ({rows} fixes): in order {:>6.1} µs per fix, 5–10 minutes late {:>7.1} µs per fix ({rewound} rewound, {rebuilt} analysed whole); the first analysis, whole, {:.0} ms",
            per_fix(ordered, in_order),
            per_fix(behind, late),
            whole.as_secs_f64() * 1e3
        );
    }
}

/// The history of [`bench_live_history`] as a tracker CSV ending at `end_ts`.
fn write_history_csv(path: &Path, end_ts: i64, days: i64) {
    use std::io::Write;
    let mut out = std::io::BufWriter::new(std::fs::File::create(path).expect("csv"));
    writeln!(out, "plate,ts,lat,lon,speed_kmh,ignition").expect("write");
    // A few metres of jitter, the same on every run.
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut jitter = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % 1000) as f64 * 1e-7 - 5e-5
    };
    let start = end_ts - days * 86_400;
    let mut line = |plate: &str, ts: i64, lat: f64, lon: f64, kmh: f64, on: bool| {
        writeln!(out, "{plate},{ts},{lat:.6},{lon:.6},{kmh},{}", u8::from(on)).expect("write");
    };
    // Parked: it drives in for half an hour, then stands until the end.
    for k in 0..120 {
        let ts = start - 1800 + 15 * k;
        line(
            "P-PARK",
            ts,
            14.60 + 1e-3 * k as f64 / 6.0,
            -90.55,
            40.0,
            true,
        );
    }
    for ts in (start..=end_ts).step_by(15) {
        line(
            "P-PARK",
            ts,
            14.62 + jitter(),
            -90.55 + jitter(),
            0.0,
            false,
        );
    }
    // Working: each day 8 hours back and forth at 36 km/h along 5 km, 10 minutes
    // standing (idling) each hour, then parked until the next day.
    for day in 0..days {
        let d0 = start + day * 86_400;
        let mut x_m = 0.0f64;
        for ts in (d0..d0 + 86_400).step_by(15) {
            let (of_day, of_hour) = (ts - d0, (ts - d0) % 3600);
            let driving = of_day < 8 * 3600 && of_hour < 3000;
            if driving {
                // A triangle wave over 5 km: 10 m/s.
                let along = (of_day as f64 * 10.0) % 10_000.0;
                x_m = if along < 5_000.0 {
                    along
                } else {
                    10_000.0 - along
                };
            }
            let lon = -90.53 + x_m / 107_600.0;
            let (kmh, on) = match (driving, of_day < 8 * 3600) {
                (true, _) => (36.0, true),
                (false, true) => (0.0, true),
                (false, false) => (0.0, false),
            };
            line("P-WORK", ts, 14.63 + jitter(), lon + jitter(), kmh, on);
        }
    }
}
