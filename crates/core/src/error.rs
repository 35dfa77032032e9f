//! One error type for the whole crate, with a small closed set of stable codes.
//!
//! Domain code returns [`Error`]; the two front ends translate it at their edge: the
//! CLI into `fleetctl: <code>: <message>` plus an exit status, the MCP server into a
//! tool result with `isError: true`. The codes and exit statuses are a public
//! contract, like a command's flags.

use std::fmt;

/// The stable, snake_case error codes of fleetctl.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorCode {
    /// A value given by the caller is malformed or out of range.
    InvalidArgument,
    /// A named thing (plate, geofence, place) does not exist.
    NotFound,
    /// A name matches several things; the hint lists the candidates.
    Ambiguous,
    /// Nothing can be made from the data (a map of a day without fixes).
    NoData,
    /// The database is missing or cannot be opened.
    DbUnavailable,
    /// The database exists but is not of the schema this binary reads.
    DbSchema,
    /// Reading or writing a file failed.
    Io,
    /// Drawing or encoding an image failed.
    Render,
    /// A bug: something that should not happen did.
    Internal,
    /// HTTP: no valid bearer token.
    Unauthorized,
    /// HTTP: the browser origin or the `Host` is not one this server answers.
    Forbidden,
    /// HTTP: the path exists but not with this method.
    MethodNotAllowed,
    /// HTTP: the request was not received in time.
    Timeout,
    /// HTTP: the request body is over the limit.
    TooLarge,
    /// HTTP: too many failed authentications from this address lately.
    RateLimited,
    /// HTTP: every worker is busy, or the server is stopping; retry shortly.
    Busy,
}

impl ErrorCode {
    /// Every code, in the order of the table in docs/errors.md.
    pub const ALL: [ErrorCode; 16] = [
        ErrorCode::InvalidArgument,
        ErrorCode::NotFound,
        ErrorCode::Ambiguous,
        ErrorCode::NoData,
        ErrorCode::DbUnavailable,
        ErrorCode::DbSchema,
        ErrorCode::Io,
        ErrorCode::Render,
        ErrorCode::Internal,
        ErrorCode::Unauthorized,
        ErrorCode::Forbidden,
        ErrorCode::MethodNotAllowed,
        ErrorCode::Timeout,
        ErrorCode::TooLarge,
        ErrorCode::RateLimited,
        ErrorCode::Busy,
    ];

    /// The code as it appears in messages and JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::InvalidArgument => "invalid_argument",
            ErrorCode::NotFound => "not_found",
            ErrorCode::Ambiguous => "ambiguous",
            ErrorCode::NoData => "no_data",
            ErrorCode::DbUnavailable => "db_unavailable",
            ErrorCode::DbSchema => "db_schema",
            ErrorCode::Io => "io",
            ErrorCode::Render => "render",
            ErrorCode::Internal => "internal",
            ErrorCode::Unauthorized => "unauthorized",
            ErrorCode::Forbidden => "forbidden",
            ErrorCode::MethodNotAllowed => "method_not_allowed",
            ErrorCode::Timeout => "timeout",
            ErrorCode::TooLarge => "too_large",
            ErrorCode::RateLimited => "rate_limited",
            ErrorCode::Busy => "busy",
        }
    }

    /// The HTTP status `serve --http` answers with for this code.
    pub fn http_status(self) -> u16 {
        match self {
            ErrorCode::InvalidArgument => 400,
            ErrorCode::Unauthorized => 401,
            ErrorCode::Forbidden => 403,
            ErrorCode::NotFound | ErrorCode::NoData => 404,
            ErrorCode::MethodNotAllowed => 405,
            ErrorCode::Timeout => 408,
            ErrorCode::Ambiguous => 409,
            ErrorCode::TooLarge => 413,
            ErrorCode::RateLimited => 429,
            ErrorCode::Io | ErrorCode::Render | ErrorCode::Internal => 500,
            ErrorCode::Busy | ErrorCode::DbUnavailable | ErrorCode::DbSchema => 503,
        }
    }

    /// The process exit status the CLI uses for this code.
    pub fn exit_code(self) -> i32 {
        match self {
            ErrorCode::InvalidArgument => 2,
            ErrorCode::NotFound | ErrorCode::Ambiguous | ErrorCode::NoData => 3,
            ErrorCode::DbUnavailable | ErrorCode::DbSchema => 4,
            ErrorCode::Io | ErrorCode::Render => 5,
            ErrorCode::Internal => 70,
            // The HTTP codes never end a command; sysexits-style statuses all the same.
            ErrorCode::MethodNotAllowed | ErrorCode::TooLarge => 2,
            ErrorCode::Timeout | ErrorCode::RateLimited | ErrorCode::Busy => 75,
            ErrorCode::Unauthorized | ErrorCode::Forbidden => 77,
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An error with a stable code, a message naming the offending value, and an
/// optional hint saying what would be accepted or what to do next. When another
/// error caused it, that error is kept as its `source` (not only quoted in the
/// message), so a caller can walk the chain.
#[derive(Debug, Clone)]
pub struct Error {
    /// Which kind of failure this is.
    pub code: ErrorCode,
    /// What went wrong, naming the value.
    pub message: String,
    /// What would work instead, when we know.
    pub hint: Option<String>,
    /// The error that caused this one, if any.
    pub source: Option<std::sync::Arc<dyn std::error::Error + Send + Sync>>,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for Error {
    /// The cause itself (not the shared pointer around it), so it can be downcast.
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_deref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

/// Two errors are the same when they say the same (their causes are not compared).
impl PartialEq for Error {
    fn eq(&self, other: &Self) -> bool {
        (self.code, &self.message, &self.hint) == (other.code, &other.message, &other.hint)
    }
}

/// Turns another error into ours in one call, keeping it as the cause: the message
/// says what was being done, then the cause's own words.
pub trait Context<T> {
    /// `code`, and `doing` (e.g. the path) before the cause's text.
    fn context(self, code: ErrorCode, doing: impl FnOnce() -> String) -> Result<T>;
}

impl<T, E: std::error::Error + Send + Sync + 'static> Context<T> for std::result::Result<T, E> {
    fn context(self, code: ErrorCode, doing: impl FnOnce() -> String) -> Result<T> {
        self.map_err(|e| Error::new(code, format!("{}: {e}", doing())).with_source(e))
    }
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// An error with a code and message and no hint.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Error {
            code,
            message: crate::secrets::scrub(message.into()),
            hint: None,
            source: None,
        }
    }

    /// Adds a hint.
    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(crate::secrets::scrub(hint.into()));
        self
    }

    /// Shorthand for an `invalid_argument` error.
    pub fn invalid(message: impl Into<String>) -> Self {
        Error::new(ErrorCode::InvalidArgument, message)
    }

    /// Keeps `cause` as this error's source.
    pub fn with_source(mut self, cause: impl std::error::Error + Send + Sync + 'static) -> Self {
        self.source = Some(std::sync::Arc::new(cause));
        self
    }

    /// Shorthand for an `io` error about `path`, caused by `err`.
    pub fn io(path: &std::path::Path, err: impl std::error::Error + Send + Sync + 'static) -> Self {
        Error::new(ErrorCode::Io, format!("{}: {err}", path.display())).with_source(err)
    }

    /// Shorthand for an `internal` error.
    pub fn internal(message: impl Into<String>) -> Self {
        Error::new(ErrorCode::Internal, message)
    }

    /// The error as the JSON object both front ends show:
    /// `{"error": {"code", "message", "hint"}}`.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({ "error": { "code": self.code.as_str(), "message": self.message, "hint": self.hint } })
    }

    /// The stable code of this error.
    pub fn code(&self) -> ErrorCode {
        self.code
    }
}

/// `text` as one shell word: as it is when it holds only characters no shell reads
/// (letters, digits, `-_.,:/@+=`), else in single quotes. A hint built from what a
/// device sent is pasted into a shell by an operator.
pub fn shell_word(text: &str) -> String {
    let plain = !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.,:/@+=".contains(c));
    if plain {
        return text.to_string();
    }
    format!("'{}'", text.replace('\'', "'\\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The contract, row by row: code, exit status, HTTP status (docs/errors.md's table
    /// is checked against the code by an integration test).
    #[test]
    fn every_code_has_its_documented_exit_and_http_status() {
        let table = [
            (ErrorCode::InvalidArgument, "invalid_argument", 2, 400),
            (ErrorCode::NotFound, "not_found", 3, 404),
            (ErrorCode::Ambiguous, "ambiguous", 3, 409),
            (ErrorCode::NoData, "no_data", 3, 404),
            (ErrorCode::DbUnavailable, "db_unavailable", 4, 503),
            (ErrorCode::DbSchema, "db_schema", 4, 503),
            (ErrorCode::Io, "io", 5, 500),
            (ErrorCode::Render, "render", 5, 500),
            (ErrorCode::Internal, "internal", 70, 500),
            (ErrorCode::Unauthorized, "unauthorized", 77, 401),
            (ErrorCode::Forbidden, "forbidden", 77, 403),
            (ErrorCode::MethodNotAllowed, "method_not_allowed", 2, 405),
            (ErrorCode::Timeout, "timeout", 75, 408),
            (ErrorCode::TooLarge, "too_large", 2, 413),
            (ErrorCode::RateLimited, "rate_limited", 75, 429),
            (ErrorCode::Busy, "busy", 75, 503),
        ];
        for (code, name, exit, http) in table {
            assert_eq!(code.as_str(), name);
            assert_eq!(code.exit_code(), exit, "{name}");
            assert_eq!(code.http_status(), http, "{name}");
        }
    }

    #[test]
    fn the_cause_is_kept_not_only_quoted() {
        use std::error::Error as _;
        let read = std::fs::read("/no/such/file").context(ErrorCode::Io, || "/no/such/file".into());
        let e = read.unwrap_err();
        assert!(e.message.starts_with("/no/such/file: "), "{}", e.message);
        let cause = e.source().expect("a source");
        assert_eq!(
            cause
                .downcast_ref::<std::io::Error>()
                .map(std::io::Error::kind),
            Some(std::io::ErrorKind::NotFound)
        );
        assert_eq!(
            e,
            Error::new(ErrorCode::Io, e.message.clone()),
            "causes are not compared"
        );
    }

    #[test]
    fn display_starts_with_the_code() {
        let e = Error::invalid("--days 0 is out of range").with_hint("use 1..=366");
        assert_eq!(e.to_string(), "invalid_argument: --days 0 is out of range");
    }
}
