//! The servers' threads: each started under a name of its own, and who waits when
//! the cores are busy under `--ingest`: the analyser (a fix may take
//! up to a second to show in the answers), not a tool call nor a device's request
//! (milliseconds). A Linux nice value, per thread; elsewhere every thread keeps the
//! process's priority. With `--realtime-tools`, the tool calls' threads run under
//! a real-time policy, ahead of every ordinary thread, except while they draw a
//! picture (docs/live.md, "Tool calls ahead of ingest").

use crate::error::{Error, Result};
use std::cell::Cell;

/// Starts a thread of the server under a name of its own (`top -H` and panic
/// messages show it).
pub fn spawn_named<T: Send + 'static>(
    name: &str,
    run: impl FnOnce() -> T + Send + 'static,
) -> Result<std::thread::JoinHandle<T>> {
    std::thread::Builder::new()
        .name(name.into())
        .spawn(run)
        .map_err(|e| Error::internal(format!("starting the {name} thread: {e}")))
}

/// The live analyser.
pub const ANALYSER_NICE: i32 = 10;

/// The real-time priority of the tools' threads: the lowest, above every ordinary
/// thread and below any real-time thread the machine's owner runs.
#[cfg(target_os = "linux")]
const TOOLS_REALTIME_PRIORITY: i32 = 1;

thread_local! {
    /// Whether this thread was put under the real-time policy.
    static REALTIME: Cell<bool> = const { Cell::new(false) };
}

/// Sets the calling thread's nice value (raising it needs no privilege); a refusal
/// leaves the priority as it was. Threads started afterwards by this one inherit it,
/// so call it once a thread has started the threads it needs.
pub fn lower_this_thread(nice: i32) {
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

/// Puts the calling thread under the round-robin real-time policy (processes it
/// starts get the ordinary one back), or says why the system refused.
pub fn make_this_thread_realtime() -> Result<(), String> {
    #[cfg(target_os = "linux")]
    {
        set_policy(libc::SCHED_RR, TOOLS_REALTIME_PRIORITY)?;
        REALTIME.with(|r| r.set(true));
        Ok(())
    }
    #[cfg(not(target_os = "linux"))]
    Err("a real-time policy for single threads is set only on Linux".into())
}

/// Sets the calling thread's scheduling policy (pid 0 is the calling thread on
/// Linux), reset to the ordinary one in any process it starts.
#[cfg(target_os = "linux")]
fn set_policy(policy: libc::c_int, priority: i32) -> Result<(), String> {
    let param = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: `param` outlives the call, which only reads it.
    let status = unsafe { libc::sched_setscheduler(0, policy | libc::SCHED_RESET_ON_FORK, &param) };
    let refused = std::io::Error::last_os_error();
    match (status, refused.raw_os_error()) {
        (0, _) => Ok(()),
        (_, Some(libc::EPERM)) => Err("not permitted to this process".into()),
        _ => Err(refused.to_string()),
    }
}

/// While held, a real-time thread runs under the ordinary policy: a picture takes
/// tens to hundreds of milliseconds of a core, which the devices' requests should
/// not wait for. Nothing on a thread that is not real-time.
pub struct OrdinaryWhile {
    lowered: bool,
}

impl OrdinaryWhile {
    /// Lowers a real-time thread when `draws` says its call draws a picture
    /// (asked only on a real-time thread: nothing is looked up on the others).
    pub fn if_drawing(draws: impl FnOnce() -> bool) -> OrdinaryWhile {
        #[cfg(target_os = "linux")]
        let lowered =
            REALTIME.with(Cell::get) && draws() && set_policy(libc::SCHED_OTHER, 0).is_ok();
        #[cfg(not(target_os = "linux"))]
        let lowered = {
            let _ = draws;
            false
        };
        OrdinaryWhile { lowered }
    }
}

impl Drop for OrdinaryWhile {
    fn drop(&mut self) {
        #[cfg(target_os = "linux")]
        if self.lowered {
            // Allowed once (the thread was made real-time), allowed again; if the
            // privilege went meanwhile, the thread stays ordinary.
            let raised = set_policy(libc::SCHED_RR, TOOLS_REALTIME_PRIORITY).is_ok();
            REALTIME.with(|r| r.set(raised));
        }
    }
}

/// The calling thread's scheduling policy.
#[cfg(all(test, target_os = "linux"))]
fn policy_of_this_thread() -> i32 {
    // SAFETY: a query about the calling thread.
    unsafe { libc::sched_getscheduler(0) & !libc::SCHED_RESET_ON_FORK }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn a_drawing_runs_ordinary_on_a_realtime_thread_and_nothing_changes_on_an_ordinary_one() {
        std::thread::spawn(|| {
            {
                let _drawing = OrdinaryWhile::if_drawing(|| true);
                assert_eq!(policy_of_this_thread(), libc::SCHED_OTHER);
            }
            assert_eq!(policy_of_this_thread(), libc::SCHED_OTHER, "never raised");
            if make_this_thread_realtime().is_err() {
                // No privilege here: the refusal is the answer, and the thread is as it was.
                assert_eq!(policy_of_this_thread(), libc::SCHED_OTHER);
                return;
            }
            assert_eq!(policy_of_this_thread(), libc::SCHED_RR);
            {
                let _drawing = OrdinaryWhile::if_drawing(|| true);
                assert_eq!(policy_of_this_thread(), libc::SCHED_OTHER);
            }
            assert_eq!(policy_of_this_thread(), libc::SCHED_RR, "raised again");
        })
        .join()
        .unwrap();
    }
}
