//! Reading raster tiles from an MBTiles file (SQLite; rows numbered from the south,
//! as the format stores them). Read-only; a missing tile is simply absent.
//!
//! The file comes from someone else, so every query runs against a deadline (SQLite's
//! progress handler interrupts a `tiles` view that never ends) and a tile blob is
//! refused above `MAX_TILE_BYTES` before it is read into memory.

use crate::error::{Error, ErrorCode, Result};
use rusqlite::{Connection, OpenFlags, OptionalExtension, params};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long opening may take (finding the tiles table and reading its format).
pub const OPEN_DEADLINE: Duration = Duration::from_secs(2);
/// How long one tile may take to read.
pub const TILE_DEADLINE: Duration = Duration::from_secs(1);
/// The largest tile read, bytes, from an MBTiles blob or a tile file (a raster tile
/// is tens of kilobytes).
pub const MAX_TILE_BYTES: u64 = 2 * 1024 * 1024;

/// An open MBTiles file.
pub struct MbTiles {
    conn: Connection,
    path: PathBuf,
    deadline: Arc<Mutex<Instant>>,
    attribution: Option<String>,
}

impl MbTiles {
    /// Opens `path`, checking that it holds raster tiles in a `tiles` table.
    pub fn open(path: &Path) -> Result<MbTiles> {
        let bad = |why: String| {
            Error::invalid(format!("--tiles {}: {why}", path.display())).with_hint(
                "give a folder of {z}/{x}/{y}.png tiles or a readable .mbtiles file of PNG, JPEG or WebP tiles",
            )
        };
        if !path.is_file() {
            return Err(bad("no such file".into()));
        }
        let mut conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|e| bad(e.to_string()))?;
        // No value larger than a tile (a view computing a gigabyte blob fails at once),
        // and no functions the file's own schema would call with side effects.
        conn.set_limit(
            rusqlite::limits::Limit::SQLITE_LIMIT_LENGTH,
            MAX_TILE_BYTES as i32 + 1024,
        )
        .map_err(|e| bad(e.to_string()))?;
        conn.execute_batch("PRAGMA trusted_schema = OFF")
            .map_err(|e| bad(e.to_string()))?;
        let deadline = Arc::new(Mutex::new(Instant::now() + OPEN_DEADLINE));
        let watched = deadline.clone();
        conn.progress_handler(
            10_000,
            Some(move || Instant::now() > *watched.lock().unwrap_or_else(|e| e.into_inner())),
        )
        .map_err(|e| bad(e.to_string()))?;
        let tiles = MbTiles {
            conn,
            path: path.to_path_buf(),
            deadline,
            attribution: None,
        };
        tiles
            .conn
            .query_row("SELECT 1 FROM tiles LIMIT 1", [], |_| Ok(()))
            .optional()
            .map_err(|e| {
                bad(format!(
                    "not an MBTiles file ({})",
                    tiles.explain(e, OPEN_DEADLINE)
                ))
            })?;
        // The metadata table is optional in practice; any other failure is said.
        let metadata = |name: &str| -> Result<Option<String>> {
            tiles
                .conn
                .query_row(
                    // Text or NULL whatever the file stored there (a NULL or a blob is no
                    // attribution, not a refusal).
                    "SELECT substr(CAST(value AS TEXT), 1, 200) FROM metadata WHERE name = ?1",
                    [name],
                    |r| r.get::<_, Option<String>>(0),
                )
                .optional()
                .map(Option::flatten)
                .or_else(|e| {
                    let text = e.to_string();
                    if text.contains("no such table") || text.contains("no such column") {
                        Ok(None)
                    } else {
                        Err(bad(format!(
                            "its metadata cannot be read ({})",
                            tiles.explain(e, OPEN_DEADLINE)
                        )))
                    }
                })
        };
        let format = metadata("format")?;
        let attribution = metadata("attribution")?;
        if let Some(f) = format.filter(|f| !matches!(f.as_str(), "png" | "jpg" | "jpeg" | "webp")) {
            return Err(bad(format!(
                "its tiles are {f:?}; only raster tiles (png, jpg, webp) can be drawn"
            )));
        }
        Ok(MbTiles {
            attribution,
            ..tiles
        })
    }

    fn start(&self, limit: Duration) {
        *self.deadline.lock().unwrap_or_else(|e| e.into_inner()) = Instant::now() + limit;
    }

    fn explain(&self, e: rusqlite::Error, limit: Duration) -> String {
        if e.sqlite_error_code() == Some(rusqlite::ErrorCode::OperationInterrupted) {
            format!("no answer within {} s", limit.as_secs_f64())
        } else {
            e.to_string()
        }
    }

    /// The tile at XYZ coordinates (y counted from the north), if the file has it,
    /// read within `limit` (at most `TILE_DEADLINE`).
    pub fn tile(&self, z: u32, x: u32, y: u32, limit: Duration) -> Result<Option<Vec<u8>>> {
        let Some(row) = (1u64 << z.min(30)).checked_sub(1 + u64::from(y)) else {
            return Ok(None);
        };
        let limit = limit.min(TILE_DEADLINE);
        self.start(limit);
        let found: Option<(Option<Vec<u8>>, i64)> = self
            .conn
            .prepare_cached(
                "SELECT CASE WHEN length(tile_data) <= ?4 THEN tile_data END, length(tile_data) \
                 FROM tiles WHERE zoom_level = ?1 AND tile_column = ?2 AND tile_row = ?3",
            )
            .and_then(|mut st| {
                st.query_row(params![z, x, row as i64, MAX_TILE_BYTES as i64], |r| {
                    Ok((r.get(0)?, r.get::<_, Option<i64>>(1)?.unwrap_or(0)))
                })
                .optional()
            })
            .map_err(|e| {
                Error::new(
                    ErrorCode::Render,
                    format!(
                        "tile {z}/{x}/{y} of {}: {}",
                        self.path.display(),
                        self.explain(e, limit)
                    ),
                )
            })?;
        match found {
            None => Ok(None),
            Some((Some(bytes), _)) => Ok(Some(bytes)),
            Some((None, len)) => Err(Error::new(
                ErrorCode::Render,
                format!(
                    "tile {z}/{x}/{y} of {} is {len} bytes, over the limit of {MAX_TILE_BYTES}",
                    self.path.display()
                ),
            )),
        }
    }

    /// The `attribution` metadata, if the file has it (read at open).
    pub fn attribution(&self) -> Option<&str> {
        self.attribution.as_deref()
    }
}
