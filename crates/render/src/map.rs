//! Route maps: one vehicle's day (or part of it) drawn to a PNG with no network at
//! all — an offline basemap from our own routes and gazetteer (or local raster tiles
//! when given), the track coloured by speed, stops sized by duration, speeding and
//! signal losses marked, geofences named, with title, legend, scale bar and north
//! arrow. Presentation only: the caller gathers the data. This file draws the route
//! itself (track, stops, ends, markers, legend); what every picture shares is beside
//! it and re-exported here: `style.rs` (colours, fonts, labels, PNG), `frame.rs` (the
//! map's window), `basemap.rs` (basemap, tiles, geofences, place labels) and
//! `furniture.rs` (title, scale, north arrow, attribution).

use crate::error::{Error, ErrorCode, Result};
use crate::geo::LatLon;
use crate::report::route_map::MapInput;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

pub use crate::basemap::*;
pub use crate::frame::*;
pub(crate) use crate::furniture::*;
pub use crate::style::*;

/// Draws the map and encodes it as PNG. Returns the bytes and the frame used.
pub fn render(input: &MapInput, tiles: Option<&Tiles>) -> Result<(Vec<u8>, Frame)> {
    crate::canvas::with_canvas(|canvas| render_on(canvas, input, tiles))
}

fn render_on(
    canvas: &mut Vec<u8>,
    input: &MapInput,
    tiles: Option<&Tiles>,
) -> Result<(Vec<u8>, Frame)> {
    let (width, height) = (input.width, input.height);
    register_fonts();
    let mut points: Vec<LatLon> = input
        .fixes
        .iter()
        .map(|f| LatLon::new(f.lat, f.lon))
        .collect();
    points.extend(input.stops.iter().map(|s| s.at));
    if points.is_empty() {
        return Err(Error::new(ErrorCode::NoData, "nothing to draw"));
    }
    let frame = Frame::fit(&points, width, height);
    let buf: &mut Vec<u8> = canvas;
    draw_ground(buf, &frame, input.streets, tiles)?;
    {
        let area = BitMapBackend::with_buffer(buf, (width, height)).into_drawing_area();
        let mut labels = Labels {
            taken: vec![(0, 0, 460, 78), (0, height as i32 - 64, 330, height as i32)],
        };
        let ends = end_labels(&area, &frame, input, &mut labels)?;
        let stops = stop_places(&area, &frame, input, &mut labels)?;
        draw_geofences(&area, &frame, &input.geofences, &mut labels)?;
        if tiles.is_none() {
            draw_place_labels(&area, &frame, &input.places, &mut labels)?;
        }
        draw_track(&area, &frame, input)?;
        draw_markers(&area, &frame, input, &stops, &ends, &mut labels)?;
        draw_furniture(&area, &frame, input, tiles.map(|t| t.attribution.as_str()))?;
        area.present().map_err(render_err)?;
    }
    let png = encode_png(buf, width, height)?;
    Ok((png, frame))
}

/// Dashes from a to b: 7 px on, 5 px off.
fn dashes(a: (f64, f64), b: (f64, f64)) -> Vec<[(i32, i32); 2]> {
    let len = (b.0 - a.0).hypot(b.1 - a.1);
    let steps = (len / 12.0).ceil().max(1.0) as usize;
    (0..steps)
        .map(|i| {
            let f0 = i as f64 * 12.0 / len;
            let f1 = ((i as f64 * 12.0 + 7.0) / len).min(1.0);
            let p = |f: f64| {
                (
                    (a.0 + (b.0 - a.0) * f).round() as i32,
                    (a.1 + (b.1 - a.1) * f).round() as i32,
                )
            };
            [p(f0.min(1.0)), p(f1)]
        })
        .collect()
}

fn draw_track(area: &Area, frame: &Frame, input: &MapInput) -> Result<()> {
    let fixes = &input.fixes;
    // A soft red halo under the speeding episodes detection found (the same rule as
    // the alerts, never a second opinion), so they read at a glance.
    let speeding = |ts: i64| {
        input
            .speeding
            .iter()
            .any(|e| (e.start_ts..=e.end_ts).contains(&ts))
    };
    for w in fixes.windows(2) {
        if w[1].ts - w[0].ts <= input.gap_s && speeding(w[0].ts) && speeding(w[1].ts) {
            let path = vec![
                frame.px(LatLon::new(w[0].lat, w[0].lon)),
                frame.px(LatLon::new(w[1].lat, w[1].lon)),
            ];
            area.draw(&PathElement::new(
                path,
                ShapeStyle::from(&SPEED_COLOURS[4].1.mix(0.35)).stroke_width(11),
            ))
            .map_err(render_err)?;
        }
    }
    let mut gaps = Vec::new();
    for w in fixes.windows(2) {
        let (a, b) = (
            frame.project(LatLon::new(w[0].lat, w[0].lon)),
            frame.project(LatLon::new(w[1].lat, w[1].lon)),
        );
        let lost = input.signal_losses.contains(&(w[0].ts, w[1].ts));
        if lost || w[1].ts - w[0].ts > input.gap_s {
            if lost {
                gaps.push((a, b));
            }
            continue;
        }
        let colour = speed_colour(
            (w[0].speed_kmh + w[1].speed_kmh) / 2.0,
            input.speed_limit_kmh,
        );
        let path = vec![
            (a.0.round() as i32, a.1.round() as i32),
            (b.0.round() as i32, b.1.round() as i32),
        ];
        area.draw(&PathElement::new(
            path,
            ShapeStyle::from(&colour).stroke_width(4),
        ))
        .map_err(render_err)?;
    }
    // Signal losses on top, white-edged, so that a loop driven again does not hide them.
    for (a, b) in gaps {
        for d in dashes(a, b) {
            area.draw(&PathElement::new(
                d.to_vec(),
                ShapeStyle::from(&WHITE).stroke_width(6),
            ))
            .map_err(render_err)?;
            area.draw(&PathElement::new(
                d.to_vec(),
                ShapeStyle::from(&GAP).stroke_width(3),
            ))
            .map_err(render_err)?;
        }
    }
    Ok(())
}

/// Stops at one spot on the map (a loop driven several times stops at the same
/// customer), with their total minutes and where their label goes, if it fits.
struct StopPlace {
    at: (i32, i32),
    minutes: f64,
    label: String,
    label_at: Option<(i32, i32)>,
}

/// Groups the stops by spot and reserves their labels, longest first.
fn stop_places(
    area: &Area,
    frame: &Frame,
    input: &MapInput,
    labels: &mut Labels,
) -> Result<Vec<StopPlace>> {
    let mut places: Vec<((i32, i32), f64, usize)> = Vec::new();
    for s in &input.stops {
        let (x, y) = frame.px(s.at);
        match places
            .iter_mut()
            .find(|((px, py), _, _)| (px - x).pow(2) + (py - y).pow(2) <= 14 * 14)
        {
            Some(place) => {
                place.1 += s.minutes;
                place.2 += 1;
            }
            None => places.push(((x, y), s.minutes, 1)),
        }
    }
    places.sort_by(|a, b| b.1.total_cmp(&a.1));
    let style = bold(11.0, &STOP);
    let (w, h) = (frame.width as i32, frame.height as i32);
    let mut out = Vec::new();
    for ((x, y), minutes, count) in places {
        let label = if count > 1 {
            format!("{minutes:.0} min ({count} stops)")
        } else {
            format!("{minutes:.0} min")
        };
        let (tw, th) = area
            .estimate_text_size(&label, &style)
            .map_err(render_err)?;
        let (tw, th) = (tw as i32, th as i32);
        let r = stop_radius_px(minutes);
        // Right of the circle, else left of it.
        let label_at = [(x + r + 2, y - 7), (x - r - 2 - tw, y - 7)]
            .into_iter()
            .find(|&(lx, ly)| {
                lx >= 0
                    && ly >= 0
                    && lx + tw <= w
                    && ly + th <= h
                    && labels.try_take(lx, ly, tw, th)
            });
        out.push(StopPlace {
            at: (x, y),
            minutes,
            label,
            label_at,
        });
    }
    Ok(out)
}

/// Whether the first and last fix are drawn as one marker (a loop ends where it began).
fn ends_together(s: (i32, i32), e: (i32, i32)) -> bool {
    (s.0 - e.0).pow(2) + (s.1 - e.1).pow(2) < 24 * 24
}

/// A label to draw: text, top-left corner, colour.
type PlacedLabel = (String, (i32, i32), RGBColor);

/// Places the start and end time labels before any other label, so that they always
/// find room: `S 06:47 · E 15:36` beside a shared marker, or one beside each.
fn end_labels(
    area: &Area,
    frame: &Frame,
    input: &MapInput,
    labels: &mut Labels,
) -> Result<Vec<PlacedLabel>> {
    let (Some(first), Some(last)) = (input.fixes.first(), input.fixes.last()) else {
        return Ok(Vec::new());
    };
    let (s_at, e_at) = (
        frame.px(LatLon::new(first.lat, first.lon)),
        frame.px(LatLon::new(last.lat, last.lon)),
    );
    let wanted = if ends_together(s_at, e_at) {
        vec![(
            format!("S {} · E {}", input.first_label, input.last_label),
            s_at,
            19,
            INK,
        )]
    } else {
        vec![
            (format!("S {}", input.first_label), s_at, 13, START),
            (format!("E {}", input.last_label), e_at, 13, INK),
        ]
    };
    let mut out = Vec::new();
    for (text, at, gap, colour) in wanted {
        let (w, h) = area
            .estimate_text_size(&text, &bold(12.0, &colour))
            .map_err(render_err)?;
        let (w, h) = (w as i32, h as i32);
        let spots = [
            (at.0 + gap, at.1 - h / 2),
            (at.0 - gap - w, at.1 - h / 2),
            (at.0 - w / 2, at.1 - gap - h),
            (at.0 - w / 2, at.1 + gap),
        ];
        let inside = |&(x, y): &(i32, i32)| {
            x >= 0 && y >= 0 && x + w <= frame.width as i32 && y + h <= frame.height as i32
        };
        let spot = spots
            .iter()
            .copied()
            .filter(inside)
            .find(|&(x, y)| labels.try_take(x, y, w, h))
            .or_else(|| spots.iter().copied().find(inside))
            .unwrap_or(spots[0]);
        labels.taken.push((spot.0, spot.1, spot.0 + w, spot.1 + h));
        out.push((text, spot, colour));
    }
    Ok(out)
}

fn draw_markers(
    area: &Area,
    frame: &Frame,
    input: &MapInput,
    stops: &[StopPlace],
    ends: &[PlacedLabel],
    labels: &mut Labels,
) -> Result<()> {
    // Stops: circles whose area grows with the minutes, with the labels reserved
    // before the place names were placed.
    for place in stops {
        let r = stop_radius_px(place.minutes);
        area.draw(&Circle::new(place.at, r, STOP.mix(0.30).filled()))
            .map_err(render_err)?;
        area.draw(&Circle::new(
            place.at,
            r,
            ShapeStyle::from(&STOP).stroke_width(2),
        ))
        .map_err(render_err)?;
    }
    let stop_style = bold(11.0, &STOP);
    for place in stops.iter().filter(|p| p.label_at.is_some()) {
        let at = place.label_at.unwrap_or_default();
        area.draw(&Text::new(
            place.label.clone(),
            at,
            stop_style.pos(Pos::new(HPos::Left, VPos::Top)),
        ))
        .map_err(render_err)?;
    }
    // Speeding: the top speed of each episode.
    let red = SPEED_COLOURS[4].1;
    for s in &input.speeding {
        let (x, y) = frame.px(s.at);
        area.draw(&Polygon::new(
            vec![(x, y - 9), (x - 7, y + 5), (x + 7, y + 5)],
            red.filled(),
        ))
        .map_err(render_err)?;
        labels.draw(
            area,
            &format!("{:.0} km/h", s.max_speed_kmh),
            x + 9,
            y - 16,
            &bold(11.0, &red),
        )?;
    }
    // Start and end markers; their labels were placed first (`end_labels`).
    let (Some(first), Some(last)) = (input.fixes.first(), input.fixes.last()) else {
        return Ok(());
    };
    let (s_at, e_at) = (
        frame.px(LatLon::new(first.lat, first.lon)),
        frame.px(LatLon::new(last.lat, last.lon)),
    );
    let marker = |at: (i32, i32), colour: RGBColor, letter: &str| -> Result<()> {
        area.draw(&Circle::new(at, 10, colour.filled()))
            .map_err(render_err)?;
        area.draw(&Circle::new(
            at,
            10,
            ShapeStyle::from(&WHITE).stroke_width(2),
        ))
        .map_err(render_err)?;
        area.draw(&Text::new(
            letter.to_string(),
            at,
            bold(12.0, &WHITE).pos(Pos::new(HPos::Center, VPos::Center)),
        ))
        .map_err(render_err)?;
        Ok(())
    };
    if ends_together(s_at, e_at) {
        area.draw(&Circle::new(
            s_at,
            15,
            ShapeStyle::from(&INK).stroke_width(4),
        ))
        .map_err(render_err)?;
    } else {
        marker(e_at, INK, "E")?;
    }
    marker(s_at, START, "S")?;
    for (text, at, colour) in ends {
        area.draw(&Text::new(
            text.clone(),
            *at,
            bold(12.0, colour).pos(Pos::new(HPos::Left, VPos::Top)),
        ))
        .map_err(render_err)?;
    }
    Ok(())
}

fn draw_furniture(
    area: &Area,
    frame: &Frame,
    input: &MapInput,
    attribution: Option<&str>,
) -> Result<()> {
    let h = frame.height as i32;
    draw_title(area, &input.title, &input.subtitle)?;
    // Legend: speed classes, stops, signal loss.
    let legend_y = h - 54;
    area.draw(&Rectangle::new(
        [(8, legend_y - 8), (326, h - 8)],
        WHITE.mix(0.9).filled(),
    ))
    .map_err(render_err)?;
    let small = font(11.0, &INK);
    let mut x = 16;
    for (colour, name) in speed_legend(input.speed_limit_kmh) {
        let (colour, name) = (&colour, name.as_str());
        area.draw(&PathElement::new(
            vec![(x, legend_y + 6), (x + 18, legend_y + 6)],
            ShapeStyle::from(colour).stroke_width(5),
        ))
        .map_err(render_err)?;
        area.draw(&Text::new(name, (x + 22, legend_y), small.clone()))
            .map_err(render_err)?;
        let (nw, _) = area.estimate_text_size(name, &small).map_err(render_err)?;
        x += 22 + nw as i32 + 12;
    }
    let row2 = legend_y + 22;
    area.draw(&Circle::new((22, row2 + 6), 6, STOP.mix(0.3).filled()))
        .map_err(render_err)?;
    area.draw(&Circle::new(
        (22, row2 + 6),
        6,
        ShapeStyle::from(&STOP).stroke_width(1),
    ))
    .map_err(render_err)?;
    area.draw(&Text::new("stop (minutes)", (34, row2), small.clone()))
        .map_err(render_err)?;
    for d in dashes((128.0, f64::from(row2 + 6)), (156.0, f64::from(row2 + 6))) {
        area.draw(&PathElement::new(
            d.to_vec(),
            ShapeStyle::from(&GAP).stroke_width(3),
        ))
        .map_err(render_err)?;
    }
    area.draw(&Text::new("signal lost", (162, row2), small.clone()))
        .map_err(render_err)?;
    let red = SPEED_COLOURS[4].1;
    area.draw(&Polygon::new(
        vec![(240, row2), (234, row2 + 11), (246, row2 + 11)],
        red.filled(),
    ))
    .map_err(render_err)?;
    area.draw(&Text::new("speeding", (252, row2), small.clone()))
        .map_err(render_err)?;
    draw_scale_and_north(area, frame)?;
    if let Some(text) = attribution {
        draw_attribution(area, frame, text)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 1×1 palette PNG whose PLTE chunk is 4 bytes long (found by the `tile` fuzz
    /// target): the PNG decoder panicked on it.
    const PLTE_OF_FOUR_BYTES: &[u8] = &[
        0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44,
        0x52, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x03, 0x00, 0x00, 0x00, 0x28,
        0xcb, 0x34, 0xbb, 0x00, 0x00, 0x00, 0x04, 0x50, 0x4c, 0x54, 0x45, 0x00, 0x00, 0x00, 0x00,
        0xb4, 0xa3, 0xae, 0x7a, 0x00, 0x00, 0x00, 0x0a, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63,
        0x60, 0x00, 0x00, 0x00, 0x02, 0x00, 0x01, 0x48, 0xaf, 0xa4, 0x71, 0x00, 0x00, 0x00, 0x00,
        0x49, 0x45, 0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
    ];

    #[test]
    fn regression_a_malformed_palette_is_an_error_not_a_panic() {
        let e = decode_tile(PLTE_OF_FOUR_BYTES).unwrap_err();
        assert!(!e.is_empty());
    }

    #[test]
    fn a_tile_larger_than_the_limit_is_refused_at_its_header() {
        let img = image::RgbImage::new(MAX_TILE_SIDE + 1, 1);
        let mut png = Vec::new();
        img.write_to(&mut std::io::Cursor::new(&mut png), image::ImageFormat::Png)
            .unwrap();
        assert!(decode_tile(&png).unwrap_err().contains("limit"));
        let ok = image::RgbImage::new(256, 256);
        let mut png = Vec::new();
        ok.write_to(&mut std::io::Cursor::new(&mut png), image::ImageFormat::Png)
            .unwrap();
        assert_eq!(decode_tile(&png).unwrap().dimensions(), (256, 256));
    }

    #[test]
    fn the_legend_and_colours_follow_the_limit_and_detection_s_comparison() {
        let labels =
            |limit| -> Vec<String> { speed_legend(limit).into_iter().map(|c| c.1).collect() };
        assert_eq!(labels(80.0), ["<20", "20–40", "40–60", "60–80", ">80 km/h"]);
        assert_eq!(labels(90.0), ["<20", "20–40", "40–60", "60–90", ">90 km/h"]);
        assert_eq!(labels(50.0), ["<20", "20–40", "40–50", ">50 km/h"]);
        assert_eq!(
            speed_colour(80.0, 80.0),
            SPEED_COLOURS[3].1,
            "at the limit is not over it"
        );
        assert_eq!(speed_colour(80.1, 80.0), SPEED_COLOURS[4].1);
        assert_eq!(speed_colour(55.0, 50.0), SPEED_COLOURS[4].1);
        assert_eq!(speed_colour(45.0, 50.0), SPEED_COLOURS[2].1);
        assert_eq!(
            speed_colour(50.0, 50.0),
            SPEED_COLOURS[2].1,
            "the top class shown"
        );
    }
}
