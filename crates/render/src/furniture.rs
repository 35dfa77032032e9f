//! Map furniture every map has: the title, the scale bar with a north arrow, and
//! the tiles' attribution.

use crate::error::Result;
use crate::geo;
use crate::map::*;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

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
