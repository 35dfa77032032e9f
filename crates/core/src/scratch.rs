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
