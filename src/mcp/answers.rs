//! Answers a server keeps for the database version they were computed at: fifty
//! assistants asking "who is stopped now?" of an unchanged fleet cost one report,
//! not fifty. A report is a function of the database and its clock, and
//! [`Db::version`] changes whenever either may have, so a kept answer is the one
//! the report would give again; a new version drops them all.

use crate::error::Result;
use crate::report::{Answer, Args, Db};
use std::collections::HashMap;
use std::sync::Arc;

/// At most this many answers are kept; past it the half given longest ago goes.
const MAX_ANSWERS: usize = 256;
/// At most this many bytes of answers (their JSON and pictures) are kept.
const MAX_BYTES: usize = 16 * 1024 * 1024;

/// The answers of one database version, by tool and arguments.
#[derive(Default)]
pub struct Answers {
    version: Option<(u64, i64)>,
    kept: Keeper<Arc<Kept>>,
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

/// Kept values by key, each with when it was last given out and its cost. Past
/// [`MAX_ANSWERS`] or [`MAX_BYTES`], the half given out longest ago goes: the
/// fleet-wide answers every client asks for stay, while one-off answers about one
/// vehicle each come and go (dropping all at once made every client's next
/// fleet-wide question wait for its report again).
struct Keeper<V> {
    entries: HashMap<(String, String), Entry<V>>,
    bytes: usize,
    /// Counts the times a value was given out or kept.
    tick: u64,
}

struct Entry<V> {
    value: V,
    last_given: u64,
    bytes: usize,
}

impl<V> Default for Keeper<V> {
    fn default() -> Self {
        Keeper {
            entries: HashMap::new(),
            bytes: 0,
            tick: 0,
        }
    }
}

impl<V> Keeper<V> {
    fn clear(&mut self) {
        *self = Keeper::default();
    }

    /// The value kept for `key`, marked as given out now.
    fn get(&mut self, key: &(String, String)) -> Option<&V> {
        self.tick += 1;
        let entry = self.entries.get_mut(key)?;
        entry.last_given = self.tick;
        Some(&entry.value)
    }

    fn remove(&mut self, key: &(String, String)) {
        if let Some(entry) = self.entries.remove(key) {
            self.bytes -= entry.bytes;
        }
    }

    /// Keeps `value` (in place of any under `key`), counted for `bytes`, making
    /// room first; one over [`MAX_BYTES`] is not kept. Values for which `pinned`
    /// holds are never dropped to make room.
    fn keep(&mut self, key: (String, String), value: V, bytes: usize, pinned: impl Fn(&V) -> bool) {
        self.remove(&key);
        if bytes > MAX_BYTES {
            return;
        }
        while self.entries.len() >= MAX_ANSWERS || self.bytes + bytes > MAX_BYTES {
            let mut given: Vec<u64> = self
                .entries
                .values()
                .filter(|e| !pinned(&e.value))
                .map(|e| e.last_given)
                .collect();
            if given.is_empty() {
                break;
            }
            let half = given.len() / 2;
            let (_, &mut newest_dropped, _) = given.select_nth_unstable(half);
            self.entries
                .retain(|_, e| pinned(&e.value) || e.last_given > newest_dropped);
            self.bytes = self.entries.values().map(|e| e.bytes).sum();
        }
        self.tick += 1;
        self.bytes += bytes;
        let last_given = self.tick;
        self.entries.insert(
            key,
            Entry {
                value,
                last_given,
                bytes,
            },
        );
    }
}

impl Answers {
    /// Forgets every answer (the database went away or was opened again).
    pub fn clear(&mut self) {
        self.version = None;
        self.kept.clear();
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
        self.kept.keep(key, fresh.clone(), cost(&fresh), |_| false);
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
    kept: Keeper<Slot>,
}

enum Slot {
    /// A worker is running the report.
    Running,
    Done(Arc<Kept>),
}

impl Slot {
    /// A slot others wait on, which only its runner may take away.
    fn running(&self) -> bool {
        matches!(self, Slot::Running)
    }
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
        state
            .kept
            .keep(key.clone(), Slot::Running, 0, Slot::running);
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
            let bytes = cost(&fresh);
            state
                .kept
                .keep(key, Slot::Done(fresh.clone()), bytes, Slot::running);
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
    fn an_answer_every_client_asks_for_outlives_answers_asked_once() {
        let shared = SharedAnswers::default();
        let at = ("10:12:".to_string(), 1_764_106_200);
        let fleet_wide = Args::new();
        shared.answer(at.clone(), "mileage_ranking", &fleet_wide, 1 << 20, || {
            answer_of(7548.6)
        });
        let mut runs = 0;
        for round in 0..4 * MAX_ANSWERS {
            // A vehicle's position, asked once each.
            let mut one = Args::new();
            one.insert("plate".into(), json!(format!("P-{round:03}")));
            shared.answer(at.clone(), "vehicle_position", &one, 1 << 20, || {
                runs += 1;
                answer_of(round as f64)
            });
            // Every few questions, the fleet-wide one again: always kept.
            if round % 8 == 0 {
                let again =
                    shared.answer(at.clone(), "mileage_ranking", &fleet_wide, 1 << 20, || {
                        panic!("the fleet-wide answer was dropped at round {round}")
                    });
                assert_eq!(
                    again.unwrap().unwrap().answer.value["fleet_total_km"],
                    7548.6
                );
            }
        }
        assert_eq!(runs, 4 * MAX_ANSWERS);
        assert!(shared.lock().kept.entries.len() <= MAX_ANSWERS);
        // The first vehicle's answer made room long ago: asked again, it is run.
        let mut first = Args::new();
        first.insert("plate".into(), json!("P-000"));
        let mut ran = false;
        shared.answer(at, "vehicle_position", &first, 1 << 20, || {
            ran = true;
            answer_of(0.0)
        });
        assert!(ran, "an answer asked once is not kept for ever");
    }

    #[test]
    fn kept_answers_stay_within_their_bytes() {
        let mut keeper: Keeper<u8> = Keeper::default();
        let key = |k: &str| (k.to_string(), String::new());
        keeper.keep(key("huge"), 0, MAX_BYTES + 1, |_| false);
        assert!(
            keeper.get(&key("huge")).is_none(),
            "one over the cap is not kept"
        );
        keeper.keep(key("a"), 1, MAX_BYTES / 2 + 1, |_| false);
        keeper.keep(key("b"), 2, MAX_BYTES / 2 + 1, |_| false);
        assert!(keeper.get(&key("a")).is_none());
        assert_eq!(keeper.get(&key("b")), Some(&2));
        assert_eq!(keeper.bytes, MAX_BYTES / 2 + 1);
        // A pinned value (a report being run) is never dropped to make room.
        keeper.keep(key("c"), 3, MAX_BYTES / 2 + 1, |v| *v == 2);
        assert_eq!(keeper.get(&key("b")), Some(&2));
        assert_eq!(keeper.get(&key("c")), Some(&3));
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
