//! The one logger: lines on stderr, never stdout (which belongs to a command's output
//! or, under `serve`, to the protocol alone). `main` sets the verbosity once.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

static VERBOSE: AtomicBool = AtomicBool::new(false);

/// Sets whether `verbose` lines are written.
pub fn init(verbose: bool) {
    VERBOSE.store(verbose, Ordering::Relaxed);
}

/// Whether verbose logging is on.
pub fn is_verbose() -> bool {
    VERBOSE.load(Ordering::Relaxed)
}

/// Writes one line to stderr.
pub fn info(line: &str) {
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "fleetctl: {line}");
}

/// Writes one line to stderr when verbose.
pub fn verbose(line: impl FnOnce() -> String) {
    if is_verbose() {
        info(&line());
    }
}
