//! The bearer token `serve --http` asks of clients: from `FLEETCTL_TOKEN` or a file.

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
    let token = match token_file {
        Some(path) => first_line_of(path)
            .map_err(|e| Error::invalid(format!("--token-file {}: {e}", path.display())))?,
        None => std::env::var("FLEETCTL_TOKEN")
            .unwrap_or_default()
            .trim()
            .to_string(),
    };
    if token.chars().any(|c| c.is_control() || c == ' ') {
        return Err(
            Error::invalid("the bearer token holds spaces or control characters")
                .with_hint("use printable characters only, e.g. `openssl rand -hex 32 > token`"),
        );
    }
    let hint = "set FLEETCTL_TOKEN or pass --token-file PATH (first line), e.g. `(umask 077; openssl rand -hex 32 > token)`; tokens are never taken from the command line";
    if token.is_empty() {
        let message = match token_file {
            Some(path) => format!(
                "--token-file {} is empty: no bearer token was given",
                path.display()
            ),
            None => "no bearer token was given".to_string(),
        };
        return Err(Error::invalid(message).with_hint(hint));
    }
    if token.chars().count() < MIN_TOKEN_CHARS {
        return Err(Error::invalid(format!(
            "the bearer token is {} characters long; it must have at least {MIN_TOKEN_CHARS}",
            token.chars().count()
        ))
        .with_hint(hint));
    }
    if let Some(path) = token_file {
        warn_if_readable_by_others(path);
    }
    Ok(token)
}

/// The shortest token accepted, characters.
const MIN_TOKEN_CHARS: usize = 16;

/// Says so on stderr when others than the owner may read the token file.
fn warn_if_readable_by_others(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    if let Ok(meta) = std::fs::metadata(path)
        && meta.permissions().mode() & 0o044 != 0
    {
        crate::logging::info(&format!(
            "warning: --token-file {} can be read by other users (mode {:o}); `chmod 600 {}` keeps the token yours",
            path.display(),
            meta.permissions().mode() & 0o777,
            path.display()
        ));
    }
}
