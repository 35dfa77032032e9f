//! Reading files that come from elsewhere (tiles, token files, whatever `--db` points
//! at): only regular files, and never more than a cap. A path is looked at before it
//! is opened, because opening a FIFO for reading blocks until someone writes to it,
//! and a device such as `/dev/zero` never ends.

use std::io::{self, Read};
use std::path::Path;

/// Why a path is not a regular file, or `None` when it is one (links are followed).
pub fn not_regular(path: &Path) -> io::Result<Option<&'static str>> {
    let kind = std::fs::metadata(path)?.file_type();
    Ok(if kind.is_file() {
        None
    } else if kind.is_dir() {
        Some("a folder")
    } else {
        Some("not a regular file (a device, pipe or socket)")
    })
}

/// Opens a regular file, refusing anything else before it is opened.
pub fn open_regular(path: &Path) -> io::Result<std::fs::File> {
    if let Some(what) = not_regular(path)? {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, what));
    }
    let file = std::fs::File::open(path)?;
    // Replaced between the look and the open: check what was opened.
    if !file.metadata()?.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a regular file (a device, pipe or socket)",
        ));
    }
    Ok(file)
}

/// The whole of a regular file of at most `max_bytes`.
pub fn read_capped(path: &Path, max_bytes: u64) -> io::Result<Vec<u8>> {
    let file = open_regular(path)?;
    let too_large = || {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("larger than {max_bytes} bytes"),
        )
    };
    if file.metadata()?.len() > max_bytes {
        return Err(too_large());
    }
    let mut bytes = Vec::new();
    file.take(max_bytes + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max_bytes {
        return Err(too_large());
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_and_folders_are_refused_before_they_are_opened() {
        let e = read_capped(Path::new("/dev/zero"), 16).unwrap_err();
        assert!(e.to_string().contains("not a regular file"), "{e}");
        let e = read_capped(Path::new("/"), 16).unwrap_err();
        assert!(e.to_string().contains("folder"), "{e}");
    }

    #[cfg(unix)]
    #[test]
    fn regression_a_fifo_is_refused_without_blocking() {
        let dir = std::env::temp_dir().join(format!("fleetctl-fifo-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let fifo = dir.join("tile.png");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        if made.is_ok_and(|s| s.success()) {
            let e = read_capped(&fifo, 16).unwrap_err();
            assert!(e.to_string().contains("not a regular file"), "{e}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_file_over_the_cap_is_refused() {
        let path = std::env::temp_dir().join(format!("fleetctl-cap-{}", std::process::id()));
        std::fs::write(&path, b"0123456789").unwrap();
        assert_eq!(read_capped(&path, 10).unwrap(), b"0123456789");
        assert!(
            read_capped(&path, 9)
                .unwrap_err()
                .to_string()
                .contains("larger than 9")
        );
        let _ = std::fs::remove_file(&path);
    }
}
