//! The live feed's groundwork: vehicles known by the id their tracker pushes with
//! (`vehicles add --device-id`, `vehicles set --device-id`), one device per vehicle.

use crate::harness::{TempDir, fixture_db, fleetctl, open, run};

#[test]
fn a_device_id_belongs_to_one_vehicle_and_can_be_moved() {
    let dir = TempDir::new("device-ids");
    let db = dir.join("fleet.db");
    std::fs::copy(fixture_db(), &db).unwrap();
    let db_arg = db.to_str().unwrap();
    let vehicles = |words: &[&str]| {
        let mut args = vec!["--db", db_arg, "vehicles"];
        args.extend_from_slice(words);
        fleetctl(&args)
    };
    let added = run(vehicles(&["add", "P-900LIV", "--device-id", "48241179"])).ok();
    assert!(
        added.stdout.contains("Added P-900LIV (device 48241179)"),
        "{}",
        added.stdout
    );
    // The same device for another vehicle is refused, naming who has it and how to free it.
    let taken = run(vehicles(&["add", "P-901LIV", "--device-id", "48241179"])).fails(2);
    let said = format!("{}{}", taken.stdout, taken.stderr);
    assert!(
        said.contains("already belongs to P-900LIV") && said.contains("--device-id none"),
        "{said}"
    );
    let again = run(vehicles(&["add", "P-900LIV"])).fails(2);
    assert!(format!("{}{}", again.stdout, again.stderr).contains("already in the fleet"));
    // Moved to a demo vehicle: freed first, then set.
    run(vehicles(&["set", "P-900LIV", "--device-id", "none"])).ok();
    run(vehicles(&["set", "p103zgs", "--device-id", "48241179"])).ok();
    let owner: String = open(&db)
        .query_row(
            "SELECT plate FROM vehicles WHERE device_id = '48241179'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(owner, "P-103ZGS");
    let nothing = run(vehicles(&["set", "P-103ZGS"])).fails(2);
    assert!(format!("{}{}", nothing.stdout, nothing.stderr).contains("--device-id"));
}
