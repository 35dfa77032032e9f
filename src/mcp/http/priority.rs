//! Who waits when the cores are busy under `--ingest`: the analyser (a fix may take
//! up to a second to show in the answers), not a tool call nor a device's request
//! (milliseconds). A Linux nice value, per thread; elsewhere every thread keeps the
//! process's priority. (Lowering the devices' event loop as well was measured and
//! not kept: docs/live.md, "Not yet".)

/// The live analyser.
pub(super) const ANALYSER_NICE: i32 = 10;

/// Sets the calling thread's nice value (raising it needs no privilege); a refusal
/// leaves the priority as it was. Threads started afterwards by this one inherit it,
/// so call it once a thread has started the threads it needs.
pub(super) fn lower_this_thread(nice: i32) {
    #[cfg(target_os = "linux")]
    // SAFETY: two system calls on the calling thread; no memory is handed over. On
    // Linux the nice value is per thread, and PRIO_PROCESS with a thread id sets
    // that thread's alone.
    unsafe {
        let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
        libc::setpriority(libc::PRIO_PROCESS, tid, nice);
    }
    #[cfg(not(target_os = "linux"))]
    let _ = nice;
}
