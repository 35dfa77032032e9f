//! Event kinds as the `events` table keeps them: a one-byte code each instead of
//! the name (an event row and its `(kind, start_ts)` index entry were a third name),
//! with the names in the schema's `event_kinds` table for whoever reads the file
//! with SQL. The codes are the file format: never renumber one.

use crate::error::{Error, ErrorCode, Result};
use crate::model::EventKind;

/// The code stored for a kind.
pub(crate) fn code(kind: EventKind) -> i64 {
    match kind {
        EventKind::Speeding => 1,
        EventKind::LongStop => 2,
        EventKind::SignalLoss => 3,
        EventKind::GeofenceEnter => 4,
        EventKind::GeofenceExit => 5,
        EventKind::IgnitionOn => 6,
        EventKind::IgnitionOff => 7,
    }
}

/// The kind of a stored code; any other code is a damaged database, said so.
pub(crate) fn kind(code: i64) -> Result<EventKind> {
    EventKind::ALL
        .into_iter()
        .find(|&k| self::code(k) == code)
        .ok_or_else(|| {
            Error::new(
                ErrorCode::DbSchema,
                format!("the events table holds an unknown kind code {code}"),
            )
            .with_hint("run `fleetctl analyze` to rebuild the detected events")
        })
}

/// The codes of `kinds`, comma-separated, for `kind IN (…)`.
pub(crate) fn codes_sql(kinds: &[EventKind]) -> String {
    kinds
        .iter()
        .map(|&k| code(k).to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schemas_event_kinds_table_names_every_code_as_the_store_does() {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        conn.execute_batch(super::super::SCHEMA_SQL).unwrap();
        let table: Vec<(i64, String)> = conn
            .prepare("SELECT code, name FROM event_kinds ORDER BY code")
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        let mut ours: Vec<(i64, String)> = EventKind::ALL
            .into_iter()
            .map(|k| (code(k), k.as_str().to_string()))
            .collect();
        ours.sort();
        assert_eq!(table, ours);
        for k in EventKind::ALL {
            assert_eq!(kind(code(k)).unwrap(), k);
        }
        let said = kind(99).unwrap_err().to_string();
        assert!(said.contains("99"), "{said}");
    }
}
