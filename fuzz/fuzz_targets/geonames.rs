//! Fuzzes the places reader (`places import`) on GeoNames dumps: tab-separated lines
//! read one at a time (and a GeoJSON document when the input opens with `{`). Places
//! kept have a name and coordinates in range; entries left out say where and why.

#![no_main]

use fleetctl::formats::places::read_places;
use libfuzzer_sys::fuzz_target;
use std::path::PathBuf;

thread_local! {
    /// The file each input is written to, in a folder made once per run.
    static INPUT: PathBuf = {
        let dir = std::env::temp_dir().join(format!("fleetctl-fuzz-places-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a scratch folder");
        dir.join("places.txt")
    };
}

fuzz_target!(|data: &[u8]| {
    INPUT.with(|path| {
        std::fs::write(path, data).expect("the input is written");
        let Ok(loaded) = read_places(path) else {
            return;
        };
        for p in &loaded.items {
            assert!(
                (-90.0..=90.0).contains(&p.lat) && (-180.0..=180.0).contains(&p.lon),
                "a place out of range was kept: {p:?}"
            );
            assert!(
                !p.name.trim().is_empty(),
                "a place without a name was kept: {p:?}"
            );
        }
        for (n, why) in &loaded.skipped {
            assert!(
                *n >= 1 && !why.is_empty(),
                "an entry left out as ({n}, {why:?})"
            );
        }
    });
});
