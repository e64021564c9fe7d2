//! `runner scrub`.

/// Arguments of `runner scrub`.
#[derive(Debug, clap::Args)]
pub struct ScrubArgs {}

/// Runs `runner scrub`.
pub fn run(_args: ScrubArgs) -> u8 {
    eprintln!("runner scrub: not implemented yet");
    crate::exit_codes::BAD_INPUT
}
