//! Fleet maps: every vehicle at one instant drawn to a PNG with no network — a dot
//! per vehicle coloured by its state (moving, idle, parked, offline) and labelled with
//! its plate, vehicles at one spot gathered into one marker with a list, over the
//! same offline basemap, tiles and geofences as the route map (`map.rs`), with a
//! legend that counts each state. Presentation only: `report::fleet_map` gathers
//! the data (`FleetMapInput`).

use crate::error::{Error, ErrorCode, Result};
use crate::geo::{LatLon, offset_m};
use crate::map::{
    Area, Frame, INK, Labels, STREET_EDGE, Tiles, bold, draw_attribution, draw_geofences,
    draw_ground, draw_place_labels, draw_scale_and_north, draw_title, encode_png, font,
    register_fonts, render_err,
};
use crate::report::fleet_map::{FleetMapInput, FleetMapVehicle};
use crate::report::vehicle_position::LiveState;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// Each state's colour and name, in legend order.
pub const STATE_COLOURS: [(LiveState, RGBColor, &str); 4] = [
    (LiveState::Moving, RGBColor(26, 150, 65), "moving"),
    (LiveState::Idle, RGBColor(236, 112, 20), "idle"),
    (LiveState::Parked, RGBColor(49, 104, 187), "parked"),
    (LiveState::Offline, RGBColor(128, 128, 128), "offline"),
];

/// The colour of a state's dot.
pub fn state_colour(state: LiveState) -> RGBColor {
    STATE_COLOURS
        .iter()
        .find(|(s, _, _)| *s == state)
        .map_or(INK, |c| c.1)
}

/// The radius of a vehicle's dot, pixels.
pub const DOT_RADIUS_PX: i32 = 7;
/// Vehicles whose dots would be closer than this, pixels, share one marker.
const TOGETHER_PX: i32 = 18;
/// The smallest extent shown, metres a side: a fleet parked at one depot still
/// shows the streets around it.
const MIN_EXTENT_M: f64 = 2500.0;
/// Plates listed beside a shared marker before "+N more".
const MAX_LISTED: usize = 8;

/// Vehicles drawn as one marker, and where their label goes, if it fits.
struct Group<'a> {
    at: (i32, i32),
    members: Vec<&'a FleetMapVehicle>,
    label: Option<(i32, i32)>,
}

impl Group<'_> {
    fn radius(&self) -> i32 {
        if self.members.len() > 1 {
            11
        } else {
            DOT_RADIUS_PX
        }
    }

    /// The label's lines: the plate, or one line per vehicle (capped).
    fn lines(&self) -> Vec<(String, Option<RGBColor>)> {
        if self.members.len() == 1 {
            return vec![(self.members[0].plate.clone(), None)];
        }
        let mut lines: Vec<(String, Option<RGBColor>)> = self
            .members
            .iter()
            .take(MAX_LISTED)
            .map(|v| (v.plate.clone(), Some(state_colour(v.state))))
            .collect();
        if self.members.len() > MAX_LISTED {
            lines.push((format!("+{} more", self.members.len() - MAX_LISTED), None));
        }
        lines
    }
}

const LINE_H: i32 = 15;

/// The label box's size for a group: text width plus the dots' room.
fn label_size(area: &Area, group: &Group) -> Result<(i32, i32)> {
    let style = bold(11.0, &INK);
    let mut w = 0;
    let lines = group.lines();
    for (text, dot) in &lines {
        let (tw, _) = area.estimate_text_size(text, &style).map_err(render_err)?;
        w = w.max(tw as i32 + if dot.is_some() { 14 } else { 0 });
    }
    Ok((w + 8, lines.len() as i32 * LINE_H + 4))
}

/// Groups the vehicles by spot (in plate order, so the picture is the same every
/// time) and reserves their labels.
fn groups<'a>(
    area: &Area,
    frame: &Frame,
    input: &'a FleetMapInput,
    labels: &mut Labels,
) -> Result<Vec<Group<'a>>> {
    let mut vehicles: Vec<&FleetMapVehicle> = input.vehicles.iter().collect();
    vehicles.sort_by(|a, b| a.plate.cmp(&b.plate));
    let mut out: Vec<Group> = Vec::new();
    for v in vehicles {
        let (x, y) = frame.px(v.at);
        match out
            .iter_mut()
            .find(|g| (g.at.0 - x).pow(2) + (g.at.1 - y).pow(2) <= TOGETHER_PX * TOGETHER_PX)
        {
            Some(g) => g.members.push(v),
            None => out.push(Group {
                at: (x, y),
                members: vec![v],
                label: None,
            }),
        }
    }
    // The markers first, so that no label covers one; then the labels, bigger groups
    // first: their lists are the hardest to place.
    for g in &out {
        let r = g.radius() + 1;
        labels
            .taken
            .push((g.at.0 - r, g.at.1 - r, g.at.0 + r, g.at.1 + r));
    }
    let mut order: Vec<usize> = (0..out.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(out[i].members.len()));
    let (fw, fh) = (frame.width as i32, frame.height as i32);
    for i in order {
        let (w, h) = label_size(area, &out[i])?;
        let (x, y) = out[i].at;
        let r = out[i].radius() + 4;
        let spots = [
            (x + r, y - h / 2),
            (x - r - w, y - h / 2),
            (x - w / 2, y - r - h),
            (x - w / 2, y + r),
            (x + r, y - h - 2),
            (x + r, y + 2),
            (x - r - w, y - h - 2),
            (x - r - w, y + 2),
        ];
        out[i].label = spots.into_iter().find(|&(lx, ly)| {
            lx >= 0 && ly >= 0 && lx + w <= fw && ly + h <= fh && labels.try_take(lx, ly, w, h)
        });
    }
    Ok(out)
}

/// The points the map is framed on: the report's (the vehicles less those far from
/// the rest), widened to at least `MIN_EXTENT_M` a side.
fn framing(input: &FleetMapInput) -> Vec<LatLon> {
    let mut points = input.frame.clone();
    let (mut south, mut north, mut west, mut east) = (90.0f64, -90.0f64, 180.0f64, -180.0f64);
    for p in &points {
        south = south.min(p.lat);
        north = north.max(p.lat);
        west = west.min(p.lon);
        east = east.max(p.lon);
    }
    let center = LatLon::new((south + north) / 2.0, (west + east) / 2.0);
    let half = MIN_EXTENT_M / 2.0;
    points.push(offset_m(center, -half, -half));
    points.push(offset_m(center, half, half));
    points
}

/// Draws the fleet map and encodes it as PNG. Returns the bytes and the frame used.
pub fn render(input: &FleetMapInput, tiles: Option<&Tiles>) -> Result<(Vec<u8>, Frame)> {
    if input.vehicles.is_empty() {
        return Err(Error::new(ErrorCode::NoData, "no vehicle to draw"));
    }
    crate::canvas::with_canvas(|canvas| render_on(canvas, input, tiles))
}

fn render_on(
    buf: &mut Vec<u8>,
    input: &FleetMapInput,
    tiles: Option<&Tiles>,
) -> Result<(Vec<u8>, Frame)> {
    let (width, height) = (input.width, input.height);
    register_fonts();
    let frame = Frame::fit(&framing(input), width, height);
    draw_ground(buf, &frame, input.streets, tiles)?;
    {
        let area = BitMapBackend::with_buffer(buf, (width, height)).into_drawing_area();
        let (title_w, _) = area
            .estimate_text_size(&input.title, &bold(18.0, &INK))
            .map_err(render_err)?;
        let (sub_w, _) = area
            .estimate_text_size(&input.subtitle, &font(13.0, &INK))
            .map_err(render_err)?;
        let h = height as i32;
        let legend_w = legend_width(&area, input)?;
        let mut labels = Labels {
            taken: vec![
                (0, 0, title_w.max(sub_w) as i32 + 36, 70),
                (0, h - 64, legend_w + 16, h),
                (width as i32 - 60, 0, width as i32, 60),
                (width as i32 - 220, h - 50, width as i32, h),
            ],
        };
        let groups = groups(&area, &frame, input, &mut labels)?;
        draw_geofences(&area, &frame, &input.geofences, &mut labels)?;
        if tiles.is_none() {
            draw_place_labels(&area, &frame, &input.places, &mut labels)?;
        }
        draw_vehicles(&area, &groups)?;
        draw_title(&area, &input.title, &input.subtitle)?;
        draw_legend(&area, input, h, legend_w)?;
        draw_scale_and_north(&area, &frame)?;
        if let Some(t) = tiles {
            draw_attribution(&area, &frame, &t.attribution)?;
        }
        area.present().map_err(render_err)?;
    }
    let png = encode_png(buf, width, height)?;
    Ok((png, frame))
}

fn dot(area: &Area, at: (i32, i32), r: i32, colour: RGBColor) -> Result<()> {
    area.draw(&Circle::new(at, r, colour.filled()))
        .map_err(render_err)?;
    area.draw(&Circle::new(
        at,
        r,
        ShapeStyle::from(&WHITE).stroke_width(2),
    ))
    .map_err(render_err)?;
    Ok(())
}

/// A moving vehicle's heading: a small arrowhead just outside its dot.
fn heading_arrow(area: &Area, at: (i32, i32), heading_deg: f64, colour: RGBColor) -> Result<()> {
    let a = heading_deg.to_radians();
    let (dx, dy) = (a.sin(), -a.cos());
    let p = |d: f64, side: f64| {
        (
            (f64::from(at.0) + dx * d - dy * side).round() as i32,
            (f64::from(at.1) + dy * d + dx * side).round() as i32,
        )
    };
    area.draw(&Polygon::new(
        vec![p(16.0, 0.0), p(9.0, -5.0), p(9.0, 5.0)],
        colour.filled(),
    ))
    .map_err(render_err)?;
    Ok(())
}

fn draw_vehicles(area: &Area, groups: &[Group]) -> Result<()> {
    // A thin leader from each marker to its label, under the markers, so that a
    // list is read as the one of its marker.
    for g in groups {
        let Some((x, y)) = g.label else { continue };
        let (w, h) = label_size(area, g)?;
        let near = (g.at.0.clamp(x, x + w), g.at.1.clamp(y, y + h));
        area.draw(&PathElement::new(
            vec![g.at, near],
            ShapeStyle::from(&INK.mix(0.6)).stroke_width(1),
        ))
        .map_err(render_err)?;
    }
    for g in groups {
        if let [v] = g.members.as_slice() {
            let colour = state_colour(v.state);
            if let Some(h) = v.heading_deg {
                heading_arrow(area, g.at, h, colour)?;
            }
            dot(area, g.at, DOT_RADIUS_PX, colour)?;
        } else {
            area.draw(&Circle::new(g.at, g.radius(), WHITE.filled()))
                .map_err(render_err)?;
            area.draw(&Circle::new(
                g.at,
                g.radius(),
                ShapeStyle::from(&INK).stroke_width(2),
            ))
            .map_err(render_err)?;
            area.draw(&Text::new(
                g.members.len().to_string(),
                g.at,
                bold(11.0, &INK).pos(Pos::new(HPos::Center, VPos::Center)),
            ))
            .map_err(render_err)?;
        }
    }
    // Labels over every marker: white boxes, one plate a line.
    for g in groups {
        let Some((x, y)) = g.label else { continue };
        let (w, h) = label_size(area, g)?;
        area.draw(&Rectangle::new(
            [(x, y), (x + w, y + h)],
            WHITE.mix(0.88).filled(),
        ))
        .map_err(render_err)?;
        area.draw(&Rectangle::new(
            [(x, y), (x + w, y + h)],
            ShapeStyle::from(&STREET_EDGE).stroke_width(1),
        ))
        .map_err(render_err)?;
        for (i, (text, colour)) in g.lines().into_iter().enumerate() {
            let line_y = y + 2 + i as i32 * LINE_H;
            let mut tx = x + 4;
            if let Some(c) = colour {
                area.draw(&Circle::new((x + 9, line_y + LINE_H / 2), 4, c.filled()))
                    .map_err(render_err)?;
                tx += 14;
            }
            area.draw(&Text::new(text, (tx, line_y + 1), bold(11.0, &INK)))
                .map_err(render_err)?;
        }
    }
    Ok(())
}

/// The legend's entries: each state with its count.
fn legend_states(input: &FleetMapInput) -> Vec<(RGBColor, String)> {
    STATE_COLOURS
        .iter()
        .map(|(state, colour, name)| {
            let n = input.vehicles.iter().filter(|v| v.state == *state).count();
            (*colour, format!("{name} {n}"))
        })
        .collect()
}

const TOGETHER_TEXT: &str = "vehicles at one spot";
const HEADING_TEXT: &str = "heading";

/// The legend's width, pixels: its longer row.
fn legend_width(area: &Area, input: &FleetMapInput) -> Result<i32> {
    let small = font(11.0, &INK);
    let width = |text: &str| -> Result<i32> {
        Ok(area.estimate_text_size(text, &small).map_err(render_err)?.0 as i32)
    };
    let mut row1 = 8;
    for (_, text) in legend_states(input) {
        row1 += 18 + width(&text)? + 16;
    }
    let row2 = 8 + 30 + width(TOGETHER_TEXT)? + 16 + 36 + width(HEADING_TEXT)? + 8;
    Ok(row1.max(row2))
}

/// The legend, bottom left: each state with its count, the shared marker, the
/// heading arrow.
fn draw_legend(area: &Area, input: &FleetMapInput, h: i32, legend_w: i32) -> Result<()> {
    let y = h - 54;
    area.draw(&Rectangle::new(
        [(8, y - 8), (8 + legend_w, h - 8)],
        WHITE.mix(0.9).filled(),
    ))
    .map_err(render_err)?;
    let small = font(11.0, &INK);
    let mut x = 16;
    for (colour, text) in legend_states(input) {
        dot(area, (x + 7, y + 6), 6, colour)?;
        area.draw(&Text::new(text.clone(), (x + 18, y), small.clone()))
            .map_err(render_err)?;
        let (tw, _) = area.estimate_text_size(&text, &small).map_err(render_err)?;
        x += 18 + tw as i32 + 16;
    }
    let row2 = y + 22;
    area.draw(&Circle::new((23, row2 + 6), 8, WHITE.filled()))
        .map_err(render_err)?;
    area.draw(&Circle::new(
        (23, row2 + 6),
        8,
        ShapeStyle::from(&INK).stroke_width(2),
    ))
    .map_err(render_err)?;
    area.draw(&Text::new(
        "n",
        (23, row2 + 6),
        bold(10.0, &INK).pos(Pos::new(HPos::Center, VPos::Center)),
    ))
    .map_err(render_err)?;
    area.draw(&Text::new(TOGETHER_TEXT, (38, row2), small.clone()))
        .map_err(render_err)?;
    let (tw, _) = area
        .estimate_text_size(TOGETHER_TEXT, &small)
        .map_err(render_err)?;
    let x = 38 + tw as i32 + 22;
    heading_arrow(area, (x, row2 + 6), 90.0, STATE_COLOURS[0].1)?;
    dot(area, (x, row2 + 6), 6, STATE_COLOURS[0].1)?;
    area.draw(&Text::new(HEADING_TEXT, (x + 22, row2), small))
        .map_err(render_err)?;
    Ok(())
}
