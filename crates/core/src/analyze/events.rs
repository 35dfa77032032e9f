//! Events derived from a vehicle's fixes: speeding episodes, long stops, signal
//! losses, geofence entries and exits, and ignition changes — never replayed from
//! anything the generator wrote.

use super::Thresholds;
use crate::geo::{Geofence, LatLon, places::Namer};
use crate::model::{
    Event, EventDetail, EventKind, Fix, GeofenceDetail, LongStopDetail, NoDetail, SignalLossDetail,
    SpeedingDetail, Stop, VehicleAnalysis, Visit,
};

/// A fix faster than this, km/h, is moving (for rules that need the ignition and
/// have none).
pub const MOVING_KMH: f64 = 5.0;

fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

fn event(f: &Fix, kind: EventKind, end_ts: i64, detail: EventDetail) -> Event {
    Event {
        vehicle_id: f.vehicle_id,
        kind,
        start_ts: f.ts,
        end_ts,
        lat: f.lat,
        lon: f.lon,
        detail,
    }
}

/// Speeding: a run of fixes above the limit, consecutive ones less than the
/// signal-loss threshold apart, whose fixes prove at least `speeding_min_s`: from
/// the first fast fix to the last. So one fast fix is never an episode, whatever
/// the cadence (a single reading may be a spike), nor two 15 s apart (15 s proved,
/// under the 20 s); three at 15 s are, two at 60 s are. The event runs from the
/// first fast fix to the last, and its `duration_s` is that span, the one figure
/// every report and export gives; `fixes` says how many fast fixes it rests on.
///
/// `limits_kmh` holds each fix's limit; `limit_at` says where a fix's limit comes from
/// (asked only for an episode's fixes, so that a vehicle's millions of fixes carry a
/// number each, not a name).
pub fn speeding(
    fixes: &[Fix],
    limits_kmh: &[f64],
    limit_at: &dyn Fn(&Fix) -> (f64, super::LimitSource),
    th: &Thresholds,
    namer: &Namer,
) -> Vec<Event> {
    let max_gap_s = th.signal_loss_s();
    let fast = |k: usize| fixes[k].speed_kmh > limits_kmh[k];
    let mut out = Vec::new();
    let mut i = 0;
    while i < fixes.len() {
        if !fast(i) {
            i += 1;
            continue;
        }
        let mut j = i;
        while j + 1 < fixes.len() && fast(j + 1) && fixes[j + 1].ts - fixes[j].ts <= max_gap_s {
            j += 1;
        }
        let duration_s = fixes[j].ts - fixes[i].ts;
        if duration_s >= th.speeding_min_s {
            let max = fixes[i..=j].iter().map(|f| f.speed_kmh).fold(0.0, f64::max);
            // The episode broke the lowest limit that applied during it.
            let lowest = (i..=j)
                .min_by(|&a, &b| limits_kmh[a].total_cmp(&limits_kmh[b]))
                .expect("an episode has a fix");
            let (limit, source) = limit_at(&fixes[lowest]);
            let (limit_source, limit_geofence) = match source {
                super::LimitSource::Fleet => ("fleet", None),
                super::LimitSource::Vehicle => ("vehicle", None),
                super::LimitSource::Geofence(name) => ("geofence", Some(name)),
            };
            out.push(event(
                &fixes[i],
                EventKind::Speeding,
                fixes[j].ts,
                EventDetail::Speeding(SpeedingDetail {
                    max_speed_kmh: round1(max),
                    limit_kmh: limit,
                    limit_source: limit_source.to_string(),
                    limit_geofence,
                    over_limit_kmh: round1(max - limit),
                    duration_s,
                    fixes: j - i + 1,
                    place: namer.name(LatLon::new(fixes[i].lat, fixes[i].lon)),
                }),
            ));
        }
        i = j + 1;
    }
    out
}

/// Long stops: every stop lasting at least `long_stop_min`.
pub fn long_stops(stops: &[Stop], th: &Thresholds) -> Vec<Event> {
    stops
        .iter()
        .filter(|s| s.duration_s() as f64 >= th.long_stop_min * 60.0)
        .map(|s| Event {
            vehicle_id: s.vehicle_id,
            kind: EventKind::LongStop,
            start_ts: s.start_ts,
            end_ts: s.end_ts,
            lat: s.lat,
            lon: s.lon,
            detail: EventDetail::LongStop(LongStopDetail {
                duration_min: round1(s.duration_s() as f64 / 60.0),
                engine_on: s.engine_on(),
                idle_min: round1(s.idle_s as f64 / 60.0),
                parked_min: round1(s.parked_s as f64 / 60.0),
                ongoing: s.ongoing,
                place: s.place.clone(),
            }),
        })
        .collect()
}

/// Signal losses: a gap over `signal_loss_min` between consecutive fixes while on
/// shift. On shift means the ignition was on at the fix before the gap. Where the
/// source reports no ignition, it means the vehicle was on the road at either end
/// (`MOVING_KMH` or faster) and did not reappear more than `stop_radius_m` away
/// after over an hour (`motion::STAY_GAP_S`): a gap that begins and ends at rest (a
/// tracker that reports only while driving, a vehicle parked for the night) or one
/// after which the vehicle is found far away hours later is silence, not a signal
/// lost mid-drive.
pub fn signal_losses(fixes: &[Fix], th: &Thresholds, namer: &Namer) -> Vec<Event> {
    let on_shift = |w: &[Fix]| match w[0].ignition {
        Some(on) => on,
        None => {
            let at_rest = |f: &Fix| f.speed_kmh < MOVING_KMH;
            let away = crate::geo::haversine_m(
                LatLon::new(w[0].lat, w[0].lon),
                LatLon::new(w[1].lat, w[1].lon),
            ) > th.stop_radius_m;
            let silence = at_rest(&w[0]) && at_rest(&w[1]);
            let driven_unseen = away && w[1].ts - w[0].ts > super::motion::STAY_GAP_S;
            !silence && !driven_unseen
        }
    };
    fixes
        .windows(2)
        .filter(|w| w[1].ts - w[0].ts > th.signal_loss_s() && on_shift(w))
        .map(|w| {
            event(
                &w[0],
                EventKind::SignalLoss,
                w[1].ts,
                EventDetail::SignalLoss(SignalLossDetail {
                    minutes_lost: round1((w[1].ts - w[0].ts) as f64 / 60.0),
                    resumed_lat: w[1].lat,
                    resumed_lon: w[1].lon,
                    place: namer.name(LatLon::new(w[0].lat, w[0].lon)),
                }),
            )
        })
        .collect()
}

/// Ignition changes between consecutive fixes that both report it.
pub fn ignition(fixes: &[Fix]) -> Vec<Event> {
    fixes
        .windows(2)
        .filter_map(|w| match (w[0].ignition, w[1].ignition) {
            (Some(a), Some(b)) if a != b => Some((w, b)),
            _ => None,
        })
        .map(|(w, on)| {
            let kind = if on {
                EventKind::IgnitionOn
            } else {
                EventKind::IgnitionOff
            };
            event(&w[1], kind, w[1].ts, EventDetail::Ignition(NoDetail {}))
        })
        .collect()
}

/// Where a vehicle stands against one geofence while its fixes are read in order:
/// the inside/outside state flips only when `geofence_hold_fixes` consecutive fixes
/// agree on the new side, and the event's time is the first of them. A vehicle whose
/// data starts inside is visiting from its first fix.
#[derive(Debug, Clone)]
pub struct GeofenceWatch {
    /// The index (in the vehicle's fixes) of the next fix to look at.
    pub next: usize,
    inside: bool,
    open_since: Option<i64>,
}

impl GeofenceWatch {
    /// The state at a vehicle's first fix.
    pub fn start(first: &Fix, g: &Geofence) -> GeofenceWatch {
        let inside = g.shape.contains(LatLon::new(first.lat, first.lon));
        GeofenceWatch {
            next: 1,
            inside,
            open_since: inside.then_some(first.ts),
        }
    }

    /// Reads `fixes` (the vehicle's from index `base` on) as far as they decide,
    /// adding the entries and exits to `found`'s events and the visits they close to
    /// its visits.
    /// With `at_end` false, more fixes follow: it stops where the flip needs fixes
    /// past the slice, and `next` says where to go on.
    pub fn advance(
        &mut self,
        fixes: &[Fix],
        base: usize,
        g: &Geofence,
        th: &Thresholds,
        at_end: bool,
        found: &mut VehicleAnalysis,
    ) {
        let hold = th.geofence_hold_fixes.max(1);
        let from = self.next - base;
        let inside: Vec<bool> = fixes[from.min(fixes.len())..]
            .iter()
            .map(|f| g.shape.contains(LatLon::new(f.lat, f.lon)))
            .collect();
        let at = |k: usize| inside[k - from];
        let mut k = from;
        while k < fixes.len() {
            if at(k) == self.inside {
                k += 1;
                continue;
            }
            if k + hold > fixes.len() {
                if !at_end {
                    break;
                }
                k += 1;
                continue;
            }
            if !(k..k + hold).all(|m| at(m) != self.inside) {
                k += 1;
                continue;
            }
            self.inside = !self.inside;
            let f = &fixes[k];
            let kind = if self.inside {
                EventKind::GeofenceEnter
            } else {
                EventKind::GeofenceExit
            };
            found.events.push(event(
                f,
                kind,
                f.ts,
                EventDetail::Geofence(GeofenceDetail {
                    geofence: g.name.clone(),
                    geofence_id: g.id,
                }),
            ));
            if self.inside {
                self.open_since = Some(f.ts);
            } else if let Some(enter_ts) = self.open_since.take() {
                found.visits.push(Visit {
                    vehicle_id: f.vehicle_id,
                    geofence_id: g.id,
                    enter_ts,
                    exit_ts: Some(f.ts),
                });
            }
            k += hold;
        }
        self.next = base + k;
    }

    /// The visit still open when the vehicle's fixes end.
    pub fn open_visit(&self, vehicle_id: i64, g: &Geofence) -> Option<Visit> {
        self.open_since.map(|enter_ts| Visit {
            vehicle_id,
            geofence_id: g.id,
            enter_ts,
            exit_ts: None,
        })
    }
}
