//! `admit-demo`: an upload server behind an `admit` gate, a burst of clients against
//! it, and a check of what the gate did, once with a fixed wait budget and once with
//! an overload target. Exits 0 only if every check held in both.
//!
//! `admit-demo serve`: the server alone until Ctrl-C; exits 0 if it drained.

use std::process::ExitCode;

use admit_demo::{Command, Config, USAGE};

fn main() -> ExitCode {
    let config = match Config::from_args(std::env::args().skip(1)) {
        Ok(Command::Run(config)) => config,
        Ok(Command::Serve(config)) => return serve(config),
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
        Ok(comparison) if comparison.passed() => ExitCode::SUCCESS,
        Ok(_) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("admit-demo: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `admit-demo serve`: the server alone until Ctrl-C, then a drain.
fn serve(config: admit_demo::Config) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("admit-demo: {e}");
            return ExitCode::FAILURE;
        }
    };
    let interrupted = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    match runtime.block_on(admit_demo::serve(config, None, interrupted)) {
        Ok(served) if served.drained.is_complete() => ExitCode::SUCCESS,
        Ok(_) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("admit-demo: {e}");
            ExitCode::FAILURE
        }
    }
}
