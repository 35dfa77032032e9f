//! Each derived table declared once: its columns, in the order every insert, COPY
//! and read of either backend uses, how each backend keeps them, and how a row of
//! the model fills them. A new column is one line here, one in each DDL file (a
//! test holds both to this declaration) and the model's field.

use super::{event_kinds, positions};
use crate::error::{Error, Result};
use crate::model::{DailyRollup, Event, Fix, Stop, Trip, Visit};
use std::borrow::Cow;

/// One column: its name, its type in SQLite and in PostgreSQL, and whether it may
/// be NULL.
#[derive(Debug)]
pub struct Column {
    /// The column's name.
    pub name: &'static str,
    /// Its type in SQLite's DDL.
    pub sqlite: &'static str,
    /// Its type in PostgreSQL's DDL.
    pub pg: &'static str,
    /// NULL allowed.
    pub nullable: bool,
}

/// A derived table.
#[derive(Debug)]
pub struct Table {
    /// The table's name.
    pub name: &'static str,
    /// PostgreSQL keeps an `id` the writer numbers, a vehicle's rows in detection's
    /// order (SQLite's is its rowid): not among `columns`.
    pub numbered: bool,
    /// Its columns, in the order rows are written and read.
    pub columns: &'static [Column],
}

const fn int(name: &'static str) -> Column {
    Column {
        name,
        sqlite: "INTEGER",
        pg: "bigint",
        nullable: false,
    }
}

const fn real(name: &'static str) -> Column {
    Column {
        name,
        sqlite: "REAL",
        pg: "double precision",
        nullable: false,
    }
}

const fn text(name: &'static str) -> Column {
    Column {
        name,
        sqlite: "TEXT",
        pg: "text",
        nullable: false,
    }
}

/// A yes/no: 0/1 in SQLite, a boolean in PostgreSQL.
const fn flag(name: &'static str) -> Column {
    Column {
        name,
        sqlite: "INTEGER",
        pg: "boolean",
        nullable: false,
    }
}

/// Degrees × 10^7, as positions keep them.
const fn e7(name: &'static str) -> Column {
    Column {
        pg: "integer",
        ..int(name)
    }
}

/// The column `c`, NULL allowed.
const fn null(c: Column) -> Column {
    Column {
        nullable: true,
        ..c
    }
}

/// Stops.
pub const STOPS: Table = Table {
    name: "stops",
    numbered: true,
    columns: &[
        int("vehicle_id"),
        int("start_ts"),
        int("end_ts"),
        real("lat"),
        real("lon"),
        int("idle_s"),
        int("parked_s"),
        flag("ongoing"),
        text("place"),
        int("unknown_s"),
    ],
};

/// Trips; `moving_s` holds the driving seconds (the column's first name).
pub const TRIPS: Table = Table {
    name: "trips",
    numbered: true,
    columns: &[
        int("vehicle_id"),
        int("start_ts"),
        int("end_ts"),
        real("distance_km"),
        real("max_speed_kmh"),
        e7("start_lat_e7"),
        e7("start_lon_e7"),
        e7("end_lat_e7"),
        e7("end_lon_e7"),
        real("gap_km"),
        int("moving_s"),
        int("idle_s"),
        null(real("odometer_km")),
    ],
};

/// Events; `kind` is an `event_kinds` code; `detail` its figures as JSON.
pub const EVENTS: Table = Table {
    name: "events",
    numbered: true,
    columns: &[
        int("vehicle_id"),
        Column {
            pg: "smallint",
            ..int("kind")
        },
        int("start_ts"),
        int("end_ts"),
        real("lat"),
        real("lon"),
        Column {
            pg: "jsonb",
            ..text("detail")
        },
    ],
};

/// Each vehicle's newest fix.
pub const LATEST_FIX: Table = Table {
    name: "latest_fix",
    numbered: false,
    columns: &[
        int("vehicle_id"),
        int("ts"),
        real("lat"),
        real("lon"),
        real("speed_kmh"),
        flag("speed_derived"),
        null(real("heading_deg")),
        null(flag("ignition")),
        null(real("odometer_km")),
    ],
};

/// Geofence visits.
pub const VISITS: Table = Table {
    name: "visits",
    numbered: false,
    columns: &[
        int("vehicle_id"),
        int("geofence_id"),
        int("enter_ts"),
        null(int("exit_ts")),
    ],
};

/// Daily rollups; `moving_min` and `avg_moving_speed_kmh` hold the driving minutes and the
/// average while driving (the columns' first names).
pub const DAILY: Table = Table {
    name: "daily",
    numbered: false,
    columns: &[
        int("vehicle_id"),
        Column {
            pg: "date",
            ..text("date")
        },
        real("gps_distance_km"),
        null(real("odometer_distance_km")),
        real("moving_min"),
        real("idle_min"),
        real("parked_min"),
        int("trips"),
        int("stops"),
        real("max_speed_kmh"),
        real("avg_moving_speed_kmh"),
        int("first_ts"),
        int("last_ts"),
        int("signal_losses"),
        real("gap_km"),
        null(text("odometer_rejected")),
        int("events"),
    ],
};

/// Every derived table, in the order an analysis writes them.
pub const DERIVED: [&Table; 6] = [&LATEST_FIX, &STOPS, &TRIPS, &EVENTS, &VISITS, &DAILY];

impl Table {
    /// The column names, comma-separated, each after `alias.` when given.
    pub fn names(&self, alias: Option<&str>) -> String {
        let mut out = String::new();
        for (i, c) in self.columns.iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            if let Some(a) = alias {
                out.push_str(a);
                out.push('.');
            }
            out.push_str(c.name);
        }
        out
    }

    /// A NULL of each column's PostgreSQL type, comma-separated (a union's branch
    /// that gives another table's columns).
    pub fn typed_nulls(&self) -> String {
        let nulls: Vec<String> = self
            .columns
            .iter()
            .map(|c| format!("CAST(NULL AS {})", c.pg))
            .collect();
        nulls.join(", ")
    }

    /// SQLite's insert of one row.
    pub fn sqlite_insert(&self) -> String {
        let marks: Vec<String> = (1..=self.columns.len()).map(|i| format!("?{i}")).collect();
        format!(
            "INSERT INTO {} ({}) VALUES ({})",
            self.name,
            self.names(None),
            marks.join(", ")
        )
    }
}

/// A table's column names as a select list, each after `alias.` when given.
#[derive(Debug, Clone, Copy)]
pub struct Names(pub &'static Table, pub Option<&'static str>);

impl std::fmt::Display for Names {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0.names(self.1))
    }
}

/// One value of a row, as both backends write it.
#[derive(Debug, Clone, PartialEq)]
#[allow(missing_docs)] // each variant is the value it holds
pub enum Cell<'a> {
    Int(i64),
    OptInt(Option<i64>),
    Real(f64),
    OptReal(Option<f64>),
    Flag(bool),
    OptFlag(Option<bool>),
    Text(Cow<'a, str>),
    OptText(Option<&'a str>),
}

/// A row of the model that a derived table keeps: its cells in the table's
/// column order.
pub trait Derived {
    /// The table that keeps it.
    const TABLE: &'static Table;
    /// Its values, in the table's column order.
    fn cells(&self) -> Result<Vec<Cell<'_>>>;
}

impl Derived for Stop {
    const TABLE: &'static Table = &STOPS;
    fn cells(&self) -> Result<Vec<Cell<'_>>> {
        use Cell::*;
        Ok(vec![
            Int(self.vehicle_id),
            Int(self.start_ts),
            Int(self.end_ts),
            Real(self.lat),
            Real(self.lon),
            Int(self.idle_s),
            Int(self.parked_s),
            Flag(self.ongoing),
            Text(Cow::Borrowed(&self.place)),
            Int(self.unknown_s),
        ])
    }
}

impl Derived for Trip {
    const TABLE: &'static Table = &TRIPS;
    fn cells(&self) -> Result<Vec<Cell<'_>>> {
        use Cell::*;
        Ok(vec![
            Int(self.vehicle_id),
            Int(self.start_ts),
            Int(self.end_ts),
            Real(self.distance_km),
            Real(self.max_speed_kmh),
            Int(positions::e7(self.start_lat)),
            Int(positions::e7(self.start_lon)),
            Int(positions::e7(self.end_lat)),
            Int(positions::e7(self.end_lon)),
            Real(self.gap_km),
            Int(self.driving_s),
            Int(self.idle_s),
            OptReal(self.odometer_km),
        ])
    }
}

impl Derived for Event {
    const TABLE: &'static Table = &EVENTS;
    fn cells(&self) -> Result<Vec<Cell<'_>>> {
        use Cell::*;
        let detail = serde_json::to_string(&self.detail).map_err(|err| {
            Error::internal(format!("an event's detail did not serialise: {err}"))
        })?;
        Ok(vec![
            Int(self.vehicle_id),
            Int(event_kinds::code(self.kind)),
            Int(self.start_ts),
            Int(self.end_ts),
            Real(self.lat),
            Real(self.lon),
            Text(Cow::Owned(detail)),
        ])
    }
}

impl Derived for Fix {
    const TABLE: &'static Table = &LATEST_FIX;
    fn cells(&self) -> Result<Vec<Cell<'_>>> {
        use Cell::*;
        Ok(vec![
            Int(self.vehicle_id),
            Int(self.ts),
            Real(self.lat),
            Real(self.lon),
            Real(self.speed_kmh),
            Flag(self.speed_derived),
            OptReal(self.heading_deg),
            OptFlag(self.ignition),
            OptReal(self.odometer_km),
        ])
    }
}

impl Derived for Visit {
    const TABLE: &'static Table = &VISITS;
    fn cells(&self) -> Result<Vec<Cell<'_>>> {
        use Cell::*;
        Ok(vec![
            Int(self.vehicle_id),
            Int(self.geofence_id),
            Int(self.enter_ts),
            OptInt(self.exit_ts),
        ])
    }
}

impl Derived for DailyRollup {
    const TABLE: &'static Table = &DAILY;
    fn cells(&self) -> Result<Vec<Cell<'_>>> {
        use Cell::*;
        Ok(vec![
            Int(self.vehicle_id),
            Text(Cow::Borrowed(&self.date)),
            Real(self.gps_distance_km),
            OptReal(self.odometer_distance_km),
            Real(self.driving_min),
            Real(self.idle_min),
            Real(self.parked_min),
            Int(self.trips),
            Int(self.stops),
            Real(self.max_speed_kmh),
            Real(self.avg_driving_speed_kmh),
            Int(self.first_ts),
            Int(self.last_ts),
            Int(self.signal_losses),
            Real(self.gap_km),
            OptText(self.odometer_rejected.map(|r| r.as_str())),
            Int(self.events),
        ])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The columns `ddl` creates `table` with: (name, type, NULL allowed), sorted.
    fn created(ddl: &str, table: &str) -> Vec<(String, String, bool)> {
        let head = format!("CREATE TABLE {table} (");
        let from = ddl
            .find(&head)
            .unwrap_or_else(|| panic!("{table} in the DDL"))
            + head.len();
        let body = &ddl[from..from + ddl[from..].find("\n);").expect("the table's end")];
        let mut columns: Vec<(String, String, bool)> = body
            .lines()
            .map(|l| l.split("--").next().unwrap().trim().trim_end_matches(','))
            .filter(|l| !l.is_empty() && !l.starts_with("PRIMARY KEY"))
            .map(|l| {
                let (name, rest) = l.split_once(' ').unwrap();
                let rest = rest.trim();
                let ty_end = [" NOT NULL", " PRIMARY KEY", " DEFAULT"]
                    .iter()
                    .filter_map(|w| rest.find(w))
                    .min()
                    .unwrap_or(rest.len());
                let not_null = rest.contains("NOT NULL") || rest.contains("PRIMARY KEY");
                (name.to_string(), rest[..ty_end].to_string(), !not_null)
            })
            .collect();
        columns.sort();
        columns
    }

    /// The columns the declaration says `table` has in a backend.
    fn declared(
        table: &Table,
        ty: fn(&Column) -> &'static str,
        id: &str,
    ) -> Vec<(String, String, bool)> {
        let mut columns: Vec<_> = table
            .columns
            .iter()
            .map(|c| (c.name.to_string(), ty(c).to_string(), c.nullable))
            .collect();
        if table.numbered {
            columns.push(("id".to_string(), id.to_string(), false));
        }
        columns.sort();
        columns
    }

    #[test]
    fn both_ddl_files_create_each_derived_table_as_declared() {
        for table in DERIVED {
            assert_eq!(
                created(crate::store::SCHEMA_SQL, table.name),
                declared(table, |c| c.sqlite, "INTEGER"),
                "schema.sql's {}",
                table.name
            );
            assert_eq!(
                created(crate::store::pg::SCHEMA_SQL, table.name),
                declared(table, |c| c.pg, "bigint"),
                "store/pg/schema.sql's {}",
                table.name
            );
        }
    }

    #[test]
    fn a_ddl_that_disagrees_is_caught() {
        let ddl =
            crate::store::SCHEMA_SQL.replace("    place      TEXT NOT NULL", "    place      TEXT");
        assert_ne!(
            created(&ddl, "stops"),
            declared(&STOPS, |c| c.sqlite, "INTEGER")
        );
    }
}
