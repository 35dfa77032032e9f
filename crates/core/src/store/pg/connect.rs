//! Where a PostgreSQL fleet lives and how to reach it: a `postgres://` URL as libpq
//! reads it, with the usual `PG*` variables for what it leaves out, and `sslmode`
//! (`disable`, `prefer`, `require`, `verify-ca`, `verify-full`) carried out with
//! rustls. The password is never shown: messages name the URL without it.

use crate::error::{Error, ErrorCode, Result};
use std::path::Path;
use std::sync::Arc;

/// True when `--db` names a PostgreSQL database: a `postgres://` or `postgresql://`
/// URL, or a libpq `key=value` connection string (`host=db user=ana dbname=fleet`),
/// which must never be taken for a file name (a file named after the password).
/// A SQLite file whose name starts that way is given as `./host=…`.
pub fn is_url(db: &Path) -> bool {
    let text = db.to_string_lossy();
    text.starts_with("postgres://") || text.starts_with("postgresql://") || is_key_value(&text)
}

/// libpq's connection keywords a `key=value` string may start with.
const KEYWORDS: [&str; 12] = [
    "host",
    "hostaddr",
    "port",
    "dbname",
    "user",
    "password",
    "sslmode",
    "sslrootcert",
    "connect_timeout",
    "application_name",
    "options",
    "target_session_attrs",
];

fn is_key_value(text: &str) -> bool {
    text.trim_start()
        .split_once('=')
        .is_some_and(|(key, _)| KEYWORDS.contains(&key.trim()))
}

/// How the connection is protected (libpq's `sslmode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SslMode {
    Disable,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

/// A PostgreSQL database to connect to.
#[derive(Debug, Clone)]
pub struct Target {
    config: postgres::Config,
    ssl: SslMode,
    root_cert: Option<std::path::PathBuf>,
    shown: String,
}

impl Target {
    /// Reads a `postgres://USER[:PASSWORD]@HOST[:PORT]/DB[?sslmode=…&sslrootcert=…]`
    /// URL, taking what it leaves out from PGHOST, PGPORT, PGUSER, PGPASSWORD,
    /// PGDATABASE, PGSSLMODE and PGSSLROOTCERT (libpq's defaults after that).
    pub fn parse(url: &str) -> Result<Target> {
        Self::parse_with(url, |name| std::env::var(name).ok())
    }

    fn parse_with(url: &str, env: impl Fn(&str) -> Option<String>) -> Result<Target> {
        // Whatever may be a password is known as a secret before anything could quote
        // it (a parser's complaint about a URL with raw `/ @ ? #` in its password).
        for secret in password_candidates(url) {
            crate::secrets::register(&secret);
        }
        let shown = crate::secrets::scrub(without_password(url));
        let key_value = is_key_value(url);
        let bad = |why: String| {
            Error::new(
                ErrorCode::InvalidArgument,
                format!("--db {shown}: {why}"),
            )
            .with_hint("a PostgreSQL database is postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?sslmode=require], or a path for a SQLite file")
        };
        // sslmode and sslrootcert are ours to carry out: the client knows no verify-*.
        let (base, query) = match key_value {
            true => ("", url),
            false => url.split_once('?').unwrap_or((url, "")),
        };
        let separator = if key_value { ' ' } else { '&' };
        let mut ssl = None;
        let mut root_cert = None;
        let mut kept = Vec::new();
        let pairs: Vec<&str> = match key_value {
            true => key_value_pairs(query)
                .into_iter()
                .map(|(raw, _, _)| raw)
                .collect(),
            false => query.split('&').filter(|p| !p.is_empty()).collect(),
        };
        for pair in pairs {
            match pair.split_once('=') {
                Some(("sslmode", mode)) => ssl = Some(ssl_mode(mode).ok_or_else(|| bad(format!("sslmode {mode:?} is none of disable, prefer, require, verify-ca, verify-full")))?),
                Some(("sslrootcert", path)) => root_cert = Some(path.into()),
                _ => kept.push(pair),
            }
        }
        let base = match (key_value, kept.is_empty()) {
            (true, _) => kept.join(" "),
            (false, true) => base.to_string(),
            (false, false) => format!("{base}?{}", kept.join(&separator.to_string())),
        };
        let mut config: postgres::Config = base.parse().map_err(|e| bad(format!("{e}")))?;
        if config.get_hosts().is_empty() {
            config.host(&env("PGHOST").unwrap_or_else(|| "localhost".into()));
        }
        if let Some(port) = env("PGPORT").filter(|_| config.get_ports().is_empty()) {
            config.port(
                port.parse()
                    .map_err(|_| bad(format!("PGPORT {port:?} is not a port")))?,
            );
        }
        let user = config
            .get_user()
            .map(str::to_string)
            .or_else(|| env("PGUSER"))
            .or_else(|| env("USER"))
            .ok_or_else(|| bad("no user: give USER@ in the URL or set PGUSER".into()))?;
        config.user(&user);
        if let Some(password) = env("PGPASSWORD").filter(|_| config.get_password().is_none()) {
            crate::secrets::register(&password);
            config.password(password);
        }
        if let Some(password) = config.get_password() {
            crate::secrets::register(&String::from_utf8_lossy(password));
        }
        if config.get_dbname().is_none() {
            config.dbname(&env("PGDATABASE").unwrap_or(user));
        }
        let ssl = match ssl {
            Some(mode) => mode,
            None => match env("PGSSLMODE") {
                Some(mode) => ssl_mode(&mode).ok_or_else(|| bad(format!("PGSSLMODE {mode:?} is none of disable, prefer, require, verify-ca, verify-full")))?,
                None => SslMode::Prefer,
            },
        };
        // `prefer` to a server on this machine goes in the clear: on a loopback
        // address TLS protects nothing (only the host's root can see that traffic,
        // and root can read the processes' memory) and costs every round trip an
        // encryption on both sides, a tenth of a replica's answers under load
        // (docs/postgres.md). `require` and the verify modes still insist on it.
        let ssl = if ssl == SslMode::Prefer && only_loopback(&config) {
            SslMode::Disable
        } else {
            ssl
        };
        config.ssl_mode(match ssl {
            SslMode::Disable => postgres::config::SslMode::Disable,
            SslMode::Prefer => postgres::config::SslMode::Prefer,
            _ => postgres::config::SslMode::Require,
        });
        let root_cert = root_cert.or_else(|| env("PGSSLROOTCERT").map(Into::into));
        if matches!(ssl, SslMode::VerifyCa | SslMode::VerifyFull) && root_cert.is_none() {
            return Err(bad(format!(
                "sslmode {} needs the server's certificate authority: add sslrootcert=FILE (PEM) or set PGSSLROOTCERT",
                if ssl == SslMode::VerifyCa {
                    "verify-ca"
                } else {
                    "verify-full"
                }
            )));
        }
        config.application_name("fleetctl");
        config.connect_timeout(std::time::Duration::from_secs(10));
        Ok(Target {
            config,
            ssl,
            root_cert,
            shown,
        })
    }

    /// The URL as messages show it (no password).
    pub fn display(&self) -> &str {
        &self.shown
    }

    /// The database's name.
    pub fn database(&self) -> &str {
        self.config.get_dbname().unwrap_or("")
    }

    /// Connects, or says why not: the server unreachable, the password refused, the
    /// database missing, TLS refused.
    pub fn connect(&self) -> Result<postgres::Client> {
        let connected = if self.ssl == SslMode::Disable {
            self.config.connect(postgres::NoTls)
        } else {
            let tls = self.tls()?;
            self.config
                .connect(tokio_postgres_rustls::MakeRustlsConnect::new(tls))
        };
        connected.map_err(|e| self.failed("connect to", e))
    }

    /// rustls set up for this sslmode.
    fn tls(&self) -> Result<rustls::ClientConfig> {
        // ring, not aws-lc-rs: aws-lc-rs needs cmake and a C build on a fresh machine.
        #[allow(deprecated)]
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| Error::internal(format!("TLS set-up: {e}")))?;
        let roots = match &self.root_cert {
            Some(path) => Some(read_roots(path)?),
            None => None,
        };
        let config = match (self.ssl, roots) {
            (SslMode::VerifyFull, Some(roots)) => builder.with_root_certificates(roots),
            (_, Some(roots)) => {
                // verify-ca, and require or prefer with a root given (libpq's rule): the
                // chain is checked, the host name not.
                let chain = rustls::client::WebPkiServerVerifier::builder_with_provider(
                    Arc::new(roots),
                    provider,
                )
                .build()
                .map_err(|e| Error::internal(format!("TLS set-up: {e}")))?;
                builder
                    .dangerous()
                    .with_custom_certificate_verifier(Arc::new(verify::ChainOnly(chain)))
            }
            // require or prefer without a root: encrypted, the server not authenticated.
            (_, None) => builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(verify::Anyone(
                    provider.signature_verification_algorithms,
                ))),
        };
        Ok(config.with_no_client_auth())
    }

    /// An error of the server or the connection, said as what to do.
    pub fn failed(&self, doing: &str, e: postgres::Error) -> Error {
        let shown = &self.shown;
        if let Some(db) = e.as_db_error() {
            let code = db.code().code();
            let (kind, hint) = match code {
                "28P01" | "28000" => (
                    ErrorCode::DbUnavailable,
                    "check the user and password (the URL's, or PGPASSWORD; ~/.pgpass is not read) and the server's pg_hba.conf",
                ),
                "3D000" => (
                    ErrorCode::DbUnavailable,
                    "create it first: createdb NAME (then fleetctl --db URL init --time-zone ZONE)",
                ),
                "42501" => (
                    ErrorCode::DbUnavailable,
                    "this role lacks the privilege: ask the database's owner to GRANT it, or connect as the role that created the fleet",
                ),
                // lock_timeout: another session holds what this one needs.
                "55P03" => (
                    ErrorCode::Busy,
                    "another session holds a lock this one waited for past the server's lock timeout (docs/postgres.md, \"Deadlines\"); try again, or see pg_locks for who holds it",
                ),
                // The server ended this session (pg_terminate_backend, a restart, a
                // failover): the next use reconnects.
                "57P01" | "57P02" | "57P03" => (
                    ErrorCode::Busy,
                    "the server ended this session (a restart, a failover, or an administrator); nothing of it was kept: try again shortly",
                ),
                // statement_timeout (or a cancel).
                "57014" => (
                    ErrorCode::Timeout,
                    "the statement ran past the server's statement timeout (docs/postgres.md, \"Deadlines\")",
                ),
                _ => (ErrorCode::Io, "the server's message above says why"),
            };
            return Error::new(
                kind,
                format!("could not {doing} {shown}: {} ({code})", db.message()),
            )
            .with_hint(hint);
        }
        if e.is_closed() {
            return Error::new(
                ErrorCode::DbUnavailable,
                format!("could not {doing} {shown}: the connection was closed ({e})"),
            )
            .with_hint("the server restarted or dropped the connection: run the command again");
        }
        Error::new(
            ErrorCode::DbUnavailable,
            format!("could not {doing} {shown}: {}", chain_of(&e)),
        )
        .with_hint("is the server running and listening there? (pg_lsclusters; pg_ctlcluster 15 main start)")
    }
}

/// An error and its causes, as one line.
fn chain_of(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        let more = cause.to_string();
        if !text.contains(&more) {
            text = format!("{text}: {more}");
        }
        source = cause.source();
    }
    text
}

/// Whether every host the configuration names is this machine: a loopback address,
/// `localhost`, or a Unix socket.
fn only_loopback(config: &postgres::Config) -> bool {
    let hosts = config.get_hosts();
    !hosts.is_empty()
        && hosts.iter().all(|host| match host {
            postgres::config::Host::Tcp(name) => {
                name.eq_ignore_ascii_case("localhost")
                    || name
                        .trim_start_matches('[')
                        .trim_end_matches(']')
                        .parse::<std::net::IpAddr>()
                        .is_ok_and(|ip| ip.is_loopback())
            }
            #[cfg(unix)]
            postgres::config::Host::Unix(_) => true,
        })
        && config.get_hostaddrs().iter().all(|ip| ip.is_loopback())
}

fn ssl_mode(text: &str) -> Option<SslMode> {
    Some(match text {
        "disable" => SslMode::Disable,
        "allow" | "prefer" => SslMode::Prefer,
        "require" => SslMode::Require,
        "verify-ca" => SslMode::VerifyCa,
        "verify-full" => SslMode::VerifyFull,
        _ => return None,
    })
}

/// The certificate authorities of a PEM file.
fn read_roots(path: &Path) -> Result<rustls::RootCertStore> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    let unreadable = |why: String| {
        Error::new(
            ErrorCode::InvalidArgument,
            format!("sslrootcert {}: {why}", path.display()),
        )
        .with_hint(
            "give the PEM file of the certificate authority that signed the server's certificate",
        )
    };
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(path).map_err(|e| unreadable(e.to_string()))? {
        let cert = cert.map_err(|e| unreadable(e.to_string()))?;
        roots.add(cert).map_err(|e| unreadable(e.to_string()))?;
    }
    if roots.is_empty() {
        return Err(unreadable("no certificate in it".into()));
    }
    Ok(roots)
}

/// The URL (or `key=value` string) with its password replaced by `***`: the
/// user-info's password and any `password` parameter.
fn without_password(url: &str) -> String {
    if is_key_value(url) {
        return key_value_pairs(url)
            .into_iter()
            .map(|(raw, key, _)| match key {
                "password" => "password=***".to_string(),
                _ => raw.to_string(),
            })
            .collect::<Vec<_>>()
            .join(" ");
    }
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let (authority, tail) = rest.split_at(rest.find(['/', '?']).unwrap_or(rest.len()));
    let authority = match authority.rsplit_once('@') {
        Some((user_info, host)) => match user_info.split_once(':') {
            Some((user, _)) => format!("{user}:***@{host}"),
            None => authority.to_string(),
        },
        None => authority.to_string(),
    };
    let tail = match tail.split_once('?') {
        None => tail.to_string(),
        Some((path, query)) => {
            let query: Vec<String> = query
                .split('&')
                .map(|pair| match pair.split_once('=') {
                    Some(("password", _)) => "password=***".to_string(),
                    _ => pair.to_string(),
                })
                .collect();
            format!("{path}?{}", query.join("&"))
        }
    };
    format!("{scheme}://{authority}{tail}")
}

/// A libpq `key=value` string's pairs as libpq splits them: (the pair as written,
/// its key, its value unquoted). A value may be in single quotes, with `\'` and `\\`
/// inside; spaces may stand around `=`.
fn key_value_pairs(text: &str) -> Vec<(&str, &str, String)> {
    let mut pairs = Vec::new();
    let mut rest = text.trim_start();
    while !rest.is_empty() {
        let start = rest;
        let Some(eq) = rest.find('=') else {
            break;
        };
        let key = rest[..eq].trim();
        let mut after = rest[eq + 1..].trim_start();
        let mut value = String::new();
        if let Some(quoted) = after.strip_prefix('\'') {
            let mut chars = quoted.char_indices();
            let mut end = quoted.len();
            while let Some((i, c)) = chars.next() {
                match c {
                    '\\' => {
                        if let Some((_, next)) = chars.next() {
                            value.push(next);
                        }
                    }
                    '\'' => {
                        end = i + 1;
                        break;
                    }
                    c => value.push(c),
                }
            }
            after = &quoted[end.min(quoted.len())..];
        } else {
            let end = after.find(char::is_whitespace).unwrap_or(after.len());
            value.push_str(&after[..end]);
            after = &after[end..];
        }
        let raw = &start[..start.len() - after.len()];
        pairs.push((raw.trim(), key, value));
        rest = after.trim_start();
    }
    pairs
}

/// What in a connection string may be a password, read loosely (before it is
/// parsed, so also from a string that does not parse): the user-info's password up
/// to the last `@` (raw `/ ? # @` included), and any `password=` value.
fn password_candidates(url: &str) -> Vec<String> {
    let mut found = Vec::new();
    if let Some((_, rest)) = url.split_once("://")
        && let Some(at) = rest.rfind('@')
        && let Some((_, password)) = rest[..at].split_once(':')
    {
        found.push(password.to_string());
    }
    if is_key_value(url) {
        found.extend(
            key_value_pairs(url)
                .into_iter()
                .filter(|(_, key, _)| *key == "password")
                .map(|(_, _, value)| value),
        );
    }
    for piece in url.split(['&', '?']) {
        if let Some(value) = piece.trim().strip_prefix("password=") {
            found.push(value.to_string());
        }
    }
    found.retain(|p| !p.is_empty());
    found
}

/// Certificate checks for sslmode require (none) and verify-ca (the chain only).
mod verify {
    use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
    use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
    use rustls::{DigitallySignedStruct, SignatureScheme};
    use std::sync::Arc;

    /// sslmode=require without a root: any certificate (encryption, no authentication,
    /// as libpq); the handshake's signatures are still checked.
    #[derive(Debug)]
    pub struct Anyone(pub rustls::crypto::WebPkiSupportedAlgorithms);

    impl ServerCertVerifier for Anyone {
        fn verify_server_cert(
            &self,
            _end_entity: &CertificateDer<'_>,
            _intermediates: &[CertificateDer<'_>],
            _server_name: &ServerName<'_>,
            _ocsp: &[u8],
            _now: UnixTime,
        ) -> Result<ServerCertVerified, rustls::Error> {
            Ok(ServerCertVerified::assertion())
        }
        fn verify_tls12_signature(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, rustls::Error> {
            rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0)
        }
        fn verify_tls13_signature(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, rustls::Error> {
            rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0)
        }
        fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
            self.0.supported_schemes()
        }
    }

    /// sslmode=verify-ca: the chain must lead to the given root; the host name is
    /// not compared (verify-full compares it).
    #[derive(Debug)]
    pub struct ChainOnly(pub Arc<rustls::client::WebPkiServerVerifier>);

    impl ServerCertVerifier for ChainOnly {
        fn verify_server_cert(
            &self,
            end_entity: &CertificateDer<'_>,
            intermediates: &[CertificateDer<'_>],
            server_name: &ServerName<'_>,
            ocsp: &[u8],
            now: UnixTime,
        ) -> Result<ServerCertVerified, rustls::Error> {
            match self
                .0
                .verify_server_cert(end_entity, intermediates, server_name, ocsp, now)
            {
                Err(rustls::Error::InvalidCertificate(
                    rustls::CertificateError::NotValidForName
                    | rustls::CertificateError::NotValidForNameContext { .. },
                )) => Ok(ServerCertVerified::assertion()),
                other => other,
            }
        }
        fn verify_tls12_signature(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, rustls::Error> {
            self.0.verify_tls12_signature(message, cert, dss)
        }
        fn verify_tls13_signature(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, rustls::Error> {
            self.0.verify_tls13_signature(message, cert, dss)
        }
        fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
            self.0.supported_verify_schemes()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_of(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |name| {
            pairs
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn a_url_takes_what_it_leaves_out_from_the_pg_variables_and_never_shows_its_password() {
        let t = Target::parse_with(
            "postgres://fleet:s3cret@db.example:6432/ops?sslmode=verify-full&sslrootcert=/etc/ca.pem",
            env_of(&[]),
        )
        .unwrap();
        assert_eq!(
            t.display(),
            "postgres://fleet:***@db.example:6432/ops?sslmode=verify-full&sslrootcert=/etc/ca.pem"
        );
        assert_eq!((t.database(), t.ssl), ("ops", SslMode::VerifyFull));
        let t = Target::parse_with(
            "postgres:///",
            env_of(&[
                ("PGHOST", "pg.local"),
                ("PGUSER", "ana"),
                ("PGPASSWORD", "x"),
                ("PGSSLMODE", "require"),
            ]),
        )
        .unwrap();
        assert_eq!(t.config.get_user(), Some("ana"));
        assert_eq!(t.database(), "ana", "libpq's default: the user's name");
        assert_eq!(t.ssl, SslMode::Require);
        assert_eq!(t.config.get_password(), Some(&b"x"[..]));
    }

    #[test]
    fn prefer_to_a_server_on_this_machine_goes_in_the_clear_and_require_still_insists() {
        let mode = |url: &str| Target::parse_with(url, env_of(&[])).unwrap().ssl;
        assert_eq!(mode("postgres://u@127.0.0.1/db"), SslMode::Disable);
        assert_eq!(mode("postgres://u@localhost:5433/db"), SslMode::Disable);
        assert_eq!(mode("postgres://u@[::1]/db"), SslMode::Disable);
        assert_eq!(
            mode("postgres://u@127.0.0.1/db?sslmode=prefer"),
            SslMode::Disable
        );
        assert_eq!(
            mode("postgres://u@127.0.0.1/db?sslmode=require"),
            SslMode::Require
        );
        assert_eq!(mode("postgres://u@db.example/db"), SslMode::Prefer);
        assert_eq!(mode("postgres://u@10.0.0.7/db"), SslMode::Prefer);
        assert_eq!(
            mode("postgres://u@localhost,db.example/db"),
            SslMode::Prefer
        );
    }

    #[test]
    fn a_bad_url_or_mode_is_refused_naming_it_without_the_password() {
        let said =
            Target::parse_with("postgres://u:pw@h/db?sslmode=sometimes", env_of(&[])).unwrap_err();
        assert_eq!(said.code, ErrorCode::InvalidArgument);
        assert!(
            said.message.contains("sometimes") && !said.message.contains("pw@"),
            "{}",
            said.message
        );
        let said =
            Target::parse_with("postgres://u@h/db?sslmode=verify-full", env_of(&[])).unwrap_err();
        assert!(said.message.contains("sslrootcert"), "{}", said.message);
        let said = Target::parse_with("postgres://u:pw@h:notaport/db", env_of(&[])).unwrap_err();
        assert!(!said.message.contains(":pw"), "{}", said.message);
        // Raw characters in the password, and a password as a parameter.
        let said = Target::parse_with("postgres://u:S3C/R@E?T#pw@h/db", env_of(&[])).unwrap_err();
        assert!(
            !said.message.contains("S3C") && !said.message.contains("T#pw"),
            "{}",
            said.message
        );
        let t = Target::parse_with("postgres://u@h/db?password=Hush-1234", env_of(&[])).unwrap();
        assert_eq!(t.display(), "postgres://u@h/db?password=***");
    }

    #[test]
    fn a_key_value_string_is_read_as_postgresql_never_as_a_file_name() {
        assert!(is_url(Path::new(
            "host=db.example user=ana password=Quiet-5678 dbname=ops"
        )));
        assert!(!is_url(Path::new("./host=x.db")) && !is_url(Path::new("fleet.db")));
        let t = Target::parse_with(
            "host=db.example user=ana password=Quiet-5678 dbname=ops sslmode=require",
            env_of(&[]),
        )
        .unwrap();
        assert_eq!((t.database(), t.ssl), ("ops", SslMode::Require));
        assert_eq!(
            t.display(),
            "host=db.example user=ana password=*** dbname=ops sslmode=require"
        );
        // A quoted password with spaces is masked whole.
        let t = Target::parse_with(
            "host=db.example user=ana password='Quiet and long 9' dbname=ops",
            env_of(&[]),
        )
        .unwrap();
        assert_eq!(
            t.display(),
            "host=db.example user=ana password=*** dbname=ops"
        );
        assert_eq!(t.config.get_password(), Some(&b"Quiet and long 9"[..]));
    }
}
