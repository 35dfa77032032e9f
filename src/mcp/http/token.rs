//! The tokens `serve --http` asks of clients: the bearer token of MCP and the tools
//! (`FLEETCTL_TOKEN` or `--token-file`), and the ingest token of devices that push
//! positions (`FLEETCTL_INGEST_TOKEN` or `--ingest-token-file`), each from its
//! variable or a file, never from the command line.

use crate::error::{Error, Result};
use std::path::Path;

/// The longest token file read, bytes.
const MAX_TOKEN_FILE_BYTES: u64 = 4096;

/// The first line of a small regular file (never a device or pipe a link points to).
fn first_line_of(path: &Path) -> std::io::Result<String> {
    let bytes = crate::untrusted::read_capped(path, MAX_TOKEN_FILE_BYTES)
        .map_err(|e| std::io::Error::new(e.kind(), format!("{e}; a token file holds one line")))?;
    let text = String::from_utf8(bytes)
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidData, "not UTF-8 text"))?;
    Ok(text.lines().next().unwrap_or_default().trim().to_string())
}

/// Reads the token: `FLEETCTL_TOKEN`, or the first line of `token_file`.
pub fn read_token(token_file: Option<&Path>) -> Result<String> {
    read_secret(token_file, "FLEETCTL_TOKEN", "--token-file", "bearer token")
}

/// Reads the ingest token: `FLEETCTL_INGEST_TOKEN`, or the first line of `token_file`.
pub fn read_ingest_token(token_file: Option<&Path>) -> Result<String> {
    read_secret(
        token_file,
        "FLEETCTL_INGEST_TOKEN",
        "--ingest-token-file",
        "ingest token",
    )
}

/// A token from the variable `env` or the first line of `file` (given as `flag`),
/// checked: printable, at least `MIN_TOKEN_CHARS` long.
fn read_secret(file: Option<&Path>, env: &str, flag: &str, what: &str) -> Result<String> {
    let token_file = file;
    let token = match token_file {
        Some(path) => first_line_of(path)
            .map_err(|e| Error::invalid(format!("{flag} {}: {e}", path.display())))?,
        None => std::env::var(env).unwrap_or_default().trim().to_string(),
    };
    if token.chars().any(|c| c.is_control() || c == ' ') {
        return Err(
            Error::invalid(format!("the {what} holds spaces or control characters"))
                .with_hint("use printable characters only, e.g. `openssl rand -hex 32 > token`"),
        );
    }
    let hint = format!(
        "set {env} or pass {flag} PATH (first line), e.g. `(umask 077; openssl rand -hex 32 > token)`; tokens are never taken from the command line"
    );
    if token.is_empty() {
        let message = match token_file {
            Some(path) => format!("{flag} {} is empty: no {what} was given", path.display()),
            None => format!("no {what} was given"),
        };
        return Err(Error::invalid(message).with_hint(hint));
    }
    if token.chars().count() < MIN_TOKEN_CHARS {
        return Err(Error::invalid(format!(
            "the {what} is {} characters long; it must have at least {MIN_TOKEN_CHARS}",
            token.chars().count()
        ))
        .with_hint(hint));
    }
    if let Some(path) = token_file {
        warn_if_readable_by_others(path, flag);
    }
    Ok(token)
}

/// The shortest token accepted, characters.
const MIN_TOKEN_CHARS: usize = 16;

/// Says so on stderr when others than the owner may read the token file.
fn warn_if_readable_by_others(path: &Path, flag: &str) {
    use std::os::unix::fs::PermissionsExt;
    if let Ok(meta) = std::fs::metadata(path)
        && meta.permissions().mode() & 0o044 != 0
    {
        crate::logging::info(&format!(
            "warning: {flag} {} can be read by other users (mode {:o}); `chmod 600 {}` keeps the token yours",
            path.display(),
            meta.permissions().mode() & 0o777,
            path.display()
        ));
    }
}
