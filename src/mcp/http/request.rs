//! One HTTP request, step by step: the `Host` check, the answers that need no token,
//! the token, the route, the body within the shared budget, then a worker. Each step
//! either lets the request go on or is its answer.

use super::answer::AnswerBody;
use super::policy;
use super::steps::{
    Answer, Refused, authenticate, error_answer, header, read_body, refuse, respond, small,
    too_large,
};
use super::worker::{Job, Reply};
use super::{Conn, MAX_BODY_BYTES, Shared, Task};
use crate::error::{Error, ErrorCode};
use hyper::Request;
use hyper::body::{Bytes, Incoming};
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::mpsc::TrySendError;
use std::time::Instant;

fn forbidden_origin(origin: &str) -> Answer {
    error_answer(
        ErrorCode::Forbidden,
        format!("origin {origin:?} is not allowed"),
        &[],
        true,
    )
}

/// Answers one request (the log line is written by the caller). Each step below
/// either lets the request go on or is its answer (`Err`).
pub(super) async fn handle(req: Request<Incoming>, conn: &Conn, shared: &Shared) -> Answer {
    let _in_hand = conn.clock.in_hand();
    let deadline = conn.clock.take() + shared.request_timeout;
    match answer(req, conn, shared, deadline).await {
        Ok(answer) => answer,
        Err(refused) => *refused,
    }
}

async fn answer(
    req: Request<Incoming>,
    conn: &Conn,
    shared: &Shared,
    deadline: Instant,
) -> std::result::Result<Answer, Refused> {
    check_host(
        req.headers(),
        req.uri(),
        req.version(),
        &conn.local,
        &shared.allowed_hosts,
    )?;
    if let Some(name) = req.uri().path().strip_prefix("/ingest/") {
        let name = name.to_string();
        return super::ingest::answer(req, &name, conn, shared, deadline).await;
    }
    let cors = policy::cors(
        header(&req, "origin"),
        &shared.allowed_origins,
        req.method() == hyper::Method::OPTIONS,
    );
    let token = req.headers().get("authorization").map(|v| v.as_bytes());
    let token_ok = policy::bearer_matches(token, &shared.token);
    if token_ok {
        conn.authenticated.store(true, Ordering::Relaxed);
    }
    let anonymous = !conn.authenticated.load(Ordering::Relaxed);
    // Asked only by a health check.
    let problem = match req.uri().path() {
        "/healthz" => shared.ingest.as_ref().and_then(|f| f.health.problem()),
        _ => None,
    };
    if let Some(answer) = open_answer(
        req.method(),
        req.uri().path(),
        &cors,
        &shared.openapi,
        problem,
        anonymous,
    ) {
        return Ok(answer);
    }
    authenticate(token_ok, conn.ip, &shared.failures)?;
    let cors = match cors {
        policy::Cors::Allowed(headers) => headers,
        policy::Cors::Refused(o) => return Err(Box::new(forbidden_origin(&o))),
        policy::Cors::NoOrigin => Vec::new(),
    };
    let route = route_of(req.method(), req.uri().path(), &cors)?;
    if policy::body_too_large(header(&req, "content-length"), MAX_BODY_BYTES) {
        return Err(Box::new(too_large(MAX_BODY_BYTES, &cors)));
    }
    let protocol_headers: HashMap<String, String> =
        ["mcp-protocol-version", "mcp-method", "mcp-name"]
            .into_iter()
            .filter_map(|n| header(&req, n).map(|v| (n.to_string(), v.to_string())))
            .collect();
    let (body, budget) = read_body(req, MAX_BODY_BYTES, shared, deadline, &cors).await?;
    // Bytes that arrived while the body was read belong to this request, not the next.
    conn.clock.take();
    let job = match route {
        None => Job::Mcp {
            body,
            headers: protocol_headers,
        },
        Some(name) => Job::Tool { name, body },
    };
    dispatch(job, budget, shared, &cors).await
}

/// DNS rebinding: a page on another name must not reach a loopback server. Two Host
/// headers are a bad request (RFC 9112 §3.2); an absolute URL's authority is the host
/// the request is for, whatever its Host header says (§3.2.2).
fn check_host(
    headers: &hyper::HeaderMap,
    uri: &hyper::Uri,
    version: hyper::Version,
    local: &str,
    allowed_hosts: &[String],
) -> std::result::Result<(), Refused> {
    if headers.get_all("host").iter().count() > 1 {
        return Err(Box::new(error_answer(
            ErrorCode::InvalidArgument,
            "a request has one Host header; this one has several",
            &[],
            true,
        )));
    }
    let host = uri
        .authority()
        .map(|a| a.as_str())
        .or_else(|| headers.get("host").and_then(|v| v.to_str().ok()));
    match host {
        None if version == hyper::Version::HTTP_11 => Err(Box::new(error_answer(
            ErrorCode::InvalidArgument,
            "HTTP/1.1 requests need a Host header",
            &[],
            true,
        ))),
        Some(h) if !policy::host_allowed(h, local, allowed_hosts) => {
            let e = Error::new(
                ErrorCode::Forbidden,
                format!("host {h:?} is not served here"),
            )
            .with_hint("start the server with --allow-host NAME to answer to that name");
            Err(Box::new(refuse(&e, &[], true)))
        }
        _ => Ok(()),
    }
}

/// The answers that need no token: health, the OpenAPI document and CORS preflights.
/// Their connection closes unless it has shown a valid token (`anonymous` false),
/// before or with this request; a wrong one here is no failed attempt, as nothing was
/// asked that needs it.
fn open_answer(
    method: &hyper::Method,
    path: &str,
    cors: &policy::Cors,
    openapi: &Bytes,
    problem: Option<String>,
    anonymous: bool,
) -> Option<Answer> {
    match (method.as_str(), path) {
        ("GET", "/healthz") => Some(match problem {
            None => respond(200, small(br#"{"status":"ok"}"#.to_vec()), &[], anonymous),
            // Pushes cannot be stored now: a load balancer or supervisor must know.
            Some(problem) => respond(
                503,
                small(
                    serde_json::json!({"status": "failing", "problem": problem})
                        .to_string()
                        .into_bytes(),
                ),
                &[("Retry-After", "5".into())],
                anonymous,
            ),
        }),
        ("GET", "/openapi.json") => Some(respond(
            200,
            Some(AnswerBody::unbudgeted(openapi.clone())),
            &[],
            anonymous,
        )),
        ("OPTIONS", _) => Some(match cors {
            policy::Cors::Allowed(headers) => respond(204, None, headers, anonymous),
            policy::Cors::Refused(o) => forbidden_origin(o),
            policy::Cors::NoOrigin => error_answer(
                ErrorCode::MethodNotAllowed,
                "use POST",
                &[("Allow", "POST".into())],
                true,
            ),
        }),
        _ => None,
    }
}

/// Where a POST goes: `/mcp` (None) or one tool's REST twin (its name).
fn route_of(
    method: &hyper::Method,
    path: &str,
    cors: &[(&str, String)],
) -> std::result::Result<Option<String>, Refused> {
    let route = match path {
        "/mcp" => None,
        p => match p.strip_prefix("/api/v1/tools/") {
            Some(name) if !name.is_empty() && !name.contains('/') => Some(name.to_string()),
            _ => {
                return Err(Box::new(error_answer(
                    ErrorCode::NotFound,
                    format!("no such path {p}"),
                    cors,
                    true,
                )));
            }
        },
    };
    if method != hyper::Method::POST {
        return Err(Box::new(error_answer(
            ErrorCode::MethodNotAllowed,
            "use POST",
            &[("Allow", "POST".into())],
            true,
        )));
    }
    Ok(route)
}

/// Hands the job to a worker (or answers 503 when none can take it) and answers with
/// its reply.
async fn dispatch(
    job: Job,
    budget: tokio::sync::OwnedSemaphorePermit,
    shared: &Shared,
    cors: &[(&str, String)],
) -> std::result::Result<Answer, Refused> {
    let (reply, answer) = tokio::sync::oneshot::channel();
    let task = Task {
        job,
        reply,
        _budget: budget,
    };
    let reply = match shared.jobs.try_send(task) {
        Ok(()) => answer
            .await
            .unwrap_or_else(|_| Reply::error(&Error::internal("the worker failed"))),
        Err(TrySendError::Full(_)) => {
            return Err(Box::new(error_answer(
                ErrorCode::Busy,
                "all workers are busy; retry shortly",
                &[("Retry-After", "1".into())],
                false,
            )));
        }
        Err(TrySendError::Disconnected(_)) => {
            return Err(Box::new(error_answer(
                ErrorCode::Busy,
                "the server is stopping",
                &[("Retry-After", "1".into())],
                true,
            )));
        }
    };
    let stopping = shared.stopping.load(Ordering::Relaxed);
    let body = match reply.body {
        None => None,
        Some(body) => Some(budgeted(body, shared, cors)?),
    };
    Ok(respond(reply.status, body, cors, stopping))
}

/// A worker's answer with its share of the answer budget: when answers waiting for
/// clients that do not read fill the budget, this one is dropped for a 503 and the
/// connection that has longest not read is closed, so that the retry finds room.
fn budgeted(
    body: Bytes,
    shared: &Shared,
    cors: &[(&str, String)],
) -> std::result::Result<AnswerBody, Refused> {
    let kib = u32::try_from(body.len().div_ceil(1024).max(1)).unwrap_or(u32::MAX);
    if let Ok(share) = shared.answer_budget_kib.clone().try_acquire_many_owned(kib) {
        return Ok(AnswerBody::budgeted(body, share));
    }
    shared
        .registry
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .close_longest_unread("as answers waiting to be read fill the server's budget");
    let mut headers = cors.to_vec();
    headers.push(("Retry-After", "1".into()));
    Err(Box::new(error_answer(
        ErrorCode::Busy,
        "answers waiting for clients that do not read them fill the server; retry shortly",
        &headers,
        false,
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(uri: &str, hosts: &[&str], version: hyper::Version) -> hyper::http::request::Parts {
        let mut req = Request::builder().uri(uri).version(version);
        for h in hosts {
            req = req.header("host", *h);
        }
        req.body(()).unwrap().into_parts().0
    }

    fn host_status(uri: &str, hosts: &[&str], version: hyper::Version) -> Option<u16> {
        let p = parts(uri, hosts, version);
        check_host(&p.headers, &p.uri, p.version, "127.0.0.1:8080", &[])
            .err()
            .map(|a| a.status().as_u16())
    }

    #[test]
    fn the_host_is_checked_once_and_from_the_url_when_it_has_one() {
        use hyper::Version;
        assert_eq!(
            host_status("/mcp", &["localhost:8080"], Version::HTTP_11),
            None
        );
        assert_eq!(
            host_status("/mcp", &["evil.example"], Version::HTTP_11),
            Some(403)
        );
        assert_eq!(
            host_status("/mcp", &["localhost", "evil.example"], Version::HTTP_11),
            Some(400)
        );
        assert_eq!(host_status("/mcp", &[], Version::HTTP_11), Some(400));
        assert_eq!(host_status("/mcp", &[], Version::HTTP_10), None);
        // The URL's authority wins over the header.
        assert_eq!(
            host_status("http://evil.example/mcp", &["localhost"], Version::HTTP_11),
            Some(403)
        );
    }

    #[test]
    fn open_answers_close_the_connection_until_a_token_is_shown() {
        let openapi = Bytes::from_static(b"{}");
        let get = hyper::Method::GET;
        let closes = |a: Answer| a.headers().get("connection").is_some();
        let health = open_answer(
            &get,
            "/healthz",
            &policy::Cors::NoOrigin,
            &openapi,
            None,
            true,
        );
        assert!(closes(health.unwrap()));
        let health = open_answer(
            &get,
            "/healthz",
            &policy::Cors::NoOrigin,
            &openapi,
            None,
            false,
        );
        assert!(!closes(health.unwrap()));
        assert!(
            open_answer(&get, "/mcp", &policy::Cors::NoOrigin, &openapi, None, false).is_none()
        );
        let preflight = open_answer(
            &hyper::Method::OPTIONS,
            "/mcp",
            &policy::Cors::NoOrigin,
            &openapi,
            None,
            false,
        );
        assert_eq!(preflight.unwrap().status().as_u16(), 405);
    }

    #[test]
    fn routes_are_mcp_or_one_tool_and_only_post() {
        let post = hyper::Method::POST;
        assert_eq!(route_of(&post, "/mcp", &[]).ok(), Some(None));
        assert_eq!(
            route_of(&post, "/api/v1/tools/trips", &[]).ok(),
            Some(Some("trips".to_string()))
        );
        let status =
            |m: &hyper::Method, p: &str| route_of(m, p, &[]).err().map(|a| a.status().as_u16());
        assert_eq!(status(&post, "/api/v1/tools/"), Some(404));
        assert_eq!(status(&post, "/api/v1/tools/a/b"), Some(404));
        assert_eq!(status(&hyper::Method::GET, "/mcp"), Some(405));
    }
}
