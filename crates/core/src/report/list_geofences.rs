//! `list_geofences` (`fleetctl query geofences`): the named places the fleet is
//! measured against, for discovery.

use super::{Db, List, ReportSpec};
use crate::error::Result;
use crate::geo::Shape;
use serde::{Deserialize, Serialize};

/// No arguments.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListGeofencesRequest {}

/// A geofence's shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum GeofenceShape {
    /// A polygon.
    Polygon,
    /// A circle (with `radius_m`).
    Circle,
}

/// One geofence.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct GeofenceRow {
    /// Name.
    pub name: String,
    /// `depot`, `distribution_center`, `zone` or `customer_zone`.
    pub kind: String,
    /// `polygon` or `circle`.
    pub shape: GeofenceShape,
    /// Centre latitude.
    pub lat: f64,
    /// Centre longitude.
    pub lon: f64,
    /// Radius in metres, for a circle.
    pub radius_m: Option<f64>,
    /// Where, for people (outside the geofence itself).
    pub near: String,
}

/// The geofences.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct ListGeofencesReport {
    /// Geofences, by name.
    pub geofences: List<GeofenceRow>,
}

/// Runs the report.
pub fn run(db: &Db, _req: &ListGeofencesRequest) -> Result<ListGeofencesReport> {
    let mut rows: Vec<GeofenceRow> = db
        .geofences
        .iter()
        .map(|g| {
            let c = g.shape.center();
            let near = db.namer.relative(c);
            let (shape, radius_m) = match &g.shape {
                Shape::Polygon(_) => (GeofenceShape::Polygon, None),
                Shape::Circle { radius_m, .. } => (GeofenceShape::Circle, Some(*radius_m)),
            };
            GeofenceRow {
                name: g.name.clone(),
                kind: g.kind.clone(),
                shape,
                lat: round5(c.lat),
                lon: round5(c.lon),
                radius_m,
                near,
            }
        })
        .collect();
    rows.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(ListGeofencesReport {
        geofences: List::capped(rows),
    })
}

fn round5(x: f64) -> f64 {
    (x * 1e5).round() / 1e5
}

/// The registry entry.
pub const SPEC: ReportSpec = ReportSpec {
    tool: "list_geofences",
    cli: "geofences",
    title: "The fleet's geofences",
    description: "Every named geofence: depots and distribution centres the routes start from, customer zones, \
and Centro Histórico — with kind, shape (polygon or circle with radius_m), centre lat/lon and a description of where \
it is. Call it to learn names for geofence_visits or nearest_vehicles.",
    input: super::schema::derived_input::<ListGeofencesRequest>,
    rows: "geofences",
    columns: &[("geofences", &["name", "kind", "shape", "radius_m", "near"])],
    run: |db, args| super::invoke(db, args, run),
    output_schema: super::schema::derived::<ListGeofencesReport>,
    draws: false,
};
