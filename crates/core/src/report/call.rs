//! Calling a report: validation, one read transaction, panics caught, the answer
//! (and what a drawing report asks `render::call` to draw).

use super::*;
use crate::error::{Context, Error, ErrorCode, Result};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// Validates the arguments and runs the report; a panic inside a report becomes an
/// `internal` error rather than taking the caller down. An answer whose `drawing` is
/// set is not finished: `render::call` draws it and fills in the picture's own
/// figures (`png_bytes`, `zoom`, `bounds`), which are zeros until then.
pub fn call(db: &Db, spec: &ReportSpec, args: &Args) -> Result<Answer> {
    validate(spec, args)?;
    let run = || {
        // Debug builds only: lets the tests prove that a panicking report does not
        // take a front end down.
        #[cfg(debug_assertions)]
        if std::env::var("FLEETCTL_TEST_PANIC_IN").is_ok_and(|t| t == spec.tool) {
            panic!("injected test panic in {}", spec.tool);
        }
        // Debug builds only: a report that holds its worker until the test lets it
        // go, so that a full queue can be tested without racing the clock. It writes
        // `held` in the folder, then waits for `release` to appear there.
        #[cfg(debug_assertions)]
        if std::env::var("FLEETCTL_TEST_HOLD_IN").is_ok_and(|t| t == spec.tool)
            && let Some(dir) = std::env::var_os("FLEETCTL_TEST_HOLD_DIR")
        {
            let dir = std::path::PathBuf::from(dir);
            let _ = std::fs::write(dir.join(format!("held-{}", std::process::id())), "");
            while !dir.join("release").exists() {
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
        }
        let _snapshot = Snapshot::begin(db.conn())?;
        (spec.run)(db, args)
    };
    catch_panic(spec.tool, run)
}

/// A report's queries in one read transaction: they see one state of the database
/// (a concurrent import or analyze cannot show them half its rows), and SQLite
/// takes its file lock once rather than once per query. Ends when dropped. Inside a
/// transaction already open (a writer's), nothing is done.
struct Snapshot<'c>(Option<&'c dyn crate::store::sql::Sql>);

impl<'c> Snapshot<'c> {
    fn begin(conn: &'c dyn crate::store::sql::Sql) -> Result<Snapshot<'c>> {
        Ok(Snapshot(conn.begin_read()?.then_some(conn)))
    }
}

impl Drop for Snapshot<'_> {
    fn drop(&mut self) {
        if let Some(conn) = self.0 {
            conn.end_read();
        }
    }
}

/// Runs `f`; a panic inside becomes an `internal` error naming `tool` and the panic's
/// words, rather than taking the caller down.
pub fn catch_panic<T>(tool: &str, f: impl FnOnce() -> Result<T>) -> Result<T> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(result) => result,
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            Err(
                Error::new(ErrorCode::Internal, format!("{tool} failed: {what}"))
                    .with_hint("this is a bug in fleetctl; other tools still work"),
            )
        }
    }
}

/// What a report answers: the report object, and for a report that draws its picture.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    /// The report object (the CLI's JSON, the MCP `structuredContent`).
    pub value: Value,
    /// A PNG image, for reports that draw one (made by `render::call`).
    pub png: Option<Vec<u8>>,
    /// What to draw, for reports that draw: `render::call` turns it into `png`.
    pub drawing: Option<Drawing>,
}

/// The data of a picture, one kind per report that draws. The domain gathers it;
/// `render::call` draws it (the domain never draws).
#[derive(Debug, Clone, PartialEq)]
pub enum Drawing {
    /// `route_map`: one vehicle's track on a map.
    Route(route_map::MapInput),
    /// `speed_chart`: one vehicle's speed over a day.
    Speed(speed_chart::ChartInput),
    /// `fleet_map`: every vehicle's position at an instant, on a map.
    Fleet(fleet_map::FleetMapInput),
}

/// Adapts a typed report function to the registry's JSON signature.
pub fn invoke<R: DeserializeOwned, O: Serialize>(
    db: &Db,
    args: &Args,
    run: fn(&Db, &R) -> Result<O>,
) -> Result<Answer> {
    let request: R = request_of(args)?;
    let report = run(db, &request)?;
    let value = serde_json::to_value(report)
        .context(ErrorCode::Internal, || "report did not serialise".into())?;
    Ok(Answer {
        value,
        png: None,
        drawing: None,
    })
}

/// A drawing report's answer: its summary, with what `render::call` is to draw.
pub fn drawn(summary: impl Serialize, drawing: Drawing) -> Result<Answer> {
    let value = serde_json::to_value(summary).context(ErrorCode::Internal, || {
        "a picture's summary did not serialise".into()
    })?;
    Ok(Answer {
        value,
        png: None,
        drawing: Some(drawing),
    })
}

/// Adapts a typed drawing report (which answers with its picture still to draw) to
/// the registry's JSON signature.
pub fn invoke_drawing<R: DeserializeOwned>(
    db: &Db,
    args: &Args,
    run: fn(&Db, &R) -> Result<Answer>,
) -> Result<Answer> {
    run(db, &request_of(args)?)
}

/// A report's typed request from validated JSON arguments.
fn request_of<R: DeserializeOwned>(args: &Args) -> Result<R> {
    serde_json::from_value(Value::Object(args.clone())).map_err(|e| Error::invalid(e.to_string()))
}
