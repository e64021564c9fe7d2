//! `runner run`.

/// Arguments of `runner run`.
#[derive(Debug, clap::Args)]
pub struct RunArgs {}

/// Runs `runner run`.
pub fn run(_args: RunArgs) -> u8 {
    eprintln!("runner run: not implemented yet");
    crate::exit_codes::BAD_INPUT
}
