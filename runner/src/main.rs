//! `runner`: runs Harbor-format agent benchmarks in Docker, validates leaderboard submissions
//! and scrubs job directories for publication.
//!
//! The binary is thin: it parses flags, calls the engine and the libraries, prints, and maps
//! every subcommand's `Result<CommandOutcome, CliError>` to an exit code in one place (`exit.rs`).

mod cli;
mod commands;
mod exit;
mod output;
mod report;

fn main() -> std::process::ExitCode {
    let cli = cli::parse();
    output::init(cli.quiet, cli.color);
    let filter =
        tracing_subscriber::EnvFilter::try_from_env("RUNNER_LOG").unwrap_or_else(|_| "warn".into());
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .init();
    let result = commands::dispatch(cli.command);
    if let Err(error) = &result {
        for line in error.report_lines() {
            note!("{line}");
        }
    }
    std::process::ExitCode::from(exit::ExitCode::of(&result).code())
}
