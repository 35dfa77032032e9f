//! The test harness: a command builder whose failures show everything, temporary
//! folders, and the fixture database generated once per test run.

use rusqlite::Connection;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};

/// The data clock of the fixture database.
pub const FIXTURE_AHORA: &str = "2026-11-25T15:30";
/// The seed of the fixture database.
pub const FIXTURE_SEED: u64 = 7;

/// A `fleetctl` command isolated from the user's environment: no `FLEETCTL_DB`, and
/// a data directory inside the test's temporary folder.
pub fn fleetctl(args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_fleetctl"));
    cmd.args(args)
        .env_remove("FLEETCTL_DB")
        .env(
            "XDG_DATA_HOME",
            Path::new(env!("CARGO_TARGET_TMPDIR")).join("xdg-data"),
        )
        .env("NO_COLOR", "1");
    cmd
}

/// What a finished command printed.
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
    described: String,
}

impl Run {
    /// Panics with the whole story unless the command succeeded.
    pub fn ok(self) -> Run {
        assert_eq!(self.code, 0, "expected success\n{}", self.described);
        self
    }

    /// Panics with the whole story unless the command failed with `code`.
    pub fn fails(self, code: i32) -> Run {
        assert_eq!(self.code, code, "expected exit {code}\n{}", self.described);
        self
    }
}

/// Runs a command to completion.
pub fn run(mut cmd: Command) -> Run {
    let out = cmd.output().expect("fleetctl starts");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let described = format!(
        "command: {cmd:?}\nexit: {:?}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status
    );
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout,
        stderr,
        described,
    }
}

/// A folder removed when the test ends.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(name: &str) -> TempDir {
        static COUNTER: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("{name}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    pub fn join(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Generates a database with the given extra arguments into `path`.
pub fn generate(path: &Path, extra: &[&str]) -> Run {
    let mut args = vec!["--db", path.to_str().unwrap(), "generate"];
    args.extend_from_slice(extra);
    run(fleetctl(&args))
}

/// The fixture database (seed 7, data clock 2026-11-25T15:30), generated once per run.
pub fn fixture_db() -> &'static Path {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        let path = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fixture.db");
        let seed = FIXTURE_SEED.to_string();
        generate(
            &path,
            &["--ahora", FIXTURE_AHORA, "--seed", &seed, "--force"],
        )
        .ok();
        path
    })
}

/// Opens a database for reading.
pub fn open(path: &Path) -> Connection {
    Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap()
}

/// A database for `seed` (data clock 2026-11-25T15:30), generated once per run and
/// shared by the tests that score detection across seeds.
pub fn seed_db(seed: u64) -> PathBuf {
    static DBS: OnceLock<Mutex<HashMap<u64, PathBuf>>> = OnceLock::new();
    let mut dbs = DBS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    dbs.entry(seed)
        .or_insert_with(|| {
            let path = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("seed-{seed}.db"));
            generate(
                &path,
                &[
                    "--ahora",
                    FIXTURE_AHORA,
                    "--seed",
                    &seed.to_string(),
                    "--force",
                ],
            )
            .ok();
            path
        })
        .clone()
}

/// Runs `fleetctl --db DB query ARGS… --format json` and parses the answer.
pub fn query_json(db: &Path, args: &[&str]) -> serde_json::Value {
    let mut all = vec!["--db", db.to_str().unwrap(), "query"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--format", "json"]);
    let r = run(fleetctl(&all)).ok();
    serde_json::from_str(&r.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {}", r.stdout))
}
