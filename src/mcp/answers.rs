//! Answers a server keeps for the database version they were computed at: fifty
//! assistants asking "who is stopped now?" of an unchanged fleet cost one report,
//! not fifty. A report is a function of the database and its clock, and
//! [`Db::version`] changes whenever either may have, so a kept answer is the one
//! the report would give again; a new version drops them all.

use crate::error::Result;
use crate::report::{Answer, Args, Db};
use std::collections::HashMap;

/// At most this many answers are kept; past it the server starts over.
const MAX_ANSWERS: usize = 256;
/// At most this many bytes of answers (their JSON and pictures) are kept.
const MAX_BYTES: usize = 16 * 1024 * 1024;

/// The answers of one database version, by tool and arguments.
#[derive(Default)]
pub struct Answers {
    version: Option<(u64, i64)>,
    kept: HashMap<(String, String), Answer>,
    bytes: usize,
}

impl Answers {
    /// Forgets every answer (the database went away or was opened again).
    pub fn clear(&mut self) {
        self.version = None;
        self.kept.clear();
        self.bytes = 0;
    }

    /// The answer of tool `name` to `arguments` on `db`: the one kept for the
    /// database's version, else `run`'s (kept when it succeeded). `None` for an
    /// unknown tool, as `run` says.
    pub fn answer(
        &mut self,
        db: &Db,
        name: &str,
        arguments: &Args,
        run: impl FnOnce() -> Option<Result<Answer>>,
    ) -> Option<Result<Answer>> {
        let version = db.version();
        if self.version != Some(version) {
            self.clear();
            self.version = Some(version);
        }
        let key = (
            name.to_string(),
            serde_json::Value::Object(arguments.clone()).to_string(),
        );
        if let Some(kept) = self.kept.get(&key) {
            return Some(Ok(kept.clone()));
        }
        let answer = run()?;
        if let Ok(fresh) = &answer {
            let bytes = fresh.value.to_string().len() + fresh.png.as_ref().map_or(0, Vec::len);
            if self.kept.len() >= MAX_ANSWERS || self.bytes + bytes > MAX_BYTES {
                self.kept.clear();
                self.bytes = 0;
            }
            if bytes <= MAX_BYTES {
                self.bytes += bytes;
                self.kept.insert(key, fresh.clone());
            }
        }
        Some(answer)
    }
}
