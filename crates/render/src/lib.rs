//! fleetctl-render: presentation for people — text summaries and tables, and the
//! pictures reports ask for. It depends on the domain (`fleetctl-core`) and never on a
//! front end; it never touches the store: it turns what the domain answered into
//! what people see.

#![warn(missing_docs)]

mod basemap;
mod canvas;
pub mod chart;
pub mod fleet;
mod frame;
mod furniture;
pub mod map;
mod style;
mod table;

use table::rows_of;
pub use table::{TableOptions, table};

// The domain's modules, under the paths the code here names them by.
use fleetctl_core::{error, geo, pipeline, report, synth};

use crate::error::Result;
use crate::report::{Answer, Args, Db, Drawing, ReportSpec};

use crate::pipeline::AnalyzeSummary;
use crate::synth::GenerateSummary;
use serde_json::{Map, Value};
use std::fmt::Write;
use std::path::Path;

/// Runs a report and, when its answer asks for a picture, draws it (the drawing
/// its kind names: a route map, a speed chart, a fleet map): the PNG, and the
/// picture's own figures in the answer (`png_bytes`; for maps `zoom` and `bounds`).
/// Both front ends call this, so a tool and its CLI twin answer alike.
pub fn call(db: &Db, spec: &ReportSpec, args: &Args) -> Result<Answer> {
    let mut answer = report::call(db, spec, args)?;
    let Some(drawing) = answer.drawing.take() else {
        return Ok(answer);
    };
    // The tiles' deadline starts with the first tile, not while the map waits its turn.
    let deadline = std::cell::OnceCell::new();
    let fetch = |z, x, y| {
        let deadline =
            *deadline.get_or_init(|| std::time::Instant::now() + report::route_map::TILES_DEADLINE);
        db.tiles
            .as_ref()
            .map_or(Ok(None), |t| t.fetch(z, x, y, deadline))
    };
    let tiles = db.tiles.as_ref().map(|t| map::Tiles {
        fetch: &fetch,
        attribution: t.attribution(),
    });
    let (png, frame) = report::catch_panic(spec.tool, || match &drawing {
        Drawing::Route(input) => map::render(input, tiles.as_ref()).map(|(p, f)| (p, Some(f))),
        Drawing::Fleet(input) => fleet::render(input, tiles.as_ref()).map(|(p, f)| (p, Some(f))),
        Drawing::Speed(input) => chart::render(input).map(|p| (p, None)),
    })?;
    answer.value["png_bytes"] = png.len().into();
    if let Some(frame) = frame {
        let (nw, se) = frame.bounds();
        let round5 = |x: f64| (x * 1e5).round() / 1e5;
        answer.value["zoom"] = ((frame.zoom * 1e6).round() / 1e6).into();
        answer.value["bounds"] = serde_json::json!({
            "north": round5(nw.lat), "south": round5(se.lat), "west": round5(nw.lon), "east": round5(se.lon)
        });
    }
    answer.png = Some(png);
    Ok(answer)
}

/// Groups digits by thousands: `214332` → `214,332`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The summary `fleetctl generate` prints when it is done.
pub fn generate_summary(s: &GenerateSummary) -> String {
    let mut out = String::new();
    let inactive = s.vehicles - s.active_vehicles;
    let _ = writeln!(out, "Generated {} in {:.2} s", s.path.display(), s.seconds);
    let _ = writeln!(
        out,
        "  vehicles   {} ({} active, {inactive} out of service)",
        s.vehicles, s.active_vehicles
    );
    let days = s.last_date.days_since_epoch() - s.first_date.days_since_epoch() + 1;
    let _ = writeln!(
        out,
        "  days       {days}: {} to {} (data clock {})",
        s.first_date, s.last_date, s.now
    );
    let _ = writeln!(out, "  positions  {}", thousands(s.positions));
    let planted: Vec<String> = s
        .planted
        .iter()
        .map(|(k, n)| format!("{} {n}", k.as_str()))
        .collect();
    let _ = writeln!(out, "  planted    {}", planted.join(", "));
    for note in &s.notes {
        let _ = writeln!(out, "  note: {note}");
    }
    out
}

/// The summary `fleetctl analyze` prints.
pub fn analyze_summary(path: &Path, s: &AnalyzeSummary) -> String {
    let mut out = format!(
        "Analysed {} in {:.2} s\n  vehicles   {}\n  fixes      {}\n  stops      {}\n  trips      {}\n  events     {}\n",
        path.display(),
        s.seconds,
        s.vehicles,
        thousands(s.fixes as u64),
        thousands(s.stops as u64),
        thousands(s.trips as u64),
        event_counts(&s.events)
    );
    if let Some(line) = odometer_line(s) {
        out.push_str(&format!("  {line}\n"));
    }
    out
}

/// Event counts by kind, "speeding 12, long_stop 10", or "none".
fn event_counts<K: std::fmt::Display>(events: &[(K, usize)]) -> String {
    if events.is_empty() {
        return "none".to_string();
    }
    let counts: Vec<String> = events.iter().map(|(k, n)| format!("{k} {n}")).collect();
    counts.join(", ")
}

/// A CSV cell (RFC 4180), quoted when it must be: the one quoting rule of the text CSV
/// fleetctl writes a line at a time (`query --format csv`, `import --rejects`); the
/// exports' CSV is polars'.
pub fn csv_field(text: &str) -> String {
    if text.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_string()
    }
}

/// The report's main list (`rows_field`) as CSV with a header; a report without a
/// list is one row of its scalar fields.
pub fn csv(report: &Value, rows_field: &str) -> String {
    let single;
    let rows: &[Value] = match report.get(rows_field).and_then(rows_of) {
        Some((rows, _)) => rows,
        None => {
            let flat: Map<String, Value> = report
                .as_object()
                .map(|o| {
                    o.iter()
                        .filter(|(_, v)| rows_of(v).is_none())
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect()
                })
                .unwrap_or_default();
            single = [Value::Object(flat)];
            &single
        }
    };
    let mut out = String::new();
    let Some(first) = rows.first().and_then(Value::as_object) else {
        return out;
    };
    let columns: Vec<&String> = first.keys().collect();
    let _ = writeln!(
        out,
        "{}",
        columns
            .iter()
            .map(|c| csv_field(c))
            .collect::<Vec<_>>()
            .join(",")
    );
    for r in rows {
        let line: Vec<String> = columns
            .iter()
            .map(|c| match r.get(c.as_str()) {
                None | Some(Value::Null) => String::new(),
                Some(Value::String(s)) => csv_field(s),
                Some(v @ (Value::Object(_) | Value::Array(_))) => csv_field(&v.to_string()),
                Some(v) => v.to_string(),
            })
            .collect();
        let _ = writeln!(out, "{}", line.join(","));
    }
    out
}

/// The MCP client configuration for this machine: the Claude Desktop JSON and the
/// Claude Code command, with absolute paths.
/// `fleetctl mcp-config`: the client configuration (pure JSON, for stdout, so that
/// it can be redirected into a file) and the notes that go with it (for stderr):
/// where to merge it, the Claude Code command, and `warnings` first.
pub fn mcp_config(
    (exe, db): &(std::path::PathBuf, std::path::PathBuf),
    warnings: &[String],
) -> (String, String) {
    let config = serde_json::json!({
        "mcpServers": {
            "fleetctl": {
                "command": exe.display().to_string(),
                "args": ["--db", db.display().to_string(), "serve"],
            }
        }
    });
    let json = format!(
        "{}\n",
        serde_json::to_string_pretty(&config).unwrap_or_default()
    );
    let mut notes: String = warnings.iter().map(|w| format!("warning: {w}\n")).collect();
    notes += &format!(
        "Claude Desktop: merge the JSON printed on stdout into claude_desktop_config.json\n\
         \x20 macOS:   ~/Library/Application Support/Claude/claude_desktop_config.json\n\
         \x20 Windows: %APPDATA%\\Claude\\claude_desktop_config.json\n\
         \x20 Linux:   ~/.config/Claude/claude_desktop_config.json\n\
         Claude Code:\n\
         \x20 claude mcp add fleetctl -- {} --db {} serve\n",
        shell_quote(&exe.display().to_string()),
        shell_quote(&db.display().to_string())
    );
    (json, notes)
}

/// `s` as one word for a POSIX shell (quoted only when it needs to be).
pub fn shell_quote(s: &str) -> String {
    if s.chars()
        .all(|c| c.is_ascii_alphanumeric() || "/._-+:@".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// What `fleetctl export` wrote: where, how many rows and files, how fast.
pub fn export_summary(
    s: &fleetctl_core::export::ExportSummary,
    scope: &fleetctl_core::export::Scope,
) -> String {
    let rows: Vec<String> = s
        .rows
        .iter()
        .map(|(d, n)| format!("{} {}", thousands(*n), d.as_str()))
        .collect();
    let rate = s.rows.iter().map(|r| r.1).sum::<u64>() as f64 / s.seconds.max(1e-6);
    format!(
        "Wrote {} ({}, {} to {}, {} vehicle{}) to {}: {} file{}, {:.1} MB in {:.2} s ({} rows/s)\n",
        rows.join(", "),
        if scope.vehicles.len() == 1 {
            scope.vehicles[0].1.as_str()
        } else {
            "fleet"
        },
        scope.from,
        scope.to,
        scope.vehicles.len(),
        if scope.vehicles.len() == 1 { "" } else { "s" },
        s.output.display(),
        s.files,
        if s.files == 1 { "" } else { "s" },
        s.bytes as f64 / 1e6,
        s.seconds,
        thousands(rate as u64)
    )
}

/// What `fleetctl import` did: files, rejections by reason, vehicles, detection.
pub fn import_summary(s: &fleetctl_core::ingest::ImportSummary) -> String {
    let mut out = String::new();
    let zone = &s.zone;
    let _ = writeln!(
        out,
        "Imported into {} ({}time zone {}) in {:.2} s",
        s.db.display(),
        if s.created { "created; " } else { "" },
        zone.name,
        s.seconds
    );
    let width = s
        .files
        .iter()
        .map(|f| f.name.chars().count())
        .max()
        .unwrap_or(4)
        .max(4);
    let _ = writeln!(
        out,
        "  {:<width$}  {:<12}  {:>10}  {:>10}  {:>10}",
        "file", "format", "read", "imported", "rejected"
    );
    let mut reasons: std::collections::BTreeMap<_, u64> = std::collections::BTreeMap::new();
    for f in &s.files {
        let _ = writeln!(
            out,
            "  {:<width$}  {:<12}  {:>10}  {:>10}  {:>10}",
            f.name,
            f.format,
            thousands(f.rows_read),
            thousands(f.imported),
            thousands(f.rejected_total())
        );
        for (r, n) in &f.rejected {
            *reasons.entry(*r).or_insert(0) += n;
        }
    }
    if !reasons.is_empty() {
        let _ = writeln!(out, "Rejected rows by reason:");
        for (r, n) in &reasons {
            let _ = writeln!(out, "  {:<26}{:>10}", r.as_str(), thousands(*n));
        }
    }
    if s.vehicles.is_empty() {
        let _ = writeln!(out, "No fixes added.");
        return out;
    }
    let first = s.vehicles.iter().map(|v| v.first_ts).min().unwrap_or(0);
    let last = s.vehicles.iter().map(|v| v.last_ts).max().unwrap_or(0);
    let _ = writeln!(
        out,
        "Fixes added from {} to {} (local dates {} to {})",
        zone.rfc3339(first),
        zone.rfc3339(last),
        zone.local_date(first),
        zone.local_date(last)
    );
    let pw = s
        .vehicles
        .iter()
        .map(|v| v.plate.chars().count())
        .max()
        .unwrap_or(5)
        .max(7);
    let _ = writeln!(
        out,
        "  {:<pw$}  {:>10}  {:<10}  {:<10}  {:>15}  {:>14}",
        "vehicle", "fixes", "first day", "last day", "median interval", "derived speeds"
    );
    for v in &s.vehicles {
        let interval = v
            .median_interval_s
            .map_or_else(|| "-".to_string(), |i| format!("{i:.1} s"));
        let _ = writeln!(
            out,
            "  {:<pw$}  {:>10}  {:<10}  {:<10}  {:>15}  {:>14}{}",
            v.plate,
            thousands(v.imported),
            zone.local_date(v.first_ts).to_string(),
            zone.local_date(v.last_ts).to_string(),
            interval,
            thousands(v.derived_speeds),
            if v.added { "  (new vehicle)" } else { "" }
        );
    }
    if let Some(a) = &s.analysis {
        let _ = writeln!(
            out,
            "Re-analysed {} vehicle{}: {} stops, {} trips; events: {}",
            a.vehicles,
            if a.vehicles == 1 { "" } else { "s" },
            thousands(a.stops as u64),
            thousands(a.trips as u64),
            event_counts(&a.events)
        );
        if let Some(line) = odometer_line(a) {
            let _ = writeln!(out, "{line}");
        }
    }
    let suspicions: Vec<String> = s
        .files
        .iter()
        .flat_map(|f| {
            f.units
                .suspicions()
                .into_iter()
                .map(move |u| format!("  {}: {u}", f.name))
        })
        .collect();
    if !suspicions.is_empty() {
        let _ = writeln!(
            out,
            "Units to check (the figures were imported as read; --strict-units refuses such a file):"
        );
        for line in suspicions {
            let _ = writeln!(out, "{line}");
        }
    }
    out
}

/// The vehicle-days whose odometer readings were not used, by reason; None when
/// every odometer was used (or there were none).
pub fn odometer_line(a: &fleetctl_core::pipeline::AnalyzeSummary) -> Option<String> {
    if a.odometer_rejected.is_empty() {
        return None;
    }
    let reasons: Vec<String> = a
        .odometer_rejected
        .iter()
        .map(|(why, n)| format!("{why} {n}"))
        .collect();
    Some(format!(
        "Odometer not used (distance from GPS instead), vehicle-days: {}",
        reasons.join(", ")
    ))
}

/// `fleetctl settings`: the zone and every detection threshold with its meaning.
pub fn settings(
    path: &Path,
    zone: &fleetctl_core::clock::FleetZone,
    t: &fleetctl_core::analyze::Thresholds,
    under_way: &[String],
) -> String {
    let mut out = format!("Settings of {}\n", path.display());
    for said in under_way {
        let _ = writeln!(out, "  NOTE: {said}");
    }
    let _ = writeln!(
        out,
        "  {:<20} {:<18} local dates and printed times",
        "time_zone", zone.name
    );
    for spec in &fleetctl_core::analyze::THRESHOLDS {
        let value = (spec.get)(t).to_string();
        let flag = spec
            .flag
            .as_ref()
            .map_or_else(String::new, |f| format!(" (analyze --{})", f.name));
        let _ = writeln!(out, "  {:<20} {value:<18} {}{flag}", spec.key, spec.meaning);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands_groups_digits() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(214_332), "214,332");
        assert_eq!(thousands(60_000_000), "60,000,000");
    }

    #[test]
    fn an_analysis_without_events_says_none() {
        let mut summary = AnalyzeSummary::default();
        let text = analyze_summary(Path::new("fleet.db"), &summary);
        assert!(text.contains("  events     none\n"), "{text}");
        summary.events = vec![("speeding", 12), ("long_stop", 10)];
        let text = analyze_summary(Path::new("fleet.db"), &summary);
        assert!(
            text.contains("  events     speeding 12, long_stop 10\n"),
            "{text}"
        );
    }

    #[test]
    fn csv_quotes_what_needs_quoting() {
        let report = serde_json::json!({"rows": {"total": 1, "truncated": false, "items": [
            {"place": "1.2 km NE of Zona 10, Oakland", "note": "say \"hi\"", "n": 3, "x": null}
        ]}});
        assert_eq!(
            csv(&report, "rows"),
            "place,note,n,x\n\"1.2 km NE of Zona 10, Oakland\",\"say \"\"hi\"\"\",3,\n"
        );
    }
}
