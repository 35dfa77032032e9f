//! The one logger: lines on stderr, never stdout (which belongs to a command's output
//! or, under `serve`, to the protocol alone). `main` sets the verbosity once.
//!
//! Log lines carry text that came from clients (request lines, tool names, plates), so
//! every line is made safe here, in the one place all lines pass: control characters
//! (a newline that would forge a second line, a terminal escape) and the invisible
//! characters that reorder text are written as `\u{..}` escapes, and a line is cut at
//! `MAX_LINE_CHARS`.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

static VERBOSE: AtomicBool = AtomicBool::new(false);

/// The longest log line written, in characters (the rest is replaced by `…`).
pub const MAX_LINE_CHARS: usize = 4096;

/// Sets whether `verbose` lines are written.
pub fn init(verbose: bool) {
    VERBOSE.store(verbose, Ordering::Relaxed);
}

/// Whether verbose logging is on.
pub fn is_verbose() -> bool {
    VERBOSE.load(Ordering::Relaxed)
}

/// Writes one line to stderr, escaped (see the module comment).
pub fn info(line: &str) {
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "fleetctl: {}", escape(line, MAX_LINE_CHARS));
}

/// Writes one line to stderr when verbose.
pub fn verbose(line: impl FnOnce() -> String) {
    if is_verbose() {
        info(&line());
    }
}

/// `text` as one printable line of at most `max_chars` characters.
pub fn escape(text: &str, max_chars: usize) -> String {
    let mut out = String::with_capacity(text.len().min(max_chars) + 8);
    for (n, c) in text.chars().enumerate() {
        if n == max_chars {
            out.push('…');
            break;
        }
        // Bidirectional controls reorder what is shown; U+2028/2029 break lines.
        let reorders = matches!(c, '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{2028}' | '\u{2029}');
        if c.is_control() || reorders {
            out.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_cannot_forge_a_line_or_drive_the_terminal() {
        assert_eq!(
            escape("GET /x\r\nfleetctl: forged", 100),
            "GET /x\\u{d}\\u{a}fleetctl: forged"
        );
        assert_eq!(escape("\x1b[2Jtool", 100), "\\u{1b}[2Jtool");
        assert_eq!(escape("a\u{202E}b\u{0}", 100), "a\\u{202e}b\\u{0}");
        assert_eq!(escape("a\u{2028}b", 100), "a\\u{2028}b");
        assert_eq!(
            escape("Zona 10 (Zona Viva) · km", 100),
            "Zona 10 (Zona Viva) · km"
        );
        assert_eq!(escape("abcdef", 3), "abc…");
    }
}
