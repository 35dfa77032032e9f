//! `serve --http --ingest`: the live feed's endpoints, `/ingest/osmand`,
//! `/ingest/traccar` and `/ingest/owntracks`. A request shows the ingest token (not
//! the MCP token: an ingest token only appends positions, and the MCP token never
//! writes), its body is read within the shared budget and the feed's own limit, and
//! it is handed to the feed ([`crate::feed`]), whose 200 means the fixes are on disk.

use super::policy;
use super::steps::{Answer, Refused, authenticate, error_answer, read_body, refuse, respond};
use super::{Conn, Shared};
use crate::error::{Error, ErrorCode};
use crate::feed::{MAX_INGEST_BODY_BYTES, Refusal};
use crate::live::{self, Endpoint};
use hyper::Request;
use hyper::body::{Bytes, Incoming};
use std::sync::atomic::Ordering;
use std::time::Instant;

/// Answers a request to `/ingest/NAME`.
pub(super) async fn answer(
    req: Request<Incoming>,
    name: &str,
    conn: &Conn,
    shared: &Shared,
    deadline: Instant,
) -> std::result::Result<Answer, Refused> {
    let refused = |code, message: String| Box::new(error_answer(code, message, &[], true));
    let Some(feed) = &shared.ingest else {
        return Err(refused(
            ErrorCode::NotFound,
            "this server takes no positions: start it with --ingest".into(),
        ));
    };
    let Some(endpoint) = Endpoint::named(name) else {
        return Err(refused(
            ErrorCode::NotFound,
            format!(
                "no such path /ingest/{name}: use /ingest/osmand, /ingest/traccar or /ingest/owntracks"
            ),
        ));
    };
    let get_allowed = endpoint == Endpoint::Osmand;
    let method = req.method();
    if method != hyper::Method::POST && !(get_allowed && method == hyper::Method::GET) {
        let allow = if get_allowed { "GET, POST" } else { "POST" };
        return Err(Box::new(error_answer(
            ErrorCode::MethodNotAllowed,
            format!("use {allow}"),
            &[("Allow", allow.into())],
            true,
        )));
    }
    let mut query = live::protocols::form_pairs(req.uri().query().unwrap_or(""));
    let query_token = query
        .iter()
        .position(|(k, _)| k == "token")
        .map(|i| query.remove(i).1);
    let presented = policy::presented_ingest_token(
        req.headers().get("authorization").map(|v| v.as_bytes()),
        query_token.as_deref(),
    );
    let token_ok = presented.is_some_and(|t| policy::constant_time_eq(&t, feed.token()));
    if token_ok {
        conn.authenticated.store(true, Ordering::Relaxed);
    }
    authenticate(token_ok, conn.ip, &shared.failures)?;
    if policy::body_too_large(
        req.headers()
            .get("content-length")
            .and_then(|v| v.to_str().ok()),
        MAX_INGEST_BODY_BYTES,
    ) {
        return Err(refused(
            ErrorCode::TooLarge,
            format!("request body over {MAX_INGEST_BODY_BYTES} bytes"),
        ));
    }
    let json = req
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.to_ascii_lowercase().contains("json"));
    // A GET carries its fix in the URL: no body to hold, no share of the budget.
    let (body, budget) = if req.method() == hyper::Method::GET {
        (Bytes::new(), None)
    } else {
        let (body, budget) = read_body(req, MAX_INGEST_BODY_BYTES, shared, deadline, &[]).await?;
        (body, Some(budget))
    };
    conn.clock.take();
    let request = live::Request {
        endpoint,
        query,
        body: body.to_vec(),
        json,
    };
    let outcome = match feed.push(request) {
        Ok(outcome) => outcome,
        Err(Refusal::Stopped) => {
            return Err(Box::new(error_answer(
                ErrorCode::Busy,
                "the feed's writer has stopped; the server is stopping to start again",
                &[("Retry-After", "5".into())],
                false,
            )));
        }
        Err(Refusal::Full) => {
            return Err(Box::new(error_answer(
                ErrorCode::Busy,
                "the feed's queue is full; retry shortly",
                &[("Retry-After", "1".into())],
                false,
            )));
        }
    };
    let outcome = outcome
        .await
        .unwrap_or_else(|_| Err(Error::internal("the feed's writer stopped")));
    drop(budget);
    let stopping = shared.stopping.load(Ordering::Relaxed);
    Ok(match outcome {
        Ok(accepted) => {
            // OwnTracks reads the answer as a list of messages for the device.
            let body = if endpoint == Endpoint::OwnTracks {
                "[]".to_string()
            } else {
                serde_json::json!({
                    "stored": accepted.stored,
                    "duplicates": accepted.duplicates,
                    "ignored": accepted.ignored,
                })
                .to_string()
            };
            respond(
                200,
                Some(super::answer::AnswerBody::unbudgeted(Bytes::from(body))),
                &[],
                stopping,
            )
        }
        // Busy (the database out of reach for now): the device retries after a pause.
        Err(e) if e.code == ErrorCode::Busy => refuse(&e, &[("Retry-After", "2".into())], stopping),
        Err(e) => refuse(&e, &[], stopping),
    })
}
