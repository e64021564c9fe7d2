//! The verifier contract: run the task tests, read rewards safely, parse named checks.
//!
//! [`verify`] is the entry point the runner calls after the agent phase. The parsing pieces
//! ([`reward`], [`checks`], [`inspect`], [`host_read`]) are pure and usable on their own.

pub mod checks;
pub mod error;
pub mod host_read;
pub mod inspect;
pub mod leftovers;
pub mod reward;
mod target;
mod verify;

pub use error::{Refusal, VerifierError, VerifierErrorKind};
pub use reward::{REWARD_FILE_LIMIT, Rewards, read_rewards};
pub use verify::{
    TESTS_DIR, VerifierOutcome, VerifyNotes, verify, verify_step, verify_with_image_tests,
};
