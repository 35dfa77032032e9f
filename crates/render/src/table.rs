//! Reports as tables for people (`fleetctl query` on a terminal): the columns each
//! report names for reading, local times as `HH:MM` (the date once in the list's
//! heading when it spans one day, `MM-DD HH:MM` otherwise), figures to one decimal,
//! and a width that fits the terminal — widths, wrapping and the `…` of a cut cell
//! are comfy-table's. `--wide` shows every field in full; JSON and CSV are untouched.

use comfy_table::{
    Cell, ColumnConstraint, ContentArrangement, LineStyle, Row, Table, TableStyle, Width,
};
use serde_json::Value;
use std::fmt::Write;

/// Cells at most this wide (plates, times, dates, figures) are never cut.
const SHORT_CELL: u16 = 10;

/// How a table is laid out.
#[derive(Debug, Clone, Copy)]
pub struct TableOptions {
    /// Every field of every row, in full, however wide.
    pub wide: bool,
    /// The width to fit, in terminal columns (ignored when `wide`).
    pub width: u16,
}

impl Default for TableOptions {
    /// 100 columns, or the terminal's `COLUMNS` when the shell exports it.
    fn default() -> Self {
        let width = std::env::var("COLUMNS")
            .ok()
            .and_then(|c| c.parse::<u16>().ok())
            .filter(|&c| c >= 40)
            .unwrap_or(100);
        TableOptions { wide: false, width }
    }
}

/// A report as text: its scalar fields first, then each list as a table of the
/// columns `columns` names for it (every field when `wide` or when it names none).
pub fn table(report: &Value, columns: &[(&str, &[&str])], options: TableOptions) -> String {
    let mut out = String::new();
    let Some(obj) = report.as_object() else {
        return format!("{report}\n");
    };
    let scalars: Vec<(&String, &Value)> =
        obj.iter().filter(|(_, v)| rows_of(v).is_none()).collect();
    let width = scalars.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    for (k, v) in &scalars {
        let text = match v.as_str().and_then(LocalTime::parse) {
            Some(t) if !options.wide => format!("{} {}", t.date, t.hh_mm),
            _ => cell(k, v, options.wide),
        };
        let _ = writeln!(out, "{k:<width$}  {text}");
    }
    let mut hidden = false;
    for (k, v) in obj {
        let Some((rows, total)) = rows_of(v) else {
            continue;
        };
        let named = columns.iter().find(|(list, _)| list == k).map(|(_, c)| *c);
        let all: Vec<&str> = rows
            .first()
            .and_then(Value::as_object)
            .map(|o| o.keys().map(String::as_str).collect())
            .unwrap_or_default();
        let shown: Vec<&str> = match named {
            Some(named) if !options.wide => {
                named.iter().copied().filter(|c| all.contains(c)).collect()
            }
            _ => all.clone(),
        };
        hidden |= shown.len() < all.len();
        // The one day of the list's times, said once in its heading (full times when
        // wide); a `date` column that only repeats it says nothing more.
        let day = (!options.wide).then(|| one_day(rows, &shown)).flatten();
        let mut shown = shown;
        if let Some(d) = &day {
            let repeats = |r: &Value| r.get("date").and_then(Value::as_str) == Some(d.as_str());
            if rows.iter().all(repeats) {
                shown.retain(|c| *c != "date");
            }
        }
        let count = if rows.len() < total {
            format!("showing {} of {total}", rows.len())
        } else {
            total.to_string()
        };
        let on_day = day.as_ref().map(|d| format!(", {d}")).unwrap_or_default();
        let _ = writeln!(out, "\n{k} ({count}){on_day}");
        if rows.is_empty() {
            let _ = writeln!(out, "  none");
            continue;
        }
        let mut t = Table::new();
        t.load_style(TableStyle::new().header_separator(LineStyle::none().fill('─').junction(' ')));
        t.set_truncation_indicator("…");
        if options.wide {
            t.set_content_arrangement(ContentArrangement::Disabled);
        } else {
            t.set_content_arrangement(ContentArrangement::Dynamic);
            t.set_width(options.width);
        }
        t.set_header(shown.iter().map(|c| Cell::new(*c)));
        for r in rows {
            let cells = shown.iter().map(|c| {
                let v = r.get(*c).unwrap_or(&Value::Null);
                // A time on the list's one day, or on the row's own `date`, needs no
                // date of its own.
                let row_date = r.get("date").and_then(Value::as_str);
                let text = match v.as_str().and_then(LocalTime::parse) {
                    Some(time) if !options.wide => {
                        if day.is_some() || row_date == Some(time.date.as_str()) {
                            time.hh_mm
                        } else {
                            format!("{} {}", &time.date[5..], time.hh_mm)
                        }
                    }
                    _ => cell(c, v, options.wide),
                };
                Cell::new(text)
            });
            let mut row = Row::from(cells);
            if !options.wide {
                row.max_height(1);
            }
            t.add_row(row);
        }
        // Two spaces between columns (a padding of one, and the heading rule's blank
        // junction), none before the first. A heading is never cut
        // or wrapped, nor a short cell (a plate, a time, a figure): long names give way.
        let last = shown.len().saturating_sub(1);
        let widest = t.column_max_content_widths();
        let floors: Vec<u16> = (0..shown.len())
            .map(|i| {
                let heading = u16::try_from(shown[i].chars().count()).unwrap_or(u16::MAX);
                heading.max(widest.get(i).copied().unwrap_or(0).min(SHORT_CELL))
            })
            .collect();
        for (i, column) in t.column_iter_mut().enumerate() {
            let gap = if i == last { 0 } else { 1 };
            column.set_padding((0, gap));
            // (A column's width counts its padding.)
            let floor = floors[i].saturating_add(gap);
            column.set_constraint(ColumnConstraint::LowerBoundary(Width::Fixed(floor)));
        }
        for line in t.lines() {
            let _ = writeln!(out, "{}", line.trim_end());
        }
    }
    if hidden {
        let _ = writeln!(out, "\n(--wide shows every column)");
    }
    out
}

/// A local time as written in an answer (`2026-11-24T12:06:45-06:00`), split for
/// people.
struct LocalTime {
    date: String,
    hh_mm: String,
}

impl LocalTime {
    /// `YYYY-MM-DDTHH:MM[:SS][.fff](Z|±HH:MM)`; anything else is no time.
    fn parse(text: &str) -> Option<LocalTime> {
        let b = text.as_bytes();
        let digits = |range: std::ops::Range<usize>| {
            b.get(range)
                .is_some_and(|s| s.iter().all(u8::is_ascii_digit))
        };
        let shape = b.len() >= 17
            && digits(0..4)
            && b[4] == b'-'
            && digits(5..7)
            && b[7] == b'-'
            && digits(8..10)
            && b[10] == b'T'
            && digits(11..13)
            && b[13] == b':'
            && digits(14..16);
        let zoned =
            text.ends_with('Z') || matches!(b.get(b.len().wrapping_sub(6)), Some(b'+' | b'-'));
        (shape && zoned).then(|| LocalTime {
            date: text[..10].to_string(),
            hh_mm: text[11..16].to_string(),
        })
    }
}

/// The one local date every time of `columns` falls on, if there is one.
fn one_day(rows: &[Value], columns: &[&str]) -> Option<String> {
    let mut dates = rows.iter().flat_map(|r| {
        columns
            .iter()
            .filter_map(|c| r.get(*c)?.as_str().and_then(LocalTime::parse))
            .map(|t| t.date)
    });
    let first = dates.next()?;
    dates.all(|d| d == first).then_some(first)
}

/// A scalar for a table cell, the value of field `key`: figures to one decimal unless
/// `wide` — but never a coordinate, which one decimal would move by kilometres.
fn cell(key: &str, v: &Value, wide: bool) -> String {
    let coordinate = key == "lat" || key == "lon" || key.ends_with("_lat") || key.ends_with("_lon");
    match v {
        Value::Null => "-".into(),
        Value::Bool(b) => if *b { "yes" } else { "no" }.into(),
        Value::String(s) => s.clone(),
        Value::Number(n) => match n.as_f64() {
            Some(x) if !wide && !coordinate && n.is_f64() => format!("{x:.1}"),
            _ => n.to_string(),
        },
        Value::Object(m) => m
            .iter()
            .map(|(k, v)| format!("{k}={}", cell(k, v, wide)))
            .collect::<Vec<_>>()
            .join(" "),
        Value::Array(a) => a
            .iter()
            .map(|v| cell(key, v, wide))
            .collect::<Vec<_>>()
            .join(", "),
    }
}

/// The rows of a capped list (`{total, truncated, items}`) or a plain array of objects.
pub(crate) fn rows_of(v: &Value) -> Option<(&Vec<Value>, usize)> {
    match v {
        Value::Object(m) if m.contains_key("items") && m.contains_key("total") => Some((
            m["items"].as_array()?,
            m["total"].as_u64().unwrap_or(0) as usize,
        )),
        Value::Array(a) if a.first().is_some_and(Value::is_object) => Some((a, a.len())),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn narrow(width: u16) -> TableOptions {
        TableOptions { wide: false, width }
    }

    #[test]
    fn scalars_then_lists_with_the_day_once_in_the_heading() {
        let report = json!({
            "date": "2026-11-24",
            "distance_km": 12.53,
            "stops": {"total": 3, "truncated": true, "items": [
                {"start": "2026-11-24T08:00:10-06:00", "minutes": 12.04, "place": "in Bodega Mixco", "lat": 14.612345},
                {"start": "2026-11-24T09:30:00-06:00", "minutes": 4.5, "place": "1.2 km NE of Zona 10", "lat": 14.6}
            ]}
        });
        let text = table(
            &report,
            &[("stops", &["start", "minutes", "place"])],
            narrow(100),
        );
        assert!(
            text.starts_with("date         2026-11-24\ndistance_km  12.5\n"),
            "{text}"
        );
        assert!(
            text.contains("stops (showing 2 of 3), 2026-11-24\n"),
            "{text}"
        );
        assert!(text.contains("\n08:00 "), "{text}");
        assert!(text.contains(" 12.0 "), "{text}");
        assert!(!text.contains("lat"), "{text}");
        assert!(text.ends_with("(--wide shows every column)\n"), "{text}");
        let wide = table(
            &report,
            &[("stops", &["start"])],
            TableOptions {
                wide: true,
                width: 100,
            },
        );
        assert!(
            wide.contains("2026-11-24T08:00:10-06:00") && wide.contains("14.612345"),
            "{wide}"
        );
        assert!(!wide.contains("--wide"), "{wide}");
    }

    #[test]
    fn coordinates_keep_their_decimals_where_figures_are_rounded() {
        let report = json!({"lat": 14.630553, "speed_kmh": 41.27, "stops": [
            {"place": "at Mixco", "lat": 14.612345, "end_lon": -90.604689, "minutes": 12.04}
        ]});
        let text = table(&report, &[], narrow(100));
        assert!(
            text.contains("14.630553") && text.contains("41.3"),
            "{text}"
        );
        assert!(
            text.contains("14.612345") && text.contains("-90.604689"),
            "{text}"
        );
        assert!(text.contains("12.0"), "{text}");
    }

    #[test]
    fn a_date_column_that_repeats_the_heading_is_left_out() {
        let report = json!({"days": [
            {"date": "2026-11-24", "plate": "P-1", "first": "2026-11-24T07:20:00-06:00"},
            {"date": "2026-11-24", "plate": "P-2", "first": "2026-11-24T06:26:00-06:00"}
        ]});
        let text = table(&report, &[], narrow(100));
        assert!(text.contains("days (2), 2026-11-24\nplate"), "{text}");
        assert!(!text.contains("date"), "{text}");
    }

    #[test]
    fn a_list_over_several_days_shows_month_and_day() {
        let report = json!({"trips": [
            {"start": "2026-11-24T23:50:00-06:00"},
            {"start": "2026-11-25T00:10:00-06:00"}
        ]});
        let text = table(&report, &[], narrow(100));
        assert!(text.contains("trips (2)\n"), "{text}");
        assert!(
            text.contains("11-24 23:50") && text.contains("11-25 00:10"),
            "{text}"
        );
    }

    #[test]
    fn every_line_fits_the_width_and_long_cells_are_cut() {
        let long = "a very long place name that goes on and on past any sensible column width";
        let rows: Vec<Value> = (0..3)
            .map(|i| json!({"plate": format!("P-{i}00ABC"), "place": long, "other": long, "more": long}))
            .collect();
        let text = table(&json!({ "rows": rows }), &[], narrow(60));
        for line in text.lines() {
            assert!(
                line.chars().count() <= 60,
                "{} columns: {line}",
                line.chars().count()
            );
        }
        assert!(text.contains('…'), "{text}");
    }

    #[test]
    fn only_zoned_iso_times_are_times() {
        assert!(LocalTime::parse("2026-11-24T08:00:00-06:00").is_some());
        assert!(LocalTime::parse("2026-11-24T14:00:00Z").is_some());
        assert!(LocalTime::parse("2026-11-24").is_none());
        assert!(LocalTime::parse("2026-11-24T08:00:00").is_none());
        assert!(LocalTime::parse("P-123BCD").is_none());
    }
}
