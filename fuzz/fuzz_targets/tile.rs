//! Fuzzes the map tile decoder: tiles come from an MBTiles file or folder the user
//! names, so any bytes may arrive; PNG, JPEG and WebP are decoded within size limits.

#![no_main]

use fleetctl::render::map::{MAX_TILE_SIDE, decode_tile};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(img) = decode_tile(data) {
        assert!(
            img.width() <= MAX_TILE_SIDE && img.height() <= MAX_TILE_SIDE,
            "a {}×{} tile got past the {MAX_TILE_SIDE}-pixel limit",
            img.width(),
            img.height()
        );
    }
});
