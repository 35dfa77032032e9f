//! An import into PostgreSQL analyses each vehicle it adds from the rows it appends,
//! on worker threads while the reading goes on, instead of reading every fix back
//! from the server once the rows are in: the read-back was most of an import's time.
//! A vehicle the fleet already had, or one whose rows came in several windows, is
//! analysed after the rows as before (`pipeline::detect_vehicles_postgres`), from
//! everything stored.

use crate::analyze::{self, Context};
use crate::error::{Error, Result};
use crate::model::{Fix, VehicleAnalysis};
use std::sync::{Arc, Mutex, mpsc};
use std::thread::JoinHandle;

/// Worker threads analysing vehicles beside the import, and what they found, until
/// the import writes it.
pub(super) struct Beside {
    jobs: Option<mpsc::SyncSender<Vec<Fix>>>,
    found: mpsc::Receiver<(usize, VehicleAnalysis)>,
    workers: Vec<JoinHandle<()>>,
    /// Vehicles handed over whose analysis has not been taken yet.
    in_flight: usize,
    /// The vehicles handed over: the analysis after the rows leaves them out.
    pub(super) analysed: std::collections::HashSet<i64>,
}

impl Beside {
    /// A worker per core, analysing with `ctx` (the fleet's stored context).
    pub(super) fn start(ctx: Arc<Context>) -> Beside {
        let workers = crate::parallel::cores();
        // Two vehicles waiting per worker at most: memory stays flat.
        let (jobs, queue) = mpsc::sync_channel::<Vec<Fix>>(workers * 2);
        let queue = Arc::new(Mutex::new(queue));
        let (done, found) = mpsc::channel();
        let workers = (0..workers)
            .map(|_| {
                let (queue, done, ctx) = (queue.clone(), done.clone(), ctx.clone());
                std::thread::spawn(move || {
                    loop {
                        let next = queue
                            .lock()
                            .map_err(drop)
                            .and_then(|q| q.recv().map_err(drop));
                        let Ok(fixes) = next else { break };
                        let found = analyze::analyze_vehicle(&fixes, &ctx);
                        if done.send((fixes.len(), found)).is_err() {
                            break;
                        }
                    }
                })
            })
            .collect();
        Beside {
            jobs: Some(jobs),
            found,
            workers,
            in_flight: 0,
            analysed: Default::default(),
        }
    }

    /// Hands over every fix of one vehicle the import added (as the store keeps them,
    /// in time order); `write` gets each analysis that is ready meanwhile.
    pub(super) fn submit(
        &mut self,
        fixes: Vec<Fix>,
        write: &mut dyn FnMut(usize, VehicleAnalysis) -> Result<()>,
    ) -> Result<()> {
        let Some(vehicle_id) = fixes.first().map(|f| f.vehicle_id) else {
            return Ok(());
        };
        let jobs = self.jobs.as_ref().ok_or_else(stopped)?;
        jobs.send(fixes).map_err(|_| stopped())?;
        self.analysed.insert(vehicle_id);
        self.in_flight += 1;
        while let Ok((n, a)) = self.found.try_recv() {
            self.in_flight -= 1;
            write(n, a)?;
        }
        Ok(())
    }

    /// Waits for the analyses still running and gives each to `write`.
    pub(super) fn finish(
        &mut self,
        write: &mut dyn FnMut(usize, VehicleAnalysis) -> Result<()>,
    ) -> Result<()> {
        drop(self.jobs.take());
        while self.in_flight > 0 {
            let (n, a) = self.found.recv().map_err(|_| stopped())?;
            self.in_flight -= 1;
            write(n, a)?;
        }
        Ok(())
    }
}

/// A worker ended before its work did (it panicked).
fn stopped() -> Error {
    Error::internal("an analysis worker of the import stopped")
}

impl Drop for Beside {
    /// Stops the workers: the queue closes, and each ends after its vehicle.
    fn drop(&mut self) {
        drop(self.jobs.take());
        for worker in self.workers.drain(..) {
            let _ = worker.join();
        }
    }
}
