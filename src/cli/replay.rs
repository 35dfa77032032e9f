//! `fleetctl replay`: pushes a database's positions to a live server's
//! `/ingest/osmand` as a fleet of OsmAnd clients — the demo ("watch the fleet
//! move") and the load generator of the ingest benchmark. Each vehicle pushes as its
//! device id (else its plate), its fixes in order; `--devices` connections push at
//! once, each for its share of the vehicles, paced by the fixes' own times.

use crate::error::{Error, ErrorCode, Result};
use crate::model::Fix;
use crate::store;
use clap::Args;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::time::{Duration, Instant};

#[derive(Debug, Args)]
pub(super) struct ReplayArgs {
    /// The server to push to: its base URL, plain HTTP (e.g. http://127.0.0.1:5055).
    #[arg(long, value_name = "URL")]
    to: String,

    /// Time runs this many times faster than the fixes' own (1: real time; 0: as
    /// fast as the server takes them).
    #[arg(long, default_value_t = 1.0, value_name = "X")]
    speed: f64,

    /// Connections pushing at once, each for its share of the vehicles (1–4096).
    /// To a loopback server, connections past the 50th come from 127.0.1.1,
    /// 127.0.1.2, … (50 each), as a fleet's devices come from many addresses; give
    /// the server `--max-connections` above N.
    #[arg(long, default_value_t = 16, value_name = "N",
          value_parser = clap::value_parser!(u16).range(1..=4096))]
    devices: u16,

    /// Stamp the fixes as if the first were happening now (real time only: at any
    /// other speed they would be stamped in the future, which servers refuse).
    #[arg(long)]
    start_now: bool,

    /// The ingest token's file (its first line); default: FLEETCTL_INGEST_TOKEN.
    #[arg(long, value_name = "PATH")]
    ingest_token_file: Option<PathBuf>,

    /// Push about this many fixes, shared among the connections (all by default).
    #[arg(long, value_name = "N")]
    limit: Option<usize>,

    /// At --speed 0, push at most this many fixes a second over all connections,
    /// evenly spread: a load of a known size (e.g. --rate 20000) rather than all
    /// the server takes.
    #[arg(long, value_name = "FIXES_PER_S")]
    rate: Option<f64>,
}

/// What a replay did.
#[derive(Debug, Default)]
struct Tally {
    sent: usize,
    refused: usize,
    first_refusal: Option<(u16, String)>,
    latencies_us: Vec<u64>,
}

pub(super) fn run(db: store::Location, args: ReplayArgs) -> Result<()> {
    let (host, port) = http_target(&args.to)?;
    let token = crate::mcp::http::read_ingest_token(args.ingest_token_file.as_deref())?;
    if !(args.speed >= 0.0 && args.speed.is_finite()) {
        return Err(Error::invalid(format!("--speed {} is not a speed-up", args.speed))
            .with_hint("give 1 for real time, 60 for an hour a minute, 0 for as fast as the server takes them"));
    }
    if let Some(rate) = args.rate {
        if !(rate > 0.0 && rate.is_finite()) {
            return Err(
                Error::invalid(format!("--rate {rate} is not a number of fixes a second"))
                    .with_hint("give a positive number, e.g. --rate 20000"),
            );
        }
        if args.speed != 0.0 {
            return Err(Error::invalid("--rate needs --speed 0").with_hint(
                "at any other speed the fixes' own times set the pace; add --speed 0 to push at a fixed rate",
            ));
        }
    }
    if args.start_now && args.speed != 1.0 {
        return Err(Error::invalid("--start-now needs --speed 1").with_hint(
            "faster than real time, fixes stamped from now on would lie in the future, which servers refuse; replay faster without --start-now",
        ));
    }
    let conn = store::open_for_reading(&db)?;
    let ids = store::live::pushing_ids(conn.as_ref())?;
    if ids.is_empty() {
        return Err(Error::new(
            ErrorCode::NoData,
            format!("{} has no positions to replay", db.shown()),
        ));
    }
    let first_ts = store::read::oldest_fix_ts(conn.as_ref())?.unwrap_or(0);
    drop(conn);
    let devices = usize::from(args.devices).min(ids.len());
    let shift_s = if args.start_now {
        crate::clock::wall_clock_now() - first_ts
    } else {
        0
    };
    let started = Instant::now();
    let limit = args.limit.unwrap_or(usize::MAX);
    let per_device = limit.div_ceil(devices);
    let tallies: Vec<Result<Tally>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..devices)
            .map(|d| {
                let share: Vec<(i64, String)> =
                    ids.iter().skip(d).step_by(devices).cloned().collect();
                let (db, host, token) = (&db, host.as_str(), token.as_str());
                scope.spawn(move || {
                    let fixes = share_fixes(db, &share)?;
                    let mut client = Client::new(host, port, d);
                    let mut tally = Tally::default();
                    for (k, (device, fix)) in fixes.iter().take(per_device).enumerate() {
                        let due_s = match args.rate {
                            // Connection d's k-th push is the (k·devices + d)-th of all.
                            Some(rate) => Some((k * devices + d) as f64 / rate),
                            None if args.speed > 0.0 => {
                                Some((fix.ts - first_ts).max(0) as f64 / args.speed)
                            }
                            None => None,
                        };
                        if let Some(due) = due_s.map(Duration::from_secs_f64)
                            && let Some(wait) = due.checked_sub(started.elapsed())
                        {
                            std::thread::sleep(wait);
                        }
                        let path = osmand_path(device, fix, shift_s);
                        let sent = Instant::now();
                        let (status, body) = client.get(&path, token)?;
                        tally.latencies_us.push(sent.elapsed().as_micros() as u64);
                        tally.sent += 1;
                        if status != 200 {
                            tally.refused += 1;
                            if tally.first_refusal.is_none() {
                                tally.first_refusal = Some((status, body));
                            }
                        }
                    }
                    Ok(tally)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(Error::internal("a replay thread failed")))
            })
            .collect()
    });
    let mut all = Tally::default();
    for t in tallies {
        let t = t?;
        all.sent += t.sent;
        all.refused += t.refused;
        all.first_refusal = all.first_refusal.or(t.first_refusal);
        all.latencies_us.extend(t.latencies_us);
    }
    all.latencies_us.sort_unstable();
    let pct = |p: f64| {
        let v = &all.latencies_us;
        v.get(((v.len() as f64 * p) as usize).min(v.len().saturating_sub(1)))
            .map_or(0.0, |us| *us as f64 / 1000.0)
    };
    let seconds = started.elapsed().as_secs_f64();
    let mut said = format!(
        "Replayed {} fixes of {} vehicles over {devices} connections in {seconds:.1} s ({:.0} fixes/s; latency p50 {:.1} ms, p99 {:.1} ms); refused {}\n",
        all.sent,
        ids.len(),
        all.sent as f64 / seconds.max(1e-9),
        pct(0.5),
        pct(0.99),
        all.refused
    );
    // The server's answer is quoted, never printed raw: whatever it holds (terminal
    // escapes, many lines) comes out as one escaped line.
    let first = all
        .first_refusal
        .as_ref()
        .map(|(status, body)| format!("{status}: {}", crate::logging::escape(body.trim(), 500)));
    if let Some(first) = &first {
        said += &format!("First refusal: {first}\n");
    }
    super::print_stdout(&said)?;
    match (all.first_refusal, first) {
        (Some((status, _)), Some(first)) => Err(refused(status, all.refused, all.sent, &first)),
        _ => Ok(()),
    }
}

/// The error of a replay some of whose fixes the server refused, its code as the
/// first refusal's status says (so that a script tells a bad token from a full queue).
fn refused(status: u16, refused: usize, sent: usize, first: &str) -> Error {
    let code = match status {
        400 | 413 => ErrorCode::InvalidArgument,
        401 | 403 => ErrorCode::Unauthorized,
        404 => ErrorCode::NotFound,
        429 | 503 => ErrorCode::Busy,
        _ => ErrorCode::Io,
    };
    Error::new(
        code,
        format!("the server refused {refused} of the {sent} fixes sent (the first: {first})"),
    )
    .with_hint("the refusal says why: an unknown device needs `fleetctl vehicles add PLATE --device-id ID` on the server's database, a 401 the ingest token")
}

/// A share of the vehicles' fixes, each with the id it pushes as, in time order.
fn share_fixes(db: &store::Location, share: &[(i64, String)]) -> Result<Vec<(String, Fix)>> {
    let conn = store::open_for_reading(db)?;
    let mut out = Vec::new();
    for (vehicle, device) in share {
        store::read::positions_between(
            conn.as_ref(),
            *vehicle,
            i64::MIN,
            i64::MAX,
            &mut |fix, _| out.push((device.clone(), *fix)),
        )?;
    }
    out.sort_by_key(|(_, f)| f.ts);
    Ok(out)
}

/// One fix as the OsmAnd protocol's query, speed in km/h (said so), odometer in
/// metres.
fn osmand_path(device: &str, f: &Fix, shift_s: i64) -> String {
    let mut q = format!(
        "/ingest/osmand?id={}&timestamp={}&lat={}&lon={}&speed={}&speed_unit=kmh",
        percent_encode(device),
        f.ts + shift_s,
        f.lat,
        f.lon,
        f.speed_kmh
    );
    if let Some(h) = f.heading_deg {
        q += &format!("&bearing={h}");
    }
    if let Some(on) = f.ignition {
        q += &format!("&ignition={on}");
    }
    if let Some(km) = f.odometer_km {
        q += &format!("&odometer={}", km * 1000.0);
    }
    q
}

fn percent_encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// `http://HOST:PORT` → (host, port); anything else is refused with the reason.
fn http_target(url: &str) -> Result<(String, u16)> {
    let hint = "give the live server's base URL, e.g. --to http://127.0.0.1:5055 (plain HTTP: replay on the server's machine or through a tunnel)";
    let rest = url.strip_prefix("http://").ok_or_else(|| {
        Error::invalid(format!("--to {url:?} is not an http:// URL")).with_hint(hint)
    })?;
    let authority = rest.trim_end_matches('/');
    let (host, port) = match authority.rsplit_once(':') {
        Some((h, p)) => (
            h,
            p.parse().map_err(|_| {
                Error::invalid(format!("--to {url:?}: {p:?} is not a port")).with_hint(hint)
            })?,
        ),
        None => (authority, 80),
    };
    if host.is_empty() || host.contains('/') {
        return Err(Error::invalid(format!("--to {url:?} names no host")).with_hint(hint));
    }
    Ok((host.to_string(), port))
}

/// A keep-alive HTTP/1.1 client for GET requests with a bearer token: what an
/// OsmAnd client does, and no more (no TLS, no redirects).
struct Client {
    host: String,
    port: u16,
    /// The address it connects from (`None`: the system's choice).
    source: Option<std::net::IpAddr>,
    conn: Option<BufReader<TcpStream>>,
}

/// Connections per loopback source address, under the server's cap per address
/// (64): beyond them, a replay to a loopback server spreads its connections over
/// 127.0.1.1, 127.0.1.2, …, as devices come from many addresses.
const CONNECTIONS_PER_SOURCE: usize = 50;

impl Client {
    /// A client for connection number `index` of a replay.
    fn new(host: &str, port: u16, index: usize) -> Client {
        let loopback = host
            .parse::<std::net::Ipv4Addr>()
            .is_ok_and(|ip| ip.is_loopback());
        let group = index / CONNECTIONS_PER_SOURCE;
        Client {
            host: host.to_string(),
            port,
            source: (loopback && group > 0)
                .then(|| std::net::Ipv4Addr::new(127, 0, 1, group as u8).into()),
            conn: None,
        }
    }

    /// GETs `path`; the status and the body. A connection the server closed is
    /// opened again once.
    fn get(&mut self, path: &str, token: &str) -> Result<(u16, String)> {
        match self.try_get(path, token) {
            Ok(answer) => Ok(answer),
            Err(_) => {
                self.conn = None;
                self.try_get(path, token).map_err(|e| {
                    Error::new(
                        ErrorCode::Io,
                        format!("http://{}:{}{path}: {e}", self.host, self.port),
                    )
                    .with_hint("is the server running with --ingest?")
                })
            }
        }
    }

    /// Connects; a server that is still starting (connection refused) is waited for
    /// up to 10 s.
    fn connect(&self) -> std::io::Result<TcpStream> {
        let mut waited = Duration::ZERO;
        loop {
            let connected = match self.source {
                None => TcpStream::connect((self.host.as_str(), self.port)),
                Some(source) => self.connect_from(source),
            };
            match connected {
                Err(e)
                    if e.kind() == std::io::ErrorKind::ConnectionRefused
                        && waited < Duration::from_secs(10) =>
                {
                    std::thread::sleep(Duration::from_millis(100));
                    waited += Duration::from_millis(100);
                }
                other => return other,
            }
        }
    }

    /// Connects from `source` (std cannot bind before connecting; tokio's socket
    /// can, on a runtime made for the moment).
    fn connect_from(&self, source: std::net::IpAddr) -> std::io::Result<TcpStream> {
        let to = std::net::SocketAddr::new(
            self.host
                .parse()
                .map_err(|_| std::io::Error::other("not an IP address"))?,
            self.port,
        );
        let socket = tokio::net::TcpSocket::new_v4()?;
        socket.bind(std::net::SocketAddr::new(source, 0))?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .build()?;
        let stream = runtime.block_on(socket.connect(to))?.into_std()?;
        stream.set_nonblocking(false)?;
        Ok(stream)
    }

    fn try_get(&mut self, path: &str, token: &str) -> std::io::Result<(u16, String)> {
        if self.conn.is_none() {
            let stream = self.connect()?;
            stream.set_nodelay(true)?;
            stream.set_read_timeout(Some(Duration::from_secs(60)))?;
            self.conn = Some(BufReader::new(stream));
        }
        let conn = self.conn.as_mut().expect("connected above");
        // One write, one segment: `write!` on the socket would send each formatted
        // piece as its own segment (no delay), and wake the server for each.
        let request = format!(
            "GET {path} HTTP/1.1\r\nHost: {}:{}\r\nAuthorization: Bearer {token}\r\n\r\n",
            self.host, self.port
        );
        conn.get_mut().write_all(request.as_bytes())?;
        let mut line = String::new();
        conn.read_line(&mut line)?;
        let status: u16 = line
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| std::io::Error::other(format!("not an HTTP answer: {line:?}")))?;
        let (mut length, mut close) = (0usize, false);
        loop {
            line.clear();
            conn.read_line(&mut line)?;
            let header = line.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':') {
                let value = value.trim();
                if name.eq_ignore_ascii_case("content-length") {
                    length = value.parse().unwrap_or(0);
                } else if name.eq_ignore_ascii_case("connection") {
                    close = value.eq_ignore_ascii_case("close");
                }
            }
        }
        let mut body = vec![0; length];
        conn.read_exact(&mut body)?;
        if close {
            self.conn = None;
        }
        Ok((status, String::from_utf8_lossy(&body).into_owned()))
    }
}
