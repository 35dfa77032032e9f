//! The canvases pictures are drawn on, lent from one pool: at most one per core, so a
//! server whose workers all draw 2048² maps at once holds a core's worth of 12 MB
//! canvases, not a worker's worth (drawing is CPU work: more at once than cores gains
//! nothing). A canvas is kept for the next picture rather than freed and allocated
//! again.

use std::sync::{Condvar, Mutex};

/// Canvases not lent out, and how many are.
struct Pool {
    free: Vec<Vec<u8>>,
    lent: usize,
}

static POOL: Mutex<Pool> = Mutex::new(Pool {
    free: Vec::new(),
    lent: 0,
});
static RETURNED: Condvar = Condvar::new();

/// Canvases that may exist at once: one per core, at least one.
fn most_at_once() -> usize {
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// A canvas's place in the pool while it is lent: dropping it (even while unwinding)
/// frees the place, and gives the canvas back when there is one to give.
struct Lent(Option<Vec<u8>>);

impl Drop for Lent {
    fn drop(&mut self) {
        let mut pool = POOL.lock().unwrap_or_else(|e| e.into_inner());
        pool.lent -= 1;
        pool.free.extend(self.0.take());
        RETURNED.notify_one();
    }
}

/// Runs `draw` on a canvas from the pool, waiting while every canvas is lent.
pub(crate) fn with_canvas<T>(draw: impl FnOnce(&mut Vec<u8>) -> T) -> T {
    let (mut canvas, mut place) = {
        let mut pool = POOL.lock().unwrap_or_else(|e| e.into_inner());
        while pool.free.is_empty() && pool.lent >= most_at_once() {
            pool = RETURNED.wait(pool).unwrap_or_else(|e| e.into_inner());
        }
        pool.lent += 1;
        (pool.free.pop().unwrap_or_default(), Lent(None))
    };
    let drawn = draw(&mut canvas);
    place.0 = Some(canvas);
    drawn
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_more_canvases_than_cores_whatever_the_threads() {
        let threads: Vec<_> = (0..4 * most_at_once())
            .map(|_| {
                std::thread::spawn(|| {
                    with_canvas(|canvas| {
                        canvas.resize(1024, 0);
                        POOL.lock().unwrap().lent
                    })
                })
            })
            .collect();
        for t in threads {
            let lent_while_drawing = t.join().unwrap();
            assert!((1..=most_at_once()).contains(&lent_while_drawing));
        }
        let pool = POOL.lock().unwrap();
        assert_eq!(pool.lent, 0);
        assert!(pool.free.len() <= most_at_once());
    }
}
