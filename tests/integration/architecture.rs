//! The layering rules of docs/architecture.md, checked on the source text: the domain
//! never prints or knows its front ends, only the store speaks SQL, and the two
//! front ends do not reach into each other (the CLI only starts the servers).

use std::path::Path;

fn sources(dir: &str) -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src").join(dir);
    let mut out = Vec::new();
    let mut stack = vec![root];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push((
                    path.display().to_string(),
                    std::fs::read_to_string(&path).unwrap(),
                ));
            }
        }
    }
    assert!(!out.is_empty(), "no sources under src/{dir}");
    out
}

#[test]
fn the_domain_never_prints_nor_knows_its_front_ends() {
    for dir in ["report", "analyze", "synth", "geo", "store"] {
        for (path, text) in sources(dir) {
            for forbidden in [
                "crate::cli",
                "crate::mcp",
                "clap::",
                "println!",
                "eprintln!",
                "print!(",
                "eprint!(",
            ] {
                assert!(!text.contains(forbidden), "{path} uses {forbidden}");
            }
        }
    }
}

#[test]
fn only_the_store_speaks_sql() {
    for dir in ["report", "analyze", "synth", "geo", "render", "cli", "mcp"] {
        for (path, text) in sources(dir) {
            for sql in [
                "SELECT ",
                "INSERT INTO",
                "CREATE TABLE",
                "DELETE FROM",
                "UPDATE ",
            ] {
                assert!(!text.contains(sql), "{path} holds SQL ({sql})");
            }
        }
    }
}

#[test]
fn the_front_ends_stay_apart() {
    for (path, text) in sources("mcp") {
        assert!(!text.contains("crate::cli"), "{path} imports the CLI");
    }
    for (path, text) in sources("cli") {
        for line in text.lines().filter(|l| l.contains("crate::mcp::")) {
            assert!(
                [
                    "crate::mcp::serve_stdio",
                    "crate::mcp::http::serve",
                    "crate::mcp::http::HttpOptions",
                    "crate::mcp::http::read_token"
                ]
                .iter()
                .any(|allowed| line.contains(allowed)),
                "{path}: the CLI may only start the servers: {line}"
            );
        }
    }
}
