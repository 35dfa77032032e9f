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

/// Runs `fleetctl --db DB WORDS…` to completion.
pub fn run_on(db: &Path, words: &[&str]) -> Run {
    let mut args = vec!["--db", db.to_str().unwrap()];
    args.extend_from_slice(words);
    run(fleetctl(&args))
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
        // A fixture left by an older build may be one this build refuses to replace.
        let _ = std::fs::remove_file(&path);
        let seed = FIXTURE_SEED.to_string();
        generate(
            &path,
            &["--ahora", FIXTURE_AHORA, "--seed", &seed, "--force"],
        )
        .ok();
        path
    })
}

/// Every row of `table`, ordered by `order_by`, each as its cells joined by `|`.
pub fn table_rows(conn: &Connection, table: &str, order_by: &str) -> Vec<String> {
    let mut st = conn
        .prepare(&format!("SELECT * FROM {table} ORDER BY {order_by}"))
        .unwrap();
    let n = st.column_count();
    st.query_map([], |r| {
        let cells: Vec<String> = (0..n)
            .map(|i| format!("{:?}", r.get_ref(i).unwrap()))
            .collect();
        Ok(cells.join("|"))
    })
    .unwrap()
    .map(Result::unwrap)
    .collect()
}

/// SQL that puts a current database's positions back in the layout of schema
/// versions 3 to 7 (floating-point columns under a `(vehicle_id, ts, ts_ms)` key), to
/// test the upgrades of databases written by earlier fleetctls.
pub const POSITIONS_AS_VERSION_7: &str = "\
    CREATE TABLE positions_v7 (vehicle_id INTEGER NOT NULL REFERENCES vehicles(id), \
        ts INTEGER NOT NULL, ts_ms INTEGER NOT NULL DEFAULT 0, lat REAL NOT NULL, \
        lon REAL NOT NULL, speed_kmh REAL NOT NULL, speed_derived INTEGER NOT NULL DEFAULT 0, \
        heading_deg REAL, ignition INTEGER, odometer_km REAL, \
        PRIMARY KEY (vehicle_id, ts, ts_ms)) WITHOUT ROWID; \
    INSERT INTO positions_v7 SELECT vehicle_id, ts, ts_ms, lat, lon, speed_kmh, \
        speed_derived, heading_deg, ignition, odometer_km FROM fixes; \
    DROP VIEW fixes; DROP TABLE positions; ALTER TABLE positions_v7 RENAME TO positions; ";

/// SQL that puts a current database's positions back in the layout of schema
/// version 8 (speed, heading, ignition and the derived-speed flag in columns of
/// their own), with version 8's fixes view.
pub const POSITIONS_AS_VERSION_8: &str = "\
    CREATE TABLE positions_v8 (vehicle_time INTEGER PRIMARY KEY, lat_e7 INTEGER NOT NULL, \
        lon_e7 INTEGER NOT NULL, speed_kmh_e2 INTEGER NOT NULL, speed_derived INTEGER NOT NULL, \
        heading_deg_e1 INTEGER, ignition INTEGER, odometer_m INTEGER); \
    INSERT INTO positions_v8 SELECT vehicle_time, lat_e7, lon_e7, motion >> 15, motion & 1, \
        nullif((motion >> 3) & 4095, 4095), nullif((motion >> 1) & 3, 0) - 1, odometer_m \
        FROM positions; \
    DROP VIEW fixes; DROP TABLE positions; ALTER TABLE positions_v8 RENAME TO positions; \
    CREATE VIEW fixes AS SELECT vehicle_time >> 42 AS vehicle_id, \
        (vehicle_time & 4398046511103) / 1000 AS ts, (vehicle_time & 4398046511103) % 1000 AS ts_ms, \
        lat_e7 / 1e7 AS lat, lon_e7 / 1e7 AS lon, speed_kmh_e2 / 1e2 AS speed_kmh, speed_derived, \
        heading_deg_e1 / 1e1 AS heading_deg, ignition, odometer_m / 1e3 AS odometer_km FROM positions; ";

/// SQL that puts trips and events back in the layout of schema versions up to 8
/// (floating-point trip ends, event kinds by name, no `event_kinds` table).
pub const TRIPS_AND_EVENTS_BEFORE_9: &str = "\
    CREATE TABLE trips_v8 (id INTEGER PRIMARY KEY, vehicle_id INTEGER NOT NULL, \
        start_ts INTEGER NOT NULL, end_ts INTEGER NOT NULL, distance_km REAL NOT NULL, \
        odometer_km REAL, gap_km REAL NOT NULL, max_speed_kmh REAL NOT NULL, \
        moving_s INTEGER NOT NULL, idle_s INTEGER NOT NULL, start_lat REAL NOT NULL, \
        start_lon REAL NOT NULL, end_lat REAL NOT NULL, end_lon REAL NOT NULL); \
    INSERT INTO trips_v8 SELECT id, vehicle_id, start_ts, end_ts, distance_km, odometer_km, \
        gap_km, max_speed_kmh, moving_s, idle_s, start_lat_e7 / 1e7, start_lon_e7 / 1e7, \
        end_lat_e7 / 1e7, end_lon_e7 / 1e7 FROM trips; \
    DROP TABLE trips; ALTER TABLE trips_v8 RENAME TO trips; \
    CREATE INDEX trips_vehicle_ts ON trips (vehicle_id, start_ts); \
    CREATE INDEX trips_ts ON trips (start_ts, vehicle_id, end_ts); \
    CREATE TABLE events_v8 (id INTEGER PRIMARY KEY, vehicle_id INTEGER NOT NULL, \
        kind TEXT NOT NULL, start_ts INTEGER NOT NULL, end_ts INTEGER NOT NULL, \
        lat REAL NOT NULL, lon REAL NOT NULL, detail TEXT NOT NULL); \
    INSERT INTO events_v8 SELECT e.id, e.vehicle_id, k.name, e.start_ts, e.end_ts, e.lat, \
        e.lon, e.detail FROM events e JOIN event_kinds k ON k.code = e.kind; \
    DROP TABLE events; DROP TABLE event_kinds; ALTER TABLE events_v8 RENAME TO events; \
    CREATE INDEX events_ts ON events (start_ts); \
    CREATE INDEX events_vehicle_ts ON events (vehicle_id, start_ts); \
    CREATE INDEX events_kind_ts ON events (kind, start_ts); ";

/// A tracker's CSV file at `path`: `plate`'s 40 fixes 15 s apart from
/// 2026-12-02T14:00:00Z, northwards at 30 km/h, in the columns `import` reads.
pub fn write_tracker_csv(path: &Path, plate: &str) {
    let rows: String = (0..40)
        .map(|k| {
            format!(
                "{plate},{},{},-90.55,30.0\n",
                1_796_220_000 + k * 15,
                14.60 + k as f64 * 0.0008
            )
        })
        .collect();
    std::fs::write(path, format!("plate,timestamp,lat,lon,speed_kmh\n{rows}")).unwrap();
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
            let _ = std::fs::remove_file(&path);
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

/// A running `fleetctl serve`, spoken to line by line.
pub struct McpSession {
    pub child: std::process::Child,
    stdin: Option<std::process::ChildStdin>,
    lines: std::sync::mpsc::Receiver<String>,
    stderr: std::sync::Arc<Mutex<String>>,
    stderr_reader: Option<std::thread::JoinHandle<()>>,
    next_id: i64,
}

impl McpSession {
    /// Starts `fleetctl --db DB serve` with extra environment variables.
    pub fn start_with_env(db: &Path, env: &[(&str, &str)]) -> McpSession {
        use std::io::{BufRead, Read};
        let mut cmd = fleetctl(&["--db", db.to_str().unwrap(), "serve"]);
        cmd.envs(env.iter().copied())
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        let mut child = cmd.spawn().expect("serve starts");
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stderr = std::sync::Arc::new(Mutex::new(String::new()));
        let sink = stderr.clone();
        let mut err = child.stderr.take().unwrap();
        let stderr_reader = std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = err.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        McpSession {
            stdin: child.stdin.take(),
            child,
            lines,
            stderr,
            stderr_reader: Some(stderr_reader),
            next_id: 1,
        }
    }

    /// Starts `fleetctl --db DB serve`.
    pub fn start(db: &Path) -> McpSession {
        McpSession::start_with_env(db, &[])
    }

    /// Starts a server and opens a legacy session (initialize + initialized).
    pub fn initialized(db: &Path, version: &str) -> McpSession {
        let mut s = McpSession::start(db);
        let r = s.request("initialize", serde_json::json!({"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}));
        assert_eq!(r["result"]["protocolVersion"], version, "{r}");
        s.send_line(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        s
    }

    /// Writes raw bytes (a line ending is not added).
    pub fn send_raw(&mut self, bytes: &[u8]) {
        use std::io::Write;
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(bytes).unwrap();
        stdin.flush().unwrap();
    }

    /// Writes one line.
    pub fn send_line(&mut self, line: &str) {
        self.send_raw(format!("{line}\n").as_bytes());
    }

    /// The next line the server wrote, parsed; panics after 60 s (a deadline for a
    /// server that hangs, never a measure of speed).
    pub fn recv(&mut self) -> serde_json::Value {
        let line = self
            .lines
            .recv_timeout(std::time::Duration::from_secs(60))
            .unwrap_or_else(|_| panic!("no answer from the server; stderr:\n{}", self.stderr()));
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON on stdout ({e}): {line}"))
    }

    /// Whether the server answered nothing to what was sent so far: a `ping` goes
    /// after it, and since answers come in order, the next line must be the ping's.
    /// (No waiting on time: the ping's answer is the condition.)
    pub fn answered_nothing(&mut self) -> bool {
        let id = format!("sentinel-{}", self.next_id);
        self.next_id += 1;
        self.send_line(
            &serde_json::json!({"jsonrpc": "2.0", "id": id, "method": "ping"}).to_string(),
        );
        self.recv()["id"] == serde_json::json!(id)
    }

    /// Sends a request with the next integer id and returns its response.
    pub fn request(&mut self, method: &str, params: serde_json::Value) -> serde_json::Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send_line(
            &serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
                .to_string(),
        );
        let r = self.recv();
        assert_eq!(r["id"], id, "the id is echoed: {r}");
        r
    }

    /// Calls a tool and returns the result object.
    pub fn call_tool(&mut self, name: &str, arguments: serde_json::Value) -> serde_json::Value {
        let r = self.request(
            "tools/call",
            serde_json::json!({"name": name, "arguments": arguments}),
        );
        r["result"].clone()
    }

    /// Everything the server wrote to stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Closes stdin, waits for the exit, and returns everything logged on stderr.
    pub fn finish_with_stderr(mut self) -> (String, std::process::ExitStatus) {
        let reader = self.stderr_reader.take();
        let stderr = self.stderr.clone();
        let (status, _) = self.finish();
        // The reader ends when the pipe closes, so after the join it has read it all.
        if let Some(r) = reader {
            r.join().unwrap();
        }
        let log = stderr.lock().unwrap().clone();
        (log, status)
    }

    /// Closes stdin and waits for the exit status (panics after 60 s).
    pub fn finish(mut self) -> (std::process::ExitStatus, std::time::Duration) {
        drop(self.stdin.take());
        let started = std::time::Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return (status, started.elapsed());
            }
            assert!(
                started.elapsed() < std::time::Duration::from_secs(60),
                "the server did not exit at end of input"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }
}

impl Drop for McpSession {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The `_meta` a 2026-07-28 request carries.
pub fn modern_meta() -> serde_json::Value {
    serde_json::json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "1"}
    })
}

/// The error object of a failed tool result: its text block, parsed. A failed result
/// carries no `structuredContent` (clients check that against the output schema).
pub fn tool_error(result: &serde_json::Value) -> serde_json::Value {
    assert_eq!(result["isError"], true, "not a tool error: {result}");
    assert!(
        result.get("structuredContent").is_none(),
        "a tool error has no structuredContent: {result}"
    );
    let text = result["content"][0]["text"].as_str().expect("a text block");
    serde_json::from_str(text)
        .unwrap_or_else(|e| panic!("the text is not the error object ({e}): {text}"))
}

/// Sends SIGTERM to `child` and waits for it to exit; 60 s is a deadline for a hung
/// process only, never a measure of speed.
pub fn sigterm_and_wait(child: &mut std::process::Child) -> std::process::ExitStatus {
    let pid = child.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    let started = std::time::Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(60),
            "still running after SIGTERM"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// Runs `fleetctl --db DB WORDS… -o OUT --format json` (a map or a chart); returns
/// its JSON answer and the PNG's bytes.
pub fn draw_on(db: &Path, words: &[&str], out: &Path) -> (serde_json::Value, Vec<u8>) {
    let mut all = vec!["--db", db.to_str().unwrap()];
    all.extend_from_slice(words);
    all.extend_from_slice(&["-o", out.to_str().unwrap(), "--format", "json"]);
    let r = run(fleetctl(&all)).ok();
    (
        serde_json::from_str(&r.stdout).unwrap(),
        std::fs::read(out).unwrap(),
    )
}

/// The image pixel of a point, from the zoom and bounds a map's answer reports.
pub fn projector(answer: &serde_json::Value) -> impl Fn(fleetctl::geo::LatLon) -> (i64, i64) {
    use fleetctl::geo::{LatLon, web_mercator_px};
    let zoom = answer["zoom"].as_f64().unwrap();
    let nw = LatLon::new(
        answer["bounds"]["north"].as_f64().unwrap(),
        answer["bounds"]["west"].as_f64().unwrap(),
    );
    let (left, top) = web_mercator_px(nw, zoom);
    move |p| {
        let (x, y) = web_mercator_px(p, zoom);
        ((x - left).round() as i64, (y - top).round() as i64)
    }
}

/// Imports a school zone (speed limit 30, a circle of `radius_m`) centred where
/// `plate` first sped, into the database at `db`, as a fleet manager would.
pub fn plant_school_zone(db: &Path, dir: &TempDir, plate: &str, radius_m: u32) {
    let (lat, lon): (f64, f64) = open(db)
        .query_row(
            "SELECT lat, lon FROM events WHERE kind = (SELECT code FROM event_kinds WHERE name = 'speeding') AND vehicle_id = \
             (SELECT id FROM vehicles WHERE plate = ?1) ORDER BY start_ts LIMIT 1",
            [plate],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    let zone = dir.join("school.geojson");
    std::fs::write(
        &zone,
        format!(
            r#"{{"type":"FeatureCollection","features":[{{"type":"Feature","properties":{{"name":"Escuela","speed_limit_kmh":30,"radius_m":{radius_m}}},"geometry":{{"type":"Point","coordinates":[{lon},{lat}]}}}}]}}"#
        ),
    )
    .unwrap();
    run_on(db, &["geofences", "import", zone.to_str().unwrap()]).ok();
}
