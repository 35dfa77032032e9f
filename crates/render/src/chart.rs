//! Speed charts: one vehicle's day drawn as speed over local time, to a PNG, so that
//! a person (or an assistant that reads images) sees the day's profile at a glance —
//! where it sped, where it stood, where the signal dropped, when the engine ran.
//! Presentation only: `report::speed_chart` gathers the data (`ChartInput`); this
//! file lays it out and paints it with plotters and the embedded fonts.

use crate::error::Result;
use crate::map::{Area, INK, Labels, STOP, bold, encode_png, font, register_fonts, render_err};
use crate::report::speed_chart::ChartInput;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// The shade under a speeding episode (opaque, so that it reads the same on any
/// screen and a test can find it).
pub const SPEEDING_SHADE: RGBColor = RGBColor(250, 200, 200);
/// The band of a stop.
pub const STOP_SHADE: RGBColor = RGBColor(235, 228, 245);
/// The band of a signal loss.
pub const LOSS_SHADE: RGBColor = RGBColor(222, 222, 222);
/// The speed line.
pub const SPEED_LINE: RGBColor = RGBColor(49, 104, 187);
/// The speed line above the limit that applied.
pub const OVER_LINE: RGBColor = RGBColor(215, 25, 28);
/// The limit line.
pub const LIMIT_LINE: RGBColor = RGBColor(150, 20, 20);
/// A geofence's lower limit.
pub const ZONE_LIMIT_LINE: RGBColor = RGBColor(166, 97, 26);
/// The ignition strip: on, off, not reported.
pub const IGNITION_COLOURS: [RGBColor; 3] = [
    RGBColor(26, 150, 65),
    RGBColor(120, 120, 120),
    RGBColor(205, 205, 205),
];
const GRID_LINE: RGBColor = RGBColor(228, 228, 228);
const AXIS_TEXT: RGBColor = RGBColor(80, 80, 80);

/// Where things go, pixels.
struct Layout {
    left: i32,
    right: i32,
    top: i32,
    bottom: i32,
    strip_top: i32,
    strip_bottom: i32,
    ticks_y: i32,
    legend_y: i32,
}

/// The plot's box in a chart of this size, pixels: (left, top, right, bottom). The
/// time axis runs from `left` (the answer's `chart_from`) to `right` (`chart_to`).
pub fn plot_area(width: u32, height: u32) -> (i32, i32, i32, i32) {
    (58, 74, width as i32 - 22, height as i32 - 78)
}

impl Layout {
    fn of(width: u32, height: u32) -> Layout {
        let h = height as i32;
        let (left, top, right, bottom) = plot_area(width, height);
        Layout {
            left,
            right,
            top,
            bottom,
            strip_top: h - 70,
            strip_bottom: h - 58,
            ticks_y: h - 52,
            legend_y: h - 26,
        }
    }
}

/// Maps time and speed to pixels.
struct Scale {
    from_ts: i64,
    to_ts: i64,
    max_kmh: f64,
    l: Layout,
}

impl Scale {
    fn x(&self, ts: i64) -> i32 {
        let span = (self.to_ts - self.from_ts).max(1) as f64;
        let f = ((ts - self.from_ts) as f64 / span).clamp(0.0, 1.0);
        self.l.left + (f * f64::from(self.l.right - self.l.left)).round() as i32
    }

    fn y(&self, kmh: f64) -> i32 {
        let f = (kmh / self.max_kmh).clamp(0.0, 1.0);
        self.l.bottom - (f * f64::from(self.l.bottom - self.l.top)).round() as i32
    }
}

/// The top of the speed axis: above the fastest fix and the limit, a multiple of 20.
pub fn axis_top_kmh(max_speed_kmh: f64, limit_kmh: f64) -> f64 {
    let want = max_speed_kmh.max(limit_kmh) * 1.08 + 4.0;
    ((want / 20.0).ceil() * 20.0).max(40.0)
}

/// Hours between time labels, so that labels stay at least 64 px apart.
fn hour_step(span_s: i64, plot_w: i32) -> i64 {
    let hours = (span_s as f64 / 3600.0).max(1.0);
    [1, 2, 3, 4, 6, 12]
        .into_iter()
        .find(|step| f64::from(plot_w) / (hours / *step as f64) >= 64.0)
        .unwrap_or(24)
}

/// Draws the chart and encodes it as PNG.
pub fn render(input: &ChartInput) -> Result<Vec<u8>> {
    crate::canvas::with_canvas(|canvas| render_on(canvas, input))
}

fn render_on(buf: &mut Vec<u8>, input: &ChartInput) -> Result<Vec<u8>> {
    let (width, height) = (input.width, input.height);
    register_fonts();
    buf.clear();
    buf.resize(width as usize * height as usize * 3, 0);
    {
        let area = BitMapBackend::with_buffer(buf, (width, height)).into_drawing_area();
        let max_speed = input.points.iter().map(|p| p.speed_kmh).fold(0.0, f64::max);
        let s = Scale {
            from_ts: input.from_ts,
            to_ts: input.to_ts,
            max_kmh: axis_top_kmh(max_speed, input.limit_kmh),
            l: Layout::of(width, height),
        };
        area.fill(&WHITE).map_err(render_err)?;
        draw_grid(&area, input, &s)?;
        draw_bands(&area, input, &s)?;
        draw_limits(&area, input, &s)?;
        draw_speed(&area, input, &s)?;
        draw_ignition(&area, input, &s)?;
        draw_labels(&area, input, &s)?;
        draw_axes(&area, input, &s)?;
        draw_legend(&area, &s, width)?;
        area.present().map_err(render_err)?;
    }
    encode_png(buf, width, height)
}

fn rect(area: &Area, a: (i32, i32), b: (i32, i32), colour: RGBColor) -> Result<()> {
    area.draw(&Rectangle::new([a, b], colour.filled()))
        .map_err(render_err)?;
    Ok(())
}

/// A path (repeated points dropped: a zero-length step has no direction).
fn line(area: &Area, mut points: Vec<(i32, i32)>, colour: RGBColor, w: u32) -> Result<()> {
    points.dedup();
    if points.len() < 2 {
        return Ok(());
    }
    area.draw(&PathElement::new(
        points,
        ShapeStyle::from(&colour).stroke_width(w),
    ))
    .map_err(render_err)?;
    Ok(())
}

/// A horizontal dashed line: 8 px on, 5 px off.
fn dashed(area: &Area, x0: i32, x1: i32, y: i32, colour: RGBColor) -> Result<()> {
    let mut x = x0;
    while x < x1 {
        line(area, vec![(x, y), ((x + 8).min(x1), y)], colour, 2)?;
        x += 13;
    }
    Ok(())
}

fn draw_grid(area: &Area, input: &ChartInput, s: &Scale) -> Result<()> {
    let l = &s.l;
    let step = if s.max_kmh > 160.0 { 40.0 } else { 20.0 };
    let mut v = 0.0;
    while v <= s.max_kmh {
        line(
            area,
            vec![(l.left, s.y(v)), (l.right, s.y(v))],
            GRID_LINE,
            1,
        )?;
        v += step;
    }
    let hours = hour_step(input.to_ts - input.from_ts, l.right - l.left);
    let mut t = input.from_ts;
    while t <= input.to_ts {
        line(
            area,
            vec![(s.x(t), l.top), (s.x(t), l.bottom)],
            GRID_LINE,
            1,
        )?;
        t += hours * 3600;
    }
    Ok(())
}

/// Stops, signal losses and speeding episodes as bands the height of the plot.
fn draw_bands(area: &Area, input: &ChartInput, s: &Scale) -> Result<()> {
    let l = &s.l;
    // A band at least `min_w` px wide, centred on the span, within the plot.
    let band = |a: i64, b: i64, min_w: i32| -> (i32, i32) {
        let (mut x0, mut x1) = (s.x(a), s.x(b));
        if x1 - x0 < min_w {
            let mid = (x0 + x1) / 2;
            x0 = mid - min_w / 2;
            x1 = x0 + min_w;
        }
        (x0.max(l.left), x1.min(l.right))
    };
    for stop in &input.stops {
        let (x0, x1) = band(stop.start_ts, stop.end_ts, 2);
        rect(area, (x0, l.top), (x1, l.bottom), STOP_SHADE)?;
    }
    for gap in &input.signal_losses {
        let (x0, x1) = band(gap.start_ts, gap.end_ts, 3);
        rect(area, (x0, l.top), (x1, l.bottom), LOSS_SHADE)?;
        // Hatched, so that it does not read as a stop.
        let mut x = x0 - (l.bottom - l.top);
        while x < x1 {
            let (a, b) = ((x, l.bottom), (x + (l.bottom - l.top), l.top));
            let clipped = clip_diagonal(a, b, x0, x1);
            if let Some((p, q)) = clipped {
                line(area, vec![p, q], RGBColor(200, 200, 200), 1)?;
            }
            x += 8;
        }
    }
    for e in &input.speeding {
        let (x0, x1) = band(e.start_ts, e.end_ts, 7);
        rect(area, (x0, l.top), (x1, l.bottom), SPEEDING_SHADE)?;
    }
    Ok(())
}

/// The part of a 45° segment from `a` (bottom) to `b` (top) between x0 and x1.
fn clip_diagonal(
    a: (i32, i32),
    b: (i32, i32),
    x0: i32,
    x1: i32,
) -> Option<((i32, i32), (i32, i32))> {
    let start = a.0.max(x0);
    let end = b.0.min(x1);
    (start < end).then(|| ((start, a.1 - (start - a.0)), (end, a.1 - (end - a.0))))
}

/// The vehicle's (or fleet's) limit dashed across the plot, and a geofence's lower
/// limit solid where it applied.
fn draw_limits(area: &Area, input: &ChartInput, s: &Scale) -> Result<()> {
    let l = &s.l;
    dashed(area, l.left, l.right, s.y(input.limit_kmh), LIMIT_LINE)?;
    for w in input.points.windows(2) {
        let (a, b) = (w[0], w[1]);
        if a.limit_kmh < input.limit_kmh && b.ts - a.ts <= input.gap_s {
            let y = s.y(a.limit_kmh);
            line(
                area,
                vec![(s.x(a.ts), y), (s.x(b.ts), y)],
                ZONE_LIMIT_LINE,
                2,
            )?;
        }
    }
    Ok(())
}

/// The speed, broken wherever fixes are missing for longer than the signal-loss
/// threshold; red where it is above the limit that applied. Drawn a segment at a
/// time: plotters joins a wide polyline with mitres, and the speed's sharp turns
/// would grow spikes across the picture.
fn draw_speed(area: &Area, input: &ChartInput, s: &Scale) -> Result<()> {
    for over in [false, true] {
        for w in input.points.windows(2) {
            let (a, b) = (w[0], w[1]);
            if b.ts - a.ts > input.gap_s {
                continue;
            }
            let is_over = a.speed_kmh > a.limit_kmh && b.speed_kmh > b.limit_kmh;
            if is_over != over {
                continue;
            }
            let (pa, pb) = ((s.x(a.ts), s.y(a.speed_kmh)), (s.x(b.ts), s.y(b.speed_kmh)));
            if over {
                line(area, vec![pa, pb], OVER_LINE, 3)?;
            } else {
                line(area, vec![pa, pb], SPEED_LINE, 2)?;
            }
        }
    }
    Ok(())
}

fn draw_ignition(area: &Area, input: &ChartInput, s: &Scale) -> Result<()> {
    let l = &s.l;
    rect(
        area,
        (l.left, l.strip_top),
        (l.right, l.strip_bottom),
        RGBColor(248, 248, 248),
    )?;
    for w in input.points.windows(2) {
        let (a, b) = (w[0], w[1]);
        if b.ts - a.ts > input.gap_s {
            continue;
        }
        let colour = match a.ignition {
            Some(true) => IGNITION_COLOURS[0],
            Some(false) => IGNITION_COLOURS[1],
            None => IGNITION_COLOURS[2],
        };
        let (x0, x1) = (s.x(a.ts), s.x(b.ts).max(s.x(a.ts) + 1));
        rect(area, (x0, l.strip_top), (x1, l.strip_bottom), colour)?;
    }
    area.draw(&Text::new(
        "ignition",
        (l.left - 6, (l.strip_top + l.strip_bottom) / 2),
        font(10.0, &AXIS_TEXT).pos(Pos::new(HPos::Right, VPos::Center)),
    ))
    .map_err(render_err)?;
    Ok(())
}

/// Labels: the limit, the stops' minutes, the signal losses' minutes and the top
/// speed of each speeding episode, each where it fits without covering another.
fn draw_labels(area: &Area, input: &ChartInput, s: &Scale) -> Result<()> {
    let l = &s.l;
    // The title and the axes are not for labels.
    let mut labels = Labels {
        taken: vec![(0, 0, s.l.right + 30, l.top - 2)],
    };
    let limit_text = format!("{} {} km/h", input.limit_label, number(input.limit_kmh));
    let style = bold(11.0, &LIMIT_LINE);
    let (tw, th) = area
        .estimate_text_size(&limit_text, &style)
        .map_err(render_err)?;
    let y = s.y(input.limit_kmh);
    label(
        area,
        &mut labels,
        &limit_text,
        l.right - tw as i32 - 4,
        y - th as i32 - 3,
        &style,
    )?;
    for (name, limit) in &input.zone_limits {
        let Some(first) = input
            .points
            .iter()
            .find(|p| (p.limit_kmh - limit).abs() < 1e-9)
        else {
            continue;
        };
        let text = format!("{name} {} km/h", number(*limit));
        let style = bold(10.0, &ZONE_LIMIT_LINE);
        label(
            area,
            &mut labels,
            &text,
            s.x(first.ts),
            s.y(*limit) + 3,
            &style,
        )?;
    }
    // Speeding: the top speed above its peak.
    let red = bold(11.0, &OVER_LINE);
    for e in &input.speeding {
        let peak = input
            .points
            .iter()
            .filter(|p| (e.start_ts..=e.end_ts).contains(&p.ts))
            .max_by(|a, b| a.speed_kmh.total_cmp(&b.speed_kmh));
        let (x, kmh) = peak.map_or((s.x((e.start_ts + e.end_ts) / 2), e.max_speed_kmh), |p| {
            (s.x(p.ts), p.speed_kmh)
        });
        let text = format!("{} km/h", number(e.max_speed_kmh.round()));
        let (tw, th) = area.estimate_text_size(&text, &red).map_err(render_err)?;
        let (tw, th) = (tw as i32, th as i32);
        let y = s.y(kmh);
        for (lx, ly) in [
            (x - tw / 2, y - th - 6),
            (x + 6, y - th - 6),
            (x - tw - 6, y - th - 6),
        ] {
            if label(area, &mut labels, &text, lx, ly.max(l.top), &red)? {
                break;
            }
        }
    }
    // Signal losses and stops: their minutes at the top of their band, in up to
    // three rows; a label that finds no room is left out.
    let grey = bold(10.0, &RGBColor(90, 90, 90));
    let purple = bold(10.0, &STOP);
    let mut wanted: Vec<(String, i32, &TextStyle)> = input
        .signal_losses
        .iter()
        .map(|g| {
            (
                format!("no signal {} min", number(g.minutes_lost.round())),
                (s.x(g.start_ts) + s.x(g.end_ts)) / 2,
                &grey,
            )
        })
        .collect();
    let mut stops: Vec<_> = input.stops.iter().collect();
    // Longest first: they win the room.
    stops.sort_by(|a, b| b.duration_min.total_cmp(&a.duration_min));
    wanted.extend(stops.iter().map(|stop| {
        (
            format!("{} min", number(stop.duration_min.round())),
            (s.x(stop.start_ts) + s.x(stop.end_ts)) / 2,
            &purple,
        )
    }));
    for (text, mid, style) in wanted {
        let (tw, th) = area.estimate_text_size(&text, style).map_err(render_err)?;
        let (tw, th) = (tw as i32, th as i32);
        let x = (mid - tw / 2).clamp(l.left + 2, l.right - tw - 2);
        for row in 0..3 {
            if label(
                area,
                &mut labels,
                &text,
                x,
                l.top + 3 + row * (th + 3),
                style,
            )? {
                break;
            }
        }
    }
    Ok(())
}

/// Draws `text` with its top-left at (x, y) on a white box, if the box fits in the
/// picture and covers no label drawn before.
fn label(
    area: &Area,
    labels: &mut Labels,
    text: &str,
    x: i32,
    y: i32,
    style: &TextStyle,
) -> Result<bool> {
    let (w, h) = area.estimate_text_size(text, style).map_err(render_err)?;
    // The estimate is the ink's height; a line of text needs a little more.
    let (w, h) = (w as i32, h as i32 + 4);
    let (width, height) = area.dim_in_pixel();
    if x < 2
        || y < 2
        || x + w + 2 > width as i32
        || y + h > height as i32
        || !labels.try_take(x, y, w, h)
    {
        return Ok(false);
    }
    area.draw(&Rectangle::new(
        [(x - 2, y - 1), (x + w + 2, y + h)],
        WHITE.mix(0.85).filled(),
    ))
    .map_err(render_err)?;
    area.draw(&Text::new(
        text.to_string(),
        (x, y),
        style.pos(Pos::new(HPos::Left, VPos::Top)),
    ))
    .map_err(render_err)?;
    Ok(true)
}

/// A number without a trailing `.0`.
fn number(v: f64) -> String {
    format!("{}", (v * 10.0).round() / 10.0)
}

fn draw_axes(area: &Area, input: &ChartInput, s: &Scale) -> Result<()> {
    let l = &s.l;
    area.draw(&Rectangle::new(
        [(l.left, l.top), (l.right, l.bottom)],
        ShapeStyle::from(&RGBColor(160, 160, 160)).stroke_width(1),
    ))
    .map_err(render_err)?;
    let text = font(11.0, &AXIS_TEXT);
    let step = if s.max_kmh > 160.0 { 40.0 } else { 20.0 };
    let mut v = 0.0;
    while v <= s.max_kmh {
        area.draw(&Text::new(
            number(v),
            (l.left - 6, s.y(v)),
            text.pos(Pos::new(HPos::Right, VPos::Center)),
        ))
        .map_err(render_err)?;
        v += step;
    }
    area.draw(&Text::new(
        "km/h",
        (l.left - 6, l.top - 6),
        bold(11.0, &AXIS_TEXT).pos(Pos::new(HPos::Right, VPos::Bottom)),
    ))
    .map_err(render_err)?;
    let hours = hour_step(input.to_ts - input.from_ts, l.right - l.left);
    let mut t = input.from_ts;
    while t <= input.to_ts {
        area.draw(&Text::new(
            input.zone.hhmm(t),
            (s.x(t), l.ticks_y),
            text.pos(Pos::new(HPos::Center, VPos::Top)),
        ))
        .map_err(render_err)?;
        t += hours * 3600;
    }
    // Title: on a narrow chart, the lines lose their last parts rather than run off.
    let room = s.l.right + 16;
    let title = bold(18.0, &INK);
    let sub = font(13.0, &INK);
    let title_text = fitted(area, &input.title, &title, room)?;
    let sub_text = fitted(area, &input.subtitle, &sub, room)?;
    area.draw(&Text::new(title_text, (16, 12), title))
        .map_err(render_err)?;
    area.draw(&Text::new(sub_text, (16, 40), sub))
        .map_err(render_err)?;
    Ok(())
}

/// `text` without as many of its last ` · ` parts as it takes to fit in `room`
/// pixels (the first part is always kept).
fn fitted(area: &Area, text: &str, style: &TextStyle, room: i32) -> Result<String> {
    let parts: Vec<&str> = text.split(" · ").collect();
    for n in (1..=parts.len()).rev() {
        let candidate = parts[..n].join(" · ");
        let (w, _) = area
            .estimate_text_size(&candidate, style)
            .map_err(render_err)?;
        if 16 + w as i32 <= room || n == 1 {
            return Ok(candidate);
        }
    }
    Ok(text.to_string())
}

/// The legend along the bottom: as many entries as the width holds.
fn draw_legend(area: &Area, s: &Scale, width: u32) -> Result<()> {
    let y = s.l.legend_y;
    let small = font(11.0, &INK);
    let mut x = s.l.left;
    type Swatch = fn(&Area, i32, i32) -> Result<()>;
    let entries: [(Swatch, &str); 8] = [
        (
            |a, x, y| line(a, vec![(x, y + 6), (x + 18, y + 6)], SPEED_LINE, 2),
            "speed",
        ),
        (
            |a, x, y| line(a, vec![(x, y + 6), (x + 18, y + 6)], OVER_LINE, 3),
            "over the limit",
        ),
        (|a, x, y| dashed(a, x, x + 21, y + 6, LIMIT_LINE), "limit"),
        (
            |a, x, y| rect(a, (x, y), (x + 18, y + 12), SPEEDING_SHADE),
            "speeding",
        ),
        (
            |a, x, y| rect(a, (x, y), (x + 18, y + 12), STOP_SHADE),
            "stop (minutes)",
        ),
        (
            |a, x, y| rect(a, (x, y), (x + 18, y + 12), LOSS_SHADE),
            "no signal",
        ),
        (
            |a, x, y| rect(a, (x, y + 2), (x + 18, y + 10), IGNITION_COLOURS[0]),
            "ignition on",
        ),
        (
            |a, x, y| {
                rect(a, (x, y + 2), (x + 8, y + 10), IGNITION_COLOURS[1])?;
                rect(a, (x + 10, y + 2), (x + 18, y + 10), IGNITION_COLOURS[2])
            },
            "off / not reported",
        ),
    ];
    for (swatch, name) in entries {
        let (nw, _) = area.estimate_text_size(name, &small).map_err(render_err)?;
        if x + 22 + nw as i32 > width as i32 - 8 {
            break;
        }
        swatch(area, x, y)?;
        area.draw(&Text::new(name, (x + 22, y), small.clone()))
            .map_err(render_err)?;
        x += 22 + nw as i32 + 14;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_speed_axis_clears_the_fastest_fix_and_the_limit() {
        assert_eq!(axis_top_kmh(0.0, 80.0), 100.0);
        assert_eq!(axis_top_kmh(97.0, 80.0), 120.0);
        assert_eq!(axis_top_kmh(10.0, 30.0), 40.0);
    }

    #[test]
    fn time_labels_thin_out_on_narrow_charts() {
        assert_eq!(hour_step(10 * 3600, 1120), 1);
        assert_eq!(hour_step(10 * 3600, 400), 2);
        assert_eq!(hour_step(24 * 3600, 260), 6);
    }
}
