//! The stdio transport: one JSON-RPC message per line in, one per line out, and
//! nothing else on stdout. Lines over `MAX_LINE_BYTES` are answered with an error
//! without being held in memory; end of input ends the server.

use super::jsonrpc::{self, INVALID_REQUEST};
use super::session::Server;
use std::io::{self, BufRead, Write};

/// The longest message accepted, bytes.
pub const MAX_LINE_BYTES: usize = jsonrpc::MAX_MESSAGE_BYTES;

/// Reads one line into `buf` (without `\n`), keeping at most `cap` bytes. Returns
/// `None` at end of input, else whether the line was longer than `cap`.
fn read_line_capped(
    reader: &mut impl BufRead,
    buf: &mut Vec<u8>,
    cap: usize,
) -> io::Result<Option<bool>> {
    buf.clear();
    let mut too_long = false;
    let mut read_any = false;
    loop {
        let available = reader.fill_buf()?;
        if available.is_empty() {
            return Ok(read_any.then_some(too_long));
        }
        read_any = true;
        let (chunk, done) = match available.iter().position(|&b| b == b'\n') {
            Some(i) => (&available[..i], Some(i + 1)),
            None => (available, None),
        };
        if buf.len() + chunk.len() > cap {
            too_long = true;
        } else {
            buf.extend_from_slice(chunk);
        }
        let used = done.unwrap_or(available.len());
        reader.consume(used);
        if done.is_some() {
            return Ok(Some(too_long));
        }
    }
}

/// Serves `input` to `output` until end of input.
pub fn serve(server: &mut Server, input: impl BufRead, mut output: impl Write) -> io::Result<()> {
    let mut reader = input;
    let mut line = Vec::with_capacity(64 * 1024);
    while let Some(too_long) = read_line_capped(&mut reader, &mut line, MAX_LINE_BYTES)? {
        if line.last() == Some(&b'\r') {
            line.pop();
        }
        let answer = if too_long {
            Some(
                jsonrpc::error(
                    &serde_json::Value::Null,
                    INVALID_REQUEST,
                    &format!("Invalid Request: message longer than {MAX_LINE_BYTES} bytes"),
                    None,
                )
                .to_string(),
            )
        } else if line.iter().all(u8::is_ascii_whitespace) {
            None
        } else {
            server.handle_line(&line)
        };
        if let Some(answer) = answer {
            output.write_all(answer.as_bytes())?;
            output.write_all(b"\n")?;
            output.flush()?;
        }
        // The answer is out: end the read transaction it ran in (PostgreSQL), so
        // that no snapshot is held while the client thinks.
        server.rest();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_split_and_capped() {
        let mut input: &[u8] = b"one\r\ntwo\n\nthree-is-long\nlast";
        let mut buf = Vec::new();
        let mut seen = Vec::new();
        while let Some(too_long) = read_line_capped(&mut input, &mut buf, 8).unwrap() {
            seen.push((String::from_utf8_lossy(&buf).into_owned(), too_long));
        }
        assert_eq!(
            seen,
            vec![
                ("one\r".to_string(), false),
                ("two".to_string(), false),
                (String::new(), false),
                (String::new(), true),
                ("last".to_string(), false)
            ]
        );
    }
}
