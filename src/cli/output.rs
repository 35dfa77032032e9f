//! What the commands write: files replaced whole (never a device, FIFO or socket),
//! stdout that tolerates a closed pipe, and a progress bar on a terminal.

use crate::error::{Error, Result};
use std::io::{IsTerminal, Write};

/// Writes `bytes` to a temporary file beside `path` and renames it into place, so that
/// a full disk or a kill never leaves a truncated file where a good one was. A link at
/// `path` is written through, as `generate` does; the temporary file is created new
/// (never one planted under its name) and removed on failure, and the temporary files
/// that killed runs left beside it are removed. A target that is not a regular file
/// (a device such as `/dev/null`, a FIFO, a socket, or a link to one such as
/// `/dev/stdout`) is written in place: it is never renamed over.
pub(super) fn write_replacing(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    if let Ok(m) = std::fs::metadata(path)
        && !m.is_file()
        && !m.is_dir()
    {
        // Our own standard output (`-o /dev/stdout`) is written through the descriptor
        // we hold: reopening a pipe that another user made is not allowed.
        let mut f = match own_stdout_if(&m) {
            Some(stdout) => stdout,
            None => std::fs::OpenOptions::new().write(true).open(path)?,
        };
        return f.write_all(bytes).and_then(|()| f.flush());
    }
    let path = match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => std::fs::canonicalize(path)?,
        _ => path.to_path_buf(),
    };
    let name = path
        .file_name()
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a file name"))?;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let prefix = format!(".{}.tmp-", name.to_string_lossy());
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(std::path::Path::new("."));
    crate::scratch::remove_abandoned(dir, &prefix);
    let tmp = path.with_file_name(format!("{prefix}{}-{nanos}", std::process::id()));
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)
        .and_then(|mut f| {
            f.write_all(bytes)?;
            f.sync_all()
        });
    match written.and_then(|()| crate::scratch::replace(&tmp, &path)) {
        Ok(()) => Ok(()),
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            Err(e)
        }
    }
}

/// Standard output as a file, when it is the file `target` describes.
pub(super) fn own_stdout_if(target: &std::fs::Metadata) -> Option<std::fs::File> {
    use std::os::fd::AsFd;
    use std::os::unix::fs::MetadataExt;
    let stdout = std::fs::File::from(std::io::stdout().as_fd().try_clone_to_owned().ok()?);
    let m = stdout.metadata().ok()?;
    (m.dev() == target.dev() && m.ino() == target.ino()).then_some(stdout)
}

/// Writes to stdout, treating a closed pipe as success (`fleetctl … | head`).
pub(super) fn print_stdout(text: &str) -> Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(Error::io(std::path::Path::new("<stdout>"), e))
        }
        _ => Ok(()),
    }
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
