//! Answers a server keeps for the database version they were computed at: fifty
//! assistants asking "who is stopped now?" of an unchanged fleet cost one report,
//! not fifty. A report is a function of the database and its clock, and
//! [`Db::version`] changes whenever either may have, so a kept answer is the one
//! the report would give again; a new version drops them all.

use crate::error::Result;
use crate::report::{Answer, Args, Db};
use std::collections::HashMap;
use std::sync::Arc;

/// At most this many answers are kept; past it the server starts over.
const MAX_ANSWERS: usize = 256;
/// At most this many bytes of answers (their JSON and pictures) are kept.
const MAX_BYTES: usize = 16 * 1024 * 1024;

/// The answers of one database version, by tool and arguments.
#[derive(Default)]
pub struct Answers {
    version: Option<(u64, i64)>,
    kept: HashMap<(String, String), Arc<Kept>>,
    bytes: usize,
}

/// A tool's answer, and its MCP tool result serialised once: a kept answer is
/// sent again without being built or written out again.
pub struct Kept {
    /// The report's answer.
    pub answer: Answer,
    /// The MCP tool result as JSON text; `None` when it is over the answer cap
    /// (the result is then a tool error saying so, made when sent).
    pub result_text: Option<Arc<str>>,
}

impl Kept {
    /// `answer` and its MCP tool result, when at most `max_bytes`.
    pub fn new(answer: Answer, max_bytes: usize) -> Kept {
        let text = result_text(&answer);
        Kept {
            answer,
            result_text: (text.len() <= max_bytes).then(|| text.into()),
        }
    }
}

/// The MCP tool result of `answer` as JSON text, as `tools::success` makes it
/// and serde_json writes it, with the answer serialised once: the text block is
/// that JSON as a string, and `structuredContent` the same JSON.
fn result_text(answer: &Answer) -> String {
    let json = answer.value.to_string();
    let quoted = serde_json::Value::String(json.clone()).to_string();
    let mut text = String::with_capacity(json.len() + quoted.len() + 128);
    text += r#"{"content":[{"type":"text","text":"#;
    text += &quoted;
    text += "}";
    if let Some(png) = &answer.png {
        text += r#",{"type":"image","data":""#;
        text += &super::tools::base64(png);
        text += r#"","mimeType":"image/png"}"#;
    }
    text += r#"],"structuredContent":"#;
    text += &json;
    text += r#","isError":false}"#;
    text
}

/// What a kept answer is found by: the tool and its arguments as JSON.
fn key(name: &str, arguments: &Args) -> (String, String) {
    (
        name.to_string(),
        serde_json::Value::Object(arguments.clone()).to_string(),
    )
}

/// The bytes a kept answer is counted for: its values take about what their
/// JSON does, its result text (the JSON twice, and the picture's base64) about as
/// much again; one over the cap is never kept.
fn cost(kept: &Kept) -> usize {
    kept.result_text
        .as_ref()
        .map_or(MAX_BYTES + 1, |text| 2 * text.len())
}

impl Answers {
    /// Forgets every answer (the database went away or was opened again).
    pub fn clear(&mut self) {
        self.version = None;
        self.kept.clear();
        self.bytes = 0;
    }

    /// The answer of tool `name` to `arguments` on `db`: the one kept for the
    /// database's version, else `run`'s (kept when it succeeded, with its MCP
    /// result when at most `max_bytes`). `None` for an unknown tool, as `run` says.
    pub fn answer(
        &mut self,
        db: &Db,
        name: &str,
        arguments: &Args,
        max_bytes: usize,
        run: impl FnOnce() -> Option<Result<Answer>>,
    ) -> Option<Result<Arc<Kept>>> {
        let version = db.version();
        if self.version != Some(version) {
            self.clear();
            self.version = Some(version);
        }
        let key = key(name, arguments);
        if let Some(kept) = self.kept.get(&key) {
            return Some(Ok(kept.clone()));
        }
        let fresh = match run()? {
            Ok(answer) => Arc::new(Kept::new(answer, max_bytes)),
            Err(e) => return Some(Err(e)),
        };
        let bytes = cost(&fresh);
        if self.kept.len() >= MAX_ANSWERS || self.bytes + bytes > MAX_BYTES {
            self.kept.clear();
            self.bytes = 0;
        }
        if bytes <= MAX_BYTES {
            self.bytes += bytes;
            self.kept.insert(key, fresh.clone());
        }
        Some(Ok(fresh))
    }
}

/// Answers kept for a replica's workers together, on PostgreSQL: a snapshot's
/// text means the same on every connection to a server, so a worker may give
/// another's answer to the same version, and a worker asked what another is
/// working out waits for it rather than working it out too (the first question
/// after a change, asked by every client at once, costs one report, not one per
/// worker). SQLite's `data_version` means something on its own connection only,
/// so each worker keeps its own there ([`Answers`]).
#[derive(Default)]
pub struct SharedAnswers {
    state: std::sync::Mutex<Shared>,
    done: std::sync::Condvar,
}

#[derive(Default)]
struct Shared {
    version: Option<(String, i64)>,
    kept: HashMap<(String, String), Slot>,
    bytes: usize,
}

enum Slot {
    /// A worker is running the report.
    Running,
    Done(Arc<Kept>),
}

impl SharedAnswers {
    fn lock(&self) -> std::sync::MutexGuard<'_, Shared> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// As [`Answers::answer`], for the database version `version` (the snapshot
    /// seen and the clock's "now").
    pub fn answer(
        &self,
        version: (String, i64),
        name: &str,
        arguments: &Args,
        max_bytes: usize,
        run: impl FnOnce() -> Option<Result<Answer>>,
    ) -> Option<Result<Arc<Kept>>> {
        let key = key(name, arguments);
        let mut state = self.lock();
        loop {
            if state.version.as_ref() != Some(&version) {
                *state = Shared {
                    version: Some(version.clone()),
                    ..Shared::default()
                };
            }
            match state.kept.get(&key) {
                Some(Slot::Done(kept)) => return Some(Ok(kept.clone())),
                Some(Slot::Running) => {
                    state = self.done.wait(state).unwrap_or_else(|e| e.into_inner());
                }
                None => break,
            }
        }
        state.kept.insert(key.clone(), Slot::Running);
        drop(state);
        // However the run ends (a panic included), the slot is settled and the
        // workers waiting for it are woken.
        let mut running = Running {
            shared: self,
            key: Some(key),
            version: &version,
        };
        let fresh = match run()? {
            Ok(answer) => Arc::new(Kept::new(answer, max_bytes)),
            Err(e) => return Some(Err(e)),
        };
        let key = running.key.take().expect("the slot's key");
        let mut state = self.lock();
        if state.version.as_ref() == Some(&version) {
            state.kept.remove(&key);
            let bytes = cost(&fresh);
            if state.kept.len() >= MAX_ANSWERS || state.bytes + bytes > MAX_BYTES {
                state.kept.retain(|_, slot| matches!(slot, Slot::Running));
                state.bytes = 0;
            }
            if bytes <= MAX_BYTES {
                state.bytes += bytes;
                state.kept.insert(key, Slot::Done(fresh.clone()));
            }
        }
        drop(state);
        self.done.notify_all();
        Some(Ok(fresh))
    }
}

/// A report being run for [`SharedAnswers`]: dropped with its key still in it (an
/// error, no such tool, a panic), it takes the slot away and wakes the waiters,
/// who then run the report themselves.
struct Running<'a> {
    shared: &'a SharedAnswers,
    key: Option<(String, String)>,
    version: &'a (String, i64),
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        if let Some(key) = self.key.take() {
            let mut state = self.shared.lock();
            if state.version.as_ref() == Some(self.version) {
                state.kept.remove(&key);
            }
            drop(state);
            self.shared.done.notify_all();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn answer_of(km: f64) -> Option<Result<Answer>> {
        Some(Ok(Answer {
            value: json!({ "fleet_total_km": km }),
            png: None,
            drawing: None,
        }))
    }

    #[test]
    fn workers_share_an_answer_for_one_snapshot_and_never_across_two() {
        let shared = SharedAnswers::default();
        let args = Args::new();
        let at = |snapshot: &str| (snapshot.to_string(), 1_764_106_200);
        let km = |kept: Option<Result<Arc<Kept>>>| {
            kept.unwrap().unwrap().answer.value["fleet_total_km"]
                .as_f64()
                .unwrap()
        };
        let first = shared.answer(at("10:12:"), "mileage_ranking", &args, 1 << 20, || {
            answer_of(7548.6)
        });
        assert_eq!(km(first), 7548.6);
        // Another worker, the same snapshot: the answer kept, the report not run.
        let again = shared.answer(at("10:12:"), "mileage_ranking", &args, 1 << 20, || {
            panic!("run again for the same snapshot")
        });
        assert_eq!(km(again), 7548.6);
        // A commit ended: another snapshot, the report run.
        let after = shared.answer(at("10:13:"), "mileage_ranking", &args, 1 << 20, || {
            answer_of(8548.6)
        });
        assert_eq!(km(after), 8548.6);
        // A failed run keeps nothing: the next asker runs the report.
        let failed = shared.answer(at("10:13:"), "alerts", &args, 1 << 20, || {
            Some(Err(crate::error::Error::internal("the server went away")))
        });
        assert!(failed.unwrap().is_err());
        let retried = shared.answer(at("10:13:"), "alerts", &args, 1 << 20, || answer_of(1.0));
        assert_eq!(km(retried), 1.0);
    }

    #[test]
    fn a_kept_result_is_the_text_of_the_result_value() {
        let value = json!({"plate": "P-701JFG", "place": "0.3 km SE of \"Mixco\" ñ", "km": 12.5, "rows": [1, null]});
        for png in [None, Some(vec![0x89, b'P', b'N', b'G', 0, 255])] {
            let answer = Answer {
                value: value.clone(),
                png,
                drawing: None,
            };
            assert_eq!(
                result_text(&answer),
                super::super::tools::success(answer.clone()).to_string()
            );
        }
    }
}
