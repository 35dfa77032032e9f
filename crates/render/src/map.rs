//! Route maps: one vehicle's day (or part of it) drawn to a PNG with no network at
//! all — an offline basemap from our own routes and gazetteer (or local raster tiles
//! when given), the track coloured by speed, stops sized by duration, speeding and
//! signal losses marked, geofences named, with title, legend, scale bar and north
//! arrow. Presentation only: the caller gathers the data.

use crate::error::{Context, Error, ErrorCode, Result};
use crate::geo::{self, LatLon, Shape, atlas};
use crate::report::route_map::MapInput;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::sync::Once;

/// Speed classes of the track: upper bound (km/h, exclusive) and colour. The fourth
/// class ends at the speed limit that applied (80 by default) and the last is above
/// it, as detection counts speeding (`speed > limit`).
pub const SPEED_COLOURS: [(f64, RGBColor); 5] = [
    (20.0, RGBColor(49, 104, 187)),
    (40.0, RGBColor(26, 150, 65)),
    (60.0, RGBColor(214, 182, 14)),
    (80.0, RGBColor(241, 126, 24)),
    (f64::INFINITY, RGBColor(215, 25, 28)),
];
pub(crate) const BACKGROUND: RGBColor = RGBColor(244, 241, 234);
pub(crate) const GRID: RGBColor = RGBColor(232, 227, 216);
pub(crate) const STREET_EDGE: RGBColor = RGBColor(214, 207, 193);
const STREET: RGBColor = RGBColor(255, 255, 255);
pub(crate) const LABEL: RGBColor = RGBColor(125, 117, 104);
pub(crate) const INK: RGBColor = RGBColor(40, 40, 40);
pub(crate) const STOP: RGBColor = RGBColor(106, 61, 154);
pub(crate) const GAP: RGBColor = RGBColor(90, 90, 90);
pub(crate) const START: RGBColor = RGBColor(26, 150, 65);
pub(crate) const FONT: &str = "sans-serif";

/// The classes under a limit: lower and upper bound (km/h) and colour, the fourth
/// class ending at the limit, empty classes left out (a limit of 50 has no 60–80).
fn speed_classes(limit_kmh: f64) -> Vec<(f64, f64, RGBColor)> {
    let mut classes = Vec::new();
    let mut lower = 0.0;
    for (upper, colour) in &SPEED_COLOURS[..4] {
        let upper = if *upper >= 80.0 {
            limit_kmh
        } else {
            upper.min(limit_kmh)
        };
        if upper > lower {
            classes.push((lower, upper, *colour));
        }
        lower = upper;
    }
    classes
}

/// The colour the track uses for a speed under a limit: red above the limit (as
/// detection counts speeding), else the class the speed falls in.
pub fn speed_colour(speed_kmh: f64, limit_kmh: f64) -> RGBColor {
    if speed_kmh > limit_kmh {
        return SPEED_COLOURS[4].1;
    }
    let classes = speed_classes(limit_kmh);
    classes
        .iter()
        .find(|(_, upper, _)| speed_kmh < *upper)
        .or(classes.last())
        .map_or(SPEED_COLOURS[4].1, |c| c.2)
}

/// The legend's classes under a limit: colour and label.
fn speed_legend(limit_kmh: f64) -> Vec<(RGBColor, String)> {
    let number = |v: f64| format!("{}", (v * 10.0).round() / 10.0);
    let mut legend: Vec<(RGBColor, String)> = speed_classes(limit_kmh)
        .into_iter()
        .map(|(lower, upper, colour)| {
            let label = if lower == 0.0 {
                format!("<{}", number(upper))
            } else {
                format!("{}–{}", number(lower), number(upper))
            };
            (colour, label)
        })
        .collect();
    legend.push((SPEED_COLOURS[4].1, format!(">{} km/h", number(limit_kmh))));
    legend
}

/// The radius a stop (or stops at one spot) is drawn with, pixels, for `minutes`.
pub fn stop_radius_px(minutes: f64) -> i32 {
    (5.0 + 2.2 * minutes.sqrt()).min(26.0) as i32
}

/// Where raster tiles come from: `(z, x, y)` → encoded image bytes, `None` for a
/// tile the source does not have, or an error that names the tile and why.
pub type TileFetch<'a> = &'a dyn Fn(u32, u32, u32) -> Result<Option<Vec<u8>>>;

/// The largest tile decoded, in pixels a side (raster tiles are 256 or 512).
pub const MAX_TILE_SIDE: u32 = 1024;

/// Raster tiles to draw underneath, with the line that credits them.
pub struct Tiles<'a> {
    /// Fetches one tile (XYZ numbering, y down).
    pub fetch: TileFetch<'a>,
    /// The attribution line.
    pub attribution: String,
}

/// How the map is framed: the zoom and the world-pixel position of its top-left
/// corner. Reproducible from the bounds a map reports.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Frame {
    /// Web Mercator zoom (fractional).
    pub zoom: f64,
    /// World pixel x of the image's left edge.
    pub left: f64,
    /// World pixel y of the image's top edge.
    pub top: f64,
    /// Image width.
    pub width: u32,
    /// Image height.
    pub height: u32,
}

impl Frame {
    /// The image pixel of a point.
    pub fn project(&self, p: LatLon) -> (f64, f64) {
        let (x, y) = geo::web_mercator_px(p, self.zoom);
        (x - self.left, y - self.top)
    }

    pub(crate) fn px(&self, p: LatLon) -> (i32, i32) {
        let (x, y) = self.project(p);
        (x.round() as i32, y.round() as i32)
    }

    /// The corners: (north-west, south-east).
    pub fn bounds(&self) -> (LatLon, LatLon) {
        let nw = geo::web_mercator_latlon(self.left, self.top, self.zoom);
        let se = geo::web_mercator_latlon(
            self.left + f64::from(self.width),
            self.top + f64::from(self.height),
            self.zoom,
        );
        (nw, se)
    }

    /// Fits points into an image, keeping room for the title above and the legend
    /// and scale below, and the aspect of the ground.
    pub fn fit(points: &[LatLon], width: u32, height: u32) -> Frame {
        let (top_pad, bottom_pad, side_pad) = (86.0, 70.0, 40.0);
        let at0: Vec<(f64, f64)> = points
            .iter()
            .map(|p| geo::web_mercator_px(*p, 0.0))
            .collect();
        let (min_x, max_x) = at0
            .iter()
            .fold((f64::MAX, f64::MIN), |(a, b), p| (a.min(p.0), b.max(p.0)));
        let (min_y, max_y) = at0
            .iter()
            .fold((f64::MAX, f64::MIN), |(a, b), p| (a.min(p.1), b.max(p.1)));
        let avail_w = (f64::from(width) - 2.0 * side_pad).max(50.0);
        let avail_h = (f64::from(height) - top_pad - bottom_pad).max(50.0);
        let span_x = (max_x - min_x).max(1e-9);
        let span_y = (max_y - min_y).max(1e-9);
        let zoom = (avail_w / span_x)
            .log2()
            .min((avail_h / span_y).log2())
            .clamp(3.0, 17.0);
        let scale = zoom.exp2();
        let center_x = (min_x + max_x) / 2.0 * scale;
        let center_y = (min_y + max_y) / 2.0 * scale;
        let left = center_x - f64::from(width) / 2.0;
        let top = center_y - (top_pad + avail_h / 2.0);
        Frame {
            zoom,
            left,
            top,
            width,
            height,
        }
    }
}

pub(crate) fn render_err<E: std::fmt::Debug>(e: E) -> Error {
    Error::new(ErrorCode::Render, format!("drawing the map failed: {e:?}"))
}

pub(crate) fn register_fonts() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let regular: &'static [u8] = include_bytes!("fonts/DejaVuSans.ttf");
        let bold: &'static [u8] = include_bytes!("fonts/DejaVuSans-Bold.ttf");
        // The fonts are embedded and known good; a failure would leave text out, not crash.
        let _ = plotters::style::register_font(FONT, FontStyle::Normal, regular);
        let _ = plotters::style::register_font(FONT, FontStyle::Bold, bold);
    });
}

pub(crate) fn font(size: f64, colour: &RGBColor) -> TextStyle<'static> {
    (FONT, size).into_font().color(colour)
}

pub(crate) fn bold(size: f64, colour: &RGBColor) -> TextStyle<'static> {
    (FONT, size)
        .into_font()
        .style(FontStyle::Bold)
        .color(colour)
}

pub(crate) type Area<'b> = DrawingArea<BitMapBackend<'b>, plotters::coord::Shift>;

/// Places labels without overlaps: a label whose box touches a taken one is skipped.
pub(crate) struct Labels {
    /// The boxes taken so far: (left, top, right, bottom).
    pub(crate) taken: Vec<(i32, i32, i32, i32)>,
}

impl Labels {
    /// Takes the box at (x, y) of w × h (with a 2 px margin) if it touches no taken one.
    pub(crate) fn try_take(&mut self, x: i32, y: i32, w: i32, h: i32) -> bool {
        let rect = (x - 2, y - 2, x + w + 2, y + h + 2);
        if self
            .taken
            .iter()
            .any(|r| rect.0 < r.2 && r.0 < rect.2 && rect.1 < r.3 && r.1 < rect.3)
        {
            return false;
        }
        self.taken.push(rect);
        true
    }

    /// Draws `text` with its top-left at (x, y) if there is room.
    pub(crate) fn draw(
        &mut self,
        area: &Area,
        text: &str,
        x: i32,
        y: i32,
        style: &TextStyle,
    ) -> Result<bool> {
        let (w, h) = area.estimate_text_size(text, style).map_err(render_err)?;
        let (w, h) = (w as i32, h as i32);
        let (width, height) = area.dim_in_pixel();
        if x < 0
            || y < 0
            || x + w > width as i32
            || y + h > height as i32
            || !self.try_take(x, y, w, h)
        {
            return Ok(false);
        }
        area.draw(&Text::new(
            text.to_string(),
            (x, y),
            style.pos(Pos::new(HPos::Left, VPos::Top)),
        ))
        .map_err(render_err)?;
        Ok(true)
    }
}

/// A nice scale-bar length (m) that spans 70–180 pixels.
pub(crate) fn scale_bar_m(m_per_px: f64) -> f64 {
    let nice = [
        50.0, 100.0, 200.0, 500.0, 1000.0, 2000.0, 5000.0, 10_000.0, 20_000.0, 50_000.0,
    ];
    nice.into_iter()
        .find(|m| m / m_per_px >= 70.0)
        .unwrap_or(50_000.0)
}

thread_local! {
    /// Each thread's canvas, reused by every picture it draws (map, chart, fleet map):
    /// server workers draw at once, each in its own, with no lock between them. A
    /// 2048² canvas is 12 MB; it is allocated once per drawing thread, not per picture.
    pub(crate) static CANVAS: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Draws the map and encodes it as PNG. Returns the bytes and the frame used.
pub fn render(input: &MapInput, tiles: Option<&Tiles>) -> Result<(Vec<u8>, Frame)> {
    CANVAS.with_borrow_mut(|canvas| render_on(canvas, input, tiles))
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

/// The offline basemap: background, a light grid, and the demo's streets.
/// Sizes `buf` to the frame and draws what lies under a map's own marks: the offline
/// basemap, then the tiles when there are some.
pub(crate) fn draw_ground(
    buf: &mut Vec<u8>,
    frame: &Frame,
    streets: bool,
    tiles: Option<&Tiles>,
) -> Result<()> {
    let (width, height) = (frame.width, frame.height);
    buf.clear();
    buf.resize(width as usize * height as usize * 3, 0);
    {
        let area = BitMapBackend::with_buffer(buf, (width, height)).into_drawing_area();
        draw_basemap(&area, frame, streets)?;
        area.present().map_err(render_err)?;
    }
    match tiles {
        Some(tiles) => draw_tiles(buf, frame, tiles),
        None => Ok(()),
    }
}

pub(crate) fn draw_basemap(area: &Area, frame: &Frame, streets: bool) -> Result<()> {
    area.fill(&BACKGROUND).map_err(render_err)?;
    // A light grid every nice distance.
    let center = geo::web_mercator_latlon(
        frame.left + f64::from(frame.width) / 2.0,
        frame.top + f64::from(frame.height) / 2.0,
        frame.zoom,
    );
    let m_per_px = geo::web_mercator_m_per_px(center.lat, frame.zoom);
    let step_px = scale_bar_m(m_per_px) / m_per_px;
    let style = ShapeStyle::from(&GRID).stroke_width(1);
    let mut x = (-frame.left).rem_euclid(step_px);
    while x < f64::from(frame.width) {
        area.draw(&PathElement::new(
            vec![(x as i32, 0), (x as i32, frame.height as i32)],
            style,
        ))
        .map_err(render_err)?;
        x += step_px;
    }
    let mut y = (-frame.top).rem_euclid(step_px);
    while y < f64::from(frame.height) {
        area.draw(&PathElement::new(
            vec![(0, y as i32), (frame.width as i32, y as i32)],
            style,
        ))
        .map_err(render_err)?;
        y += step_px;
    }
    // The demo's streets (the routes its generator drives), drawn like a street map:
    // a pale edge, a white core; never under a fleet's own data. The routes are
    // compiled in (and checked by atlas's tests): one that does not decode is a bug.
    if !streets {
        return Ok(());
    }
    let routes: Vec<Vec<(i32, i32)>> = atlas::routes()
        .iter()
        .map(|r| {
            geo::decode_polyline(&r.polyline)
                .map(|pts| pts.into_iter().map(|p| frame.px(p)).collect())
                .map_err(|e| Error::internal(format!("route {}: {}", r.slug, e.message)))
        })
        .collect::<Result<_>>()?;
    let street_w = if frame.zoom >= 14.0 { 7 } else { 5 };
    for (colour, w) in [(STREET_EDGE, street_w + 2), (STREET, street_w)] {
        for path in &routes {
            area.draw(&PathElement::new(
                path.clone(),
                ShapeStyle::from(&colour).stroke_width(w),
            ))
            .map_err(render_err)?;
        }
    }
    Ok(())
}

/// Decodes one tile (PNG, JPEG or WebP), refusing one larger than `MAX_TILE_SIDE`
/// before any pixel memory is taken. Public for the `tile` fuzz target (fuzz/).
pub fn decode_tile(bytes: &[u8]) -> std::result::Result<image::RgbImage, String> {
    use image::ImageFormat;
    let mut reader = image::ImageReader::new(std::io::Cursor::new(bytes))
        .with_guessed_format()
        .map_err(|e| e.to_string())?;
    match reader.format() {
        Some(ImageFormat::Png | ImageFormat::Jpeg | ImageFormat::WebP) => {}
        Some(other) => {
            return Err(format!(
                "{other:?} tiles are not supported (PNG, JPEG or WebP are)"
            ));
        }
        None => return Err("not a PNG, JPEG or WebP image".into()),
    }
    let mut limits = image::Limits::default();
    limits.max_image_width = Some(MAX_TILE_SIDE);
    limits.max_image_height = Some(MAX_TILE_SIDE);
    limits.max_alloc = Some(64 * 1024 * 1024);
    reader.limits(limits);
    // The decoders are not ours: a panic inside one (found by fuzzing: a PNG palette
    // whose length is not a multiple of 3) is a tile that cannot be decoded.
    let decoded = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| reader.decode()))
        .map_err(|_| "the image decoder failed on it (a malformed image)".to_string())?;
    Ok(decoded.map_err(|e| e.to_string())?.to_rgb8())
}

/// Raster tiles into the RGB buffer, under everything drawn after.
pub(crate) fn draw_tiles(buf: &mut [u8], frame: &Frame, tiles: &Tiles) -> Result<()> {
    let z = frame.zoom.ceil().clamp(0.0, 22.0) as u32;
    let scale = (frame.zoom - f64::from(z)).exp2(); // ≤ 1: tiles are shrunk to the frame's zoom
    let tile_px = 256.0 * scale;
    let (left, top) = (frame.left / tile_px, frame.top / tile_px);
    let n = 1u32 << z;
    let x0 = left.floor().max(0.0) as u32;
    let y0 = top.floor().max(0.0) as u32;
    let x1 = ((frame.left + f64::from(frame.width)) / tile_px)
        .ceil()
        .min(f64::from(n)) as u32;
    let y1 = ((frame.top + f64::from(frame.height)) / tile_px)
        .ceil()
        .min(f64::from(n)) as u32;
    let size = tile_px.ceil() as u32;
    for ty in y0..y1 {
        for tx in x0..x1 {
            let Some(bytes) = (tiles.fetch)(z, tx, ty)? else {
                continue;
            };
            let img = decode_tile(&bytes).map_err(|why| {
                Error::new(ErrorCode::Render, format!("tile {z}/{tx}/{ty}: {why}"))
                    .with_hint("fix or remove that tile, or draw without --tiles")
            })?;
            let img =
                image::imageops::resize(&img, size, size, image::imageops::FilterType::Triangle);
            let ox = (f64::from(tx) * tile_px - frame.left).round() as i64;
            let oy = (f64::from(ty) * tile_px - frame.top).round() as i64;
            for (px, py, pixel) in img.enumerate_pixels() {
                let (x, y) = (ox + i64::from(px), oy + i64::from(py));
                if x < 0 || y < 0 || x >= i64::from(frame.width) || y >= i64::from(frame.height) {
                    continue;
                }
                let i = (y as usize * frame.width as usize + x as usize) * 3;
                buf[i..i + 3].copy_from_slice(&pixel.0);
            }
        }
    }
    Ok(())
}

fn geofence_colour(kind: &str) -> RGBColor {
    match kind {
        "depot" | "distribution_center" => RGBColor(118, 42, 131),
        "zone" => RGBColor(166, 97, 26),
        _ => RGBColor(0, 109, 44),
    }
}

/// The geofences, outlined and named.
pub(crate) fn draw_geofences(
    area: &Area,
    frame: &Frame,
    geofences: &[geo::Geofence],
    labels: &mut Labels,
) -> Result<()> {
    for geo::Geofence {
        name, kind, shape, ..
    } in geofences
    {
        let colour = geofence_colour(kind);
        let ring: Vec<(i32, i32)> = match shape {
            Shape::Polygon(poly) => poly
                .exterior()
                .0
                .iter()
                .map(|c| frame.px(LatLon::new(c.y, c.x)))
                .collect(),
            Shape::Circle { center, radius_m } => (0..48)
                .map(|i| {
                    let a = f64::from(i) / 48.0 * std::f64::consts::TAU;
                    frame.px(geo::offset_m(
                        *center,
                        radius_m * a.cos(),
                        radius_m * a.sin(),
                    ))
                })
                .collect(),
        };
        let (w, h) = (frame.width as i32, frame.height as i32);
        if ring
            .iter()
            .all(|(x, y)| *x < -50 || *y < -50 || *x > w + 50 || *y > h + 50)
        {
            continue;
        }
        area.draw(&Polygon::new(ring.clone(), colour.mix(0.12).filled()))
            .map_err(render_err)?;
        let mut closed = ring.clone();
        closed.push(ring[0]);
        area.draw(&PathElement::new(
            closed,
            ShapeStyle::from(&colour.mix(0.8)).stroke_width(2),
        ))
        .map_err(render_err)?;
        let (cx, cy) = frame.px(shape.center());
        let top = ring.iter().map(|p| p.1).min().unwrap_or(cy);
        let style = bold(12.0, &colour);
        let (tw, _) = area.estimate_text_size(name, &style).map_err(render_err)?;
        labels.draw(area, name, cx - tw as i32 / 2, top - 17, &style)?;
    }
    Ok(())
}

/// The gazetteer's places, where their labels fit.
pub(crate) fn draw_place_labels(
    area: &Area,
    frame: &Frame,
    places: &[geo::Place],
    labels: &mut Labels,
) -> Result<()> {
    let style = font(11.0, &LABEL);
    for place in places.iter().filter(|p| p.kind != "depot") {
        let (x, y) = frame.px(LatLon::new(place.lat, place.lon));
        if labels.draw(area, &place.name, x + 4, y - 6, &style)? {
            area.draw(&Circle::new((x, y), 2, LABEL.filled()))
                .map_err(render_err)?;
        }
    }
    Ok(())
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

/// The title box at the top left: a bold first line and a smaller second one.
pub(crate) fn draw_title(area: &Area, title_text: &str, subtitle: &str) -> Result<()> {
    let title = bold(18.0, &INK);
    let sub = font(13.0, &INK);
    let (tw, _) = area
        .estimate_text_size(title_text, &title)
        .map_err(render_err)?;
    let (sw, _) = area
        .estimate_text_size(subtitle, &sub)
        .map_err(render_err)?;
    let box_w = tw.max(sw) as i32 + 24;
    area.draw(&Rectangle::new(
        [(8, 8), (8 + box_w, 66)],
        WHITE.mix(0.9).filled(),
    ))
    .map_err(render_err)?;
    area.draw(&Rectangle::new(
        [(8, 8), (8 + box_w, 66)],
        ShapeStyle::from(&STREET_EDGE).stroke_width(1),
    ))
    .map_err(render_err)?;
    area.draw(&Text::new(title_text.to_string(), (20, 16), title))
        .map_err(render_err)?;
    area.draw(&Text::new(subtitle.to_string(), (20, 43), sub))
        .map_err(render_err)?;
    Ok(())
}

/// The scale bar (bottom right) and the north arrow (top right).
pub(crate) fn draw_scale_and_north(area: &Area, frame: &Frame) -> Result<()> {
    let (w, h) = (frame.width as i32, frame.height as i32);
    let small = font(11.0, &INK);
    // Scale bar.
    let center = geo::web_mercator_latlon(
        frame.left + f64::from(frame.width) / 2.0,
        frame.top + f64::from(frame.height) / 2.0,
        frame.zoom,
    );
    let m_per_px = geo::web_mercator_m_per_px(center.lat, frame.zoom);
    let bar_m = scale_bar_m(m_per_px);
    let bar_px = (bar_m / m_per_px).round() as i32;
    let label = if bar_m >= 1000.0 {
        format!("{} km", bar_m / 1000.0)
    } else {
        format!("{bar_m} m")
    };
    let (x1, y1) = (w - 20, h - 22);
    area.draw(&Rectangle::new(
        [(x1 - bar_px - 10, y1 - 22), (x1 + 8, y1 + 12)],
        WHITE.mix(0.85).filled(),
    ))
    .map_err(render_err)?;
    area.draw(&PathElement::new(
        vec![
            (x1 - bar_px, y1 - 5),
            (x1 - bar_px, y1),
            (x1, y1),
            (x1, y1 - 5),
        ],
        ShapeStyle::from(&INK).stroke_width(2),
    ))
    .map_err(render_err)?;
    area.draw(&Text::new(
        label,
        (x1 - bar_px / 2, y1 - 8),
        small.pos(Pos::new(HPos::Center, VPos::Bottom)),
    ))
    .map_err(render_err)?;
    // North arrow.
    let (nx, ny) = (w - 30, 26);
    area.draw(&Circle::new((nx, ny + 6), 19, WHITE.mix(0.85).filled()))
        .map_err(render_err)?;
    area.draw(&Polygon::new(
        vec![
            (nx, ny - 8),
            (nx - 7, ny + 12),
            (nx, ny + 7),
            (nx + 7, ny + 12),
        ],
        INK.filled(),
    ))
    .map_err(render_err)?;
    area.draw(&Text::new(
        "N",
        (nx, ny + 14),
        bold(11.0, &INK).pos(Pos::new(HPos::Center, VPos::Top)),
    ))
    .map_err(render_err)?;
    Ok(())
}

/// The line that credits raster tiles, above the scale bar.
pub(crate) fn draw_attribution(area: &Area, frame: &Frame, text: &str) -> Result<()> {
    let (w, h) = (frame.width as i32, frame.height as i32);
    let style = font(10.0, &INK);
    area.draw(&Text::new(
        text.to_string(),
        (w - 8, h - 40),
        style.pos(Pos::new(HPos::Right, VPos::Bottom)),
    ))
    .map_err(render_err)?;
    Ok(())
}

/// An RGB buffer as PNG.
pub(crate) fn encode_png(rgb: &[u8], width: u32, height: u32) -> Result<Vec<u8>> {
    use image::ImageEncoder;
    use image::codecs::png::{CompressionType, FilterType, PngEncoder};
    let mut out = Vec::new();
    PngEncoder::new_with_quality(&mut out, CompressionType::Fast, FilterType::Adaptive)
        .write_image(rgb, width, height, image::ExtendedColorType::Rgb8)
        .context(ErrorCode::Render, || "PNG encoding failed".into())?;
    Ok(out)
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
