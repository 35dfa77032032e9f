//! Reading raster tiles from an MBTiles file (SQLite; rows numbered from the south,
//! as the format stores them). Read-only; a missing tile is simply absent.

use crate::error::{Error, Result};
use rusqlite::{Connection, OpenFlags, OptionalExtension, params};
use std::path::Path;

/// An open MBTiles file.
pub struct MbTiles {
    conn: Connection,
}

impl MbTiles {
    /// Opens `path`, checking that it holds a `tiles` table.
    pub fn open(path: &Path) -> Result<MbTiles> {
        let bad = |why: String| {
            Error::invalid(format!("--tiles {}: {why}", path.display()))
                .with_hint("give a folder of {z}/{x}/{y}.png tiles or a readable .mbtiles file")
        };
        if !path.is_file() {
            return Err(bad("no such file".into()));
        }
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|e| bad(e.to_string()))?;
        conn.query_row("SELECT COUNT(*) FROM tiles LIMIT 1", [], |r| {
            r.get::<_, i64>(0)
        })
        .map_err(|e| bad(format!("not an MBTiles file ({e})")))?;
        Ok(MbTiles { conn })
    }

    /// The tile at XYZ coordinates (y counted from the north).
    pub fn tile(&self, z: u32, x: u32, y: u32) -> Option<Vec<u8>> {
        let row = (1u64 << z).checked_sub(1 + u64::from(y))?;
        self.conn
            .prepare_cached("SELECT tile_data FROM tiles WHERE zoom_level = ?1 AND tile_column = ?2 AND tile_row = ?3")
            .and_then(|mut st| st.query_row(params![z, x, row as i64], |r| r.get(0)).optional())
            .ok()
            .flatten()
    }

    /// The `attribution` metadata, if the file has it.
    pub fn attribution(&self) -> Option<String> {
        self.conn
            .query_row(
                "SELECT value FROM metadata WHERE name = 'attribution'",
                [],
                |r| r.get(0),
            )
            .optional()
            .ok()
            .flatten()
    }
}
