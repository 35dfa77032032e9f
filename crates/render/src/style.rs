//! The look every picture shares: colours, fonts, the speed classes, label
//! placement that keeps labels apart, and PNG encoding.

use crate::error::{Context, Error, ErrorCode, Result};
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

pub(crate) const STREET: RGBColor = RGBColor(255, 255, 255);

pub(crate) const LABEL: RGBColor = RGBColor(125, 117, 104);

pub(crate) const INK: RGBColor = RGBColor(40, 40, 40);

pub(crate) const STOP: RGBColor = RGBColor(106, 61, 154);

pub(crate) const GAP: RGBColor = RGBColor(90, 90, 90);

pub(crate) const START: RGBColor = RGBColor(26, 150, 65);

pub(crate) const FONT: &str = "sans-serif";

/// The classes under a limit: lower and upper bound (km/h) and colour, the fourth
/// class ending at the limit, empty classes left out (a limit of 50 has no 60–80).
pub(crate) fn speed_classes(limit_kmh: f64) -> Vec<(f64, f64, RGBColor)> {
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
pub(crate) fn speed_legend(limit_kmh: f64) -> Vec<(RGBColor, String)> {
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
