//! The one logger: lines on stderr, never stdout (which belongs to a command's output
//! or, under `serve`, to the protocol alone). `main` sets the verbosity once.
//!
//! Log lines carry text that came from clients (request lines, tool names, plates), so
//! every line is made safe here, in the one place all lines pass: control characters
//! (a newline that would forge a second line, a terminal escape) and the invisible
//! characters that reorder text are written as `\u{..}` escapes, and a line is cut at
//! `MAX_LINE_CHARS`.
//!
//! A server must never wait on its log: `serve --http` starts [`start_background`],
//! after which lines go through a bounded queue to a thread of their own that writes
//! them. A stalled stderr pipe then fills the queue, and further lines are dropped and
//! counted (the count is written once stderr moves again), while every connection and
//! the shutdown go on.

use std::io::Write;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError};

static VERBOSE: AtomicBool = AtomicBool::new(false);

/// Lines the background writer may hold before new ones are dropped.
pub const QUEUE_LINES: usize = 1024;

/// The background writer, while one runs: where lines go, and how it says it is done.
struct Background {
    lines: SyncSender<String>,
    done: Receiver<()>,
}

static BACKGROUND: Mutex<Option<Background>> = Mutex::new(None);

/// Lines dropped because the queue was full, not yet reported.
static DROPPED: AtomicU64 = AtomicU64::new(0);

/// From now on, lines are written by a thread of their own (see the module comment).
pub fn start_background() {
    let mut slot = BACKGROUND.lock().unwrap_or_else(|e| e.into_inner());
    if slot.is_some() {
        return;
    }
    let (lines, queue) = std::sync::mpsc::sync_channel::<String>(QUEUE_LINES);
    let (finished, done) = std::sync::mpsc::channel();
    let spawned = std::thread::Builder::new()
        .name("log".into())
        .spawn(move || {
            // The lines queued meanwhile go out in one write (a busy server logs
            // thousands a second), each whole.
            let mut batch = String::new();
            while let Ok(first) = queue.recv() {
                let dropped = DROPPED.swap(0, Ordering::Relaxed);
                if dropped > 0 {
                    push_line(
                        &mut batch,
                        &format!("{dropped} log lines dropped: stderr did not keep up"),
                    );
                }
                push_line(&mut batch, &first);
                for line in queue.try_iter().take(BATCH_LINES) {
                    push_line(&mut batch, &line);
                }
                let _ = std::io::stderr().lock().write_all(batch.as_bytes());
                batch.clear();
            }
            let _ = finished.send(());
        });
    if spawned.is_ok() {
        *slot = Some(Background { lines, done });
    }
}

/// Ends the background writer: lines from now on are written directly, and what it
/// still holds is written within `wait` (if stderr takes them), never longer.
pub fn stop_background(wait: std::time::Duration) {
    let background = BACKGROUND.lock().unwrap_or_else(|e| e.into_inner()).take();
    if let Some(Background { lines, done }) = background {
        drop(lines);
        let _ = done.recv_timeout(wait);
    }
}

/// Lines the background writer gathers into one write at most.
const BATCH_LINES: usize = 256;

/// Adds one line to a batch, as [`write_line`] writes it.
fn push_line(batch: &mut String, line: &str) {
    batch.push_str("fleetctl: ");
    batch.push_str(line);
    batch.push('\n');
}

/// Writes one escaped line to stderr (blocking).
fn write_line(line: &str) {
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "fleetctl: {line}");
}

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

/// Writes one line to stderr, escaped (see the module comment): handed to the
/// background writer when one runs (dropped and counted if its queue is full), else
/// written here.
pub fn info(line: &str) {
    let line = escape(line, MAX_LINE_CHARS);
    // The lock is held only to hand the line over, never while writing.
    let unsent = match BACKGROUND
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .as_ref()
    {
        None => Some(line),
        Some(background) => match background.lines.try_send(line) {
            Ok(()) => None,
            Err(TrySendError::Full(_)) => {
                DROPPED.fetch_add(1, Ordering::Relaxed);
                None
            }
            Err(TrySendError::Disconnected(line)) => Some(line),
        },
    };
    if let Some(line) = unsent {
        write_line(&line);
    }
}

/// Writes one line to stderr when verbose.
pub fn verbose(line: impl FnOnce() -> String) {
    if is_verbose() {
        info(&line());
    }
}

/// `text` as one printable line of at most `max_chars` characters, with any secret
/// this process knows masked (`fleetctl_core::secrets`).
pub fn escape(text: &str, max_chars: usize) -> String {
    let text = fleetctl_core::secrets::scrub(text.to_string());
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
