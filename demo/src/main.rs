//! `admit-demo`: an upload server behind an `admit` gate, a burst of clients against
//! it, and a check of what the gate did, once with a fixed wait budget and once with
//! an overload target. Exits 0 only if every check held in both.
//!
//! `admit-demo serve`: the server alone until Ctrl-C or SIGTERM; exits 0 if it drained.
//!
//! `admit-demo load --target HOST:PORT`: uploads against a server already running,
//! then a summary; exits 0 whatever the answers, 2 for bad flags.

use std::process::ExitCode;

use admit_demo::{Command, Config, LoadConfig, LOAD_USAGE, USAGE};

fn main() -> ExitCode {
    let config = match Config::from_args(std::env::args().skip(1)) {
        Ok(Command::Run(config)) => config,
        Ok(Command::Serve(config)) => return serve(config),
        Ok(Command::Load(config)) => return load(&config),
        Ok(Command::Help) => {
            print!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Ok(Command::LoadHelp) => {
            print!("{LOAD_USAGE}");
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

/// The runtime `serve` and `load` run on: two workers, as a small container
/// has; `None` (said on stderr) if it cannot be built.
fn runtime() -> Option<tokio::runtime::Runtime> {
    match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => Some(runtime),
        Err(e) => {
            eprintln!("admit-demo: {e}");
            None
        }
    }
}

/// `admit-demo serve`: the server alone until Ctrl-C or SIGTERM, then a drain.
fn serve(config: admit_demo::Config) -> ExitCode {
    let Some(runtime) = runtime() else {
        return ExitCode::FAILURE;
    };
    // Listening before the server prints its address: a signal sent once it has
    // drains like any other, instead of killing the process.
    let stop = match runtime.block_on(async { stop_signal() }) {
        Ok(stop) => stop,
        Err(e) => {
            eprintln!("admit-demo: listening for signals: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(admit_demo::serve(config, None, stop)) {
        Ok(served) if served.drained.is_complete() => ExitCode::SUCCESS,
        Ok(_) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("admit-demo: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `admit-demo load`: the client loops against the target, then the summary.
fn load(config: &LoadConfig) -> ExitCode {
    let addr = match config.resolve() {
        Ok(addr) => addr,
        Err(e) => {
            eprintln!("admit-demo: --target {}: {e}", config.target);
            return ExitCode::from(2);
        }
    };
    let Some(runtime) = runtime() else {
        return ExitCode::FAILURE;
    };
    let summary = runtime.block_on(admit_demo::remote_load::run(config, addr, true));
    println!("\n{summary}");
    ExitCode::SUCCESS
}

/// Completes at Ctrl-C (SIGINT) or SIGTERM, what a container runtime sends to stop
/// a container: both take the same drain.
#[cfg(unix)]
fn stop_signal() -> std::io::Result<impl std::future::Future<Output = ()>> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut interrupt = signal(SignalKind::interrupt())?;
    let mut terminate = signal(SignalKind::terminate())?;
    Ok(async move {
        tokio::select! {
            _ = interrupt.recv() => {}
            _ = terminate.recv() => {}
        }
    })
}

/// Completes at Ctrl-C.
#[cfg(not(unix))]
fn stop_signal() -> std::io::Result<impl std::future::Future<Output = ()>> {
    Ok(async {
        let _ = tokio::signal::ctrl_c().await;
    })
}
