//! `runner`: runs Harbor-format agent benchmarks in Docker, validates leaderboard submissions
//! and scrubs job directories for publication.

mod cli;
mod commands;
mod docker;
mod events;
mod exit_codes;
mod job;
mod report;
mod trial;

use clap::Parser;

fn main() -> std::process::ExitCode {
    let cli = cli::Cli::parse();
    let filter =
        tracing_subscriber::EnvFilter::try_from_env("RUNNER_LOG").unwrap_or_else(|_| "warn".into());
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .init();
    let code = commands::dispatch(cli.command);
    std::process::ExitCode::from(code)
}
