//! The HTTP server's rules, as small pure functions: who may call (bearer token,
//! failures per address), from where (Origin with scheme, host and port; the Host
//! header against DNS rebinding), how much (body size), CORS and the protocol headers'
//! encoding. Framing is hyper's; these decide what to answer (the status of each error
//! code is `ErrorCode::http_status`).

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// Failed authentications from one address within `FAILURE_WINDOW` before it gets 429.
pub const MAX_FAILURES: u32 = 10;
/// The window failures are counted in.
pub const FAILURE_WINDOW: Duration = Duration::from_secs(60);

/// Compares without an early exit, so timing does not tell how much matched.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let mut diff = a.len() ^ b.len();
    for i in 0..a.len().max(b.len()) {
        diff |= usize::from(a.get(i).copied().unwrap_or(0) ^ b.get(i).copied().unwrap_or(0xff));
    }
    diff == 0
}

/// Whether an `Authorization` header carries `token` as a bearer token.
pub fn bearer_matches(header: Option<&[u8]>, token: &[u8]) -> bool {
    let Some(value) = header else { return false };
    let Some(rest) = value
        .strip_prefix(b"Bearer ")
        .or_else(|| value.strip_prefix(b"bearer "))
    else {
        return false;
    };
    constant_time_eq(rest.trim_ascii(), token)
}

/// The ingest token a device presents: `Authorization: Bearer TOKEN`, the password
/// of `Authorization: Basic` (OwnTracks asks for a user and a password), or a
/// `token=` query parameter (`query_token`, for apps that can only be given a URL).
pub fn presented_ingest_token(
    authorization: Option<&[u8]>,
    query_token: Option<&str>,
) -> Option<Vec<u8>> {
    if let Some(value) = authorization {
        if let Some(rest) = value
            .strip_prefix(b"Bearer ")
            .or_else(|| value.strip_prefix(b"bearer "))
        {
            return Some(rest.trim_ascii().to_vec());
        }
        if let Some(rest) = value
            .strip_prefix(b"Basic ")
            .or_else(|| value.strip_prefix(b"basic "))
        {
            let pair = base64_decode(std::str::from_utf8(rest.trim_ascii()).ok()?)?;
            let colon = pair.iter().position(|&b| b == b':')?;
            return Some(pair[colon + 1..].to_vec());
        }
    }
    query_token.map(|t| t.as_bytes().to_vec())
}

/// Whether a host name is this machine's loopback.
fn is_loopback_host(host: &str) -> bool {
    matches!(host, "localhost" | "127.0.0.1" | "[::1]")
        || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// Splits `host[:port]` (brackets kept around IPv6); `None` when malformed.
fn split_host_port(authority: &str) -> Option<(&str, Option<u16>)> {
    if authority.is_empty() || authority.contains(['/', '@', ' ', '?', '#']) {
        return None;
    }
    let (host, port) = match authority.rfind(':') {
        Some(i) if !authority[i..].contains(']') => (&authority[..i], Some(&authority[i + 1..])),
        _ => (authority, None),
    };
    let port = match port {
        None => None,
        Some(p) if !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) => Some(p.parse().ok()?),
        Some(_) => return None,
    };
    (!host.is_empty()).then_some((host, port))
}

/// Whether a browser `Origin` may call: an exact entry of `allowed`, or an `http` or
/// `https` origin on a loopback host. `null` (sandboxed frames, files) never passes.
pub fn origin_allowed(origin: &str, allowed: &[String]) -> bool {
    if allowed.iter().any(|a| a == origin) {
        return true;
    }
    let Some((scheme, authority)) = origin.split_once("://") else {
        return false;
    };
    matches!(scheme, "http" | "https")
        && split_host_port(authority).is_some_and(|(host, _)| is_loopback_host(host))
}

/// What a request's `Origin` means for its answer.
#[derive(Debug, PartialEq)]
pub enum Cors {
    /// No `Origin`: not a browser's cross-origin call; no CORS headers.
    NoOrigin,
    /// An allowed origin: the headers its answer carries.
    Allowed(Vec<(&'static str, String)>),
    /// A foreign origin: refuse (403), naming it.
    Refused(String),
}

/// The CORS decision for `origin`; a preflight (`OPTIONS`) also gets the methods and
/// headers it may use, cached for ten minutes.
pub fn cors(origin: Option<&str>, allowed: &[String], preflight: bool) -> Cors {
    let Some(origin) = origin else {
        return Cors::NoOrigin;
    };
    if !origin_allowed(origin, allowed) {
        return Cors::Refused(origin.to_string());
    }
    let mut headers = vec![
        ("Access-Control-Allow-Origin", origin.to_string()),
        ("Vary", "Origin".to_string()),
    ];
    if preflight {
        headers.extend([
            (
                "Access-Control-Allow-Methods",
                "POST, GET, OPTIONS".to_string(),
            ),
            (
                "Access-Control-Allow-Headers",
                "Authorization, Content-Type, MCP-Protocol-Version, Mcp-Method, Mcp-Name"
                    .to_string(),
            ),
            ("Access-Control-Max-Age", "600".to_string()),
        ]);
    }
    Cors::Allowed(headers)
}

/// Whether a `Host` header names this server: a loopback name (on any port: the
/// listening port may be chosen by the system), the address it listens on, or an
/// entry of `allowed` (`name` or `name:port`). Other names are refused, so a page
/// whose DNS name was rebound to 127.0.0.1 cannot reach the server.
pub fn host_allowed(host: &str, listening: &str, allowed: &[String]) -> bool {
    let Some((name, _)) = split_host_port(host) else {
        return false;
    };
    let name = name.to_ascii_lowercase();
    is_loopback_host(&name)
        || host == listening
        || allowed
            .iter()
            .any(|a| a.eq_ignore_ascii_case(host) || a.eq_ignore_ascii_case(&name))
}

/// A `Content-Length` over `max` (hyper has already refused malformed ones).
pub fn body_too_large(content_length: Option<&str>, max: usize) -> bool {
    content_length
        .and_then(|v| v.parse::<u64>().ok())
        .is_some_and(|n| n > max as u64)
}

/// The client a connection counts against: its IPv4 address, or the /64 network of
/// its IPv6 address (one host may hold a whole /64 and pick a new address each time).
pub fn client_key(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) if v6.to_ipv4_mapped().is_none() => {
            let mut segments = v6.segments();
            segments[4..].fill(0);
            IpAddr::V6(std::net::Ipv6Addr::from(segments))
        }
        IpAddr::V6(v6) => IpAddr::V4(
            v6.to_ipv4_mapped()
                .unwrap_or(std::net::Ipv4Addr::UNSPECIFIED),
        ),
        v4 => v4,
    }
}

/// The most clients the failure log remembers; past it, the oldest are forgotten.
const MAX_REMEMBERED_CLIENTS: usize = 4096;

/// Failed authentications by client (`client_key`), counted for a minute from the
/// first failure.
#[derive(Default)]
pub struct FailureLog {
    failures: HashMap<IpAddr, (u32, Instant)>,
}

impl FailureLog {
    /// Whether `ip` has failed too often lately (a failure is recorded either way).
    pub fn fail(&mut self, ip: IpAddr, now: Instant) -> bool {
        let ip = client_key(ip);
        if self.failures.len() >= MAX_REMEMBERED_CLIENTS {
            self.failures
                .retain(|_, (_, since)| now.duration_since(*since) < FAILURE_WINDOW);
            if self.failures.len() >= MAX_REMEMBERED_CLIENTS
                && let Some(oldest) = self
                    .failures
                    .iter()
                    .min_by_key(|(_, (_, t))| *t)
                    .map(|(k, _)| *k)
            {
                self.failures.remove(&oldest);
            }
        }
        let entry = self.failures.entry(ip).or_insert((0, now));
        if now.duration_since(entry.1) >= FAILURE_WINDOW {
            *entry = (0, now);
        }
        let limited = entry.0 >= MAX_FAILURES;
        entry.0 += 1;
        limited
    }
}

/// A header value as sent, or decoded from the `=?base64?…?=` form the 2026-07-28
/// revision uses for values that are not header-safe.
pub fn header_value(raw: &str) -> Option<String> {
    match raw
        .strip_prefix("=?base64?")
        .and_then(|r| r.strip_suffix("?="))
    {
        Some(encoded) => String::from_utf8(base64_decode(encoded)?).ok(),
        None => Some(raw.to_string()),
    }
}

/// Standard base64 (with or without padding).
pub fn base64_decode(text: &str) -> Option<Vec<u8>> {
    use base64::Engine;
    use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
    const LENIENT: GeneralPurpose = GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
    );
    LENIENT.decode(text).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_compare_whole() {
        assert!(constant_time_eq(b"secret-token-123", b"secret-token-123"));
        assert!(!constant_time_eq(b"secret-token-123", b"secret-token-124"));
        assert!(!constant_time_eq(b"secret", b"secret-token-123"));
        assert!(!constant_time_eq(b"", b"x"));
        let token = b"secret-token-123";
        assert!(bearer_matches(Some(b"Bearer secret-token-123"), token));
        assert!(bearer_matches(Some(b"bearer secret-token-123 "), token));
        for bad in [
            &b"Basic secret-token-123"[..],
            b"Bearer",
            b"Bearersecret-token-123",
            b"",
        ] {
            assert!(!bearer_matches(Some(bad), token), "{bad:?}");
        }
        assert!(!bearer_matches(None, token));
    }

    #[test]
    fn only_loopback_or_listed_origins_pass_with_their_scheme() {
        let allowed = vec!["https://dispatch.example".to_string()];
        for ok in [
            "http://localhost:6274",
            "http://127.0.0.1",
            "https://[::1]:8080",
            "https://dispatch.example",
            "http://127.0.0.2:80",
        ] {
            assert!(origin_allowed(ok, &allowed), "{ok}");
        }
        for bad in [
            "https://evil.example",
            "http://localhost.evil.example",
            "http://127.0.0.1.nip.io",
            "null",
            "evil://localhost",
            "file://localhost",
            "http://localhost:80x",
            "http://user@localhost",
            "https://dispatch.example:443",
            "localhost",
            "",
        ] {
            assert!(!origin_allowed(bad, &allowed), "{bad}");
        }
    }

    #[test]
    fn allowed_origins_get_cors_headers_and_preflights_get_more() {
        let allowed = vec!["https://dispatch.example".to_string()];
        assert_eq!(cors(None, &allowed, false), Cors::NoOrigin);
        assert_eq!(
            cors(Some("file://localhost"), &allowed, true),
            Cors::Refused("file://localhost".into())
        );
        let Cors::Allowed(plain) = cors(Some("https://dispatch.example"), &allowed, false) else {
            panic!("refused")
        };
        assert_eq!(
            plain[0],
            (
                "Access-Control-Allow-Origin",
                "https://dispatch.example".into()
            )
        );
        assert_eq!(plain.len(), 2);
        let Cors::Allowed(preflight) = cors(Some("http://localhost:3000"), &allowed, true) else {
            panic!("refused")
        };
        assert!(
            preflight
                .iter()
                .any(|(k, v)| *k == "Access-Control-Allow-Headers" && v.contains("Authorization"))
        );
    }

    #[test]
    fn hosts_are_loopback_the_listening_address_or_listed() {
        let allowed = vec!["fleet.example".to_string()];
        for ok in [
            "localhost",
            "localhost:8765",
            "127.0.0.1:8765",
            "[::1]:9",
            "LOCALHOST",
            "fleet.example",
            "fleet.example:443",
            "10.0.0.5:8765",
        ] {
            assert!(host_allowed(ok, "10.0.0.5:8765", &allowed), "{ok}");
        }
        for bad in [
            "evil.example",
            "rebind.evil.example:8765",
            "",
            "localhost:x",
            "a b",
            "10.0.0.5:9999",
        ] {
            assert!(!host_allowed(bad, "10.0.0.5:8765", &allowed), "{bad}");
        }
    }

    #[test]
    fn announced_bodies_over_the_limit_are_refused_unread() {
        assert!(body_too_large(Some("2000000"), 1 << 20));
        assert!(!body_too_large(Some("1048576"), 1 << 20));
        assert!(!body_too_large(None, 1 << 20));
    }

    #[test]
    fn the_eleventh_failure_in_a_minute_is_rate_limited_and_forgotten_later() {
        let mut log = FailureLog::default();
        let ip: IpAddr = "10.1.2.3".parse().unwrap();
        let t0 = Instant::now();
        for _ in 0..MAX_FAILURES {
            assert!(!log.fail(ip, t0));
        }
        assert!(log.fail(ip, t0));
        assert!(
            !log.fail("10.9.9.9".parse().unwrap(), t0),
            "other addresses are not affected"
        );
        assert!(!log.fail(ip, t0 + FAILURE_WINDOW + Duration::from_secs(1)));
    }

    #[test]
    fn an_ipv6_client_is_its_64_network() {
        let a: IpAddr = "2001:db8:1:2:aaaa::1".parse().unwrap();
        let b: IpAddr = "2001:db8:1:2:bbbb::9".parse().unwrap();
        assert_eq!(client_key(a), client_key(b));
        assert_ne!(
            client_key(a),
            client_key("2001:db8:1:3::1".parse().unwrap())
        );
        let v4: IpAddr = "10.0.0.1".parse().unwrap();
        assert_eq!(client_key(v4), v4);
        assert_eq!(client_key("::ffff:10.0.0.1".parse().unwrap()), v4);
    }

    #[test]
    fn base64_header_values_are_decoded() {
        assert_eq!(
            header_value("=?base64?dHJpcF9zdW1tYXJ5?=").as_deref(),
            Some("trip_summary")
        );
        assert_eq!(
            header_value("=?base64?Wm9uYSDDoQ==?=").as_deref(),
            Some("Zona á")
        );
        assert_eq!(header_value("plain").as_deref(), Some("plain"));
        assert_eq!(header_value("=?base64?***?="), None);
        assert_eq!(base64_decode("Zm9vYmFy").unwrap(), b"foobar");
        assert_eq!(base64_decode("Zm9vYg==").unwrap(), b"foob");
    }

    #[test]
    fn an_ingest_token_is_read_from_bearer_basic_or_the_query() {
        let token = |auth: Option<&str>, query: Option<&str>| {
            presented_ingest_token(auth.map(str::as_bytes), query)
                .map(|t| String::from_utf8(t).unwrap())
        };
        assert_eq!(token(Some("Bearer abc "), None).as_deref(), Some("abc"));
        // `printf 'jane:s3cret-token' | base64`
        assert_eq!(
            token(Some("Basic amFuZTpzM2NyZXQtdG9rZW4="), None).as_deref(),
            Some("s3cret-token")
        );
        assert_eq!(token(Some("Basic YTpi"), None).as_deref(), Some("b"));
        assert_eq!(token(Some("Basic !!"), Some("q")), None);
        assert_eq!(token(None, Some("q")).as_deref(), Some("q"));
        assert_eq!(token(None, None), None);
    }
}
