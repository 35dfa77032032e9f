//! The layering rules of docs/architecture.md, checked on the source text: every
//! module uses only the layers below it (grouped imports and paths in code included),
//! the domain never prints, only the store speaks SQL, and the two front ends do not
//! reach into each other (the CLI only starts the servers). Between crates the
//! compiler enforces the arrow (crates/core cannot name crates/render or the binary);
//! inside a crate, this test does.

use std::path::Path;

/// Every `.rs` file under `dir`, with its text.
fn files_under(dir: &Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
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
    out
}

/// The modules of the workspace by name, with their files: those of the domain crate
/// (crates/core/src), the rendering crate as one module `render`, the file formats
/// crate as one module `formats`, and the binary's
/// front ends (src/).
fn modules() -> Vec<(String, Vec<(String, String)>)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut out = vec![
        (
            "render".to_string(),
            files_under(&root.join("crates/render/src")),
        ),
        (
            "formats".to_string(),
            files_under(&root.join("crates/formats/src")),
        ),
    ];
    for crate_src in ["crates/core/src", "src"] {
        for entry in std::fs::read_dir(root.join(crate_src)).unwrap() {
            let path = entry.unwrap().path();
            let module = path.file_stem().unwrap().to_string_lossy().to_string();
            if matches!(module.as_str(), "lib" | "main") {
                continue;
            }
            let files = if path.is_dir() {
                files_under(&path)
            } else {
                vec![(
                    path.display().to_string(),
                    std::fs::read_to_string(&path).unwrap(),
                )]
            };
            out.push((module, files));
        }
    }
    out
}

/// The files of one module.
fn sources(module: &str) -> Vec<(String, String)> {
    let files = modules()
        .into_iter()
        .find(|(m, _)| m == module)
        .map(|(_, files)| files)
        .unwrap_or_default();
    assert!(!files.is_empty(), "no sources for module {module}");
    files
}

/// The modules of the domain crate (crates/core).
fn domain_modules() -> Vec<(String, Vec<(String, String)>)> {
    modules()
        .into_iter()
        .filter(|(_, files)| files.iter().all(|(f, _)| f.contains("crates/core/")))
        .collect()
}

#[test]
fn the_domain_never_prints_nor_knows_its_front_ends() {
    let domain = domain_modules();
    assert!(domain.len() >= 10, "{} domain modules", domain.len());
    for (_, files) in domain {
        for (path, text) in files {
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
    for (module, files) in modules() {
        if module == "store" {
            continue;
        }
        for (path, text) in files {
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
fn rendering_and_file_formats_never_touch_the_store() {
    for (path, text) in sources("render").into_iter().chain(sources("formats")) {
        for forbidden in ["store::", "rusqlite", "Connection"] {
            assert!(!text.contains(forbidden), "{path} names {forbidden}");
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
                    "crate::mcp::http::read_token",
                    "crate::mcp::http::read_ingest_token"
                ]
                .iter()
                .any(|allowed| line.contains(allowed)),
                "{path}: the CLI may only start the servers: {line}"
            );
        }
    }
}

/// The layers, lowest first: a module may use only modules of lower layers (the
/// same layer is off limits too, so `store` and `analyze` stay apart). The CLI may
/// use `mcp` only to start the servers (checked above).
const LAYERS: &[&[&str]] = &[
    // The secrets every message is scrubbed of, below the errors that carry them.
    &["secrets"],
    &["error", "logging", "untrusted", "scratch"],
    &["clock", "parallel", "output", "threads"],
    &["model", "geo"],
    &["store", "analyze"],
    &["pipeline"],
    &["synth", "ingest", "report"],
    // Exports are the reports' rows (and the positions) as columns; the live feed
    // reads pushed fixes with the import's time and unit rules.
    &["export", "live"],
    &["render", "formats"],
    // The live feed's server: what devices push, its writer, analyser and alerts.
    &["feed"],
    &["mcp"],
    &["cli"],
];

/// The crate modules a source file names: `use crate::x…`, `use crate::{x, y…}`
/// and `crate::x::` paths in code (comments left out).
fn crate_modules_named(text: &str) -> std::collections::BTreeSet<String> {
    // Comments out (a `//` that starts a line or follows a space; `http://` stays).
    let code: String = text
        .lines()
        .map(|l| {
            let cut = l
                .match_indices("//")
                .find(|(i, _)| *i == 0 || l[..*i].ends_with(char::is_whitespace))
                .map_or(l.len(), |(i, _)| i);
            &l[..cut]
        })
        .collect::<Vec<_>>()
        .join("\n");
    let mut named = std::collections::BTreeSet::new();
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect()
    };
    let mut rest = code.as_str();
    while let Some(i) = rest.find("crate::") {
        rest = &rest[i + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            // A grouped import: every first segment inside the braces, nested ones too.
            let mut depth = 1;
            let end = group
                .char_indices()
                .find(|(_, c)| {
                    match c {
                        '{' => depth += 1,
                        '}' => depth -= 1,
                        _ => {}
                    }
                    depth == 0
                })
                .map_or(group.len(), |(i, _)| i);
            for item in split_top_level(&group[..end]) {
                let name = ident(item.trim());
                if !name.is_empty() && name != "self" {
                    named.insert(name);
                }
            }
        } else {
            let name = ident(rest);
            if !name.is_empty() {
                named.insert(name);
            }
        }
    }
    named
}

/// Splits `a, b::{c, d}, e` at its top-level commas.
fn split_top_level(text: &str) -> Vec<&str> {
    let (mut parts, mut level, mut from) = (Vec::new(), 0, 0);
    for (i, c) in text.char_indices() {
        match c {
            '{' => level += 1,
            '}' => level -= 1,
            ',' if level == 0 => {
                parts.push(&text[from..i]);
                from = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&text[from..]);
    parts
}

#[test]
fn the_grouped_import_reader_sees_every_module() {
    let named = crate_modules_named(
        "use crate::{error::Error, geo::{self, LatLon}, report};\nlet x = crate::store::read::vehicles(c); // crate::cli in a comment\n",
    );
    let expected: std::collections::BTreeSet<String> = ["error", "geo", "report", "store"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert_eq!(named, expected);
}

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.contains(&module))
}

/// The crate-level modules a file reaches with `super::` paths: from a file `depth`
/// modules below the crate root, `depth` `super::`s climb to the root.
fn modules_reached_by_super(text: &str, depth: usize) -> Vec<String> {
    let mut reached = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find("super::") {
        let mut run = &rest[i..];
        let mut supers = 0;
        while let Some(next) = run.strip_prefix("super::") {
            supers += 1;
            run = next;
        }
        if supers >= depth {
            let name: String = run
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                reached.push(name);
            }
        }
        rest = run;
    }
    reached
}

/// How many modules below its crate root a source file is (`pipeline.rs` and
/// `store/mod.rs` 1, `store/read.rs` 2, `mcp/http/io.rs` 3).
fn module_depth(file: &str) -> usize {
    let under_src = file.rsplit_once("/src/").map_or(file, |(_, r)| r);
    let parts = under_src.split('/').count();
    if under_src.ends_with("mod.rs") || under_src == "lib.rs" {
        parts - 1
    } else {
        parts
    }
}

/// The modules `text`, a source file of `module`, uses against the layers.
/// The modules that are a whole crate of their own.
const CRATE_MODULES: &[&str] = &["render", "formats"];

fn violations(module: &str, text: &str) -> Vec<String> {
    violations_in(module, text, 0)
}

/// As `violations`, with `super::` paths resolved from a file `depth` modules deep.
fn violations_in(module: &str, text: &str, depth: usize) -> Vec<String> {
    let layer =
        layer_of(module).unwrap_or_else(|| panic!("src/{module} is in no layer: add it to LAYERS"));
    let mut named = crate_modules_named(text);
    if depth > 0 {
        // Only names of crate-level modules: `super::` inside a file's own inline
        // `mod tests` reaches that file's module, whose items are not modules.
        named.extend(
            modules_reached_by_super(text, depth)
                .into_iter()
                .filter(|n| layer_of(n).is_some()),
        );
    }
    named
        .into_iter()
        .filter(|used| used != module)
        // In a crate that is one module (render, formats), `crate::` names its own
        // items; only the domain's modules it re-exports are layered.
        .filter(|used| !(CRATE_MODULES.contains(&module) && layer_of(used).is_none()))
        .filter(|used| {
            let below = layer_of(used).is_some_and(|l| l < layer);
            !(below || (module == "cli" && used == "mcp"))
        })
        .collect()
}

#[test]
fn a_use_against_the_layers_is_seen() {
    assert_eq!(
        violations(
            "store",
            "use crate::{model::Fix, render::map};\nfn f() { crate::analyze::x(); }"
        ),
        vec!["analyze".to_string(), "render".to_string()]
    );
    assert!(violations("report", "use crate::{store, analyze::Thresholds};").is_empty());
    // `super::` from store/mod.rs is the crate root; from store/read.rs it is `store`.
    assert_eq!(
        violations_in("store", "use super::analyze::Thresholds;", 1),
        vec!["analyze".to_string()]
    );
    assert!(violations_in("store", "use super::db_err;", 2).is_empty());
    assert_eq!(module_depth("/x/crates/core/src/store/mod.rs"), 1);
    assert_eq!(module_depth("/x/src/mcp/http/io.rs"), 3);
}

#[test]
fn every_module_uses_only_the_layers_below_it() {
    let mut checked = 0;
    for (module, files) in modules() {
        for (file, text) in files {
            let wrong = violations_in(&module, &text, module_depth(&file));
            assert!(
                wrong.is_empty(),
                "{file}: {module} uses {wrong:?}, which are not below it in LAYERS"
            );
            checked += 1;
        }
    }
    assert!(checked > 40, "only {checked} files checked");
}
