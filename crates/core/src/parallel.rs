//! Work on every core with one writer: jobs fed in order on the calling thread,
//! done by worker threads, and their results taken back on the calling thread in
//! the order they were fed — so a database written from the results comes out the
//! same as from one thread, and only the calling thread touches the connection.

use crate::error::{Error, Result};
use std::sync::{Arc, Mutex, mpsc};

/// Hands one job to the workers.
pub type Submit<'s, J> = dyn FnMut(J) -> Result<()> + 's;

/// Whether to go on: `take` may say `Break` to end the work early (what was fed is
/// finished and dropped, nothing more is fed); `submit` then says `Break` too.
pub type Flow = std::ops::ControlFlow<()>;

/// Hands one job to the workers, or says the work has ended.
pub type SubmitFlow<'s, J> = dyn FnMut(J) -> Result<Flow> + 's;

/// Runs `work` over the jobs `feed` submits, on up to eight worker threads (one per
/// core), and gives each result to `take` in submission order. At most four jobs per
/// worker are in flight (waiting, running, or done and waiting for an earlier one to
/// be taken), so memory stays flat however many jobs there are and however slow one
/// of them is.
pub fn map_in_order<J: Send, R: Send>(
    work: &(dyn Fn(J) -> R + Sync),
    feed: &mut dyn FnMut(&mut Submit<J>) -> Result<()>,
    take: &mut dyn FnMut(R) -> Result<()>,
) -> Result<()> {
    map_in_order_on(cores(), work, feed, take)
}

/// The cores this process may use, up to eight.
pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get().min(8))
}

/// [`map_in_order`] on `workers` worker threads (at least one): fewer than the
/// cores when taking a result costs as much as making it, so that the taking
/// thread keeps a core of its own.
pub fn map_in_order_on<J: Send, R: Send>(
    workers: usize,
    work: &(dyn Fn(J) -> R + Sync),
    feed: &mut dyn FnMut(&mut Submit<J>) -> Result<()>,
    take: &mut dyn FnMut(R) -> Result<()>,
) -> Result<()> {
    map_in_order_until(
        workers,
        work,
        &mut |submit| feed(&mut |job| submit(job).map(drop)),
        &mut |r| take(r).map(|()| Flow::Continue(())),
    )
}

/// [`map_in_order_on`] for work a result may end early: when `take` answers
/// `Break`, no more results are taken and every later `submit` answers `Break`
/// (the feeder stops there), and the call returns `Ok`.
pub fn map_in_order_until<J: Send, R: Send>(
    workers: usize,
    work: &(dyn Fn(J) -> R + Sync),
    feed: &mut dyn FnMut(&mut SubmitFlow<J>) -> Result<()>,
    take: &mut dyn FnMut(R) -> Result<Flow>,
) -> Result<()> {
    let workers = workers.max(1);
    std::thread::scope(|scope| {
        let (job_tx, job_rx) = mpsc::sync_channel::<(usize, J)>(workers * 2);
        let job_rx = Arc::new(Mutex::new(job_rx));
        let (done_tx, done_rx) = mpsc::channel::<(usize, R)>();
        for _ in 0..workers {
            let (job_rx, done_tx) = (Arc::clone(&job_rx), done_tx.clone());
            scope.spawn(move || {
                loop {
                    let job = job_rx
                        .lock()
                        .map_err(drop)
                        .and_then(|rx| rx.recv().map_err(drop));
                    let Ok((seq, job)) = job else { break };
                    if done_tx.send((seq, work(job))).is_err() {
                        break;
                    }
                }
            });
        }
        drop(done_tx);
        let mut waiting = std::collections::BTreeMap::new();
        // Results taken so far: jobs in flight are those submitted and not yet taken.
        let next = std::cell::Cell::new(0usize);
        let ended = std::cell::Cell::new(false);
        let mut arrived = |seq: usize, r: R| -> Result<()> {
            if ended.get() {
                return Ok(());
            }
            waiting.insert(seq, r);
            while !ended.get()
                && let Some(r) = waiting.remove(&next.get())
            {
                if take(r)?.is_break() {
                    ended.set(true);
                    waiting.clear();
                }
                next.set(next.get() + 1);
            }
            Ok(())
        };
        let mut submitted = 0usize;
        let max_in_flight = workers * 4;
        let stopped = || Error::internal("a worker thread stopped");
        let fed = feed(&mut |job| {
            if ended.get() {
                return Ok(Flow::Break(()));
            }
            // A slow job holds back the results after it: wait for it rather than let
            // them pile up.
            while submitted - next.get() >= max_in_flight && !ended.get() {
                let (seq, r) = done_rx.recv().map_err(|_| stopped())?;
                arrived(seq, r)?;
            }
            if ended.get() {
                return Ok(Flow::Break(()));
            }
            let mut job = (submitted, job);
            // While the line is full, this thread takes results rather than wait idle.
            while let Err(refused) = job_tx.try_send(job) {
                job = match refused {
                    mpsc::TrySendError::Full(job) => job,
                    mpsc::TrySendError::Disconnected(_) => return Err(stopped()),
                };
                let (seq, r) = done_rx.recv().map_err(|_| stopped())?;
                arrived(seq, r)?;
            }
            submitted += 1;
            while let Ok((seq, r)) = done_rx.try_recv() {
                arrived(seq, r)?;
            }
            Ok(if ended.get() {
                Flow::Break(())
            } else {
                Flow::Continue(())
            })
        });
        drop(job_tx);
        fed?;
        for (seq, r) in done_rx.iter() {
            arrived(seq, r)?;
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_come_back_in_the_order_jobs_went_in() {
        let mut out = Vec::new();
        map_in_order(
            &|n: u64| {
                // Later jobs finish first.
                std::thread::yield_now();
                n * n
            },
            &mut |submit| (0..1000u64).rev().try_for_each(&mut *submit),
            &mut |r| {
                out.push(r);
                Ok(())
            },
        )
        .unwrap();
        let expected: Vec<u64> = (0..1000u64).rev().map(|n| n * n).collect();
        assert_eq!(out, expected);
    }

    #[test]
    fn a_slow_job_never_lets_results_pile_up_behind_it() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let workers = 2;
        let cap = workers * 4;
        let submitted = AtomicUsize::new(0);
        let mut taken = 0usize;
        let mut most_ahead = 0usize;
        map_in_order_on(
            workers,
            &|n: usize| {
                // Job 0 is slow: it ends only once the feeder has as many jobs in
                // flight as it may have (the jobs after it done meanwhile).
                while n == 0 && submitted.load(Ordering::SeqCst) < cap {
                    std::thread::yield_now();
                }
                n
            },
            &mut |submit| {
                for n in 0..200 {
                    submit(n)?;
                    submitted.fetch_add(1, Ordering::SeqCst);
                }
                Ok(())
            },
            &mut |_| {
                taken += 1;
                most_ahead = most_ahead.max(submitted.load(Ordering::SeqCst) + 1 - taken);
                Ok(())
            },
        )
        .unwrap();
        assert_eq!(taken, 200);
        assert!(
            most_ahead <= cap + 1,
            "{most_ahead} results waited on one slow job"
        );
    }

    #[test]
    fn an_error_while_feeding_or_taking_stops_the_work() {
        let err = map_in_order(
            &|n: u32| n,
            &mut |submit| {
                submit(1)?;
                Err(Error::invalid("feeding failed"))
            },
            &mut |_| Ok(()),
        )
        .unwrap_err();
        assert_eq!(err.message, "feeding failed");
        let err = map_in_order(
            &|n: u32| n,
            &mut |submit| (0..100).try_for_each(&mut *submit),
            &mut |n| {
                if n == 50 {
                    Err(Error::invalid("writing failed"))
                } else {
                    Ok(())
                }
            },
        )
        .unwrap_err();
        assert_eq!(err.message, "writing failed");
    }
}
