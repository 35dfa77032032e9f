//! `make bench`: the speed and memory figures the issues set targets for, measured
//! on this machine and printed. Each case runs in a fresh child process (this same
//! binary, re-executed) so that its peak memory is its own.

use fleetctl::clock::FleetZone;
use fleetctl::synth::{self, GenerateOptions};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

const AHORA: &str = "2026-11-25T15:30";

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--child-generate") {
        child_generate(&args[2..]);
        return;
    }
    let dir = std::env::temp_dir().join(format!("fleetctl-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    println!(
        "fleetctl benchmarks (release build, {} cores)",
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    println!();
    println!("generate");
    let default = (0..5)
        .map(|i| generate_in_child(&dir.join(format!("default-{i}.db")), 15, 7))
        .collect::<Vec<_>>();
    report("15 vehicles × 7 days (median of 5)", &default, 0.5);
    let mid = generate_in_child(&dir.join("100x30.db"), 100, 30);
    report("100 vehicles × 30 days", &[mid], f64::NAN);
    let big = generate_in_child(&dir.join("1000x30.db"), 1000, 30);
    report("1000 vehicles × 30 days", &[big], 180.0);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Wall seconds, rows written, peak resident memory in MiB.
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

fn generate_in_child(path: &Path, vehicles: u32, days: u32) -> Figures {
    let out = Command::new(std::env::current_exe().expect("own path"))
        .args([
            "--child-generate",
            path.to_str().unwrap(),
            &vehicles.to_string(),
            &days.to_string(),
        ])
        .output()
        .expect("child runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "child failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Vec<f64> = text
        .split_whitespace()
        .map(|x| x.parse().unwrap())
        .collect();
    let _ = std::fs::remove_file(path);
    Figures {
        seconds: v[0],
        rows: v[1] as u64,
        peak_mib: v[2],
    }
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
    let seconds = started.elapsed().as_secs_f64();
    println!("{seconds} {} {}", summary.positions, peak_rss_mib());
}

/// Peak resident set size of this process, from /proc (Linux); 0 elsewhere.
fn peak_rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
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
