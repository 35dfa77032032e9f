//! Who is in the synthetic fleet and when they work: plates, kinds, drivers, and each
//! vehicle's shift on each day (start, length, how many loops of its route).

use crate::clock::{Date, FleetZone, Weekday};
use crate::model::Vehicle;
use rand::RngExt;
use rand::rngs::Xoshiro256PlusPlus;
use std::collections::HashSet;

const PLATE_LETTERS: &[u8] = b"BCDFGHJKLMNPQRSTVWXYZ";
const FIRST_NAMES: &[&str] = &[
    "Carlos", "José", "Luis", "Juan", "Mario", "Jorge", "Óscar", "Edgar", "Byron", "Erick",
    "Marvin", "Julio", "Hugo", "Rony", "Selvin", "Walter", "Estuardo", "Fernando", "Rodrigo",
    "Diego", "Kevin", "Elmer", "Otto", "Wilson", "Ana", "María", "Lucía", "Sofía", "Claudia",
    "Gabriela", "Rosa", "Karla", "Mildred", "Brenda", "Andrea", "Paola", "Glenda", "Sandra",
    "Ingrid", "Evelyn",
];
const SURNAMES: &[&str] = &[
    "Pérez",
    "López",
    "García",
    "Hernández",
    "Morales",
    "Rodríguez",
    "Martínez",
    "González",
    "Castillo",
    "Ramírez",
    "Méndez",
    "Orellana",
    "Xicará",
    "Cuxil",
    "Ajú",
    "Chávez",
    "Reyes",
    "Juárez",
    "Flores",
    "Barrios",
    "Estrada",
    "Monterroso",
    "Solórzano",
    "Cabrera",
    "Alvarado",
    "Sandoval",
    "Gómez",
    "Díaz",
    "Mejía",
    "Recinos",
    "Tzul",
    "Sicán",
    "Velásquez",
    "Arriola",
    "Quiñónez",
    "Palacios",
    "Lemus",
    "Aguilar",
    "Batres",
    "Marroquín",
];
const KINDS: &[(&str, f64)] = &[
    ("truck", 0.30),
    ("van", 0.35),
    ("pickup", 0.25),
    ("minibus", 0.10),
];

/// Whether vehicle number `index` (0-based) of `count` is the out-of-service one:
/// the last of each fifteen, or the last of a smaller fleet of two or more.
pub fn is_inactive(index: u32, count: u32) -> bool {
    count >= 2 && (index % 15 == 14 || (count < 15 && index == count - 1))
}

/// Makes `count` vehicles with unique Guatemalan-style plates and driver names.
pub fn make_vehicles(count: u32, rng: &mut Xoshiro256PlusPlus) -> Vec<Vehicle> {
    let mut plates = HashSet::new();
    let mut drivers = HashSet::new();
    (0..count)
        .map(|i| {
            let plate = loop {
                let digits: u32 = rng.random_range(100..1000);
                let letters: String = (0..3)
                    .map(|_| PLATE_LETTERS[rng.random_range(0..PLATE_LETTERS.len())] as char)
                    .collect();
                let plate = format!("P-{digits}{letters}");
                if plates.insert(plate.clone()) {
                    break plate;
                }
            };
            let driver = loop {
                let pick = |rng: &mut Xoshiro256PlusPlus, list: &[&'static str]| {
                    list[rng.random_range(0..list.len())]
                };
                let name = format!(
                    "{} {} {}",
                    pick(rng, FIRST_NAMES),
                    pick(rng, SURNAMES),
                    pick(rng, SURNAMES)
                );
                if drivers.insert(name.clone()) {
                    break name;
                }
            };
            let mut roll: f64 = rng.random();
            let kind = KINDS
                .iter()
                .find(|(_, w)| {
                    roll -= w;
                    roll < 0.0
                })
                .map_or("van", |(k, _)| k);
            Vehicle {
                id: i64::from(i) + 1,
                plate,
                kind: kind.to_string(),
                driver,
                active: !is_inactive(i, count),
            }
        })
        .collect()
}

/// When a vehicle works on one day.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Shift {
    /// Engine on at the depot, UTC epoch seconds.
    pub start_ts: i64,
    /// Planned length, seconds.
    pub length_s: i64,
}

/// Draws one vehicle's shift for `date`: weekdays start 06:20–08:20 and last
/// 7.5–9.5 h; Saturdays are shorter; on Sundays about a third of the fleet works.
pub fn draw_shift(date: Date, zone: &FleetZone, rng: &mut Xoshiro256PlusPlus) -> Option<Shift> {
    let start_min = rng.random_range(6 * 60 + 20..=8 * 60 + 20);
    let (start_min, length_h) = match date.weekday() {
        Weekday::Sun => {
            if !rng.random_bool(0.35) {
                return None;
            }
            (
                rng.random_range(7 * 60..=9 * 60),
                rng.random_range(3.0..5.0),
            )
        }
        Weekday::Sat => (start_min, rng.random_range(4.0..6.0)),
        _ => (start_min, rng.random_range(7.5..9.5)),
    };
    Some(Shift {
        start_ts: zone.at(date, i64::from(start_min) * 60),
        length_s: (length_h * 3600.0) as i64,
    })
}
