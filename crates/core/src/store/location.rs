//! Where a fleet lives, read once from `--db`: a SQLite file, or a PostgreSQL
//! database (a `postgres://` URL or a libpq `key=value` string, parsed with the
//! `PG*` variables it leaves out). Everything past the command line is handed this,
//! never the text again; it prints without the password.

use super::pg::{self, Target};
use crate::error::Result;
use std::path::{Path, PathBuf};

/// A fleet's database.
#[derive(Clone)]
pub enum Location {
    /// A SQLite file.
    File(PathBuf),
    /// A PostgreSQL + PostGIS database.
    Postgres(Box<Target>),
}

impl Location {
    /// Reads `--db`'s value: a PostgreSQL URL or connection string (see
    /// [`pg::is_url`]), else a file path.
    pub fn parse(db: &Path) -> Result<Location> {
        if pg::is_url(db) {
            Ok(Location::Postgres(Box::new(Target::parse(
                &db.to_string_lossy(),
            )?)))
        } else {
            Ok(Location::File(db.to_path_buf()))
        }
    }

    /// The SQLite file, when it is one.
    pub fn file(&self) -> Option<&Path> {
        match self {
            Location::File(path) => Some(path),
            Location::Postgres(_) => None,
        }
    }

    /// The PostgreSQL database, when it is one.
    pub fn postgres(&self) -> Option<&Target> {
        match self {
            Location::File(_) => None,
            Location::Postgres(target) => Some(target),
        }
    }

    /// As messages and logs name it: a path as it is, a URL without its password.
    pub fn shown(&self) -> String {
        match self {
            Location::File(path) => path.display().to_string(),
            Location::Postgres(target) => target.display().to_string(),
        }
    }
}

impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.shown())
    }
}

/// Two locations are the same file, or the same database as shown (host, port,
/// database and user; the password is never compared, since it is never kept
/// where it could print).
impl PartialEq for Location {
    fn eq(&self, other: &Location) -> bool {
        match (self, other) {
            (Location::File(a), Location::File(b)) => a == b,
            (Location::Postgres(a), Location::Postgres(b)) => a.display() == b.display(),
            _ => false,
        }
    }
}

impl std::fmt::Debug for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Location({})", self.shown())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_is_parsed_once_and_never_prints_its_password() {
        let db = Location::parse(Path::new("postgres://ana:Hush-4321@db.example/fleet")).unwrap();
        assert!(db.postgres().is_some() && db.file().is_none());
        for shown in [db.shown(), format!("{db}"), format!("{db:?}")] {
            assert!(!shown.contains("Hush-4321"), "{shown}");
            assert!(shown.contains("db.example"), "{shown}");
        }
        let file = Location::parse(Path::new("fleet.db")).unwrap();
        assert_eq!(file.file(), Some(Path::new("fleet.db")));
    }
}
