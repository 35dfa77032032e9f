//! Faults and hostile files: fleetctl never replaces a file that is not its own, never
//! leaves its own unusable after a kill, and keeps the modes and links it finds.

use crate::harness::{TempDir, fixture_db, fleetctl, generate, query_json, run};
use rusqlite::Connection;
use std::path::{Path, PathBuf};

const SMALL: [&str; 6] = [
    "--ahora",
    "2026-11-25T15:30",
    "--vehicles",
    "2",
    "--days",
    "1",
];

fn with(extra: &[&'static str]) -> Vec<&'static str> {
    let mut args = SMALL.to_vec();
    args.extend_from_slice(extra);
    args
}

fn side(path: &Path, suffix: &str) -> PathBuf {
    PathBuf::from(format!("{}{suffix}", path.display()))
}

fn copy_of_fixture(dir: &TempDir, name: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::copy(fixture_db(), &path).unwrap();
    path
}

#[test]
fn regression_a_foreign_database_with_a_schema_version_is_never_replaced() {
    let dir = TempDir::new("foreign-meta");
    let path = dir.join("crm.db");
    Connection::open(&path)
        .unwrap()
        .execute_batch(
            "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT);
             INSERT INTO meta VALUES ('schema_version', '2');
             CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT);
             INSERT INTO customers (name) VALUES ('Ferretería El Martillo');",
        )
        .unwrap();
    let before = std::fs::read(&path).unwrap();
    for flag in ["--if-missing", "--force"] {
        let r = generate(&path, &with(&[flag])).fails(2);
        assert!(
            r.stderr.contains("is not a fleetctl database")
                && r.stderr.contains("another application")
                && r.stderr.contains("customers"),
            "{flag}: {}",
            r.stderr
        );
        assert_eq!(std::fs::read(&path).unwrap(), before, "{flag}: untouched");
    }
    let r = run(fleetctl(&[
        "--db",
        path.to_str().unwrap(),
        "query",
        "vehicles",
    ]))
    .fails(4);
    assert!(r.stderr.contains("customers"), "{}", r.stderr);
    // An old fleetctl database without the mark is named as such, and still never replaced.
    let old = copy_of_fixture(&dir, "old.db");
    Connection::open(&old)
        .unwrap()
        .execute_batch("PRAGMA application_id = 0")
        .unwrap();
    let r = generate(&old, &with(&["--force"])).fails(2);
    assert!(
        r.stderr.contains("without fleetctl's mark") && r.stderr.contains("delete it yourself"),
        "{}",
        r.stderr
    );
}

#[test]
fn new_databases_are_private_and_replaced_ones_keep_their_mode() {
    use std::os::unix::fs::PermissionsExt;
    let dir = TempDir::new("modes");
    let path = dir.join("fleet.db");
    generate(&path, &SMALL).ok();
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&path), 0o600, "a new database is the owner's alone");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
    generate(&path, &with(&["--force", "--seed", "9"])).ok();
    assert_eq!(mode(&path), 0o640, "--force keeps the mode it found");
    // Even a read-only one (the mode is applied once the file is written).
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o444)).unwrap();
    generate(&path, &with(&["--force"])).ok();
    assert_eq!(mode(&path), 0o444);
    assert_eq!(query_json(&path, &["vehicles"])["vehicles"]["total"], 2);
}

#[test]
fn regression_a_stale_journal_is_never_applied_to_a_new_database() {
    let dir = TempDir::new("stale-journal");
    // A database killed half-way, whose main file the user then deleted.
    let live = copy_of_fixture(&dir, "live.db");
    let path = dir.join("fleet.db");
    {
        let conn = Connection::open(&live).unwrap();
        conn.execute_batch("PRAGMA cache_size = 8; BEGIN IMMEDIATE; DELETE FROM positions;")
            .unwrap();
        std::fs::copy(side(&live, "-journal"), side(&path, "-journal")).unwrap();
        conn.execute_batch("ROLLBACK").unwrap();
    }
    assert!(side(&path, "-journal").exists());
    generate(&path, &SMALL).ok();
    assert!(
        !side(&path, "-journal").exists(),
        "the stale journal is gone"
    );
    assert_eq!(query_json(&path, &["vehicles"])["vehicles"]["total"], 2);
}

#[test]
fn a_symlinked_database_is_written_through_its_link() {
    let dir = TempDir::new("symlink");
    std::fs::create_dir_all(dir.join("real")).unwrap();
    let real = dir.join("real/fleet.db");
    let link = dir.join("fleet.db");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    // A dangling link is refused: nothing is created where it points.
    let r = generate(&link, &SMALL).fails(2);
    assert!(r.stderr.contains("symbolic link"), "{}", r.stderr);
    assert!(!real.exists());
    generate(&real, &SMALL).ok();
    let before = std::fs::read(&real).unwrap();
    generate(&link, &with(&["--force", "--seed", "9"])).ok();
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink(),
        "the link stays a link"
    );
    assert_ne!(
        std::fs::read(&real).unwrap(),
        before,
        "its target was replaced"
    );
    assert_eq!(query_json(&link, &["vehicles"])["vehicles"]["total"], 2);
}

/// The state a write killed after SQLite spilled pages leaves: the database file
/// half-changed and a hot journal beside it. Made here without timing: a transaction
/// is held open while both files are copied, then rolled back.
#[test]
fn regression_a_write_killed_half_way_is_rolled_back_by_the_next_command() {
    let dir = TempDir::new("hot-journal");
    let live = copy_of_fixture(&dir, "live.db");
    let crashed = dir.join("crashed.db");
    let old = query_json(&live, &["alerts", "--from", "2026-11-19"]);
    {
        let conn = Connection::open(&live).unwrap();
        conn.execute_batch(
            "PRAGMA cache_size = 8; BEGIN IMMEDIATE; DELETE FROM events; DELETE FROM stops; DELETE FROM daily;
             UPDATE meta SET value = 'garbage' WHERE key = 'schema_version';",
        )
        .unwrap();
        std::fs::copy(&live, &crashed).unwrap();
        std::fs::copy(side(&live, "-journal"), side(&crashed, "-journal")).unwrap();
        conn.execute_batch("ROLLBACK").unwrap();
    }
    assert_ne!(
        std::fs::read(&crashed).unwrap(),
        std::fs::read(&live).unwrap(),
        "the copy holds pages of the unfinished write"
    );
    assert_eq!(
        query_json(&crashed, &["alerts", "--from", "2026-11-19"]),
        old
    );
    assert!(
        !side(&crashed, "-journal").exists(),
        "the journal was rolled back"
    );
    // Every command works on it afterwards, the server included.
    assert_eq!(query_json(&crashed, &["vehicles"])["vehicles"]["total"], 15);
    generate(&crashed, &with(&["--force"])).ok();
}

#[test]
fn analyze_killed_at_any_moment_leaves_the_old_or_the_new_results() {
    let dir = TempDir::new("kill-analyze");
    let base = copy_of_fixture(&dir, "base.db");
    let done = copy_of_fixture(&dir, "done.db");
    let analyze = |db: &Path| {
        fleetctl(&[
            "--db",
            db.to_str().unwrap(),
            "analyze",
            "--speed-limit",
            "60",
        ])
    };
    run(analyze(&done)).ok();
    let alerts = |db: &Path| query_json(db, &["alerts", "--from", "2026-11-19"]);
    let (old, new) = (alerts(&base), alerts(&done));
    assert_ne!(old, new, "the two analyses differ");
    let mut killed_mid_write = 0;
    // Kill once the journal holds this many bytes: from the first page to the end.
    for (i, journal_bytes) in [
        1u64,
        4 << 10,
        32 << 10,
        128 << 10,
        512 << 10,
        2 << 20,
        8 << 20,
    ]
    .into_iter()
    .enumerate()
    {
        let db = copy_of_fixture(&dir, &format!("kill-{i}.db"));
        let journal = side(&db, "-journal");
        let mut child = analyze(&db)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        loop {
            if child.try_wait().unwrap().is_some() {
                break;
            }
            if std::fs::metadata(&journal).is_ok_and(|m| m.len() >= journal_bytes) {
                child.kill().unwrap();
                break;
            }
            std::thread::yield_now();
        }
        child.wait().unwrap();
        if journal.exists() {
            killed_mid_write += 1;
        }
        let now = alerts(&db);
        assert!(
            now == old || now == new,
            "kill {i} at {journal_bytes} journal bytes: neither old nor new results"
        );
        assert_eq!(query_json(&db, &["vehicles"])["vehicles"]["total"], 15);
        run(analyze(&db)).ok();
        assert_eq!(alerts(&db), new, "kill {i}: analyze runs again to the end");
        // (A journal killed before its header was written is inert, and SQLite leaves
        // it until the next write ends, as here.)
        assert!(!journal.exists(), "kill {i}: no journal left");
    }
    eprintln!("analyze killed mid-write {killed_mid_write} times of 7");
}

#[test]
fn regression_a_wal_mode_database_gets_no_side_files_from_reads() {
    let dir = TempDir::new("wal");
    let db = copy_of_fixture(&dir, "fleet.db");
    let conn = Connection::open(&db).unwrap();
    let mode: String = conn
        .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    drop(conn);
    assert_eq!(query_json(&db, &["vehicles"])["vehicles"]["total"], 15);
    for suffix in ["-wal", "-shm", "-journal"] {
        assert!(!side(&db, suffix).exists(), "{suffix} left behind");
    }
    assert!(
        query_json(&db, &["stopped"])["vehicles"]["total"]
            .as_u64()
            .is_some()
    );
    assert!(!side(&db, "-wal").exists() && !side(&db, "-shm").exists());
}

#[test]
fn regression_a_token_file_that_never_ends_is_refused() {
    let dir = TempDir::new("token-zero");
    let link = dir.join("token");
    std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
    let big = dir.join("big-token");
    std::fs::write(&big, "a".repeat(10_000)).unwrap();
    for (file, said) in [
        (&link, "not a regular file"),
        (&big, "larger than 4096 bytes"),
    ] {
        let r = run(fleetctl(&[
            "--db",
            fixture_db().to_str().unwrap(),
            "serve",
            "--http",
            "127.0.0.1:0",
            "--token-file",
            file.to_str().unwrap(),
        ]))
        .fails(2);
        assert!(r.stderr.contains(said), "{}", r.stderr);
    }
}

#[test]
fn regression_a_plate_with_a_path_in_it_never_writes_outside_the_folder() {
    let dir = TempDir::new("plate-path");
    let db = copy_of_fixture(&dir, "fleet.db");
    let (plate, date): (String, String) = Connection::open(&db)
        .unwrap()
        .query_row(
            "SELECT v.plate, d.date FROM daily d JOIN vehicles v ON v.id = d.vehicle_id ORDER BY d.gps_distance_km DESC LIMIT 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    Connection::open(&db)
        .unwrap()
        .execute(
            "UPDATE vehicles SET plate = '../../P-1' WHERE plate = ?1",
            [&plate],
        )
        .unwrap();
    std::fs::create_dir_all(dir.join("maps")).unwrap();
    let mut cmd = fleetctl(&[
        "--db",
        db.to_str().unwrap(),
        "map",
        "../../P-1",
        "--date",
        &date,
    ]);
    cmd.current_dir(dir.join("maps"));
    let r = run(cmd).ok();
    let written = r.stdout.trim();
    assert!(!written.contains('/'), "{written}");
    assert!(dir.join("maps").join(written).exists());
    let names: Vec<_> = std::fs::read_dir(dir.join("maps"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names.len(), 1, "no temporary file left: {names:?}");
}

#[test]
fn regression_a_damaged_database_is_said_to_be_damaged_never_read_as_empty() {
    let dir = TempDir::new("damaged");
    let cases = [
        (
            "UPDATE events SET detail = '{not json' WHERE kind = (SELECT code FROM event_kinds WHERE name = 'speeding')",
            "detail is not what detection writes",
        ),
        (
            "UPDATE events SET detail = json_remove(detail, '$.over_limit_kmh') WHERE kind = (SELECT code FROM event_kinds WHERE name = 'speeding')",
            "missing field `over_limit_kmh`",
        ),
        (
            "UPDATE events SET kind = 99 WHERE kind = (SELECT code FROM event_kinds WHERE name = 'speeding')",
            "unknown kind code 99",
        ),
        (
            "UPDATE meta SET value = 'fast' WHERE key = 'speed_limit_kmh'",
            "meta.speed_limit_kmh is \"fast\", not a number",
        ),
    ];
    // A vehicle-day with a speeding event: its trip report reads every event of the day.
    let (plate, date): (String, String) = Connection::open(fixture_db())
        .unwrap()
        .query_row(
            "SELECT v.plate, date(e.start_ts - 6 * 3600, 'unixepoch') FROM events e JOIN vehicles v ON v.id = e.vehicle_id WHERE e.kind = (SELECT code FROM event_kinds WHERE name = 'speeding') LIMIT 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    for (i, (damage, said)) in cases.into_iter().enumerate() {
        let db = copy_of_fixture(&dir, &format!("damaged-{i}.db"));
        Connection::open(&db)
            .unwrap()
            .execute_batch(damage)
            .unwrap();
        let r = run(fleetctl(&[
            "--db",
            db.to_str().unwrap(),
            "query",
            "trip",
            &plate,
            "--date",
            &date,
        ]))
        .fails(4);
        assert!(
            r.stderr.starts_with("fleetctl: db_schema: ") && r.stderr.contains(said),
            "{damage}: {}",
            r.stderr
        );
        assert!(r.stderr.contains("fleetctl analyze"), "{}", r.stderr);
    }
}

#[test]
fn a_failed_read_of_the_thresholds_never_resets_a_fleets_own_settings() {
    let dir = TempDir::new("thresholds-read");
    let db = dir.join("fleet.db");
    generate(&db, &with(&[])).ok();
    let db_arg = db.to_str().unwrap();
    run(fleetctl(&[
        "--db",
        db_arg,
        "analyze",
        "--speed-limit",
        "70",
    ]))
    .ok();
    // The next analysis cannot read one threshold: it fails, and writes nothing.
    let mut failing = fleetctl(&["--db", db_arg, "analyze"]);
    failing.env("FLEETCTL_TEST_FAIL_META_READ", "long_stop_min");
    let r = run(failing);
    assert_ne!(r.code, 0, "{}", r.stdout);
    assert!(r.stderr.contains("meta.long_stop_min"), "{}", r.stderr);
    // Reports refuse too, rather than answering with the defaults.
    let mut query = fleetctl(&["--db", db_arg, "query", "alerts"]);
    query.env("FLEETCTL_TEST_FAIL_META_READ", "speed_limit_kmh");
    assert_ne!(run(query).code, 0);
    let settings = run(fleetctl(&["--db", db_arg, "settings"])).ok().stdout;
    assert!(
        settings
            .lines()
            .any(|l| l.trim_start().starts_with("speed_limit_kmh") && l.contains(" 70 ")),
        "{settings}"
    );
}

#[test]
fn a_picture_goes_to_standard_output_and_never_into_a_fifo() {
    let dir = TempDir::new("picture-targets");
    let map = |out: &str| small_map(fixture_db(), out);
    picture_to_stdout(&map);
    // What a killed run left beside its target is removed by the next one; a live
    // run's own is not touched (its process exists).
    let left = dir.join(".day.png.tmp-2147483646-1");
    std::fs::write(&left, b"half a picture").unwrap();
    run(map(dir.join("day.png").to_str().unwrap())).ok();
    assert!(!left.exists());
    assert!(
        std::fs::read(dir.join("day.png"))
            .unwrap()
            .starts_with(b"\x89PNG")
    );
}

/// The same, as an ordinary user: run as one (`nobody`, through `setpriv`) when the
/// tests run as root, as they do in CI.
#[test]
fn as_an_ordinary_user_a_picture_goes_to_standard_output() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let dir = TempDir::new("picture-targets-user");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let db = dir.join("fleet.db");
    std::fs::copy(fixture_db(), &db).unwrap();
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o644)).unwrap();
    let as_root = std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0);
    let map = |out: &str| {
        let inner = small_map(&db, out);
        if !as_root {
            return inner;
        }
        let mut cmd = std::process::Command::new("setpriv");
        cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
            .arg(inner.get_program())
            .args(inner.get_args());
        for (key, value) in inner.get_envs() {
            match value {
                Some(v) => cmd.env(key, v),
                None => cmd.env_remove(key),
            };
        }
        cmd
    };
    picture_to_stdout(&map);
}

/// What can be at a path a writer is given, each made fresh in its own folder.
const FOREIGN: [&str; 5] = [
    "an empty folder",
    "a folder with files",
    "a symlink to a folder",
    "a symlink to a file",
    "a FIFO",
];

/// Puts `kind` at `dir/target`, with someone else's files beside it.
fn plant(dir: &Path, kind: &str) -> PathBuf {
    let target = dir.join("target");
    let theirs = dir.join("theirs");
    std::fs::create_dir_all(theirs.join("2026")).unwrap();
    std::fs::write(theirs.join("2026/beach.jpg"), b"not ours").unwrap();
    std::fs::write(dir.join("notes.txt"), b"keep me").unwrap();
    match kind {
        "an empty folder" => std::fs::create_dir(&target).unwrap(),
        "a folder with files" => {
            std::fs::create_dir_all(target.join("inner")).unwrap();
            std::fs::write(target.join("inner/letter.txt"), b"dear").unwrap();
        }
        "a symlink to a folder" => std::os::unix::fs::symlink(&theirs, &target).unwrap(),
        "a symlink to a file" => {
            std::os::unix::fs::symlink(dir.join("notes.txt"), &target).unwrap()
        }
        "a FIFO" => {
            mkfifo(&target);
        }
        other => unreachable!("{other}"),
    }
    target
}

/// Everything under `dir` as it is: each entry's kind, a link's target, a file's bytes.
fn snapshot(dir: &Path) -> Vec<(PathBuf, String)> {
    use std::os::unix::fs::FileTypeExt;
    let mut seen = Vec::new();
    let mut folders = vec![dir.to_path_buf()];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).unwrap().flatten() {
            let path = entry.path();
            let kind = std::fs::symlink_metadata(&path).unwrap().file_type();
            let what = if kind.is_symlink() {
                format!("link to {}", std::fs::read_link(&path).unwrap().display())
            } else if kind.is_dir() {
                folders.push(path.clone());
                "folder".into()
            } else if kind.is_fifo() {
                "fifo".into()
            } else {
                format!("{:?}", std::fs::read(&path).unwrap())
            };
            seen.push((path.strip_prefix(dir).unwrap().to_path_buf(), what));
        }
    }
    seen.sort();
    seen
}

#[test]
fn regression_no_writer_deletes_or_writes_through_what_is_not_its_own() {
    let db = fixture_db().to_str().unwrap();
    let csv = TempDir::new("writers-csv");
    let tracker = csv.join("tracker.csv");
    crate::harness::write_tracker_csv(&tracker, "P-001AAA");
    // Each writer, as the words that run it with its output at TARGET.
    let import_db = csv.join("import.db");
    let writers: Vec<(&str, Vec<&str>)> = vec![
        (
            "map",
            vec![
                "--db",
                db,
                "map",
                "P-467KCQ",
                "--date",
                "2026-11-24",
                "--width",
                "200",
                "--height",
                "200",
                "-o",
                "TARGET",
            ],
        ),
        (
            "chart",
            vec![
                "--db",
                db,
                "chart",
                "P-467KCQ",
                "--date",
                "2026-11-24",
                "-o",
                "TARGET",
            ],
        ),
        (
            "map --fleet",
            vec![
                "--db", db, "map", "--fleet", "--width", "200", "--height", "200", "-o", "TARGET",
            ],
        ),
        (
            "mcp-config --bundle",
            vec!["--db", db, "mcp-config", "--bundle", "TARGET"],
        ),
        (
            "export",
            vec!["--db", db, "export", "daily", "-o", "TARGET"],
        ),
        (
            "export --force",
            vec!["--db", db, "export", "daily", "--force", "-o", "TARGET"],
        ),
        (
            "export --partition-by",
            vec![
                "--db",
                db,
                "export",
                "daily",
                "--format",
                "parquet",
                "--partition-by",
                "date",
                "--force",
                "-o",
                "TARGET",
            ],
        ),
        (
            "import --rejects",
            vec![
                "--db",
                import_db.to_str().unwrap(),
                "import",
                tracker.to_str().unwrap(),
                "--time-zone",
                "UTC",
                "--rejects",
                "TARGET",
            ],
        ),
    ];
    for (name, words) in &writers {
        for kind in FOREIGN {
            let dir = TempDir::new("writer-target");
            let target = plant(dir.path(), kind);
            let before = snapshot(dir.path());
            let args: Vec<&str> = words
                .iter()
                .map(|w| {
                    if *w == "TARGET" {
                        target.to_str().unwrap()
                    } else {
                        w
                    }
                })
                .collect();
            let r = run(fleetctl(&args));
            assert_eq!(r.code, 2, "{name} onto {kind}: {}", r.stderr);
            let said = ["is a folder", "is a symbolic link", "not a regular file"];
            assert!(
                said.iter().any(|s| r.stderr.contains(s)),
                "{name} onto {kind} says what is there: {}",
                r.stderr
            );
            assert_eq!(
                snapshot(dir.path()),
                before,
                "{name} changed {kind} or its neighbours"
            );
        }
    }
}

#[test]
fn a_dash_writes_the_picture_export_and_bundle_to_standard_output() {
    let db = fixture_db().to_str().unwrap();
    let dir = TempDir::new("dash");
    let out = |words: &[&str]| {
        let o = fleetctl(words).current_dir(dir.path()).output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        o.stdout
    };
    assert!(
        out(&[
            "--db",
            db,
            "chart",
            "P-467KCQ",
            "--date",
            "2026-11-24",
            "-o",
            "-"
        ])
        .starts_with(b"\x89PNG")
    );
    let csv = out(&[
        "--db",
        db,
        "export",
        "daily",
        "--from",
        "2026-11-24",
        "--to",
        "2026-11-24",
        "-o",
        "-",
    ]);
    assert!(
        csv.starts_with(b"plate,") || csv.starts_with(b"date,"),
        "{}",
        String::from_utf8_lossy(&csv)
    );
    assert!(out(&["--db", db, "mcp-config", "--bundle", "-"]).starts_with(b"PK\x03\x04"));
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "no file named -"
    );
}

#[test]
fn export_force_replaces_only_what_fleetctl_wrote() {
    let dir = TempDir::new("export-force");
    let db = fixture_db().to_str().unwrap();
    let export = |out: &std::path::Path, extra: &[&str]| {
        let mut args = vec![
            "--db",
            db,
            "export",
            "daily",
            "--from",
            "2026-11-24",
            "--to",
            "2026-11-24",
            "--force",
            "-o",
            out.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        run(fleetctl(&args))
    };
    // A folder of someone else's: refused, and everything in it kept.
    let photos = dir.join("photos");
    std::fs::create_dir_all(photos.join("2026")).unwrap();
    std::fs::write(photos.join("2026/beach.jpg"), b"not ours").unwrap();
    let r = export(&photos, &["--format", "parquet", "--partition-by", "date"]).fails(2);
    assert!(r.stderr.contains("did not write"), "{}", r.stderr);
    assert_eq!(
        std::fs::read(photos.join("2026/beach.jpg")).unwrap(),
        b"not ours"
    );
    // A FIFO: refused, still a FIFO.
    let fifo = mkfifo(&dir.join("daily.csv"));
    let r = export(&fifo, &[]).fails(2);
    assert!(r.stderr.contains("not a regular file"), "{}", r.stderr);
    {
        use std::os::unix::fs::FileTypeExt;
        assert!(
            std::fs::symlink_metadata(&fifo)
                .unwrap()
                .file_type()
                .is_fifo()
        );
    }
    // fleetctl's own dataset: replaced.
    let dataset = dir.join("daily");
    export(&dataset, &["--format", "parquet", "--partition-by", "date"]).ok();
    export(&dataset, &["--format", "parquet", "--partition-by", "date"]).ok();
    assert!(dataset.join("_fleetctl_dataset").is_file());
}

/// Runs `map` with `-o -` and `-o /dev/stdout` into a pipe.
fn picture_to_stdout(map: &dyn Fn(&str) -> std::process::Command) {
    for target in ["-", "/dev/stdout"] {
        let out = map(target).output().unwrap();
        assert!(
            out.status.success(),
            "{target}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.stdout.starts_with(b"\x89PNG"), "{target}");
    }
}

/// `fleetctl map` of one vehicle's day, small, to `out`.
fn small_map(db: &Path, out: &str) -> std::process::Command {
    fleetctl(&[
        "--db",
        db.to_str().unwrap(),
        "map",
        "P-467KCQ",
        "--date",
        "2026-11-24",
        "--width",
        "320",
        "--height",
        "320",
        "-o",
        out,
    ])
}

/// Makes a FIFO at `path` (with the system's `mkfifo`) and returns its path.
fn mkfifo(path: &Path) -> PathBuf {
    assert!(
        std::process::Command::new("mkfifo")
            .arg(path)
            .status()
            .unwrap()
            .success(),
        "mkfifo {}",
        path.display()
    );
    path.to_path_buf()
}

/// The files under `dir`, each with its bytes, in a fixed order.
fn tree(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut files = Vec::new();
    let mut folders = vec![dir.to_path_buf()];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                folders.push(path);
            } else {
                let bytes = std::fs::read(&path).unwrap();
                files.push((path.strip_prefix(dir).unwrap().to_path_buf(), bytes));
            }
        }
    }
    files.sort();
    files
}

#[test]
fn export_force_killed_between_its_renames_loses_neither_dataset() {
    let dir = TempDir::new("export-kill");
    let db = fixture_db().to_str().unwrap();
    let dataset = dir.join("daily");
    let export = |from: &str, fault: Option<&str>| {
        let mut cmd = fleetctl(&[
            "--db",
            db,
            "export",
            "daily",
            "--from",
            from,
            "--to",
            "2026-11-24",
            "--format",
            "parquet",
            "--partition-by",
            "date",
            "--force",
            "-o",
            dataset.to_str().unwrap(),
        ]);
        if let Some(fault) = fault {
            cmd.env(fault, "1");
        }
        run(cmd)
    };
    export("2026-11-24", None).ok();
    let old = tree(&dataset);
    // Killed after the old dataset was moved aside: the folder is gone for now…
    let killed = export("2026-11-22", Some("FLEETCTL_TEST_DIE_BETWEEN_RENAMES"));
    assert_ne!(killed.code, 0, "the process was killed");
    assert!(!dataset.exists());
    // …and the next export puts it back before anything else; when its own rename
    // then fails, the old dataset is what stays, whole.
    let failed = export("2026-11-22", Some("FLEETCTL_TEST_FAIL_SECOND_RENAME"));
    assert_ne!(failed.code, 0, "{}", failed.stderr);
    assert_eq!(tree(&dataset), old, "the old dataset is back, whole");
    // A plain run replaces it with the new one, whole, and leaves nothing beside it.
    export("2026-11-22", None).ok();
    let new = tree(&dataset);
    assert_eq!(
        new.iter()
            .filter(|(p, _)| p.starts_with("date=2026-11-22"))
            .count(),
        1,
        "{new:?}"
    );
    let beside: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(beside, vec![std::ffi::OsString::from("daily")]);
}
