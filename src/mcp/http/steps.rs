//! The steps every endpoint of the HTTP server shares: its answers, the token check
//! with its log of failures, and a body read by the deadline within the shared
//! budget. The MCP endpoint (`request.rs`) and the live feed's (`ingest.rs`) both
//! take them from here, and neither from the other.

use super::Shared;
use super::answer::AnswerBody;
use super::policy::FailureLog;
use crate::error::{Error, ErrorCode};
use http_body_util::{BodyExt, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response, StatusCode};
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::Instant;

/// An HTTP answer.
pub(super) type Answer = Response<AnswerBody>;

/// Builds a response; `close` asks hyper to end the connection after it.
pub(super) fn respond(
    status: u16,
    body: Option<AnswerBody>,
    headers: &[(&str, String)],
    close: bool,
) -> Answer {
    let mut r = Response::builder()
        .status(StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR));
    if body.is_some() {
        r = r.header("Content-Type", "application/json");
    }
    for (name, value) in headers {
        r = r.header(*name, value.as_str());
    }
    if close {
        r = r.header("Connection", "close");
    }
    r.body(body.unwrap_or_else(|| AnswerBody::unbudgeted(Bytes::new())))
        .unwrap_or_else(|_| {
            let mut broken = Response::new(AnswerBody::unbudgeted(Bytes::new()));
            *broken.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
            broken
        })
}

/// A small body that needs no share of the answer budget.
pub(super) fn small(json: Vec<u8>) -> Option<AnswerBody> {
    Some(AnswerBody::unbudgeted(Bytes::from(json)))
}

pub(super) fn error_answer(
    code: ErrorCode,
    message: impl Into<String>,
    headers: &[(&str, String)],
    close: bool,
) -> Answer {
    refuse(&Error::new(code, message), headers, close)
}

pub(super) fn refuse(e: &Error, headers: &[(&str, String)], close: bool) -> Answer {
    respond(
        e.code.http_status(),
        small(e.to_json().to_string().into_bytes()),
        headers,
        close,
    )
}

pub(super) fn header<'r>(req: &'r Request<Incoming>, name: &str) -> Option<&'r str> {
    req.headers().get(name).and_then(|v| v.to_str().ok())
}

/// A request answered before it reached a worker (boxed: a response is large).
pub(super) type Refused = Box<Answer>;

/// Everything else needs the token: a request without it is a failed attempt, and
/// too many from one address are refused for a minute.
pub(super) fn authenticate(
    token_ok: bool,
    ip: IpAddr,
    failures: &Mutex<FailureLog>,
) -> std::result::Result<(), Refused> {
    if token_ok {
        return Ok(());
    }
    let limited = failures
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .fail(ip, Instant::now());
    Err(Box::new(if limited {
        error_answer(
            ErrorCode::RateLimited,
            "too many failed authentications from this address; wait a minute",
            &[("Retry-After", "60".into())],
            true,
        )
    } else {
        error_answer(
            ErrorCode::Unauthorized,
            "a valid bearer token is required",
            &[("WWW-Authenticate", "Bearer realm=\"fleetctl\"".into())],
            true,
        )
    }))
}

pub(super) fn too_large(limit_bytes: usize, cors: &[(&str, String)]) -> Answer {
    error_answer(
        ErrorCode::TooLarge,
        format!("request body over {limit_bytes} bytes"),
        cors,
        true,
    )
}

/// Reads the body by the deadline, within the shared budget: bodies held at once
/// (being read, queued or run) share one budget, so memory stays bounded whatever the
/// number of clients. The permit goes with the job to its worker. `limit_bytes` is
/// the endpoint's own (an MCP message's, an ingest request's).
pub(super) async fn read_body(
    req: Request<Incoming>,
    limit_bytes: usize,
    shared: &Shared,
    deadline: Instant,
    cors: &[(&str, String)],
) -> std::result::Result<(Bytes, tokio::sync::OwnedSemaphorePermit), Refused> {
    let announced = header(&req, "content-length").and_then(|v| v.parse::<usize>().ok());
    let kib = announced
        .unwrap_or(limit_bytes)
        .min(limit_bytes)
        .div_ceil(1024)
        .max(1) as u32;
    let Ok(budget) = shared.body_budget_kib.clone().try_acquire_many_owned(kib) else {
        return Err(Box::new(error_answer(
            ErrorCode::Busy,
            "too many request bodies in hand; retry shortly",
            &[("Retry-After", "1".into())],
            true,
        )));
    };
    let remaining = deadline.saturating_duration_since(Instant::now());
    let read = tokio::time::timeout(
        remaining,
        Limited::new(req.into_body(), limit_bytes).collect(),
    );
    match read.await {
        Err(_) => Err(Box::new(error_answer(
            ErrorCode::Timeout,
            "request body not received in time",
            cors,
            true,
        ))),
        Ok(Err(e))
            if e.downcast_ref::<http_body_util::LengthLimitError>()
                .is_some() =>
        {
            Err(Box::new(too_large(limit_bytes, cors)))
        }
        Ok(Err(_)) => Err(Box::new(error_answer(
            ErrorCode::InvalidArgument,
            "the request body could not be read",
            cors,
            true,
        ))),
        Ok(Ok(collected)) => {
            let body = collected.to_bytes();
            // A body without a length held the endpoint's whole limit while it came
            // in; from here on it holds its own size (a push waiting for the writer
            // must not keep a megabyte of the shared budget for a small body).
            let mut budget = budget;
            let held = body.len().div_ceil(1024).max(1);
            if budget.num_permits() > held {
                drop(budget.split(budget.num_permits() - held));
            }
            Ok((body, budget))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failed_authentications_are_limited_per_address() {
        let failures = Mutex::new(FailureLog::default());
        let ip: IpAddr = "10.0.0.1".parse().unwrap();
        assert!(authenticate(true, ip, &failures).is_ok());
        let statuses: Vec<u16> = (0..=crate::mcp::http::policy::MAX_FAILURES)
            .map(|_| {
                authenticate(false, ip, &failures)
                    .unwrap_err()
                    .status()
                    .as_u16()
            })
            .collect();
        assert_eq!(statuses[0], 401);
        assert_eq!(*statuses.last().unwrap(), 429);
    }
}
