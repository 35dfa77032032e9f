//! How a map is framed: the Web Mercator zoom and window that fit what it shows,
//! and the scale bar's length.

use crate::geo::{self, LatLon};

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

/// A nice scale-bar length (m) that spans 70–180 pixels.
pub(crate) fn scale_bar_m(m_per_px: f64) -> f64 {
    let nice = [
        50.0, 100.0, 200.0, 500.0, 1000.0, 2000.0, 5000.0, 10_000.0, 20_000.0, 50_000.0,
    ];
    nice.into_iter()
        .find(|m| m / m_per_px >= 70.0)
        .unwrap_or(50_000.0)
}
