//! The live feed's groundwork: vehicles known by the id their tracker pushes with
//! (`vehicles add --device-id`, `vehicles set --device-id`), one device per vehicle.

use crate::harness::{TempDir, fixture_db, fleetctl, open, run};

#[test]
fn a_device_id_belongs_to_one_vehicle_and_can_be_moved() {
    let dir = TempDir::new("device-ids");
    let db = dir.join("fleet.db");
    std::fs::copy(fixture_db(), &db).unwrap();
    let db_arg = db.to_str().unwrap();
    let vehicles = |words: &[&str]| {
        let mut args = vec!["--db", db_arg, "vehicles"];
        args.extend_from_slice(words);
        fleetctl(&args)
    };
    let added = run(vehicles(&["add", "P-900LIV", "--device-id", "48241179"])).ok();
    assert!(
        added.stdout.contains("Added P-900LIV (device 48241179)"),
        "{}",
        added.stdout
    );
    // The same device for another vehicle is refused, naming who has it and how to free it.
    let taken = run(vehicles(&["add", "P-901LIV", "--device-id", "48241179"])).fails(2);
    let said = format!("{}{}", taken.stdout, taken.stderr);
    assert!(
        said.contains("already belongs to P-900LIV") && said.contains("--device-id none"),
        "{said}"
    );
    let again = run(vehicles(&["add", "P-900LIV"])).fails(2);
    assert!(format!("{}{}", again.stdout, again.stderr).contains("already in the fleet"));
    // Moved to a demo vehicle: freed first, then set.
    run(vehicles(&["set", "P-900LIV", "--device-id", "none"])).ok();
    run(vehicles(&["set", "p103zgs", "--device-id", "48241179"])).ok();
    let owner: String = open(&db)
        .query_row(
            "SELECT plate FROM vehicles WHERE device_id = '48241179'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(owner, "P-103ZGS");
    let nothing = run(vehicles(&["set", "P-103ZGS"])).fails(2);
    assert!(format!("{}{}", nothing.stdout, nothing.stderr).contains("--device-id"));
}

const INGEST_TOKEN: &str = "ingest-token-0123456789abcdef";
/// The fixture's data clock, 2026-11-25T15:30-06:00.
const DATA_NOW: i64 = 1_795_642_200;

/// A copy of the fixture fleet with three vehicles whose devices push, and a
/// server with `--ingest` on it: (database, server process, base URL, its log).
fn live_fleet(dir: &TempDir, extra: &[&str]) -> (std::path::PathBuf, Server) {
    let db = dir.join("live.db");
    std::fs::copy(fixture_db(), &db).unwrap();
    for (plate, device) in [
        ("P-900LIV", "48241179"),
        ("P-901LIV", "owntracks/jane/phone"),
        ("P-902LIV", "860000000000001"),
    ] {
        add_vehicle(&db, plate, device);
    }
    let mut flags = vec!["--ingest"];
    flags.extend_from_slice(extra);
    let (child, stderr, base, _) =
        crate::http::spawn_server_on(&db, &flags, &[("FLEETCTL_INGEST_TOKEN", INGEST_TOKEN)]);
    let log = crate::http::log_lines(stderr);
    (db, Server { child, base, log })
}

/// `fleetctl vehicles add PLATE --device-id DEVICE`, which must succeed.
fn add_vehicle(db: &std::path::Path, plate: &str, device: &str) {
    crate::harness::run_on(db, &["vehicles", "add", plate, "--device-id", device]).ok();
}

struct Server {
    child: std::process::Child,
    base: String,
    log: std::sync::mpsc::Receiver<String>,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(std::time::Duration::from_secs(60)))
        .build()
        .into()
}

/// Sends a request as a device would: method, path with query, headers, body.
fn send(
    s: &Server,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, String) {
    send_to(&s.base, method, path, headers, body)
}

/// As [`send`], to a server's base URL.
pub(crate) fn send_to(
    base: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, String) {
    thread_local! {
        // One client per thread: its connections are kept alive between requests.
        static AGENT: ureq::Agent = agent();
    }
    let agent = AGENT.with(ureq::Agent::clone);
    let url = format!("{base}{path}");
    let mut resp = if method == "GET" {
        let mut req = agent.get(&url);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        req.call().unwrap()
    } else {
        let mut req = agent.post(&url);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        req.send(body.to_string()).unwrap()
    };
    let status = resp.status().as_u16();
    (status, resp.body_mut().read_to_string().unwrap())
}

fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

/// The vehicle's position as `query position` answers it, once the server's
/// analysis has caught up with the fixes it acknowledged.
fn position(db: &std::path::Path, plate: &str) -> serde_json::Value {
    analysed(db, plate);
    crate::harness::query_json(db, &["position", plate])
}

/// Waits until the vehicle's newest stored fix is its analysed one: a 200 means a
/// fix is on disk, and the server's analysis follows it (docs/live.md). The poll
/// reads the answer; the bound only turns a hang into a failure.
fn analysed(db: &std::path::Path, plate: &str) {
    let conn = open(db);
    let caught_up = || -> bool {
        conn.query_row(
            "SELECT (SELECT max(ts) FROM fixes WHERE vehicle_id = v.id) \
                    IS (SELECT ts FROM latest_fix WHERE vehicle_id = v.id) \
             FROM vehicles v WHERE v.plate = ?1",
            [plate],
            |r| r.get(0),
        )
        .unwrap()
    };
    for _ in 0..6000 {
        if caught_up() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    panic!("the analysis of {plate} never caught up with its fixes");
}

/// The exact requests of Traccar Client (its OsmAnd query, and version 9's JSON), a
/// Traccar server's JSON forwarding and OwnTracks (Basic auth), each stored in its
/// sender's unit and answered as the client expects; retries are duplicates, not
/// new fixes.
#[test]
fn the_ingest_endpoints_take_what_real_clients_send() {
    let dir = TempDir::new("ingest-clients");
    let (db, s) = live_fleet(&dir, &[]);
    let auth = bearer(INGEST_TOKEN);
    // Traccar Client for Android: GET with the token in the URL, speed in knots.
    let t1 = DATA_NOW - 600;
    let traccar_client = format!(
        "/ingest/osmand?id=48241179&timestamp={t1}&lat=14.6349&lon=-90.5069&speed=10.0&bearing=90.0&altitude=1500.0&accuracy=5.0&batt=80.0&token={INGEST_TOKEN}"
    );
    let (status, body) = send(&s, "GET", &traccar_client, &[], "");
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&body).unwrap()["stored"],
        1
    );
    // The same fix again (a retry): a duplicate, still 200.
    let (status, body) = send(&s, "GET", &traccar_client, &[], "");
    assert_eq!(status, 200);
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&body).unwrap()["duplicates"],
        1
    );
    let p = position(&db, "P-900LIV");
    assert_eq!(p["lat"], 14.6349, "{p}");
    assert!((p["speed_kmh"].as_f64().unwrap() - 18.5).abs() < 0.1, "{p}");
    // Traccar Client 9: JSON, speed in m/s.
    let json = r#"{"location":{"timestamp":"2026-11-25T21:25:00.000Z","coords":{"latitude":14.64,"longitude":-90.51,"accuracy":5,"speed":10,"heading":180,"altitude":1500},"is_moving":true,"odometer":1000,"event":"motionchange","battery":{"level":0.8,"is_charging":false},"activity":{"type":"in_vehicle"},"extras":{}},"device_id":"48241179"}"#;
    let (status, body) = send(
        &s,
        "POST",
        "/ingest/osmand",
        &[
            ("Authorization", &auth),
            ("Content-Type", "application/json"),
        ],
        json,
    );
    assert_eq!(status, 200, "{body}");
    let p = position(&db, "P-900LIV");
    assert_eq!(
        (p["lat"].as_f64(), p["speed_kmh"].as_f64()),
        (Some(14.64), Some(36.0)),
        "{p}"
    );
    // OwnTracks: Basic auth (user and password; the password is the token).
    use base64::Engine;
    let basic = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("jane:{INGEST_TOKEN}"))
    );
    let owntracks = format!(
        r#"{{"_type":"location","tid":"JJ","tst":{},"lat":14.60,"lon":-90.52,"acc":10,"alt":1500,"vel":42,"cog":270,"batt":80,"t":"u","topic":"owntracks/jane/phone"}}"#,
        DATA_NOW - 300
    );
    let (status, body) = send(
        &s,
        "POST",
        "/ingest/owntracks",
        &[
            ("Authorization", &basic),
            ("Content-Type", "application/json"),
        ],
        &owntracks,
    );
    assert_eq!((status, body.as_str()), (200, "[]"));
    assert_eq!(position(&db, "P-901LIV")["speed_kmh"], 42.0);
    // A Traccar server forwarding (forward.type=json): knots, Traccar's own offsets.
    let forwarded = r#"{"position":{"id":1,"attributes":{"ignition":true,"motion":true},"deviceId":3,"protocol":"osmand","serverTime":"2026-11-25T21:20:01.000+0000","deviceTime":"2026-11-25T21:20:00.000+0000","fixTime":"2026-11-25T21:20:00.000+0000","valid":true,"latitude":14.62,"longitude":-90.53,"altitude":0.0,"speed":20.0,"course":90.0,"accuracy":0.0},"device":{"id":3,"name":"Truck","uniqueId":"860000000000001","status":"online"}}"#;
    let (status, body) = send(
        &s,
        "POST",
        "/ingest/traccar",
        &[
            ("Authorization", &auth),
            ("Content-Type", "application/json"),
        ],
        forwarded,
    );
    assert_eq!(status, 200, "{body}");
    let p = position(&db, "P-902LIV");
    assert!((p["speed_kmh"].as_f64().unwrap() - 37.0).abs() < 0.1, "{p}");
    assert_eq!(p["ignition_on"], true);
}

/// Values past their real range are refused at the edge by every protocol, naming
/// the field and the range, and nothing of the request is stored (before, a speed of
/// 1e15 knots wrapped in the packed column and was stored as a parked vehicle).
#[test]
fn regression_every_protocol_refuses_values_past_their_range() {
    let dir = TempDir::new("ingest-ranges");
    let (db, s) = live_fleet(&dir, &[]);
    let auth = bearer(INGEST_TOKEN);
    let t = DATA_NOW - 600;
    let osmand = |extra: &str| format!("/ingest/osmand?id=48241179&lat=14.6&lon=-90.5&{extra}");
    let cases = [
        (osmand(&format!("timestamp={t}&speed=1e15")), "speed_kmh"),
        (osmand(&format!("timestamp={t}&speed=1e308")), "speed_kmh"),
        (
            osmand(&format!("timestamp={t}&bearing=409.4")),
            "heading 409.4",
        ),
        (
            osmand(&format!("timestamp={t}&odometer=-5")),
            "odometer_km -0.005",
        ),
        (osmand("timestamp=253402300799"), "9999-12-31"),
        (osmand("timestamp=100"), "1970-01-01"),
    ];
    for (path, said) in &cases {
        let (status, body) = send(&s, "POST", path, &[("Authorization", &auth)], "");
        assert_eq!(status, 400, "{path}: {body}");
        assert!(body.contains(said), "{path} names {said}: {body}");
    }
    use base64::Engine;
    let basic = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("jane:{INGEST_TOKEN}"))
    );
    let owntracks = format!(
        r#"{{"_type":"location","tst":{t},"lat":14.60,"lon":-90.52,"vel":1e15,"topic":"owntracks/jane/phone"}}"#
    );
    let json = [
        ("Authorization", basic.as_str()),
        ("Content-Type", "application/json"),
    ];
    let (status, body) = send(&s, "POST", "/ingest/owntracks", &json, &owntracks);
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("speed_kmh"), "{body}");
    let forwarded = r#"{"position":{"fixTime":"2026-11-25T21:20:00.000+0000","valid":true,"latitude":14.62,"longitude":-90.53,"speed":20.0,"course":400.0,"attributes":{"odometer":1000}},"device":{"uniqueId":"860000000000001"}}"#;
    let json = [
        ("Authorization", auth.as_str()),
        ("Content-Type", "application/json"),
    ];
    let (status, body) = send(&s, "POST", "/ingest/traccar", &json, forwarded);
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("heading 400"), "{body}");
    let stored: i64 = open(&db)
        .query_row("SELECT count(*) FROM fixes p JOIN vehicles v ON v.id = p.vehicle_id WHERE v.plate LIKE 'P-90_LIV'", [], |r| r.get(0))
        .unwrap();
    assert_eq!(stored, 0);
}

/// A server taking pushes answers `vehicle_position` over MCP and its OpenAPI twin
/// as `query position` does, for a vehicle added while it runs and the fix just
/// pushed, and holds a call's headers to its body while devices push.
#[test]
fn a_position_asked_while_devices_push_is_the_one_just_pushed() {
    let dir = TempDir::new("ingest-lookup");
    let (db, s) = live_fleet(&dir, &[]);
    // A vehicle added while the server runs.
    add_vehicle(&db, "P-903LIV", "77");
    let pushed = format!(
        "/ingest/osmand?id=77&timestamp={}&lat=14.6111&lon=-90.5222&speed=0&token={INGEST_TOKEN}",
        DATA_NOW - 60
    );
    let (status, body) = send(&s, "GET", &pushed, &[], "");
    assert_eq!(status, 200, "{body}");
    let expected = position(&db, "P-903LIV");
    assert_eq!(
        (expected["lat"].as_f64(), expected["lon"].as_f64()),
        (Some(14.6111), Some(-90.5222))
    );
    let mcp = bearer(crate::http::TOKEN);
    let call = |name: &str, arguments: serde_json::Value| {
        serde_json::json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
            "params": {"name": name, "arguments": arguments, "_meta": crate::harness::modern_meta()}})
        .to_string()
    };
    let headers = |name: &'static str| {
        [
            ("Authorization", mcp.as_str()),
            ("Content-Type", "application/json"),
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", "tools/call"),
            ("Mcp-Name", name),
        ]
    };
    let asked = call("vehicle_position", serde_json::json!({"plate": "P-903LIV"}));
    let (status, body) = send(&s, "POST", "/mcp", &headers("vehicle_position"), &asked);
    assert_eq!(status, 200, "{body}");
    let answer: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(answer["result"]["structuredContent"], expected, "{body}");
    let (status, body) = send(
        &s,
        "POST",
        "/api/v1/tools/vehicle_position",
        &[
            ("Authorization", mcp.as_str()),
            ("Content-Type", "application/json"),
        ],
        r#"{"plate": "P-903LIV"}"#,
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&body).unwrap(),
        expected
    );
    // Headers that name the lookup over a body that calls another tool.
    let other = call("list_vehicles", serde_json::json!({}));
    let (status, body) = send(&s, "POST", "/mcp", &headers("vehicle_position"), &other);
    assert_eq!(status, 400, "{body}");
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&body).unwrap()["error"]["code"],
        -32020,
        "{body}"
    );
}

/// `--realtime-tools`: the tool calls' threads (their loop and the workers) run
/// under the real-time policy and no other thread does, and the server answers and
/// takes fixes as without it; where the system refuses a real-time policy, the
/// server does not start and says how to allow one.
#[test]
fn realtime_tools_puts_the_tool_threads_alone_ahead_of_ingest() {
    let dir = TempDir::new("ingest-realtime");
    let allowed = std::thread::spawn(|| {
        let param = libc::sched_param { sched_priority: 1 };
        // SAFETY: `param` outlives the call, which only reads it.
        unsafe { libc::sched_setscheduler(0, libc::SCHED_RR, &param) == 0 }
    })
    .join()
    .unwrap();
    // Refused: here as it is, or, where this test may ask, without CAP_SYS_NICE
    // (util-linux's setpriv takes it away).
    let serve = [
        "--db",
        fixture_db().to_str().unwrap(),
        "serve",
        "--http",
        "127.0.0.1:0",
        "--ingest",
        "--realtime-tools",
    ];
    let mut refused = if allowed {
        let mut without = std::process::Command::new("setpriv");
        without
            .args([
                "--bounding-set",
                "-sys_nice",
                env!("CARGO_BIN_EXE_fleetctl"),
            ])
            .args(serve);
        without
    } else {
        crate::harness::fleetctl(&serve)
    };
    let refused = refused
        .env("FLEETCTL_TOKEN", crate::http::TOKEN)
        .env("FLEETCTL_INGEST_TOKEN", INGEST_TOKEN)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(77), "{said}");
    assert!(
        said.contains("refused a real-time policy") && said.contains("LimitRTPRIO"),
        "{said}"
    );
    if !allowed {
        return;
    }
    let (db, s) = live_fleet(&dir, &["--realtime-tools"]);
    push_track(&s, 1, DATA_NOW - 60, 15, 0.0, 0.0);
    let expected = position(&db, "P-900LIV");
    let mcp = bearer(crate::http::TOKEN);
    let headers = [
        ("Authorization", mcp.as_str()),
        ("Content-Type", "application/json"),
    ];
    let (status, body) = send(
        &s,
        "POST",
        "/api/v1/tools/vehicle_position",
        &headers,
        r#"{"plate": "P-900LIV"}"#,
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&body).unwrap(),
        expected
    );
    // A picture, drawn at the ordinary priority, then a tool again.
    let (status, body) = send(&s, "POST", "/api/v1/tools/fleet_map", &headers, "{}");
    assert_eq!(status, 200, "{body}");
    assert!(
        body.contains("png_base64"),
        "{}",
        &body[..body.len().min(300)]
    );

    // Every thread's policy (field 41 of its stat; 0 ordinary, 2 round-robin).
    let tasks = format!("/proc/{}/task", s.child.id());
    let mut policies: Vec<(String, u32)> = std::fs::read_dir(&tasks)
        .unwrap()
        .map(|task| {
            let task = task.unwrap().path();
            let comm = std::fs::read_to_string(task.join("comm")).unwrap();
            let stat = std::fs::read_to_string(task.join("stat")).unwrap();
            let after_name = &stat[stat.rfind(')').unwrap() + 2..];
            let policy = after_name.split(' ').nth(38).unwrap().parse().unwrap();
            (comm.trim().to_string(), policy)
        })
        .collect();
    policies.sort();
    let realtime: Vec<&str> = policies
        .iter()
        .filter(|(_, p)| *p == 2)
        .map(|(name, _)| name.as_str())
        .collect();
    assert_eq!(
        realtime,
        [
            "http-tools",
            "tool-worker",
            "tool-worker",
            "tool-worker",
            "tool-worker"
        ],
        "{policies:?}"
    );
    assert!(
        policies
            .iter()
            .any(|(name, p)| name == "ingest-writer" && *p == 0),
        "{policies:?}"
    );
}

/// An unknown device, a bad field, a wrong token, the MCP token, and the ingest
/// token on the MCP endpoint: each a clear 4xx, and the operator told once which
/// command adds the unknown device.
#[test]
fn ingest_refuses_what_it_cannot_store_and_its_token_reads_nothing() {
    let dir = TempDir::new("ingest-refusals");
    let (_db, s) = live_fleet(&dir, &[]);
    let auth = bearer(INGEST_TOKEN);
    let at = DATA_NOW - 60;
    let unknown = format!("/ingest/osmand?id=999&lat=14.6&lon=-90.5&timestamp={at}");
    for _ in 0..2 {
        let (status, body) = send(&s, "POST", &unknown, &[("Authorization", &auth)], "");
        assert_eq!(status, 404, "{body}");
        assert!(
            body.contains("vehicles add PLATE --device-id 999"),
            "{body}"
        );
    }
    // The operator is told which command adds it (60 s: a hung server's deadline).
    let said = loop {
        let line = s
            .log
            .recv_timeout(std::time::Duration::from_secs(60))
            .expect("a log line about device 999");
        if line.contains("belongs to no vehicle") {
            break line;
        }
    };
    assert!(
        said.contains("\"999\"") && said.contains("vehicles add PLATE --device-id 999"),
        "{said}"
    );
    let (status, body) = send(
        &s,
        "GET",
        &format!("/ingest/osmand?id=48241179&lat=north&lon=-90.5&timestamp={at}"),
        &[("Authorization", &auth)],
        "",
    );
    assert_eq!(status, 400);
    assert!(body.contains("lat \\\"north\\\" is not a number"), "{body}");
    let wrong = "/ingest/osmand?id=48241179&lat=14.6&lon=-90.5&token=not-the-token-at-all";
    assert_eq!(send(&s, "GET", wrong, &[], "").0, 401);
    let with_mcp_token = bearer(crate::http::TOKEN);
    let fix = format!("/ingest/osmand?id=48241179&lat=14.6&lon=-90.5&timestamp={at}");
    assert_eq!(
        send(&s, "POST", &fix, &[("Authorization", &with_mcp_token)], "").0,
        401
    );
    let list = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#;
    let (status, _) = send(
        &s,
        "POST",
        "/mcp",
        &[
            ("Authorization", &auth),
            ("Content-Type", "application/json"),
        ],
        list,
    );
    assert_eq!(status, 401, "an ingest token reads nothing");
    assert_eq!(
        send(
            &s,
            "GET",
            "/ingest/traccar",
            &[("Authorization", &auth)],
            ""
        )
        .0,
        405
    );
}

/// Pushes `n` fixes of P-900LIV's device, `every_s` apart from `first_ts`, each
/// `lat_step` degrees further north, at `speed_kmh`; each must be acknowledged.
fn push_track(s: &Server, n: i64, first_ts: i64, every_s: i64, lat_step: f64, speed_kmh: f64) {
    let auth = bearer(INGEST_TOKEN);
    for k in 0..n {
        let path = format!(
            "/ingest/osmand?id=48241179&lat={}&lon=-90.5&speed={speed_kmh}&timestamp={}",
            14.6 + k as f64 * lat_step,
            first_ts + k * every_s
        );
        assert_eq!(
            send(s, "POST", &path, &[("Authorization", &auth)], "").0,
            200
        );
    }
}

/// A 200 means committed: after a `kill -9` every acknowledged fix is in the
/// database (the answers are the condition; nothing waits on time).
#[test]
fn every_acknowledged_fix_survives_kill_9() {
    let dir = TempDir::new("ingest-kill");
    let (db, mut s) = live_fleet(&dir, &[]);
    let acknowledged = 40;
    push_track(&s, acknowledged, DATA_NOW - 3600, 10, 1e-4, 20.0);
    // SIGKILL: no shutdown, no checkpoint.
    s.child.kill().unwrap();
    s.child.wait().unwrap();
    let vehicle = run(fleetctl(&[
        "--db",
        db.to_str().unwrap(),
        "query",
        "position",
        "P-900LIV",
        "--format",
        "json",
    ]))
    .ok();
    assert!(vehicle.stdout.contains("P-900LIV"));
    let stored: i64 = open(&db)
        .query_row(
            "SELECT count(*) FROM fixes p JOIN vehicles v ON v.id = p.vehicle_id WHERE v.plate = 'P-900LIV'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(stored, acknowledged);
}

/// Another program reading the live file (the `sqlite3` shell, Python's `sqlite3`,
/// as docs/live.md suggests) cannot split the database nor lose an acknowledged
/// fix: the server holds its locks for its whole life, so a reader never takes
/// itself for the last connection and never deletes the server's `-wal`.
#[test]
fn regression_other_readers_of_the_live_file_lose_no_acknowledged_fix() {
    let dir = TempDir::new("ingest-readers");
    let (db, mut s) = live_fleet(&dir, &[]);
    let path = db.to_str().unwrap();
    let wal = dir.join("live.db-wal");
    let read_by_others = || {
        let shell = std::process::Command::new("sqlite3")
            .args([path, "select * from fixes limit 3"])
            .output()
            .expect("the sqlite3 shell (Debian's sqlite3) is installed");
        assert!(
            shell.status.success(),
            "{}",
            String::from_utf8_lossy(&shell.stderr)
        );
        let python = std::process::Command::new("python3")
            .args([
                "-c",
                "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); c.execute('select count(*) from fixes').fetchone(); c.close()",
                path,
            ])
            .output()
            .expect("python3 is installed");
        assert!(
            python.status.success(),
            "{}",
            String::from_utf8_lossy(&python.stderr)
        );
        assert!(wal.exists(), "a reader deleted the server's -wal");
    };
    let mut acknowledged = 0;
    for round in 0..4 {
        read_by_others();
        push_track(&s, 10, DATA_NOW - 7200 + round * 600, 10, 1e-4, 20.0);
        acknowledged += 10;
    }
    // The CLI and the server see one database: a vehicle the CLI adds now is known
    // to the server at once.
    read_by_others();
    add_vehicle(&db, "P-903LIV", "reader-test-device");
    let auth = bearer(INGEST_TOKEN);
    let path_q = format!(
        "/ingest/osmand?id=reader-test-device&lat=14.6&lon=-90.5&timestamp={}",
        DATA_NOW - 60
    );
    assert_eq!(
        send(&s, "POST", &path_q, &[("Authorization", &auth)], "").0,
        200
    );
    s.child.kill().unwrap();
    s.child.wait().unwrap();
    let count = |plate: &str| -> i64 {
        open(&db)
            .query_row(
                "SELECT count(*) FROM fixes p JOIN vehicles v ON v.id = p.vehicle_id WHERE v.plate = ?1",
                [plate],
                |r| r.get(0),
            )
            .unwrap()
    };
    assert_eq!(count("P-900LIV"), acknowledged);
    assert_eq!(count("P-903LIV"), 1);
}

/// A phone's buffered backlog in one request: the ingest endpoints take bodies up to
/// their documented 1 MiB (the MCP endpoint's 256 KiB is its own), and refuse more
/// with 413 naming the limit.
#[test]
fn regression_ingest_takes_a_backlog_up_to_one_mib() {
    let dir = TempDir::new("ingest-body-limit");
    let (_db, s) = live_fleet(&dir, &[]);
    let auth = bearer(INGEST_TOKEN);
    let headers = [
        ("Authorization", auth.as_str()),
        ("Content-Type", "application/json"),
    ];
    for (kib, first_ts, want) in [
        (255, DATA_NOW - 80_000, 200),
        (900, DATA_NOW - 40_000, 200),
        (1126, DATA_NOW - 20_000, 413),
    ] {
        let location = |k: usize| {
            format!(
                r#"{{"timestamp":{},"coords":{{"latitude":{:.6},"longitude":-90.5,"speed":5,"heading":90}},"odometer":{}}}"#,
                (first_ts + k as i64) * 1000,
                14.6 + k as f64 * 1e-6,
                k * 5
            )
        };
        let mut body = String::from(r#"{"device_id":"48241179","location":["#);
        let mut k = 0;
        while body.len() + 200 < kib * 1024 {
            if k > 0 {
                body.push(',');
            }
            body.push_str(&location(k));
            k += 1;
        }
        body.push_str("]}");
        while body.len() < kib * 1024 {
            body.push(' ');
        }
        if want == 200 {
            let (status, answer) = send(&s, "POST", "/ingest/osmand", &headers, &body);
            assert_eq!(status, want, "{kib} KiB: {answer}");
            let stored: serde_json::Value = serde_json::from_str(&answer).unwrap();
            assert_eq!(stored["stored"], k, "{kib} KiB: {answer}");
        } else {
            // Refused on its announced length, before the body is read: the head
            // alone is sent (a client still writing the body could be cut off).
            use std::io::{Read, Write};
            let mut tcp =
                std::net::TcpStream::connect(s.base.trim_start_matches("http://")).unwrap();
            write!(
                tcp,
                "POST /ingest/osmand HTTP/1.1\r\nHost: {}\r\nAuthorization: {auth}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                s.base.trim_start_matches("http://"),
                body.len()
            )
            .unwrap();
            let mut answer = String::new();
            tcp.read_to_string(&mut answer).unwrap();
            assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
            assert!(answer.contains("1048576"), "{answer}");
        }
    }
}

/// `--auto-register` adds at most `--max-new-vehicles-per-day` vehicles (then 429,
/// logged with a count, never once per push), known devices are never limited, a
/// 404's hint quotes the device id it echoes, and `vehicles remove` takes a vehicle
/// out again (its positions only when their number is given).
#[test]
fn regression_registration_is_bounded_and_a_vehicle_can_be_removed() {
    let dir = TempDir::new("ingest-register-cap");
    let (db, mut s) = live_fleet(
        &dir,
        &["--auto-register", "--max-new-vehicles-per-day", "3"],
    );
    let auth = bearer(INGEST_TOKEN);
    let push = |device: &str, k: i64| {
        let path = format!(
            "/ingest/osmand?id={device}&lat=14.6&lon=-90.5&speed=0&timestamp={}",
            DATA_NOW - 900 + k
        );
        send(&s, "POST", &path, &[("Authorization", &auth)], "")
    };
    let statuses: Vec<u16> = (0..6)
        .map(|k| push(&format!("new-device-{k}"), k).0)
        .collect();
    assert_eq!(statuses, [200, 200, 200, 429, 429, 429]);
    let (status, body) = push("new-device-9", 9);
    assert_eq!(status, 429);
    assert!(body.contains("--max-new-vehicles-per-day 3"), "{body}");
    // Known devices, old and newly added, still push.
    assert_eq!(push("new-device-1", 20).0, 200);
    assert_eq!(push("48241179", 21).0, 200);
    let status = crate::harness::sigterm_and_wait(&mut s.child);
    assert!(status.success(), "{status:?}");
    let log: Vec<String> = s.log.iter().collect();
    let capped: Vec<&String> = log.iter().filter(|l| l.contains("(429)")).collect();
    assert_eq!(capped.len(), 1, "one line, not one per push: {log:#?}");
    assert!(capped[0].contains("1 pushes from new devices"), "{log:#?}");
    // Removed again: refused while it has positions, unless their number is given.
    let r = crate::harness::run_on(&db, &["vehicles", "remove", "new-device-1"]).fails(2);
    assert!(
        r.stderr.contains("has 2 positions") && r.stderr.contains("--delete-positions 2"),
        "{}",
        r.stderr
    );
    crate::harness::run_on(
        &db,
        &[
            "vehicles",
            "remove",
            "new-device-1",
            "--delete-positions",
            "1",
        ],
    )
    .fails(2);
    crate::harness::run_on(
        &db,
        &[
            "vehicles",
            "remove",
            "new-device-1",
            "--delete-positions",
            "2",
        ],
    )
    .ok();
    let left: i64 = open(&db)
        .query_row(
            "SELECT count(*) FROM vehicles WHERE plate = 'new-device-1'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(left, 0);
    // Without --auto-register, an unknown device's 404 quotes its id for the shell.
    let (_db2, s2) = live_fleet(&TempDir::new("ingest-quoted-hint"), &[]);
    let path = format!(
        "/ingest/osmand?id=a%20b%3Brm%20-rf&lat=14.6&lon=-90.5&timestamp={}",
        DATA_NOW - 60
    );
    let (status, body) = send(&s2, "POST", &path, &[("Authorization", &auth)], "");
    assert_eq!(status, 404, "{body}");
    assert!(body.contains("--device-id 'a b;rm -rf'"), "{body}");
}

/// A thread of the feed that panics ends the server with exit 70 and says why; it
/// never lingers refusing every push as "queue full" while `/healthz` says ok. A
/// push that got no 200 was not stored; one that got 200 was.
#[test]
fn regression_a_feed_thread_that_panics_stops_the_server_loudly() {
    for thread in ["writer", "analyser"] {
        let dir = TempDir::new("ingest-panic");
        let db = dir.join("live.db");
        std::fs::copy(fixture_db(), &db).unwrap();
        add_vehicle(&db, "P-900LIV", "48241179");
        let (child, stderr, base, _) = crate::http::spawn_server_on(
            &db,
            &["--ingest"],
            &[
                ("FLEETCTL_INGEST_TOKEN", INGEST_TOKEN),
                ("FLEETCTL_TEST_PANIC_IN", thread),
            ],
        );
        let mut s = Server {
            child,
            base,
            log: crate::http::log_lines(stderr),
        };
        let path = format!(
            "/ingest/osmand?id=48241179&lat=14.6&lon=-90.5&timestamp={}",
            DATA_NOW - 60
        );
        let (status, body) = send(
            &s,
            "POST",
            &path,
            &[("Authorization", &bearer(INGEST_TOKEN))],
            "",
        );
        let status_code = s.child.wait().unwrap().code();
        assert_eq!(status_code, Some(70), "{thread}: the server exits 70");
        let log: Vec<String> = s.log.iter().collect();
        assert!(
            log.iter()
                .any(|l| l.contains(&format!("the ingest {thread} thread failed"))),
            "{thread}: {log:#?}"
        );
        let stored: i64 = open(&db)
            .query_row("SELECT count(*) FROM fixes p JOIN vehicles v ON v.id = p.vehicle_id WHERE v.plate = 'P-900LIV'", [], |r| r.get(0))
            .unwrap();
        match thread {
            "writer" => assert!(
                status != 200 && stored == 0,
                "{status} {body}, {stored} stored"
            ),
            _ => assert!(
                status == 200 && stored == 1,
                "{status} {body}, {stored} stored"
            ),
        }
    }
}

/// While pushes cannot be stored (another program holds the write lock past the
/// writer's wait), they are refused and `/healthz` says 503 with the problem; once
/// the lock is gone, both recover by themselves: `/healthz` without any push (a
/// load balancer sends none to a node it took out of rotation).
#[test]
fn regression_healthz_says_when_pushes_cannot_be_stored() {
    let dir = TempDir::new("ingest-health");
    let (db, s) = live_fleet(&dir, &[]);
    let auth = bearer(INGEST_TOKEN);
    let push = |k: i64| {
        let path = format!(
            "/ingest/osmand?id=48241179&lat=14.6&lon=-90.5&timestamp={}",
            DATA_NOW - 600 + k
        );
        send(&s, "POST", &path, &[("Authorization", &auth)], "")
    };
    assert_eq!(push(0).0, 200);
    assert_eq!(send(&s, "GET", "/healthz", &[], "").0, 200);
    let holder = rusqlite::Connection::open(&db).unwrap();
    holder.execute_batch("BEGIN IMMEDIATE").unwrap();
    let (status, body) = push(1);
    assert_eq!(status, 503, "busy, to be retried: {body}");
    let (status, health) = send(&s, "GET", "/healthz", &[], "");
    assert_eq!(status, 503, "{health}");
    assert!(health.contains("pushes cannot be stored"), "{health}");
    holder.execute_batch("ROLLBACK").unwrap();
    drop(holder);
    // The writer tries again by itself every couple of seconds; the bound only
    // turns a server that never recovers into a failure.
    let recovered = (0..600).any(|_| {
        let ok = send(&s, "GET", "/healthz", &[], "").0 == 200;
        if !ok {
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        ok
    });
    assert!(recovered, "/healthz never recovered without pushes");
    assert_eq!(push(2).0, 200);
}

/// A server stopped (SIGTERM) right after its last acknowledged push leaves the
/// reports up to date: it analyses what it holds and stores the rows before it
/// exits, so the database answers about every fix without a poll.
#[test]
fn a_stopped_server_leaves_every_fix_analysed() {
    let dir = TempDir::new("ingest-stop");
    let (db, mut s) = live_fleet(&dir, &[]);
    // Several fixes a second: the analysis holds them back to do them together.
    push_track(&s, 30, DATA_NOW - 1800, 15, 1e-3, 30.0);
    let status = crate::harness::sigterm_and_wait(&mut s.child);
    assert!(status.success(), "{status:?}");
    let (newest, analysed): (i64, Option<i64>) = open(&db)
        .query_row(
            "SELECT (SELECT max(p.ts) FROM fixes p JOIN vehicles v ON v.id = p.vehicle_id WHERE v.plate = 'P-900LIV'), \
                    (SELECT f.ts FROM latest_fix f JOIN vehicles v ON v.id = f.vehicle_id WHERE v.plate = 'P-900LIV')",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!(analysed, Some(newest));
    assert_eq!(newest, DATA_NOW - 1800 + 29 * 15);
    // Stopped (within its first minute, as a rule), it still says what it took in:
    // the writer's summary lines count every fix.
    let log: Vec<String> = s.log.iter().collect();
    let said: usize = log
        .iter()
        .filter_map(|l| {
            l.split("ingest: ")
                .nth(1)?
                .split_once(" fixes in ")?
                .0
                .parse::<usize>()
                .ok()
        })
        .sum();
    assert_eq!(said, 30, "{log:#?}");
}

/// A device that reports twice in one second (the store keeps fixes to the
/// millisecond) has both analysed: the second one, arriving after the first was
/// analysed, is the vehicle's newest, not a fix the analysis already holds.
#[test]
fn a_second_fix_in_the_same_second_is_analysed_too() {
    let dir = TempDir::new("ingest-same-second");
    let (db, mut s) = live_fleet(&dir, &[]);
    let at_ms = (DATA_NOW - 600) * 1000;
    let push = |ms: i64, lat: f64| {
        let path = format!(
            "/ingest/osmand?id=48241179&timestamp={}&lat={lat}&lon=-90.5069&speed=10&token={INGEST_TOKEN}",
            at_ms + ms
        );
        assert_eq!(send(&s, "GET", &path, &[], "").0, 200);
    };
    push(0, 14.63);
    assert_eq!(position(&db, "P-900LIV")["lat"], 14.63);
    push(500, 14.631);
    let status = crate::harness::sigterm_and_wait(&mut s.child);
    assert!(status.success(), "{status:?}");
    let p = crate::harness::query_json(&db, &["position", "P-900LIV"]);
    assert_eq!(p["lat"], 14.631, "{p}");
}

/// Without `--ingest` the server takes no positions, and says how to turn it on.
#[test]
fn a_server_without_ingest_says_how_to_turn_it_on() {
    let (child, stderr, base, _) = crate::http::spawn_server_on(fixture_db(), &[], &[]);
    let s = Server {
        child,
        base,
        log: crate::http::log_lines(stderr),
    };
    let (status, body) = send(&s, "GET", "/ingest/osmand?id=1&lat=1&lon=2", &[], "");
    assert_eq!(status, 404);
    assert!(body.contains("--ingest"), "{body}");
}

/// Item 5 of the live feed: a fleet pushed fix by fix through the endpoints — several
/// devices at once (so the writer's groups take whatever sizes the moment gives),
/// some fixes sent twice, some held back and sent late — ends with every report
/// answering exactly as on the database `generate` built from the same positions.
#[test]
fn a_fleet_pushed_live_answers_as_the_generated_database() {
    let dir = TempDir::new("live-equals-generate");
    let generated = dir.join("generated.db");
    crate::harness::generate(
        &generated,
        &[
            "--ahora",
            "2026-11-25T15:30",
            "--seed",
            "5",
            "--vehicles",
            "3",
            "--days",
            "2",
        ],
    )
    .ok();
    let live = dir.join("live.db");
    std::fs::copy(&generated, &live).unwrap();
    type Row = (
        String,
        i64,
        f64,
        f64,
        f64,
        Option<f64>,
        Option<bool>,
        Option<f64>,
    );
    let fixes: Vec<Row> = {
        let conn = rusqlite::Connection::open(&live).unwrap();
        let rows = conn
            .prepare(
                "SELECT v.plate, p.ts, p.lat, p.lon, p.speed_kmh, p.heading_deg, p.ignition, p.odometer_km \
                 FROM fixes p JOIN vehicles v ON v.id = p.vehicle_id ORDER BY p.vehicle_id, p.ts",
            )
            .unwrap()
            .query_map([], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?, r.get(6)?, r.get(7)?))
            })
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        conn.execute_batch(
            "DELETE FROM positions; DELETE FROM stops; DELETE FROM trips; DELETE FROM events; \
             DELETE FROM visits; DELETE FROM daily; DELETE FROM latest_fix; \
             UPDATE vehicles SET device_id = plate;",
        )
        .unwrap();
        rows
    };
    assert!(fixes.len() > 3000, "{} fixes", fixes.len());
    let (child, stderr, base, _) = crate::http::spawn_server_on(
        &live,
        &["--ingest", "--osmand-speed-unit", "kmh"],
        &[("FLEETCTL_INGEST_TOKEN", INGEST_TOKEN)],
    );
    let server = Server {
        child,
        base,
        log: crate::http::log_lines(stderr),
    };
    let query_of = |f: &Row| {
        let (plate, ts, lat, lon, speed, heading, ignition, odometer) = f;
        let mut q = format!("id={plate}&timestamp={ts}&lat={lat}&lon={lon}&speed={speed}");
        if let Some(h) = heading {
            q += &format!("&bearing={h}");
        }
        if let Some(i) = ignition {
            q += &format!("&ignition={i}");
        }
        if let Some(km) = odometer {
            q += &format!("&odometer={}", km * 1000.0);
        }
        format!("/ingest/osmand?{q}")
    };
    // Each vehicle's device on its own thread; every 37th fix sent twice, every
    // 53rd held back and sent 100 fixes later (25 minutes late, out of order: the
    // vehicle is analysed whole again, and resumed from there). The last 100 fixes
    // arrive in order, so the answers compared are the resumed analysis's.
    let mut by_plate: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for f in &fixes {
        by_plate.entry(f.0.clone()).or_default().push(query_of(f));
    }
    let auth = bearer(INGEST_TOKEN);
    std::thread::scope(|scope| {
        for paths in by_plate.values() {
            let (base, auth) = (server.base.as_str(), &auth);
            scope.spawn(move || {
                let send = |path: &String| {
                    let (status, body) =
                        send_to(base, "POST", path, &[("Authorization", auth)], "");
                    assert_eq!(status, 200, "{path}: {body}");
                };
                let held_back = |k: usize| k % 53 == 52 && k + 100 < paths.len();
                for (k, path) in paths.iter().enumerate() {
                    if !held_back(k) {
                        send(path);
                        if k % 37 == 36 {
                            send(path);
                        }
                    }
                    // 100 fixes later, the one held back arrives.
                    if k >= 100 && held_back(k - 100) {
                        send(&paths[k - 100]);
                    }
                }
            });
        }
    });
    for plate in by_plate.keys() {
        analysed(&live, plate);
    }
    for (name, words) in fed_fleet_cases(&generated, &dir, by_plate.keys()) {
        let expected = crate::reports::answer_json(&generated, &words);
        let got = crate::reports::answer_json(&live, &words);
        assert_eq!(got, expected, "{name}: {words:?}");
    }
    drop(server);
}

/// What a fleet fed live is compared on with the one `generate` built: every
/// snapshot case, and each vehicle's position, days, and trips and stops of its
/// last two days.
pub(crate) fn fed_fleet_cases<'p>(
    generated: &std::path::Path,
    dir: &TempDir,
    plates: impl Iterator<Item = &'p String>,
) -> Vec<(&'static str, Vec<String>)> {
    let scratch = dir.join("pictures");
    std::fs::create_dir_all(&scratch).unwrap();
    let mut cases = crate::reports::snapshot_cases(generated, &scratch);
    let words = |w: &[&str]| w.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    for plate in plates {
        cases.push(("position", words(&["query", "position", plate])));
        cases.push(("daily", words(&["query", "daily", "--plate", plate])));
        cases.push((
            "trips",
            words(&["query", "trips", "--plate", plate, "--from", "2026-11-24"]),
        ));
        cases.push((
            "stops",
            words(&["query", "stops", "--plate", plate, "--from", "2026-11-24"]),
        ));
    }
    cases
}

/// `fleetctl init` makes an empty database whose "now" is the wall clock: a fix
/// pushed two minutes ago is two minutes old in every answer, and its day is the
/// wall clock's.
#[test]
fn a_database_made_by_init_answers_at_the_wall_clock() {
    let dir = TempDir::new("live-clock");
    let db = dir.join("live.db");
    let db_arg = db.to_str().unwrap();
    let made = run(fleetctl(&[
        "--db",
        db_arg,
        "init",
        "--time-zone",
        "America/Guatemala",
    ]))
    .ok();
    assert!(
        made.stdout.contains("vehicles add PLATE --device-id ID"),
        "{}",
        made.stdout
    );
    let again = run(fleetctl(&["--db", db_arg, "init", "--time-zone", "UTC"])).fails(2);
    assert!(again.stderr.contains("already exists"), "{}", again.stderr);
    run(fleetctl(&[
        "--db",
        db_arg,
        "vehicles",
        "add",
        "P-1",
        "--device-id",
        "d1",
    ]))
    .ok();
    let (child, stderr, base, _) = crate::http::spawn_server_on(
        &db,
        &["--ingest"],
        &[("FLEETCTL_INGEST_TOKEN", INGEST_TOKEN)],
    );
    let s = Server {
        child,
        base,
        log: crate::http::log_lines(stderr),
    };
    let now = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64
    };
    let pushed_at = now() - 120;
    let path = format!(
        "/ingest/osmand?id=d1&timestamp={pushed_at}&lat=14.6349&lon=-90.5069&speed=0&ignition=false&token={INGEST_TOKEN}"
    );
    assert_eq!(send(&s, "GET", &path, &[], "").0, 200);
    let p = position(&db, "P-1");
    // Two minutes at least have passed since the fix, by the wall clock.
    assert!(p["minutes_since_fix"].as_f64().unwrap() >= 2.0, "{p}");
    assert_eq!(p["state"], "parked", "{p}");
    // Its day is the wall clock's (today, or yesterday just after midnight).
    let days = crate::harness::query_json(&db, &["daily", "--plate", "P-1", "--from", "yesterday"]);
    assert_eq!(days["days"]["total"], 1, "{days}");
}

/// `fleetctl replay` pushes a database's fixes to a live server as OsmAnd clients;
/// with `--auto-register`, the live database ends with the same fixes.
#[test]
fn replay_pushes_a_fleet_into_a_live_server() {
    let dir = TempDir::new("replay");
    let live = dir.join("live.db");
    let live_arg = live.to_str().unwrap();
    run(fleetctl(&[
        "--db",
        live_arg,
        "init",
        "--time-zone",
        "America/Guatemala",
    ]))
    .ok();
    let (child, stderr, base, _) = crate::http::spawn_server_on(
        &live,
        &["--ingest", "--auto-register"],
        &[("FLEETCTL_INGEST_TOKEN", INGEST_TOKEN)],
    );
    let _server = Server {
        child,
        base: base.clone(),
        log: crate::http::log_lines(stderr),
    };
    // `fleetctl replay` of the fixture to this server, with `flags`.
    let replay = |flags: &[&str]| {
        let mut words = vec![
            "--db",
            fixture_db().to_str().unwrap(),
            "replay",
            "--to",
            &base,
        ];
        words.extend_from_slice(flags);
        let mut replay = fleetctl(&words);
        replay.env("FLEETCTL_INGEST_TOKEN", INGEST_TOKEN);
        run(replay)
    };
    let replayed = replay(&[
        "--speed",
        "0",
        "--devices",
        "4",
        "--limit",
        "400",
        "--rate",
        "2000",
    ])
    .ok();
    assert!(replayed.stdout.contains("refused 0"), "{}", replayed.stdout);
    let sent: i64 = replayed
        .stdout
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{}", replayed.stdout));
    assert!(sent >= 300, "{}", replayed.stdout);
    let stored: i64 = open(&live)
        .query_row("SELECT count(*) FROM positions", [], |r| r.get(0))
        .unwrap();
    assert_eq!(stored, sent);
    let refused = replay(&["--speed", "60", "--start-now"]).fails(2);
    assert!(
        refused.stderr.contains("--start-now needs --speed 1"),
        "{}",
        refused.stderr
    );
    for (speed, rate, said) in [
        ("60", "2000", "--rate needs --speed 0"),
        ("0", "0", "--rate 0 is not a number of fixes a second"),
        ("0", "NaN", "--rate NaN is not a number of fixes a second"),
    ] {
        let refused = replay(&["--speed", speed, "--rate", rate]).fails(2);
        assert!(refused.stderr.contains(said), "{}", refused.stderr);
    }
    assert_eq!(
        open(&live)
            .query_row("SELECT count(*) FROM positions", [], |r| r.get::<_, i64>(0))
            .unwrap(),
        stored,
        "a refused replay pushes nothing"
    );
}

/// A replay whose fixes the server refused exits non-zero with the counts, and the
/// server's answer is quoted escaped, never printed raw (here a server that answers
/// every push 404 with terminal escapes and several lines in its body).
#[test]
fn regression_a_refused_replay_fails_and_never_prints_the_servers_raw_bytes() {
    use std::io::{BufRead, BufReader, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let server = std::thread::spawn(move || {
        // One connection (--devices 1), each request answered, until it closes.
        let (stream, _) = listener.accept().unwrap();
        let mut reader = BufReader::new(stream.try_clone().unwrap());
        let mut out = stream;
        let body = "\x1b[2J\x1b]0;owned\x07unknown device\nsecond line";
        for _ in 0..1000 {
            let mut head = String::new();
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 {
                    return;
                }
                if line == "\r\n" {
                    break;
                }
                head.push_str(&line);
            }
            let answer = format!(
                "HTTP/1.1 404 Not Found\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            );
            if out.write_all(answer.as_bytes()).is_err() {
                return;
            }
        }
    });
    let mut replay = fleetctl(&[
        "--db",
        fixture_db().to_str().unwrap(),
        "replay",
        "--to",
        &base,
        "--speed",
        "0",
        "--devices",
        "1",
        "--limit",
        "20",
    ]);
    replay.env("FLEETCTL_INGEST_TOKEN", INGEST_TOKEN);
    let r = run(replay).fails(3);
    server.join().unwrap();
    let said = format!("{}{}", r.stdout, r.stderr);
    assert!(!said.contains('\x1b') && !said.contains('\x07'), "{said:?}");
    assert!(
        r.stderr
            .contains("the server refused 20 of the 20 fixes sent"),
        "{}",
        r.stderr
    );
    assert!(r.stdout.contains("refused 20"), "{}", r.stdout);
    assert!(said.contains("unknown device\\u{a}second line"), "{said}");
}

/// `prune` archives the old days as a Hive-partitioned Parquet dataset, removes
/// their positions, and leaves every derived row as a full analysis of the
/// positions kept would write it.
#[test]
fn prune_archives_old_days_and_leaves_the_rest_as_analyze_would() {
    let dir = TempDir::new("prune");
    let db = dir.join("fleet.db");
    std::fs::copy(fixture_db(), &db).unwrap();
    let count = || -> i64 {
        open(&db)
            .query_row("SELECT count(*) FROM positions", [], |r| r.get(0))
            .unwrap()
    };
    let before = count();
    // The folder of archives does not exist yet: prune makes it.
    let archive = dir.join("archives").join("2026-12");
    let db_arg = db.to_str().unwrap();
    // The fixture's data runs 2026-11-19 to 2026-11-25 (today): three days go.
    let pruned = run(fleetctl(&[
        "--db",
        db_arg,
        "prune",
        "--older-than",
        "3d",
        "--archive",
        archive.to_str().unwrap(),
    ]))
    .ok();
    assert!(
        pruned.stdout.contains("from before 2026-11-22"),
        "{}",
        pruned.stdout
    );
    let mut folders: Vec<String> = std::fs::read_dir(&archive)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("date="))
        .collect();
    folders.sort();
    assert_eq!(
        folders,
        ["date=2026-11-19", "date=2026-11-20", "date=2026-11-21"]
    );
    let after = count();
    let gone = (before - after).to_string();
    let said = pruned.stdout.replace(',', "");
    assert!(
        said.contains(&format!("Pruned {gone} positions")),
        "{}",
        pruned.stdout
    );
    assert!(
        said.contains(&format!("({gone} positions in")),
        "{}",
        pruned.stdout
    );
    let oldest: i64 = open(&db)
        .query_row("SELECT min(ts) FROM fixes", [], |r| r.get(0))
        .unwrap();
    assert!(
        oldest >= 1_795_327_200,
        "2026-11-22T00:00-06:00 is the first instant kept"
    );
    // What prune left is what analyze makes of the positions kept.
    let analysed = dir.join("analysed.db");
    std::fs::copy(&db, &analysed).unwrap();
    run(fleetctl(&["--db", analysed.to_str().unwrap(), "analyze"])).ok();
    // Row ids differ (analyze writes every row afresh): compare the rows without
    // them, in a sorted order.
    let rows = |p: &std::path::Path| {
        let conn = open(p);
        let mut all = Vec::new();
        for table in ["stops", "trips", "events", "visits", "daily", "latest_fix"] {
            for row in crate::harness::table_rows(&conn, table, "1") {
                let without_id = match table {
                    "stops" | "trips" | "events" => row.split_once('|').unwrap().1.to_string(),
                    _ => row,
                };
                all.push(format!("{table}|{without_id}"));
            }
        }
        all.sort();
        all
    };
    assert_eq!(rows(&db), rows(&analysed));
    // Nothing older is left to prune, and an archive folder is never reused.
    let again = run(fleetctl(&["--db", db_arg, "prune", "--older-than", "3d"])).ok();
    assert!(
        again.stdout.starts_with("Nothing to prune"),
        "{}",
        again.stdout
    );
}

/// The README's example pushes a fix with no time (the server's clock) into the
/// generated demo, whose data clock is days behind: the answers move on with it,
/// and the fix is never from the future.
#[test]
fn a_fix_pushed_into_the_demo_now_is_zero_minutes_old() {
    let dir = TempDir::new("ingest-now");
    let (db, s) = live_fleet(&dir, &[]);
    let path = format!(
        "/ingest/osmand?id=48241179&lat=14.6349&lon=-90.5069&speed=10&token={INGEST_TOKEN}"
    );
    assert_eq!(send(&s, "GET", &path, &[], "").0, 200);
    let p = position(&db, "P-900LIV");
    assert_eq!(p["minutes_since_fix"], 0.0, "{p}");
    assert_eq!(p["data_now"], p["last_fix_at"], "{p}");
    assert_eq!(p["last_fix_age_s"], 0, "{p}");
}

/// A receiver of webhook POSTs on loopback: answers the first with `first_status`
/// and the next with 200, then stops; each request's head and body, in order.
pub(crate) fn webhook_receiver(
    first_status: u16,
) -> (String, std::sync::mpsc::Receiver<(String, String)>) {
    use std::io::{BufRead, BufReader, Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!(
        "http://{}/hooks/fleet?source=test",
        listener.local_addr().unwrap()
    );
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for status in [first_status, 200] {
            let Ok((stream, _)) = listener.accept() else {
                return;
            };
            let mut reader = BufReader::new(stream);
            let mut head = String::new();
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                head.push_str(&line);
            }
            let length = head
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length:")
                        .map(|v| v.trim().parse::<usize>().unwrap())
                })
                .unwrap_or(0);
            let mut body = vec![0; length];
            reader.read_exact(&mut body).unwrap();
            let _ = reader
                .get_mut()
                .write_all(format!("HTTP/1.1 {status} X\r\nContent-Length: 0\r\n\r\n").as_bytes());
            let _ = tx.send((head, String::from_utf8(body).unwrap()));
        }
    });
    (url, rx)
}

/// An alert is announced once its rows are stored, and an analysis round that fails
/// after finding it leaves it to the next round, which announces it: once (before,
/// it was counted announced and never sent).
#[test]
fn regression_an_alert_of_a_failed_analysis_round_is_announced_once_later() {
    let dir = TempDir::new("ingest-alert-retry");
    let db = dir.join("live.db");
    std::fs::copy(fixture_db(), &db).unwrap();
    add_vehicle(&db, "P-900LIV", "48241179");
    let (mut child, stderr, base, _) = crate::http::spawn_server_on(
        &db,
        &["--ingest"],
        &[
            ("FLEETCTL_INGEST_TOKEN", INGEST_TOKEN),
            ("FLEETCTL_TEST_FAIL_ANALYSIS_WITH_EVENTS", "1"),
        ],
    );
    let log = crate::http::log_lines(stderr);
    let s = Server {
        child: std::process::Command::new("true").spawn().unwrap(),
        base,
        log,
    };
    push_speeding(&s);
    let wait = std::time::Duration::from_secs(120);
    let mut said = Vec::new();
    let announced = loop {
        match s.log.recv_timeout(wait) {
            Ok(line) if line.contains("alert: P-900LIV speeding") => break true,
            Ok(line) => said.push(line),
            Err(_) => break false,
        }
    };
    assert!(announced, "the alert is announced after all: {said:#?}");
    assert!(
        said.iter().any(|l| l.contains("injected for a test")),
        "the round failed first: {said:#?}"
    );
    let status = crate::harness::sigterm_and_wait(&mut child);
    assert!(status.success(), "{status:?}");
    let after: Vec<String> = s.log.iter().collect();
    assert!(
        !after.iter().any(|l| l.contains("alert: P-900LIV speeding")),
        "announced once: {after:#?}"
    );
    let stored: i64 = open(&db)
        .query_row("SELECT count(*) FROM events WHERE kind = (SELECT code FROM event_kinds WHERE name = 'speeding') AND vehicle_id = (SELECT id FROM vehicles WHERE plate = 'P-900LIV')", [], |r| r.get(0))
        .unwrap();
    assert_eq!(stored, 1);
}

/// An HTTPS receiver gets the alert: the webhook speaks TLS (rustls), checking the
/// receiver's certificate against `--alert-webhook-ca` (here a CA made for the test
/// by openssl, the receiver Python's own HTTPS server on loopback).
#[test]
fn an_https_webhook_receiver_gets_the_alert() {
    let dir = TempDir::new("ingest-https-hook");
    let openssl = |args: &[&str]| {
        let out = std::process::Command::new("openssl")
            .args(args)
            .current_dir(dir.path())
            .output()
            .expect("openssl (Debian's openssl) is installed");
        assert!(
            out.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    openssl(
        &[
            &["req", "-x509"][..],
            &ec,
            &[
                "-subj",
                "/CN=fleetctl test CA",
                "-days",
                "2",
                "-keyout",
                "ca.key",
                "-out",
                "ca.pem",
            ],
        ]
        .concat(),
    );
    openssl(
        &[
            &["req"][..],
            &ec,
            &[
                "-subj",
                "/CN=127.0.0.1",
                "-keyout",
                "leaf.key",
                "-out",
                "leaf.csr",
            ],
        ]
        .concat(),
    );
    std::fs::write(
        dir.join("leaf.ext"),
        "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n",
    )
    .unwrap();
    openssl(&[
        "x509",
        "-req",
        "-in",
        "leaf.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-days",
        "2",
        "-extfile",
        "leaf.ext",
        "-out",
        "leaf.pem",
    ]);
    // Answers at most three POSTs (204), printing each body on a line; gone after
    // two minutes without one.
    let receiver = r#"
import http.server, ssl, sys
class Hook(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        print(body.decode(), flush=True)
        self.send_response(204)
        self.end_headers()
    def log_message(self, *args):
        pass
server = http.server.HTTPServer(("127.0.0.1", 0), Hook)
tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
tls.load_cert_chain("leaf.pem", "leaf.key")
server.socket = tls.wrap_socket(server.socket, server_side=True)
server.timeout = 120
print(server.server_address[1], flush=True)
for _ in range(3):
    server.handle_request()
"#;
    let mut python = std::process::Command::new("python3")
        .args(["-c", receiver])
        .current_dir(dir.path())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python3 is installed");
    use std::io::BufRead;
    let mut lines = std::io::BufReader::new(python.stdout.take().unwrap()).lines();
    let port = lines.next().unwrap().unwrap();
    let url = format!("https://127.0.0.1:{port}/fleet-alerts");
    let ca = dir.join("ca.pem");
    let (_db, s) = live_fleet(
        &dir,
        &[
            "--alert-webhook",
            &url,
            "--alert-webhook-ca",
            ca.to_str().unwrap(),
        ],
    );
    push_speeding(&s);
    let body = lines.next().expect("the receiver got no alert").unwrap();
    let alert: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        (alert["alert"].as_str(), alert["plate"].as_str()),
        (Some("speeding"), Some("P-900LIV")),
        "{alert}"
    );
    let _ = python.kill();
    let _ = python.wait();
}

/// An alert the webhook has not taken yet waits in the database: a stopped server
/// says how many it keeps, and the next start posts them (before, a stop dropped the
/// queue without a word).
#[test]
fn regression_alerts_not_posted_yet_survive_a_restart() {
    let dir = TempDir::new("ingest-outbox");
    // A receiver that is not there: the POSTs fail and are tried again later.
    let gone = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let (db, mut s) = live_fleet(&dir, &["--alert-webhook", &format!("http://{gone}/hook")]);
    push_speeding(&s);
    let queued = || -> i64 {
        open(&db)
            .query_row("SELECT count(*) FROM alert_outbox", [], |r| r.get(0))
            .unwrap_or(0)
    };
    let waited = (0..6000).any(|_| {
        let n = queued();
        if n == 0 {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        n > 0
    });
    assert!(waited, "the alert was never queued");
    let status = crate::harness::sigterm_and_wait(&mut s.child);
    assert!(status.success(), "{status:?}");
    let log: Vec<String> = s.log.iter().collect();
    assert!(
        log.iter()
            .any(|l| l.contains("1 alerts not posted yet are kept")),
        "{log:#?}"
    );
    assert_eq!(queued(), 1);
    // Started again with a receiver that takes it: the kept alert is posted.
    let (url, posts) = webhook_receiver(200);
    let (child, stderr, base, _) = crate::http::spawn_server_on(
        &db,
        &["--ingest", "--alert-webhook", &url],
        &[("FLEETCTL_INGEST_TOKEN", INGEST_TOKEN)],
    );
    let _again = Server {
        child,
        base,
        log: crate::http::log_lines(stderr),
    };
    let (_, body) = posts
        .recv_timeout(std::time::Duration::from_secs(120))
        .expect("the kept alert was not posted after the restart");
    let alert: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        (alert["alert"].as_str(), alert["plate"].as_str()),
        (Some("speeding"), Some("P-900LIV")),
        "{alert}"
    );
    let emptied = (0..6000).any(|_| {
        let n = queued();
        if n > 0 {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        n == 0
    });
    assert!(emptied, "the posted alert stayed queued");
}

/// Pushes P-900LIV's speeding: 26 km/h, then 133 km/h (72 knots, Traccar Client's
/// unit) for a minute, a fix every 15 s, each answered 200.
fn push_speeding(s: &Server) {
    push_speeding_to(&s.base, INGEST_TOKEN);
}

/// [`push_speeding`] to the server at `base` with the ingest token `token`.
pub(crate) fn push_speeding_to(base: &str, token: &str) {
    let mut lat = 14.60;
    for (k, knots) in [14.4, 72.0, 72.0, 72.0, 72.0].into_iter().enumerate() {
        lat += knots * 1.852 / 3.6 * 15.0 / 111_195.0;
        let path = format!(
            "/ingest/osmand?id=48241179&timestamp={}&lat={lat:.6}&lon=-90.5&speed={knots}&token={token}",
            DATA_NOW + 60 + 15 * k as i64
        );
        let (status, body) = send_to(base, "GET", &path, &[], "");
        assert_eq!(status, 200, "{body}");
    }
}

/// A vehicle pushed over the limit is alerted as it happens: logged, and POSTed to
/// the webhook as JSON — again after the receiver's 503, the same alert.
#[test]
fn speeding_pushed_live_is_logged_and_posted_to_the_webhook() {
    let (url, posts) = webhook_receiver(503);
    let dir = TempDir::new("ingest-alerts");
    let (_db, s) = live_fleet(&dir, &["--alert-webhook", &url]);
    push_speeding(&s);
    let wait = std::time::Duration::from_secs(120);
    let (refused_head, refused) = posts.recv_timeout(wait).expect("no alert was posted");
    let (head, body) = posts
        .recv_timeout(wait)
        .expect("the alert was not posted again after 503");
    assert_eq!(refused, body, "a retry posts the same alert");
    assert!(
        head.starts_with("POST /hooks/fleet?source=test HTTP/1.1\r\n"),
        "{head}"
    );
    assert!(
        refused_head
            .to_ascii_lowercase()
            .contains("content-type: application/json"),
        "{refused_head}"
    );
    let alert: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(alert["alert"], "speeding", "{alert}");
    assert_eq!(alert["plate"], "P-900LIV", "{alert}");
    assert!(
        alert["at"]
            .as_str()
            .unwrap()
            .starts_with("2026-11-25T15:31:15-06:00"),
        "{alert}"
    );
    assert!(
        alert["detail"]["max_speed_kmh"].as_f64().unwrap() > 130.0,
        "{alert}"
    );
    // Every fix after the first was fast: the episode reaches the newest one, so
    // its until and figures are as far as known.
    assert_eq!(alert["ongoing"], true, "{alert}");
    // Logged before it was posted: the line is in the log already.
    let logged = std::iter::from_fn(|| s.log.recv_timeout(wait).ok())
        .find(|line| line.contains("alert: P-900LIV speeding"))
        .expect("the alert is logged");
    assert!(logged.contains("2026-11-25T15:31:15-06:00"), "{logged}");
    assert!(logged.ends_with("(going on)"), "{logged}");
}
