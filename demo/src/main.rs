//! `admit-demo`: an upload server behind an `admit` gate, a burst of clients against
//! it, and a check of what the gate did. Exits 0 only if every check held.

use std::process::ExitCode;

use admit_demo::{Command, Config, USAGE};

fn main() -> ExitCode {
    let config = match Config::from_args(std::env::args().skip(1)) {
        Ok(Command::Run(config)) => config,
        Ok(Command::Help) => {
            print!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("admit-demo: {e}");
            return ExitCode::from(2);
        }
    };
    match admit_demo::run_blocking(config) {
        Ok(report) if report.passed() => ExitCode::SUCCESS,
        Ok(_) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("admit-demo: {e}");
            ExitCode::FAILURE
        }
    }
}
