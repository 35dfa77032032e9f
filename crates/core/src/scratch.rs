//! Scratch files written beside their target and renamed into place when complete
//! (a new database, an import's sorted runs, an export), named after the process
//! that writes them, so that what a killed run left can be told from what a live one
//! is writing, and removed by the next run.

use std::path::Path;

/// Removes the files and folders in `dir` named `prefix` then a process id (then
/// anything) whose process is gone. Only on systems with /proc; elsewhere they are
/// left for the user.
pub fn remove_abandoned(dir: &Path, prefix: &str) {
    if !Path::new("/proc/self").exists() {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let pid = name
            .strip_prefix(prefix)
            .and_then(|p| p.split(|c: char| !c.is_ascii_digit()).next())
            .and_then(|p| p.parse::<u32>().ok());
        if let Some(pid) = pid
            && !Path::new(&format!("/proc/{pid}")).exists()
        {
            let path = entry.path();
            let _ = if path.is_dir() {
                std::fs::remove_dir_all(&path)
            } else {
                std::fs::remove_file(&path)
            };
        }
    }
}

/// Puts the finished `tmp` (a file or a folder) at `target`, replacing what is there,
/// so that `target` holds either the old or the new whole, whatever happens:
///
/// - a file (or nothing) at `target` is replaced in one rename;
/// - a folder is first renamed aside to `.NAME.replaced-PID` beside it, then `tmp`
///   takes its place. If that second rename fails the folder is renamed back; if the
///   process is killed between the two, the next [`recover_replaced`] for the same
///   target puts it back. The backup's name never matches the prefixes that
///   [`remove_abandoned`] is given for partial writes, so clean-up never takes it.
///
/// The folder holding `target` is synced afterwards, so the rename survives a power
/// loss where the file system allows it.
pub fn replace(tmp: &Path, target: &Path) -> std::io::Result<()> {
    let is_folder = std::fs::symlink_metadata(target).is_ok_and(|m| m.is_dir());
    if !is_folder {
        std::fs::rename(tmp, target)?;
        sync_parent(target);
        return Ok(());
    }
    let backup = backup_path(target, std::process::id());
    std::fs::rename(target, &backup)?;
    sync_parent(target);
    // Debug builds only: the tests prove that a process killed here loses nothing.
    #[cfg(debug_assertions)]
    if std::env::var_os("FLEETCTL_TEST_DIE_BETWEEN_RENAMES").is_some() {
        std::process::abort();
    }
    let second = if cfg!(debug_assertions)
        && std::env::var_os("FLEETCTL_TEST_FAIL_SECOND_RENAME").is_some()
    {
        Err(std::io::Error::other(
            "injected failure of the second rename",
        ))
    } else {
        std::fs::rename(tmp, target)
    };
    if let Err(e) = second {
        std::fs::rename(&backup, target)?;
        sync_parent(target);
        return Err(e);
    }
    sync_parent(target);
    let _ = std::fs::remove_dir_all(&backup);
    Ok(())
}

/// Finishes what a [`replace`] killed half-way left at `target`: a backup whose
/// process is gone is put back when nothing took its place, and removed when the new
/// folder is in place. Only on systems with /proc, like [`remove_abandoned`].
pub fn recover_replaced(target: &Path) {
    if !Path::new("/proc/self").exists() {
        return;
    }
    let (Some(dir), Some(name)) = (target.parent(), target.file_name()) else {
        return;
    };
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    let prefix = format!(".{}.replaced-", name.to_string_lossy());
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let file_name = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = file_name
            .strip_prefix(&prefix)
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if Path::new(&format!("/proc/{pid}")).exists() {
            continue;
        }
        if std::fs::symlink_metadata(target).is_err() {
            if std::fs::rename(entry.path(), target).is_ok() {
                sync_parent(target);
            }
        } else {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

fn backup_path(target: &Path, pid: u32) -> std::path::PathBuf {
    let name = target
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    target.with_file_name(format!(".{name}.replaced-{pid}"))
}

/// Syncs the folder holding `path`, so that a rename in it is durable (where folders
/// can be opened and synced; elsewhere nothing is done).
pub fn sync_parent(path: &Path) {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if let Ok(folder) = std::fs::File::open(dir) {
        let _ = folder.sync_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn folder_with(path: &Path, content: &str) {
        std::fs::create_dir_all(path).unwrap();
        std::fs::write(path.join("part.txt"), content).unwrap();
    }

    fn scratch_dir(name: &str) -> std::path::PathBuf {
        let dir =
            std::env::temp_dir().join(format!("fleetctl-scratch-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_folder_is_replaced_whole_and_no_backup_stays() {
        let dir = scratch_dir("replace");
        let (target, tmp) = (dir.join("out"), dir.join(".out.partial-1"));
        folder_with(&target, "old");
        folder_with(&tmp, "new");
        replace(&tmp, &target).unwrap();
        assert_eq!(
            std::fs::read_to_string(target.join("part.txt")).unwrap(),
            "new"
        );
        assert_eq!(
            std::fs::read_dir(&dir).unwrap().count(),
            1,
            "only the target is left"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_backup_left_by_a_killed_replace_is_put_back_or_removed() {
        let dir = scratch_dir("recover");
        let target = dir.join("out");
        // Killed between the renames: the old folder waits under its backup name.
        // (pid 0 is never a process that /proc lists.)
        folder_with(&backup_path(&target, 0), "old");
        recover_replaced(&target);
        assert_eq!(
            std::fs::read_to_string(target.join("part.txt")).unwrap(),
            "old"
        );
        // Killed after the second rename: the new folder stays, the backup goes.
        folder_with(&backup_path(&target, 0), "older");
        recover_replaced(&target);
        assert_eq!(
            std::fs::read_to_string(target.join("part.txt")).unwrap(),
            "old"
        );
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
