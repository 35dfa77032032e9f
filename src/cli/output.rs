//! What the commands print: stdout that tolerates a closed pipe, and a progress bar
//! on a terminal (files are written by `fleetctl_core::output`).

use crate::error::Result;
use std::io::IsTerminal;

/// Writes to stdout, treating a closed pipe as success (`fleetctl … | head`).
pub(super) fn print_stdout(text: &str) -> Result<()> {
    crate::output::copy_to_stdout(&mut text.as_bytes()).map(drop)
}

/// A progress bar on stderr when it is a terminal; silent otherwise.
pub(super) struct ProgressBar {
    label: &'static str,
    enabled: bool,
    shown: i32,
}

impl ProgressBar {
    pub(super) fn new(label: &'static str) -> Self {
        ProgressBar {
            label,
            enabled: std::io::stderr().is_terminal(),
            shown: -1,
        }
    }

    pub(super) fn set(&mut self, fraction: f64) {
        let percent = (fraction.clamp(0.0, 1.0) * 100.0) as i32;
        if !self.enabled || percent == self.shown {
            return;
        }
        self.shown = percent;
        let filled = (percent / 4) as usize;
        eprint!(
            "\r{} [{}{}] {percent:3}%",
            self.label,
            "#".repeat(filled),
            " ".repeat(25 - filled)
        );
    }

    pub(super) fn finish(&mut self) {
        if self.enabled && self.shown >= 0 {
            eprint!("\r{}\r", " ".repeat(self.label.len() + 34));
        }
    }
}
