//! Fuzzes the map tile decoder: tiles come from an MBTiles file or folder the user
//! names, so any bytes may arrive; PNG, JPEG and WebP are decoded within size limits.
//!
//! The decoders are third-party code, and `decode_tile` turns a panic inside them into
//! an error (one was found here: a PNG palette of 4 bytes). libFuzzer's panic hook
//! would abort even on that caught panic, so this target puts Rust's default hook
//! back: a caught panic is an error, as in fleetctl, and a panic that escapes
//! `decode_tile` still reaches libfuzzer-sys, which aborts on it (a crash).

#![no_main]

use fleetctl::render::map::{MAX_TILE_SIDE, decode_tile};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    static DEFAULT_HOOK: std::sync::Once = std::sync::Once::new();
    DEFAULT_HOOK.call_once(|| drop(std::panic::take_hook()));
    if let Ok(img) = decode_tile(data) {
        assert!(
            img.width() <= MAX_TILE_SIDE && img.height() <= MAX_TILE_SIDE,
            "a {}×{} tile got past the {MAX_TILE_SIDE}-pixel limit",
            img.width(),
            img.height()
        );
    }
});
