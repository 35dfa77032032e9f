//! Two event loops when devices push positions: a connection whose first request is
//! `/ingest/…` stays on the accepting loop, any other (MCP, OpenAPI) moves to a loop
//! of its own. A fleet keeps a thousand connections busy; on one loop a tool call's
//! request and answer each waited behind a round of them (tens of milliseconds at
//! full rate), on its own loop it waits only for the worker that runs it.

use crate::error::{Error, Result};
use std::future::Future;
use std::time::Duration;
use tokio::net::TcpStream;

/// How long a new connection may take to send its first bytes before it is closed
/// (the same as a kept-alive connection's wait for its next request).
const FIRST_BYTES_WAIT: Duration = super::IDLE_TIMEOUT;

/// The tool calls' event loop, on its own thread until dropped.
pub(super) struct ToolsLane {
    handle: tokio::runtime::Handle,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ToolsLane {
    /// Starts the loop, under a real-time policy when `realtime` (the process was
    /// found to be allowed one).
    pub(super) fn start(realtime: bool) -> Result<ToolsLane> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()
            .map_err(|e| Error::internal(format!("starting the tools' HTTP runtime: {e}")))?;
        let handle = runtime.handle().clone();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = crate::threads::spawn_named("http-tools", move || {
            if realtime {
                let _ = crate::threads::make_this_thread_realtime();
            }
            let _ = runtime.block_on(stopped);
        })?;
        Ok(ToolsLane {
            handle,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    pub(super) fn handle(&self) -> tokio::runtime::Handle {
        self.handle.clone()
    }
}

impl Drop for ToolsLane {
    /// Stops the loop once the accepting one has finished or aborted its tasks.
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Serves a connection with `serve` on the accepting loop, or, when there is a tools
/// lane and its first request is not an ingest, on that lane. Aborting the returned
/// future's task aborts the connection on whichever loop it runs.
pub(super) async fn serve_in_its_lane<S, F>(
    stream: TcpStream,
    tools: Option<tokio::runtime::Handle>,
    serve: S,
) where
    S: FnOnce(TcpStream) -> F + Send + 'static,
    F: Future<Output = ()> + Send + 'static,
{
    let Some(tools) = tools else {
        return serve(stream).await;
    };
    let mut first = [0u8; 24];
    let peeked = match tokio::time::timeout(FIRST_BYTES_WAIT, stream.peek(&mut first)).await {
        Ok(Ok(n)) if n > 0 => n,
        // Closed, failed or silent: nothing to serve.
        _ => return,
    };
    if is_ingest(&first[..peeked]) {
        return serve(stream).await;
    }
    let Ok(stream) = stream.into_std() else {
        return;
    };
    let moved = tools.spawn(async move {
        if let Ok(stream) = TcpStream::from_std(stream) {
            serve(stream).await;
        }
    });
    let _abort = AbortOnDrop(moved.abort_handle());
    let _ = moved.await;
}

/// Whether a request's first bytes are an ingest's request line
/// (`GET /ingest/osmand?…`, `POST /ingest/traccar …`).
fn is_ingest(first: &[u8]) -> bool {
    first
        .iter()
        .position(|&b| b == b' ')
        .is_some_and(|space| first[space + 1..].starts_with(b"/ingest/"))
}

/// Aborts a task when dropped (its waiter aborted).
struct AbortOnDrop(tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::is_ingest;

    #[test]
    fn an_ingest_request_line_is_told_from_a_tool_call() {
        assert!(is_ingest(b"GET /ingest/osmand?id=1&lat"));
        assert!(is_ingest(b"POST /ingest/owntracks HTTP"));
        assert!(!is_ingest(b"POST /mcp HTTP/1.1\r\n"));
        assert!(!is_ingest(b"GET /openapi.json HTTP/1.1"));
        assert!(!is_ingest(b"POST /api/v1/ingest/x"));
        assert!(!is_ingest(b"GET"));
    }
}
