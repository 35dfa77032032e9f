//! The generator: a synthetic fleet driven along the embedded routes, with planted
//! anomalies recorded as ground truth in `injected_events`.
//!
//! `generate` decides everything first (vehicles, shifts, where each anomaly goes),
//! then simulates one vehicle-shift at a time and streams its fixes into a temporary
//! database, so memory does not grow with the fleet. The file is renamed into place
//! only when complete: an interrupted run leaves the previous database untouched.

pub mod drive;
pub mod fleet;

use crate::analyze;
use crate::clock::{Date, FleetZone};
use crate::error::{Error, Result};
use crate::geo::{Shape, atlas};
use crate::model::{InjectedEvent, PlantedKind};
use crate::store;
use drive::{FIX_INTERVAL_S, Plant, RoutePath, ShiftPlan};
use fleet::Shift;
use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};
use std::path::PathBuf;

/// Version of the generator, stored in `meta.generator_version`.
pub const GENERATOR_VERSION: &str = env!("CARGO_PKG_VERSION");
/// Accepted fleet sizes.
pub const VEHICLES_RANGE: std::ops::RangeInclusive<u32> = 1..=5000;
/// Accepted numbers of days.
pub const DAYS_RANGE: std::ops::RangeInclusive<u32> = 1..=366;
/// Minutes before the data clock at which the stopped-now vehicles stopped.
pub const STOPPED_NOW_MINUTES: [i64; 3] = [35, 52, 95];

/// What to generate, and where.
#[derive(Debug, Clone)]
pub struct GenerateOptions {
    /// The database to write.
    pub path: PathBuf,
    /// The data clock's "now", UTC epoch seconds (whole minutes).
    pub now_ts: i64,
    /// Random seed.
    pub seed: u64,
    /// Fleet size.
    pub vehicles: u32,
    /// Days of data, ending on the data clock's day.
    pub days: u32,
    /// Replace an existing fleetctl database.
    pub force: bool,
    /// The fleet's time zone.
    pub zone: FleetZone,
}

/// What `generate` made.
#[derive(Debug, Clone)]
pub struct GenerateSummary {
    /// Where the database is.
    pub path: PathBuf,
    /// Vehicles, and how many of them are active.
    pub vehicles: u32,
    /// Active vehicles.
    pub active_vehicles: u32,
    /// First and last local date of data.
    pub first_date: Date,
    /// Last local date (the data clock's).
    pub last_date: Date,
    /// The data clock, RFC 3339.
    pub now: String,
    /// Position rows written.
    pub positions: u64,
    /// Planted anomalies by kind.
    pub planted: Vec<(PlantedKind, usize)>,
    /// Things worth telling (where stopped-now vehicles are, plants that did not fit).
    pub notes: Vec<String>,
    /// Wall time taken.
    pub seconds: f64,
}

/// Checks the options' ranges.
pub fn validate(opts: &GenerateOptions) -> Result<()> {
    if !VEHICLES_RANGE.contains(&opts.vehicles) {
        return Err(
            Error::invalid(format!("--vehicles {} is out of range", opts.vehicles)).with_hint(
                format!("use {}..={}", VEHICLES_RANGE.start(), VEHICLES_RANGE.end()),
            ),
        );
    }
    if !DAYS_RANGE.contains(&opts.days) {
        return Err(
            Error::invalid(format!("--days {} is out of range", opts.days)).with_hint(format!(
                "use {}..={}",
                DAYS_RANGE.start(),
                DAYS_RANGE.end()
            )),
        );
    }
    Ok(())
}

/// SplitMix64: turns (seed, vehicle, day) into independent stream seeds, so each
/// shift's randomness does not depend on the order shifts are simulated in.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// Writes the fleet, its positions, the ground truth and the detection results into
/// a new database.
fn fill<'p>(
    writer: &store::Writer,
    opts: &GenerateOptions,
    plan: &'p FleetPlan,
    progress: &mut dyn FnMut(f64),
) -> Result<(Vec<InjectedEvent>, u64)> {
    let zone = &opts.zone;
    let meta = [
        ("schema_version", store::SCHEMA_VERSION.to_string()),
        ("time_zone", zone.name.clone()),
        ("data_now", opts.now_ts.to_string()),
        ("seed", opts.seed.to_string()),
        ("generator_version", GENERATOR_VERSION.to_string()),
        ("first_date", plan.first_date.to_string()),
        ("last_date", plan.last_date.to_string()),
    ];
    for (k, v) in meta {
        writer.set_meta(k, &v)?;
    }
    for g in atlas::geofences() {
        writer.insert_geofence(g)?;
    }
    writer.insert_places(atlas::places())?;
    let mut positions = 0u64;
    let mut truth: Vec<InjectedEvent> = Vec::new();
    let total = plan.vehicles.len().max(1);
    // Vehicles are simulated on every core; this thread writes them, in plan order,
    // so the rows are the same as from one thread.
    let simulate = |pv: &'p PlannedVehicle| -> (
        &'p PlannedVehicle,
        Vec<crate::model::Fix>,
        Vec<InjectedEvent>,
    ) {
        let mut fixes = Vec::new();
        let mut planted = Vec::new();
        if let Some(r) = pv.route {
            let mut odometer_m = pv.odometer_start_m;
            for shift in &pv.shifts {
                let out = drive::simulate_shift(&plan.routes[r], shift, odometer_m);
                odometer_m = out.odometer_m;
                fixes.extend(out.fixes);
                planted.extend(out.truth);
            }
        }
        (pv, fixes, planted)
    };
    let mut done = 0usize;
    crate::parallel::map_in_order(
        &simulate,
        &mut |submit| plan.vehicles.iter().try_for_each(&mut *submit),
        &mut |(pv, fixes, planted)| {
            writer.insert_vehicle(&pv.vehicle, pv.route.map(|r| plan.routes[r].slug.as_str()))?;
            positions += fixes.len() as u64;
            writer.insert_fixes(&fixes)?;
            truth.extend(planted);
            done += 1;
            progress(SIMULATION_SHARE * done as f64 / total as f64);
            Ok(())
        },
    )?;
    truth.sort_by_key(|e| (e.kind, e.vehicle_id, e.start_ts));
    for e in &truth {
        writer.insert_injected(e)?;
    }
    writer.build_indexes()?;
    crate::pipeline::detect_into(
        writer.connection(),
        analyze::Thresholds::default(),
        &mut |f| progress(SIMULATION_SHARE + (1.0 - SIMULATION_SHARE) * f),
    )?;
    progress(1.0);
    Ok((truth, positions))
}

/// Builds the fleet database. `progress` receives the fraction done (0..=1).
pub fn generate(opts: &GenerateOptions, progress: &mut dyn FnMut(f64)) -> Result<GenerateSummary> {
    let started = std::time::Instant::now();
    validate(opts)?;
    let plan = plan_fleet(opts)?;
    let (truth, positions) =
        store::build_new(&opts.path, opts.force, store::BULK_PAGE_SIZE, |writer| {
            fill(writer, opts, &plan, progress)
        })?;
    let zone = &opts.zone;
    let mut notes = plan.notes;
    let planted = PlantedKind::ALL
        .iter()
        .map(|&k| (k, truth.iter().filter(|e| e.kind == k).count()))
        .collect::<Vec<_>>();
    for (kind, wanted) in &plan.wanted {
        let got = truth.iter().filter(|e| e.kind == *kind).count();
        if got < *wanted {
            notes.push(format!(
                "planted {got} {} of the {wanted} wanted: too few shifts to hold them",
                kind.as_str()
            ));
        }
    }
    for e in truth.iter().filter(|e| e.kind == PlantedKind::StoppedNow) {
        let plate = &plan.vehicles[(e.vehicle_id - 1) as usize].vehicle.plate;
        notes.push(format!(
            "{plate} is stopped now: since {} ({:.0} min, engine on)",
            zone.hhmm(e.start_ts),
            (e.end_ts - e.start_ts) as f64 / 60.0
        ));
    }
    Ok(GenerateSummary {
        path: opts.path.clone(),
        vehicles: opts.vehicles,
        active_vehicles: plan.vehicles.iter().filter(|v| v.vehicle.active).count() as u32,
        first_date: plan.first_date,
        last_date: plan.last_date,
        now: zone.rfc3339(opts.now_ts),
        positions,
        planted,
        notes,
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// One vehicle with everything decided.
struct PlannedVehicle {
    vehicle: crate::model::Vehicle,
    route: Option<usize>,
    odometer_start_m: f64,
    shifts: Vec<ShiftPlan>,
}

struct FleetPlan {
    routes: Vec<RoutePath>,
    vehicles: Vec<PlannedVehicle>,
    first_date: Date,
    last_date: Date,
    wanted: Vec<(PlantedKind, usize)>,
    notes: Vec<String>,
}

/// The part of generation's progress the driving takes (detection takes the rest).
const SIMULATION_SHARE: f64 = 0.6;

/// Typical average speed including traffic, m/s, to estimate loop durations.
const PLANNING_SPEED_MS: f64 = 8.0;

fn plan_fleet(opts: &GenerateOptions) -> Result<FleetPlan> {
    let zone = &opts.zone;
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(opts.seed);
    let routes: Vec<RoutePath> = atlas::routes()
        .iter()
        .map(RoutePath::new)
        .collect::<Result<_>>()?;
    if routes.is_empty() {
        return Err(Error::internal("no routes are embedded in this build"));
    }
    for g in atlas::geofences() {
        Shape::from_wkt(&g.wkt, g.radius_m)?;
    }
    let last_date = zone.local_date(opts.now_ts);
    let first_date = last_date.add_days(1 - i64::from(opts.days));
    let mut notes = Vec::new();

    let vehicles = fleet::make_vehicles(opts.vehicles, &mut rng);
    let mut planned: Vec<PlannedVehicle> = Vec::with_capacity(vehicles.len());
    let mut active_index = 0usize;
    for vehicle in vehicles {
        let route = vehicle.active.then(|| {
            active_index += 1;
            (active_index - 1) % routes.len()
        });
        let odometer_start_m = rng.random_range(15_000.0..250_000.0) * 1000.0;
        let mut shifts = Vec::new();
        if let Some(r) = route {
            for day in 0..opts.days {
                let date = first_date.add_days(i64::from(day));
                let mut day_rng = Xoshiro256PlusPlus::seed_from_u64(mix(opts.seed
                    ^ mix(vehicle.id as u64)
                    ^ mix(u64::from(day) << 32)));
                if let Some(shift) = fleet::draw_shift(date, zone, &mut day_rng) {
                    shifts.push(shift_plan(
                        &routes[r],
                        &vehicle,
                        shift,
                        opts,
                        day_rng.random(),
                    ));
                }
            }
        }
        planned.push(PlannedVehicle {
            vehicle,
            route,
            odometer_start_m,
            shifts,
        });
    }

    // Stopped "now": three active vehicles halt, engine on, 35, 52 and 95 minutes
    // before the data clock. Their last shift is stretched (or moved earlier) so that
    // they are at work then.
    let mut active: Vec<usize> = (0..planned.len())
        .filter(|&i| planned[i].route.is_some())
        .collect();
    shuffle(&mut active, &mut rng);
    let last_day_start = zone.day_start(last_date);
    for (&vi, minutes) in active.iter().zip(STOPPED_NOW_MINUTES) {
        let at = opts.now_ts - minutes * 60;
        let pv = &mut planned[vi];
        let r = pv.route.expect("active");
        let today = pv.shifts.iter().position(|s| s.start_ts >= last_day_start);
        let latest_start = at - 75 * 60;
        let start = match today {
            Some(i) => pv.shifts.remove(i).start_ts.min(latest_start),
            None => latest_start.min(zone.at(last_date, 7 * 3600)),
        };
        if start < zone.at(last_date, 6 * 3600 + 20 * 60) {
            notes.push(format!(
                "{}: the data clock is before the usual shift start, so its shift was moved to begin at {} for it to be stopped now",
                pv.vehicle.plate,
                zone.rfc3339(start)
            ));
        }
        // A shift moved back into the previous evening must not overlap yesterday's.
        pv.shifts.retain(|s| s.start_ts + 14 * 3600 < start);
        let mut plan = shift_plan(
            &routes[r],
            &pv.vehicle,
            Shift {
                start_ts: start,
                length_s: 0,
            },
            opts,
            rng.random(),
        );
        plan.stopped_now_at = Some(at);
        pv.shifts.push(plan);
    }

    // Planted anomalies go on complete shifts (not the data clock's day), one per loop,
    // spreading over distinct vehicle-days before doubling up.
    let mut slots: Vec<(usize, usize)> = planned
        .iter()
        .enumerate()
        .flat_map(|(vi, pv)| {
            pv.shifts
                .iter()
                .enumerate()
                .filter(|(_, s)| s.start_ts < last_day_start && s.stopped_now_at.is_none())
                .map(move |(si, _)| (vi, si))
        })
        .collect();
    shuffle(&mut slots, &mut rng);
    let scale = ((slots.len() as f64 / 90.0).round() as usize).max(1);
    let wanted = vec![
        (PlantedKind::Speeding, 12 * scale),
        (PlantedKind::LongStop, 8 * scale),
        (PlantedKind::SignalLoss, 5 * scale),
    ];
    let mut cursor = 0usize;
    for &(kind, count) in &wanted {
        let mut placed = 0;
        let mut tried = 0;
        while placed < count && tried < slots.len() * 4 {
            tried += 1;
            let Some(&(vi, si)) = slots.get(cursor % slots.len().max(1)) else {
                break;
            };
            cursor += 1;
            let route = &routes[planned[vi].route.expect("active")];
            let shift = &mut planned[vi].shifts[si];
            let used: Vec<u32> = shift.plants.iter().map(plant_loop).collect();
            let free: Vec<u32> = (0..shift.loops).filter(|l| !used.contains(l)).collect();
            if free.is_empty() {
                continue;
            }
            let loop_index = free[rng.random_range(0..free.len())];
            let plant = match kind {
                PlantedKind::Speeding => {
                    let target_kmh = (rng.random_range(88.0f64..110.0) * 10.0).round() / 10.0;
                    // The window also needs room to reach a vertex and to brake out of it.
                    let room_s = (route.longest_free_run_m() - 800.0) / (target_kmh / 3.6) - 6.0;
                    if room_s < 60.0 {
                        continue;
                    }
                    let duration_s = rng.random_range(60.0f64..172.0).min(room_s).floor();
                    Plant::Speeding {
                        loop_index,
                        target_kmh,
                        duration_s,
                    }
                }
                PlantedKind::LongStop => Plant::LongStop {
                    loop_index,
                    stop_index: rng.random_range(0..route.stop_s.len()),
                    dwell_s: rng.random_range(45 * 60..=110 * 60),
                    engine_on: rng.random_bool(0.5),
                },
                _ => Plant::SignalLoss {
                    loop_index,
                    at_fraction: rng.random_range(0.1..0.5),
                    gap_s: rng.random_range(24..=56) * FIX_INTERVAL_S,
                },
            };
            shift.plants.push(plant);
            placed += 1;
        }
    }
    let mut wanted = wanted;
    wanted.push((PlantedKind::StoppedNow, STOPPED_NOW_MINUTES.len()));
    Ok(FleetPlan {
        routes,
        vehicles: planned,
        first_date,
        last_date,
        wanted,
        notes,
    })
}

fn plant_loop(p: &Plant) -> u32 {
    match p {
        Plant::Speeding { loop_index, .. }
        | Plant::LongStop { loop_index, .. }
        | Plant::SignalLoss { loop_index, .. } => *loop_index,
    }
}

/// Fits whole loops of the route into the shift and scales the dwells to fill it.
fn shift_plan(
    route: &RoutePath,
    vehicle: &crate::model::Vehicle,
    shift: Shift,
    opts: &GenerateOptions,
    seed: u64,
) -> ShiftPlan {
    let stops = route.stop_s.len() as f64;
    let drive_s = route.length_m / PLANNING_SPEED_MS;
    let dwell_s = stops * 12.0 * 60.0 + 15.0 * 60.0;
    let loops = ((shift.length_s as f64 / (drive_s + dwell_s)).round() as u32).max(1);
    let budget = shift.length_s as f64 - f64::from(loops) * drive_s;
    let base = f64::from(loops) * stops * 12.0 * 60.0 + f64::from(loops - 1) * 15.0 * 60.0;
    let dwell_factor = if base > 0.0 {
        (budget / base).clamp(0.4, 1.6)
    } else {
        1.0
    };
    ShiftPlan {
        vehicle_id: vehicle.id,
        start_ts: shift.start_ts,
        loops,
        dwell_factor,
        plants: Vec::new(),
        stopped_now_at: None,
        cutoff_ts: opts.now_ts,
        seed,
    }
}

fn shuffle<T>(items: &mut [T], rng: &mut Xoshiro256PlusPlus) {
    for i in (1..items.len()).rev() {
        items.swap(i, rng.random_range(0..=i));
    }
}
