//! Secrets this process was given (a PostgreSQL password, from `--db` or PGPASSWORD)
//! and the one place that keeps them out of what it says: every error's message and
//! hint, and every log line, pass through [`scrub`]. Messages name a database by its
//! parsed form with the password masked already; this is the net under them, for a
//! text that quotes the raw value (a parser's complaint, a server's error).

use std::sync::RwLock;

static KNOWN: RwLock<Vec<String>> = RwLock::new(Vec::new());

/// The mask a secret is shown as.
pub const MASK: &str = "***";

/// Secrets shorter than this are not scrubbed from text (every `a` of a message
/// would go); the masked forms of the URL still leave them out.
const MIN_CHARS: usize = 4;

/// Remembers `secret` for the rest of the process (and its percent-decoded form, as
/// a parser may quote either).
pub fn register(secret: &str) {
    let mut forms = vec![secret.to_string()];
    if let Some(decoded) = percent_decoded(secret).filter(|d| d != secret) {
        forms.push(decoded);
    }
    let mut known = KNOWN.write().unwrap_or_else(|p| p.into_inner());
    for form in forms {
        if form.chars().count() >= MIN_CHARS && !known.contains(&form) {
            known.push(form);
        }
    }
    // The longest first: a secret that holds another is masked whole.
    known.sort_by_key(|s| std::cmp::Reverse(s.len()));
}

/// `text` with every known secret replaced by [`MASK`].
pub fn scrub(text: String) -> String {
    let known = KNOWN.read().unwrap_or_else(|p| p.into_inner());
    if known.is_empty() || !known.iter().any(|s| text.contains(s.as_str())) {
        return text;
    }
    known
        .iter()
        .fold(text, |t, secret| t.replace(secret.as_str(), MASK))
}

fn percent_decoded(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_registered_secret_is_masked_in_any_text_and_its_decoded_form_too() {
        register("p%40ss-w0rd");
        assert_eq!(
            scrub("could not connect with p@ss-w0rd or p%40ss-w0rd".into()),
            "could not connect with *** or ***"
        );
        assert_eq!(scrub("nothing here".into()), "nothing here");
    }
}
