//! How a new fleet's big tables are laid out, by the extensions its database has:
//! month partitions on plain PostgreSQL, a TimescaleDB hypertable when
//! `timescaledb` is installed, tables distributed by `vehicle_id` when `citus` is.
//! Installing an extension is the database owner's choice; fleetctl only looks.
//! Only the plain layout has been run (docs/postgres.md says what was not).

use super::{SCHEMA_SQL, Target};
use crate::error::{Error, ErrorCode, Result};

/// The layout of positions and the tables derived from them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// Native declarative partitioning by UTC month, a partition made as data arrives.
    Partitioned,
    /// TimescaleDB: positions a hypertable, chunked by week of `ts_ms`.
    Hypertable,
    /// Citus: the big tables distributed by `vehicle_id` and co-located, the small
    /// ones reference tables on every node.
    Distributed,
}

/// The clause that partitions positions by month in schema.sql.
const PARTITIONED_BY: &str = " PARTITION BY RANGE (ts_ms);";

/// A hypertable's chunk: a week, in the milliseconds of `ts_ms`.
const CHUNK_MS: i64 = 7 * 24 * 3600 * 1000;

/// Tables every node of a Citus cluster holds whole: what a server keeps in
/// memory, and the names of event kinds.
const REFERENCE_TABLES: &[&str] = &[
    "meta",
    "revision",
    "vehicles",
    "geofences",
    "places",
    "event_kinds",
];

impl Layout {
    /// The layout for the extensions installed in the database `client` is on.
    pub fn of(client: &mut impl postgres::GenericClient, target: &Target) -> Result<Layout> {
        let installed: Vec<String> = client
            .query(
                "SELECT extname::text FROM pg_extension WHERE extname IN ('timescaledb', 'citus')",
                &[],
            )
            .map_err(|e| target.failed("read", e))?
            .iter()
            .map(|row| row.get(0))
            .collect();
        let has = |name: &str| installed.iter().any(|n| n == name);
        match (has("timescaledb"), has("citus")) {
            (false, false) => Ok(Layout::Partitioned),
            (true, false) => Ok(Layout::Hypertable),
            (false, true) => Ok(Layout::Distributed),
            (true, true) => Err(Error::new(
                ErrorCode::DbSchema,
                format!(
                    "{} has both TimescaleDB and Citus installed; fleetctl lays positions out for one of them",
                    target.display()
                ),
            )
            .with_hint("give the fleet a database with one of them (or neither): createdb NAME")),
        }
    }

    /// The statements that create the schema in this layout, run in one batch.
    pub fn schema(self) -> Result<String> {
        match self {
            Layout::Partitioned => Ok(SCHEMA_SQL.to_string()),
            Layout::Hypertable => {
                if SCHEMA_SQL.matches(PARTITIONED_BY).count() != 1 {
                    return Err(Error::internal(format!(
                        "schema.sql does not partition positions with {PARTITIONED_BY:?} once"
                    )));
                }
                Ok(format!(
                    "{}\nSELECT create_hypertable('fleetctl.positions', 'ts_ms', \
                     chunk_time_interval => CAST({CHUNK_MS} AS bigint));\n",
                    SCHEMA_SQL.replacen(PARTITIONED_BY, ";", 1)
                ))
            }
            Layout::Distributed => {
                let mut sql = SCHEMA_SQL.to_string();
                for table in REFERENCE_TABLES {
                    sql += &format!("\nSELECT create_reference_table('fleetctl.{table}');");
                }
                for (k, table) in vehicle_tables().iter().enumerate() {
                    let colocate = match k {
                        0 => String::new(),
                        _ => ", colocate_with => 'fleetctl.positions'".to_string(),
                    };
                    sql += &format!(
                        "\nSELECT create_distributed_table('fleetctl.{table}', 'vehicle_id'{colocate});"
                    );
                }
                Ok(sql + "\n")
            }
        }
    }
}

/// The tables schema.sql creates, in its order.
fn tables() -> Vec<&'static str> {
    SCHEMA_SQL
        .lines()
        .filter_map(|line| {
            line.strip_prefix("CREATE TABLE ")?
                .split_whitespace()
                .next()
        })
        .collect()
}

/// The tables with a row per vehicle and something (every key begins with
/// `vehicle_id`): positions first, the one the others are co-located with.
fn vehicle_tables() -> Vec<&'static str> {
    let mut found: Vec<&str> = tables()
        .into_iter()
        .filter(|t| !REFERENCE_TABLES.contains(t))
        .collect();
    found.sort_by_key(|t| *t != "positions");
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_table_is_either_a_reference_table_or_distributed_by_vehicle() {
        let all = tables();
        assert!(all.len() >= 13, "{all:?}");
        for t in REFERENCE_TABLES {
            assert!(all.contains(t), "{t} is not in schema.sql");
        }
        let distributed = vehicle_tables();
        assert_eq!(distributed[0], "positions");
        for t in &distributed {
            // Citus distributes by a column every key of the table holds.
            let body = SCHEMA_SQL
                .split_once(&format!("CREATE TABLE {t} ("))
                .and_then(|(_, rest)| rest.split_once("\n)"))
                .map(|(body, _)| body)
                .unwrap();
            assert!(body.contains("vehicle_id "), "{t} has no vehicle_id");
            if let Some(key) = body.split_once("PRIMARY KEY (") {
                assert!(key.1.starts_with("vehicle_id"), "{t}'s key: {}", key.1);
            }
        }
        let sql = Layout::Distributed.schema().unwrap();
        for t in all {
            let named = sql.matches(&format!("_table('fleetctl.{t}'")).count();
            assert_eq!(named, 1, "{t} is distributed or referenced {named} times");
        }
    }

    #[test]
    fn a_hypertable_replaces_the_month_partitions() {
        let sql = Layout::Hypertable.schema().unwrap();
        assert!(!sql.contains("PARTITION BY"), "{sql}");
        assert_eq!(sql.matches("create_hypertable(").count(), 1);
        assert!(sql.contains(&format!("CAST({CHUNK_MS} AS bigint)")));
        assert_eq!(Layout::Partitioned.schema().unwrap(), SCHEMA_SQL);
    }
}
