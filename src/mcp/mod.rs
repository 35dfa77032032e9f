//! Front end 2: `fleetctl serve`, an MCP server speaking both the handshake
//! revisions and the stateless 2026-07-28 revision over stdio. Tools are the report
//! registry; nothing here computes a fleet figure.

pub mod answers;
pub mod http;
pub mod jsonrpc;
pub mod prompts;
pub mod session;
pub mod stdio;
pub mod tools;

/// Serves MCP on stdin/stdout until stdin closes; `tiles` go under route maps.
pub fn serve_stdio(
    db_path: &crate::store::Location,
    tiles: Option<crate::report::route_map::TileSource>,
) -> std::io::Result<()> {
    let mut server = session::Server::new(db_path);
    server.set_tiles(tiles);
    crate::logging::info(&format!("serve: ready on stdio, database {db_path}"));
    let stdin = std::io::stdin().lock();
    let stdout = std::io::stdout().lock();
    stdio::serve(&mut server, stdin, stdout)
}
