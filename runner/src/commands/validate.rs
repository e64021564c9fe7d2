//! `runner validate-submission` and `runner validate-trajectory`.

/// Arguments of `runner validate-submission`.
#[derive(Debug, clap::Args)]
pub struct ValidateSubmissionArgs {}

/// Arguments of `runner validate-trajectory`.
#[derive(Debug, clap::Args)]
pub struct ValidateTrajectoryArgs {}

/// Runs `runner validate-submission`.
pub fn validate_submission(_args: ValidateSubmissionArgs) -> u8 {
    eprintln!("runner validate-submission: not implemented yet");
    crate::exit_codes::BAD_INPUT
}

/// Runs `runner validate-trajectory`.
pub fn validate_trajectory(_args: ValidateTrajectoryArgs) -> u8 {
    eprintln!("runner validate-trajectory: not implemented yet");
    crate::exit_codes::BAD_INPUT
}
