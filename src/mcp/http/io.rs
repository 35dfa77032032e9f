//! A connection's socket with time limits on both directions, under hyper: a read
//! that waits longer than the idle limit, or a write (or flush) that cannot progress
//! for the write limit, fails the connection. So a client that pipelines requests and
//! never reads the answers, or opens a connection and says nothing, cannot hold a
//! slot. It also notes when the current request's first byte arrived, so that the
//! whole request — headers and body — fits in one `--request-timeout-s`, and since
//! when a write has been waiting, so that a full server can close the connection
//! that has longest not read its answers.

use std::io;
use std::pin::Pin;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll, ready};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Sleep, sleep};

/// When the bytes of the request being read started to arrive (taken by the handler),
/// and whether a request is in hand (hyper keeps reading then, to notice a client that
/// leaves; that wait is not idleness).
#[derive(Default)]
pub struct RequestClock {
    first_byte: Mutex<Option<Instant>>,
    in_hand: AtomicUsize,
    write_waiting_since: Mutex<Option<Instant>>,
}

impl RequestClock {
    fn note_bytes(&self) {
        self.first_byte
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_or_insert_with(Instant::now);
    }

    /// The first byte's time for the request now being handled, and a fresh start for
    /// the next one.
    pub fn take(&self) -> Instant {
        self.first_byte
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
            .unwrap_or_else(Instant::now)
    }

    /// Marks a request in hand until the guard is dropped.
    pub fn in_hand(self: &std::sync::Arc<Self>) -> InHand {
        self.in_hand.fetch_add(1, Ordering::Relaxed);
        InHand(self.clone())
    }

    fn idle(&self) -> bool {
        self.in_hand.load(Ordering::Relaxed) == 0
    }

    /// Since when the answer being written has waited for the client to read, if it
    /// is waiting.
    pub fn write_waiting_since(&self) -> Option<Instant> {
        *self
            .write_waiting_since
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    fn note_write(&self, waiting: bool) {
        let mut since = self
            .write_waiting_since
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if !waiting {
            *since = None;
        } else if since.is_none() {
            *since = Some(Instant::now());
        }
    }
}

/// A request in hand (see `RequestClock::in_hand`).
pub struct InHand(std::sync::Arc<RequestClock>);

impl Drop for InHand {
    fn drop(&mut self) {
        self.0.in_hand.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A stream whose reads and writes may not stall past their limits.
pub struct Deadlined<S> {
    inner: S,
    idle: Duration,
    write: Duration,
    read_wait: Option<Pin<Box<Sleep>>>,
    write_wait: Option<Pin<Box<Sleep>>>,
    clock: std::sync::Arc<RequestClock>,
}

impl<S> Deadlined<S> {
    /// Wraps `inner`: reads may wait `idle`, writes `write`.
    pub fn new(
        inner: S,
        idle: Duration,
        write: Duration,
        clock: std::sync::Arc<RequestClock>,
    ) -> Self {
        Deadlined {
            inner,
            idle,
            write,
            read_wait: None,
            write_wait: None,
            clock,
        }
    }
}

/// Polls the stall timer of one direction; an error once it has run out.
fn stalled(
    wait: &mut Option<Pin<Box<Sleep>>>,
    limit: Duration,
    cx: &mut Context<'_>,
    what: &str,
) -> Poll<io::Error> {
    let timer = wait.get_or_insert_with(|| Box::pin(sleep(limit)));
    ready!(timer.as_mut().poll(cx));
    Poll::Ready(io::Error::new(
        io::ErrorKind::TimedOut,
        format!("{what} stalled for {} s", limit.as_secs_f64()),
    ))
}

impl<S> Deadlined<S> {
    /// A write or flush's outcome: progress resets the stall timer; waiting starts it
    /// (and marks the connection as not reading) and fails once it runs out.
    fn writing<T>(
        &mut self,
        polled: Poll<io::Result<T>>,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<T>> {
        match polled {
            Poll::Ready(r) => {
                self.write_wait = None;
                self.clock.note_write(false);
                Poll::Ready(r)
            }
            Poll::Pending => {
                self.clock.note_write(true);
                stalled(&mut self.write_wait, self.write, cx, "writing").map(Err)
            }
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Deadlined<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        let before = buf.filled().len();
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(r) => {
                this.read_wait = None;
                if buf.filled().len() > before {
                    this.clock.note_bytes();
                }
                Poll::Ready(r)
            }
            Poll::Pending if !this.clock.idle() => {
                this.read_wait = None;
                Poll::Pending
            }
            Poll::Pending => stalled(&mut this.read_wait, this.idle, cx, "reading").map(Err),
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Deadlined<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        let polled = Pin::new(&mut this.inner).poll_write(cx, data);
        this.writing(polled, cx)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        let polled = Pin::new(&mut this.inner).poll_flush(cx);
        this.writing(polled, cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
