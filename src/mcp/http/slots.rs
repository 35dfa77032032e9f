//! Connection slots: how many connections the server holds, from whom, and which one
//! gives way when it is full; and one connection's life.

use super::io::{Deadlined, RequestClock};
use super::request::handle;
use super::{Conn, MAX_CONNECTIONS_PER_ADDRESS, Shared};
use crate::error::{Error, ErrorCode};
use crate::logging;
use hyper::Request;
use hyper::body::Incoming;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long an answer must have waited for its client before the connection counts
/// as not reading.
const UNREAD_GRACE: Duration = Duration::from_secs(1);

/// The open connections, for the per-address cap and for making room.
#[derive(Default)]
pub(super) struct Registry {
    pub(super) next_id: u64,
    pub(super) open: HashMap<u64, Slot>,
}

pub(super) struct Slot {
    pub(super) ip: IpAddr,
    pub(super) opened: Instant,
    pub(super) authenticated: Arc<AtomicBool>,
    pub(super) clock: Arc<RequestClock>,
    pub(super) abort: tokio::task::AbortHandle,
}

impl Registry {
    /// Makes room for a connection from `ip`: `false` when the server is full of
    /// connections that have all shown the token and read their answers. Otherwise
    /// the oldest connection that has shown no token is closed, else the one that
    /// has longest not read its answers (of this address when the address is at its
    /// cap): a token holder who pipelines and never reads cannot lock others out.
    pub(super) fn make_room(&mut self, ip: IpAddr, max_total: usize) -> bool {
        let from_ip = self.open.values().filter(|s| s.ip == ip).count();
        let same_ip_only = from_ip >= MAX_CONNECTIONS_PER_ADDRESS;
        if !same_ip_only && self.open.len() < max_total {
            return true;
        }
        let within = |s: &Slot| !same_ip_only || s.ip == ip;
        let anonymous = self
            .open
            .iter()
            .filter(|(_, s)| within(s) && !s.authenticated.load(Ordering::Relaxed))
            .min_by_key(|(_, s)| s.opened)
            .map(|(id, _)| *id);
        let victim = anonymous.or_else(|| self.longest_unread(within));
        victim.is_some_and(|id| self.close(id, "to make room for a new one"))
    }

    /// Closes the connection that has longest not read its answers, if one has not;
    /// `false` when every connection reads.
    pub(super) fn close_longest_unread(&mut self, why: &str) -> bool {
        let victim = self.longest_unread(|_| true);
        victim.is_some_and(|id| self.close(id, why))
    }

    /// The connection among `within` whose answer has waited longest for its client,
    /// at least `UNREAD_GRACE` (a client reading a large answer waits a moment too).
    fn longest_unread(&self, within: impl Fn(&Slot) -> bool) -> Option<u64> {
        self.open
            .iter()
            .filter(|(_, s)| within(s))
            .filter_map(|(id, s)| Some((*id, s.clock.write_waiting_since()?)))
            .filter(|(_, since)| since.elapsed() >= UNREAD_GRACE)
            .min_by_key(|(_, since)| *since)
            .map(|(id, _)| id)
    }

    fn close(&mut self, id: u64, why: &str) -> bool {
        let Some(slot) = self.open.remove(&id) else {
            return false;
        };
        slot.abort.abort();
        if let Some(since) = slot.clock.write_waiting_since() {
            logging::info(&format!(
                "http: {}: closed a connection that had not read its answers for {:.1} s, {why}",
                slot.ip,
                since.elapsed().as_secs_f64()
            ));
        }
        true
    }
}

/// Removes a connection's slot when its task ends, however it ends.
pub(super) struct Leave(pub(super) Arc<Mutex<Registry>>, pub(super) u64);

impl Drop for Leave {
    fn drop(&mut self) {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .open
            .remove(&self.1);
    }
}

/// Answers a connection there is no room for, and closes it.
pub(super) async fn turn_away(mut stream: tokio::net::TcpStream) {
    use tokio::io::AsyncWriteExt;
    let body = Error::new(ErrorCode::Busy, "too many connections; retry shortly")
        .to_json()
        .to_string();
    let head = format!(
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nContent-Length: {}\r\nRetry-After: 1\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        stream.write_all(head.as_bytes()).await?;
        stream.write_all(body.as_bytes()).await?;
        stream.shutdown().await
    })
    .await;
}

/// One connection's life: requests served with keep-alive until the client leaves,
/// a deadline passes, or the server stops (then the request in hand is finished).
/// Each request is logged with its status and time (an accepted ingest request
/// only with `--verbose`).
pub(super) async fn serve_connection(
    io: hyper_util::rt::TokioIo<Deadlined<tokio::net::TcpStream>>,
    conn: Arc<Conn>,
    shared: Arc<Shared>,
    mut stop_rx: tokio::sync::watch::Receiver<bool>,
    request_timeout: Duration,
    _leave: Leave,
) {
    let service = hyper::service::service_fn(move |req: Request<Incoming>| {
        let (conn, shared) = (conn.clone(), shared.clone());
        async move {
            let line = format!("{} {}", req.method(), req.uri().path());
            let ingest = req.uri().path().starts_with("/ingest/");
            let started = Instant::now();
            let answer = handle(req, &conn, &shared).await;
            let said = || {
                format!(
                    "http: {} {line} {} {:.2} ms",
                    conn.ip,
                    answer.status().as_u16(),
                    started.elapsed().as_secs_f64() * 1000.0
                )
            };
            // A fleet pushes thousands of fixes a second: each accepted one is in the
            // feed's minute summary, and its own line only with --verbose. A refusal
            // keeps its line (the reason a device owner will ask about).
            if answer.status().is_success() && ingest {
                logging::verbose(said);
            } else {
                logging::info(&said());
            }
            Ok::<_, std::convert::Infallible>(answer)
        }
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(request_timeout)
        .max_buf_size(64 * 1024)
        .keep_alive(true);
    let connection = builder.serve_connection(io, service);
    tokio::pin!(connection);
    tokio::select! {
        _ = connection.as_mut() => {}
        _ = stop_rx.changed() => {
            connection.as_mut().graceful_shutdown();
            let _ = connection.await;
        }
    }
}
