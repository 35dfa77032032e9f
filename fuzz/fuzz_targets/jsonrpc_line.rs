//! Fuzzes the MCP server with one arbitrary stdio line per input: the JSON-RPC reader
//! and the session's dispatch (handshake, batches, tools validating their arguments
//! before answering db_unavailable) must never panic, and every answer must be JSON.

#![no_main]

use fleetctl::mcp::jsonrpc::{self, Incoming, MAX_BATCH_MESSAGES};
use fleetctl::mcp::session::Server;
use libfuzzer_sys::fuzz_target;
use std::cell::RefCell;

/// Inputs are at most 1 MiB (the stdio cap, `-max_len`); an answer echoes parts of its
/// request with JSON escaping at most a few times over, so more than this is a flood.
const MAX_ANSWER_BYTES: usize = 8 * 1024 * 1024;

thread_local! {
    /// One server for the whole run, as under `fleetctl serve`. Its database does not
    /// exist, so tools answer db_unavailable after validating their arguments. The
    /// session is opened under 2025-03-26 so batches are served; a later `initialize`
    /// is refused, so no input changes the session and crashes replay alone.
    static SERVER: RefCell<Server> = RefCell::new({
        let db = std::env::temp_dir().join("fleetctl-fuzz-no-such-dir/fleet.db");
        let mut server = Server::new(&db);
        let hello = br#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"fuzz","version":"0"}}}"#;
        let answer = server.handle_line(hello).expect("initialize is answered");
        let answer: serde_json::Value = serde_json::from_str(&answer).expect("JSON");
        assert_eq!(answer["result"]["protocolVersion"], "2025-03-26", "{answer}");
        server
    });
}

fuzz_target!(|data: &[u8]| {
    match jsonrpc::parse(data) {
        Incoming::Batch(items) => assert!(
            !items.is_empty() && items.len() <= MAX_BATCH_MESSAGES,
            "a batch of {} messages was let through",
            items.len()
        ),
        Incoming::Invalid { id, .. } => assert!(
            id.is_null() || id.is_string() || id.is_i64() || id.is_u64(),
            "an unreadable id is echoed: {id}"
        ),
        _ => {}
    }
    let answer = SERVER.with(|s| s.borrow_mut().handle_line(data));
    if let Some(answer) = answer {
        assert!(
            answer.len() <= MAX_ANSWER_BYTES,
            "a {}-byte line got a {}-byte answer",
            data.len(),
            answer.len()
        );
        if let Err(e) = serde_json::from_str::<serde_json::Value>(&answer) {
            panic!("the answer is not JSON ({e}): {answer}");
        }
    }
});
