//! The `fleetctl` binary: parse argv, run, and map an error to one stderr line and
//! its exit status. Everything else lives in the library.

use clap::Parser;
use fleetctl::cli::{self, Cli};
use fleetctl::error::Error;

fn main() {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => {
            // --help and --version.
            let _ = e.print();
            return;
        }
        Err(e) if e.kind() == clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            // `fleetctl` or `fleetctl query` alone: show what there is to choose from.
            let _ = e.print();
            std::process::exit(2);
        }
        Err(e) => fail(&cli::usage_error(&e)),
    };
    if let Err(e) = cli::run(cli) {
        fail(&e);
    }
}

fn fail(e: &Error) -> ! {
    // Messages may quote what a file or client held (a foreign database's table names):
    // escaped like every log line.
    let line = |text: &str| fleetctl::logging::escape(text, fleetctl::logging::MAX_LINE_CHARS);
    eprintln!("fleetctl: {}: {}", e.code, line(&e.message));
    if let Some(hint) = &e.hint {
        eprintln!("hint: {}", line(hint));
    }
    std::process::exit(e.code.exit_code());
}
