//! The database as a file: how fleetctl knows its own (a mark in the SQLite header,
//! never a convention another program could share), what it says about a file that is
//! not its own, how it recovers a write that was killed half-way, and how a new
//! database takes the place of an old one without a window in which someone else's
//! file could be replaced.
//!
//! A fleetctl database carries `PRAGMA application_id = APPLICATION_ID` (bytes 68..72
//! of the header). A file without it is never replaced, by any flag. The store keeps
//! SQLite's rollback journal: a write killed at any moment leaves a hot journal, which
//! the next open rolls back, so every command sees either the old or the new results;
//! a database someone switched to WAL is switched back on the first open, so read-only
//! commands never leave `-wal` and `-shm` files behind.

use crate::error::{Error, ErrorCode, Result};
use rusqlite::{Connection, OpenFlags};
use std::path::{Path, PathBuf};

/// The mark in a fleetctl database's header: `FLTC`.
pub const APPLICATION_ID: u32 = 0x464C_5443;

/// What is at a path, as far as fleetctl is concerned.
#[derive(Debug, Clone, PartialEq)]
pub enum Probe {
    /// Nothing there.
    Missing,
    /// A fleetctl database of the given schema version.
    Fleet {
        /// `meta.schema_version`.
        schema_version: i64,
    },
    /// Something else; the text says what it seems to be.
    NotFleet {
        /// Whose file it seems to be: "an SQLite database of another application
        /// (tables: customers, orders)", "a text file", "a folder"…
        what: String,
    },
}

/// Looks at `path`. A fleetctl database whose last write was interrupted is
/// recovered first (see the module comment); nothing else is ever changed.
pub fn probe(path: &Path) -> Result<Probe> {
    let header = match read_header(path)? {
        Header::Missing => return Ok(Probe::Missing),
        Header::Other(what) => return Ok(Probe::NotFleet { what }),
        Header::Sqlite(h) => h,
    };
    let app_id = u32::from_be_bytes([header[68], header[69], header[70], header[71]]);
    if app_id != APPLICATION_ID {
        return Ok(Probe::NotFleet {
            what: describe_foreign_sqlite(path, app_id),
        });
    }
    recover(path, header[18] == 2)?;
    let conn = open_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY)?;
    let version: String = conn
        .query_row(
            "SELECT value FROM meta WHERE key = 'schema_version'",
            [],
            |r| r.get(0),
        )
        .map_err(|e| unreadable(path, e))?;
    let schema_version = version.parse().map_err(|_| {
        Error::new(
            ErrorCode::DbSchema,
            format!(
                "{}: meta.schema_version {version:?} is not a number",
                path.display()
            ),
        )
    })?;
    Ok(Probe::Fleet { schema_version })
}

enum Header {
    Missing,
    Other(String),
    Sqlite([u8; 100]),
}

/// The first 100 bytes of an SQLite file, or what the file is instead.
///
/// Read through [`held_open`]: on Linux a process's SQLite locks are POSIX advisory
/// locks, which belong to the process and the file, not to a descriptor, so closing
/// *any* descriptor of the database drops every lock the process's connections hold.
/// A server whose locks vanished looks closed to another program, which then
/// checkpoints and deletes the `-wal` and `-shm` the server is still writing to.
fn read_header(path: &Path) -> Result<Header> {
    match crate::untrusted::not_regular(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Header::Missing),
        Err(e) => return Err(Error::io(path, e)),
        Ok(Some(what)) => return Ok(Header::Other(what.into())),
        Ok(None) => {}
    }
    let (head, len) = held_open(path, 100).map_err(|e| Error::io(path, e))?;
    if head.len() == 100 && head.starts_with(b"SQLite format 3\0") {
        let mut h = [0u8; 100];
        h.copy_from_slice(&head);
        return Ok(Header::Sqlite(h));
    }
    Ok(Header::Other(describe_bytes(&head, len)))
}

/// The first `n` bytes of the regular file at `path` and its length, read through a
/// descriptor that stays open for the rest of the process (one per file: a second
/// look at the same file reuses it). Never closing it is the point: see
/// [`read_header`]. A process looks at a handful of databases, so a handful of
/// descriptors is the cost.
fn held_open(path: &Path, n: usize) -> std::io::Result<(Vec<u8>, u64)> {
    use std::sync::Mutex;
    static HELD: Mutex<Vec<((u64, u64), std::fs::File)>> = Mutex::new(Vec::new());
    let identity = |m: &std::fs::Metadata| -> (u64, u64) {
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            (m.dev(), m.ino())
        }
        #[cfg(not(unix))]
        {
            let _ = m;
            (0, 0)
        }
    };
    let mut held = HELD.lock().unwrap_or_else(|p| p.into_inner());
    let wanted = identity(&std::fs::metadata(path)?);
    let index = match held.iter().position(|(id, _)| cfg!(unix) && *id == wanted) {
        Some(i) => i,
        None => {
            let file = crate::untrusted::open_regular(path)?;
            // Identified by what was opened (the path may have changed meanwhile).
            held.push((identity(&file.metadata()?), file));
            held.len() - 1
        }
    };
    let file = &held[index].1;
    let len = file.metadata()?.len();
    let mut head = vec![0u8; n.min(len as usize)];
    read_at(file, &mut head)?;
    if !cfg!(unix) {
        // Without file identities there is nothing to find it by again.
        held.pop();
    }
    Ok((head, len))
}

/// Fills `buf` from the start of `file` without moving a shared cursor.
fn read_at(file: &std::fs::File, buf: &mut [u8]) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileExt;
        file.read_exact_at(buf, 0)
    }
    #[cfg(not(unix))]
    {
        use std::io::{Read, Seek, SeekFrom};
        let mut f = file;
        f.seek(SeekFrom::Start(0))?;
        f.read_exact(buf)
    }
}

/// What a file that is not SQLite seems to be, from its first bytes.
fn describe_bytes(head: &[u8], len: u64) -> String {
    let kinds: [(&[u8], &str); 6] = [
        (b"\x89PNG", "a PNG image"),
        (b"%PDF", "a PDF document"),
        (b"PK\x03\x04", "a ZIP archive (or an XLSX/DOCX document)"),
        (b"\x1f\x8b", "a gzip archive"),
        (b"PAR1", "a Parquet file"),
        (b"SQLite format", "a damaged SQLite file"),
    ];
    if len == 0 {
        return "an empty file".into();
    }
    if let Some((_, what)) = kinds.iter().find(|(magic, _)| head.starts_with(magic)) {
        return (*what).into();
    }
    if std::str::from_utf8(head)
        .is_ok_and(|t| !t.chars().any(|c| c.is_control() && !c.is_whitespace()))
    {
        return format!("a text file of {len} bytes");
    }
    format!("a file of {len} bytes that is not SQLite")
}

/// Whose SQLite database this seems to be: by its application mark, else by its
/// tables (read without changing anything; any failure just leaves them out).
fn describe_foreign_sqlite(path: &Path, app_id: u32) -> String {
    let owner = match app_id {
        0 => None,
        0x4750_4B47 => Some("a GeoPackage".to_string()),
        0x4D50_4258 => Some("an MBTiles tile set".to_string()),
        0x0F05_5111..=0x0F05_5113 => Some("a Fossil repository".to_string()),
        id => Some(format!(
            "a database of another application (application_id {id:#010x})"
        )),
    };
    let tables: Vec<String> = open_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY)
        .and_then(|c| {
            let mut st = c
                .prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
                .map_err(|e| unreadable(path, e))?;
            let names = st
                .query_map([], |r| r.get::<_, String>(0))
                .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
                .map_err(|e| unreadable(path, e))?;
            Ok(names)
        })
        .unwrap_or_default();
    let looks_like_ours = ["meta", "positions", "vehicles", "stops"]
        .iter()
        .all(|t| tables.iter().any(|n| n == t));
    let listed = match tables.len() {
        0 => String::new(),
        1..=6 => format!(" (tables: {})", tables.join(", ")),
        n => format!(" (tables: {}, … {n} in all)", tables[..6].join(", ")),
    };
    match owner {
        Some(o) => format!("{o}{listed}"),
        None if looks_like_ours => format!(
            "an SQLite database without fleetctl's mark{listed}, as made by fleetctl before it marked its files, or by hand; \
             if it is an old fleetctl database, delete it yourself and generate again"
        ),
        None => format!("an SQLite database of another application{listed}"),
    }
}

/// Finishes or undoes an interrupted write: a hot journal is rolled back (SQLite does
/// it on the first read through a read-write connection) and a WAL-mode database is
/// checkpointed and put back in rollback-journal mode.
fn recover(path: &Path, wal_mode: bool) -> Result<()> {
    let journal = side_file(path, "-journal");
    let hot = std::fs::metadata(&journal).is_ok_and(|m| m.len() > 0);
    if !hot && !wal_mode {
        return Ok(());
    }
    let conn = match Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    ) {
        Ok(c) => c,
        // Not ours to write (a read-only copy): a real hot journal then makes the
        // read below fail with SQLite's own explanation.
        Err(_) => return Ok(()),
    };
    // A writer in the middle of its commit holds the file for a moment. A WAL
    // database held open by another program (`serve --http --ingest` keeps its
    // database in WAL mode) answers at once that it is busy: nothing to wait for.
    let wait_s = if wal_mode { 0 } else { 5 };
    let _ = conn.busy_timeout(std::time::Duration::from_secs(wait_s));
    let step = if wal_mode {
        "PRAGMA journal_mode = DELETE"
    } else {
        "SELECT count(*) FROM sqlite_master"
    };
    let done = conn.query_row(step, [], |_| Ok(()));
    // Another program has the WAL database open: its side files are its own, and
    // SQLite reads the database through them; nothing of ours is left to recover.
    if wal_mode
        && done
            .as_ref()
            .is_err_and(|e| e.sqlite_error_code() == Some(rusqlite::ErrorCode::DatabaseBusy))
    {
        return Ok(());
    }
    done.map_err(|e| {
        Error::new(
            ErrorCode::DbUnavailable,
            format!(
                "{}: could not recover the interrupted write: {e}",
                path.display()
            ),
        )
        .with_hint("make sure no other program holds the database and that its folder is writable, then run the command again")
    })
}

fn open_flags(path: &Path, flags: OpenFlags) -> Result<Connection> {
    Connection::open_with_flags(path, flags | OpenFlags::SQLITE_OPEN_NO_MUTEX)
        .map_err(|e| unreadable(path, e))
}

fn unreadable(path: &Path, e: rusqlite::Error) -> Error {
    Error::new(
        ErrorCode::DbUnavailable,
        format!("{}: cannot be read: {e}", path.display()),
    )
    .with_source(e)
}

fn side_file(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// Where a new database goes, checked before any work starts, and installed when the
/// work is done — atomically, and only if the path still holds what was checked.
#[derive(Debug)]
pub struct Target {
    /// The file that will be written: the path given, or the file a symlink there
    /// points to (the link is kept and the new database written through it).
    pub file: PathBuf,
    /// The existing fleetctl database to replace, if any.
    existing: Option<Existing>,
}

#[derive(Debug, PartialEq)]
struct Existing {
    identity: (u64, u64),
    mode: u32,
}

impl Target {
    /// Checks `path`: a missing path is fine; an existing fleetctl database needs
    /// `force`; anything else is refused whatever the flags, with what it seems to be.
    pub fn check(path: &Path, force: bool) -> Result<Target> {
        let file = resolve_symlink(path)?;
        let existing = match probe(&file)? {
            Probe::Missing => None,
            Probe::Fleet { .. } if force => Some(existing(&file)?),
            Probe::Fleet { .. } => {
                return Err(Error::invalid(format!("{} already exists", path.display()))
                    .with_hint("pass --force to replace it, or --db to write elsewhere"));
            }
            Probe::NotFleet { what } => return Err(not_ours(path, &what)),
        };
        Ok(Target { file, existing })
    }

    /// The folder the file is in (where its temporary file must be, for the rename).
    pub fn folder(&self) -> PathBuf {
        match self.file.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        }
    }

    /// The permissions the new file gets: those of the database it replaces, or
    /// owner-only for a new one.
    pub fn mode(&self) -> u32 {
        self.existing.as_ref().map_or(0o600, |e| e.mode)
    }

    /// Puts the complete temporary file `tmp` in place. Without an existing database
    /// this never replaces anything: a file that appeared at the path meanwhile is
    /// kept and the call fails. With one, the path must still hold that same
    /// database.
    pub fn install(&self, tmp: &Path) -> Result<()> {
        // The mode last: SQLite could not have written a file made read-only at once.
        set_mode(tmp, self.mode())?;
        match &self.existing {
            None => {
                self.link_new(tmp)?;
            }
            Some(before) => {
                let now = match probe(&self.file)? {
                    Probe::Fleet { .. } => existing(&self.file).ok(),
                    _ => None,
                };
                if now.map(|n| n.identity) != Some(before.identity) {
                    return Err(self.appeared());
                }
                // The old file's journal must not be applied to the new file.
                remove_side_files(&self.file);
                crate::scratch::replace(tmp, &self.file).map_err(|e| Error::io(&self.file, e))?;
            }
        }
        Ok(())
    }

    /// Puts `tmp` at a path that held no database: never over a file that appeared.
    fn link_new(&self, tmp: &Path) -> Result<()> {
        if std::fs::symlink_metadata(&self.file).is_ok() {
            return Err(self.appeared());
        }
        // Side files without their database are stale (a deleted database's journal):
        // SQLite would apply them to the new file, whose pages they do not describe.
        remove_side_files(&self.file);
        match std::fs::hard_link(tmp, &self.file) {
            Ok(()) => {
                let _ = std::fs::remove_file(tmp);
                crate::scratch::sync_parent(&self.file);
                Ok(())
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Err(self.appeared()),
            // A file system without hard links: checked above, then renamed (a short window).
            Err(_) => {
                crate::scratch::replace(tmp, &self.file).map_err(|e| Error::io(&self.file, e))
            }
        }
    }

    fn appeared(&self) -> Error {
        Error::new(
            ErrorCode::Io,
            format!(
                "{} was created or replaced by someone else while fleetctl was writing; it was left as it is",
                self.file.display()
            ),
        )
        .with_hint("run the command again (with --force if that file is a fleetctl database to replace)")
    }
}

fn remove_side_files(path: &Path) {
    for suffix in ["-journal", "-wal", "-shm"] {
        let _ = std::fs::remove_file(side_file(path, suffix));
    }
}

/// The refusal for a file that is not a fleetctl database.
fn not_ours(path: &Path, what: &str) -> Error {
    Error::invalid(format!(
        "{} is not a fleetctl database: it seems to be {what}; refusing to replace it",
        path.display()
    ))
    .with_hint("choose another path with --db; fleetctl never replaces a file it did not make")
}

/// A symlink is written through: the file it points to is the target (a dangling or
/// looping link is refused, so nothing is created somewhere unexpected).
fn resolve_symlink(path: &Path) -> Result<PathBuf> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => std::fs::canonicalize(path).map_err(|e| {
            Error::invalid(format!(
                "{} is a symbolic link whose target cannot be used ({e})",
                path.display()
            ))
            .with_hint("point --db at a real file or folder")
        }),
        _ => Ok(path.to_path_buf()),
    }
}

#[cfg(unix)]
fn existing(path: &Path) -> Result<Existing> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).map_err(|e| Error::io(path, e))?;
    Ok(Existing {
        identity: (m.dev(), m.ino()),
        mode: m.mode() & 0o7777,
    })
}

#[cfg(not(unix))]
fn existing(path: &Path) -> Result<Existing> {
    let m = std::fs::metadata(path).map_err(|e| Error::io(path, e))?;
    let modified = m
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos() as u64);
    Ok(Existing {
        identity: (m.len(), modified),
        mode: 0o600,
    })
}

/// Creates a new, empty file at `path`, readable by its owner only (it must not
/// exist), so that the database SQLite then writes there is never readable by others
/// in between. `Target::install` gives it its final mode.
pub fn create_private(path: &Path) -> Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    options.open(path).map(drop).map_err(|e| Error::io(path, e))
}

/// Gives a file exactly `mode` (the umask does not narrow it).
fn set_mode(path: &Path, mode: u32) -> Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
            .map_err(|e| Error::io(path, e))?;
    }
    let _ = (path, mode);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("fleetctl-file-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn regression_a_file_that_appears_while_generating_is_never_replaced() {
        let dir = scratch("race");
        let path = dir.join("fleet.db");
        let target = Target::check(&path, false).unwrap();
        let tmp = dir.join(".fleet.db.tmp");
        create_private(&tmp).unwrap();
        // Someone else writes there between the check and the install.
        std::fs::write(&path, "theirs").unwrap();
        let e = target.install(&tmp).unwrap_err();
        assert!(
            e.message.contains("created or replaced by someone else"),
            "{}",
            e.message
        );
        assert_eq!(std::fs::read(&path).unwrap(), b"theirs");
        // Without the intruder, the file goes in place.
        std::fs::remove_file(&path).unwrap();
        target.install(&tmp).unwrap();
        assert!(path.exists() && !tmp.exists());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn files_that_are_not_sqlite_are_named_by_their_first_bytes() {
        assert_eq!(describe_bytes(b"", 0), "an empty file");
        assert_eq!(describe_bytes(b"\x89PNG\r\n", 900), "a PNG image");
        assert_eq!(describe_bytes(b"buy milk\n", 9), "a text file of 9 bytes");
        assert_eq!(
            describe_bytes(b"\x00\x01\x02", 3),
            "a file of 3 bytes that is not SQLite"
        );
    }
}
