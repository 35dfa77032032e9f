//! What lies under a map's own marks: the offline basemap (background, grid, the
//! demo's streets), raster tiles when given (decoded with limits), geofences and
//! place labels.

use crate::error::{Error, ErrorCode, Result};
use crate::geo::{self, LatLon, Shape, atlas};
use crate::map::*;
use plotters::prelude::*;

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

pub(crate) fn geofence_colour(kind: &str) -> RGBColor {
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
