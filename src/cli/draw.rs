//! `fleetctl map` and `fleetctl chart`: a picture to a file (named for what it shows
//! unless `-o` says), its summary to stdout.

use super::*;
use crate::error::{Error, Result};
use crate::{render, report};
use std::path::PathBuf;

pub(super) fn draw(path: crate::store::Location, d: query::DrawArgs) -> Result<()> {
    let json = d.json;
    draw_to_file(path, d).or_else(|e| {
        // With --format json a failure is the same error object the tool answers.
        if json {
            print_stdout(&format!("{}\n", e.to_json()))?;
        }
        Err(e)
    })
}

/// The picture's file name when -o is not given, from what the answer says.
pub(super) fn default_file_name(tool: &str, answer: &serde_json::Value) -> String {
    let text = |key: &str, default: &'static str| -> String {
        answer[key].as_str().unwrap_or(default).to_string()
    };
    let name = match tool {
        "speed_chart" => format!(
            "{}_{}_speed.png",
            text("plate", "chart"),
            text("date", "day")
        ),
        "fleet_map" => {
            // `2026-11-25T15:30:00-06:00` → `fleet_2026-11-25_1530.png`.
            let at = text("at", "");
            let (date, time) = at.split_once('T').unwrap_or(("now", ""));
            let hhmm: String = time.chars().take(5).filter(char::is_ascii_digit).collect();
            format!("fleet_{date}_{hhmm}.png")
        }
        _ => format!("{}_{}.png", text("plate", "map"), text("date", "day")),
    };
    safe_file_name(&name)
}

pub(super) fn draw_to_file(path: crate::store::Location, d: query::DrawArgs) -> Result<()> {
    let spec = report::find(d.tool)
        .filter(|s| s.draws)
        .ok_or_else(|| Error::internal(format!("no drawing report {}", d.tool)))?;
    let tiles = d
        .tiles
        .as_deref()
        .map(report::route_map::TileSource::open)
        .transpose()?;
    // What is at -o is checked before any work (and again as the picture goes in place).
    if let Some(out) = d.output.as_deref().filter(|o| !crate::output::is_stdout(o)) {
        crate::output::check(out, "-o", crate::output::May::ReplaceFile)?;
    }
    let mut db = report::Db::open(&path)?;
    db.tiles = tiles;
    let answer = render::call(&db, spec, &d.args)?;
    let png = answer
        .png
        .ok_or_else(|| Error::internal(format!("{} drew nothing", spec.tool)))?;
    let output = d
        .output
        .unwrap_or_else(|| PathBuf::from(default_file_name(spec.tool, &answer.value)));
    crate::output::write_file(&output, "-o", crate::output::May::ReplaceFile, &png)?;
    match (crate::output::is_stdout(&output), d.json) {
        // The picture is standard output: the summary goes to standard error.
        (true, true) => eprintln!("{}", answer.value),
        (true, false) => {}
        (false, true) => print_stdout(&format!("{}\n", answer.value))?,
        (false, false) => print_stdout(&format!("{}\n", output.display()))?,
    }
    Ok(())
}

/// A file name made from data (a plate from someone else's database may hold `/` or
/// `..`): only letters, digits, `-`, `_` and `.` are kept, and it never starts with a dot.
pub(super) fn safe_file_name(name: &str) -> String {
    let kept: String = name
        .chars()
        .map(|c| {
            if c.is_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect();
    kept.trim_start_matches('.').replace("..", "_")
}
