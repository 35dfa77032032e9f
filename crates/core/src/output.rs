//! Where fleetctl writes a file of its own (`-o`, `--bundle`, `--rejects`, an export):
//! one rule for every writer, checked before any work and again just before the file
//! goes in place. fleetctl never deletes, truncates or writes through what it did not
//! make: a folder, a symbolic link, a device, FIFO or socket at the path is refused
//! with what it is. An existing regular file is replaced only where the command says
//! so (its `--help` and docs/errors.md), and then whole: the new bytes are written
//! beside it under a name of this process and renamed over it.

use crate::error::{Error, Result};
use std::io::Write;
use std::path::{Path, PathBuf};

/// What a writer may find at its path and still write there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum May {
    /// Only a missing path (export without `--force`).
    Create,
    /// A missing path or a regular file, replaced whole (`map -o`, `--bundle`).
    ReplaceFile,
    /// As `ReplaceFile`, or a folder holding `marker`, a dataset fleetctl wrote
    /// (`export --force --partition-by`).
    ReplaceDataset {
        /// The file that marks the folder as fleetctl's own.
        marker: &'static str,
    },
}

/// Whether `path` means standard output: `-`, or a name of this process's own
/// standard output (`/dev/stdout`, `/proc/self/fd/1`), which is ours to write.
pub fn is_stdout(path: &Path) -> bool {
    if path.as_os_str() == "-" {
        return true;
    }
    #[cfg(unix)]
    {
        use std::os::fd::AsFd;
        use std::os::unix::fs::MetadataExt;
        let ours = std::io::stdout()
            .as_fd()
            .try_clone_to_owned()
            .ok()
            .and_then(|fd| std::fs::File::from(fd).metadata().ok());
        if let (Some(ours), Ok(there)) = (ours, std::fs::metadata(path)) {
            return ours.dev() == there.dev() && ours.ino() == there.ino();
        }
    }
    false
}

/// Checks that `path` may be written as `may` says; the error names what is there and
/// what the flag accepts. `flag` is how the user gave the path (`-o`, `--bundle`).
pub fn check(path: &Path, flag: &str, may: May) -> Result<()> {
    // `-o` and `--bundle` take `-` for standard output; other flags do not.
    let or_stdout = match flag {
        "-o" | "--bundle" => format!(" ({flag} - writes to standard output)"),
        _ => String::new(),
    };
    let refuse = |what: &str, hint: String| {
        Err(Error::invalid(format!(
            "{flag} {}: {what}; fleetctl writes only files of its own and left it as it is",
            path.display()
        ))
        .with_hint(hint))
    };
    let meta = match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return check_folder(path, flag),
        Err(e) => return Err(Error::io(path, e)),
        Ok(m) => m,
    };
    let kind = meta.file_type();
    if kind.is_symlink() {
        return refuse(
            "is a symbolic link",
            format!("give the path the link points to, or another {flag} path{or_stdout}"),
        );
    }
    if kind.is_dir() {
        let example = path.join("NAME");
        let hint = format!(
            "give a file name inside it, such as {flag} {}",
            example.display()
        );
        return match may {
            May::ReplaceDataset { marker } if path.join(marker).is_file() => Ok(()),
            May::ReplaceDataset { marker } => refuse(
                &format!("is a folder fleetctl did not write (it holds no {marker})"),
                hint,
            ),
            _ => refuse("is a folder", hint),
        };
    }
    if !kind.is_file() {
        return refuse(
            "is not a regular file (a device, FIFO or socket)",
            format!("give a file path{or_stdout}"),
        );
    }
    match may {
        May::Create => Err(
            Error::invalid(format!("{} exists already", path.display())).with_hint(format!(
                "add --force to replace it, or choose another path with {flag}"
            )),
        ),
        May::ReplaceFile | May::ReplaceDataset { .. } => Ok(()),
    }
}

/// The folder a new file goes in must be there (nothing is created on the way).
fn check_folder(path: &Path, flag: &str) -> Result<()> {
    let folder = folder_of(path);
    if folder.is_dir() {
        return Ok(());
    }
    Err(Error::new(
        crate::error::ErrorCode::Io,
        format!("{flag} {}: no folder {}", path.display(), folder.display()),
    )
    .with_hint("create the folder first, or choose another path"))
}

/// The folder `path` is in (`.` for a bare name).
pub fn folder_of(path: &Path) -> PathBuf {
    path.parent()
        .filter(|d| !d.as_os_str().is_empty())
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

/// A new file beside `path`, named for this process, that [`Aside::commit`] renames
/// over `path` once complete (checked again first) and that is removed if dropped
/// uncommitted. What killed runs left beside the same target is removed on creation.
pub struct Aside {
    /// The file being written.
    pub file: std::fs::File,
    tmp: PathBuf,
    target: PathBuf,
    flag: String,
    may: May,
    done: bool,
}

impl Aside {
    /// Checks `path` and creates the file beside it (never over one planted there).
    pub fn create(path: &Path, flag: &str, may: May) -> Result<Aside> {
        if path.as_os_str() == "-" {
            return Err(Error::invalid(format!(
                "{flag} -: this file cannot go to standard output (the command prints there)"
            ))
            .with_hint(format!("give {flag} a file path")));
        }
        check(path, flag, may)?;
        let name = path
            .file_name()
            .ok_or_else(|| {
                Error::invalid(format!("{flag} {}: not a file name", path.display()))
                    .with_hint("give a path that ends in a file name, such as map.png")
            })?
            .to_string_lossy()
            .into_owned();
        let folder = folder_of(path);
        let prefix = format!(".{name}.tmp-");
        crate::scratch::remove_abandoned(&folder, &prefix);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let tmp = folder.join(format!("{prefix}{}-{nanos}", std::process::id()));
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)
            .map_err(|e| {
                Error::io(path, e).with_hint(format!("choose a writable path with {flag}"))
            })?;
        Ok(Aside {
            file,
            tmp,
            target: path.to_path_buf(),
            flag: flag.to_string(),
            may,
            done: false,
        })
    }

    /// The file being written, under its temporary name.
    pub fn path(&self) -> &Path {
        &self.tmp
    }

    /// Makes the file durable and puts it at the path, if the path still holds
    /// nothing foreign (someone may have made a folder or link there meanwhile).
    pub fn commit(mut self) -> Result<()> {
        let io = |e| Error::io(&self.target, e);
        self.file
            .flush()
            .and_then(|()| self.file.sync_all())
            .map_err(io)?;
        check(&self.target, &self.flag, self.may)?;
        std::fs::rename(&self.tmp, &self.target).map_err(io)?;
        crate::scratch::sync_parent(&self.target);
        self.done = true;
        Ok(())
    }
}

impl Drop for Aside {
    fn drop(&mut self) {
        if !self.done {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

/// Copies `from` to standard output; how many bytes. A reader that closed the pipe
/// (`fleetctl … | head`) is no error.
pub fn copy_to_stdout(from: &mut dyn std::io::Read) -> Result<u64> {
    let mut out = std::io::stdout().lock();
    match std::io::copy(from, &mut out).and_then(|n| out.flush().map(|()| n)) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(0),
        other => other.map_err(|e| Error::io(Path::new("<stdout>"), e)),
    }
}

/// Writes `bytes` to `path` as [`Aside`] does, or to standard output for `-`.
pub fn write_file(path: &Path, flag: &str, may: May, mut bytes: &[u8]) -> Result<()> {
    if is_stdout(path) {
        return copy_to_stdout(&mut bytes).map(drop);
    }
    let mut aside = Aside::create(path, flag, may)?;
    aside
        .file
        .write_all(bytes)
        .map_err(|e| Error::io(path, e))?;
    aside.commit()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("fleetctl-output-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_file_is_replaced_whole_and_nothing_is_left_beside_it() {
        let dir = scratch("replace");
        let path = dir.join("map.png");
        write_file(&path, "-o", May::ReplaceFile, b"first").unwrap();
        write_file(&path, "-o", May::ReplaceFile, b"second").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"second");
        let e = write_file(&path, "-o", May::Create, b"third").unwrap_err();
        assert!(e.message.contains("exists already"), "{}", e.message);
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn an_uncommitted_file_is_removed() {
        let dir = scratch("drop");
        let aside = Aside::create(&dir.join("x.csv"), "-o", May::Create).unwrap();
        drop(aside);
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_folder_is_refused_unless_it_is_a_marked_dataset() {
        let dir = scratch("folder");
        let e = check(&dir, "-o", May::ReplaceFile).unwrap_err();
        assert!(e.message.contains("is a folder"), "{}", e.message);
        std::fs::write(dir.join("_mark"), "").unwrap();
        check(&dir, "-o", May::ReplaceDataset { marker: "_mark" }).unwrap();
        let e = check(&dir.join("no/such.png"), "-o", May::ReplaceFile).unwrap_err();
        assert!(e.message.contains("no folder"), "{}", e.message);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
