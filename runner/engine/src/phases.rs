//! The trial's phases as `runner serve` drives them: an episode is a session of one task's
//! container as a trial's is, so it starts and readies that container
//! ([`ready_environment`]), moves it between networks ([`switch_network`]), starts each step
//! ([`start_step`]), collects ([`PhasedCollection`]), and verifies ([`verify`]: in the
//! container or in a separate verifier's) through the functions the trial's sequence
//! (`trial/mod.rs`) calls itself; what only one of them does around those orders is a hook
//! ([`StepStart`], [`VerifyDriver`] with its [`SeparateVerifierHooks`]). This is the
//! engine's one door for serve: every item here is also the trial's own, and nothing in
//! `trial/` is public for serve alone.

pub use crate::trial::artifacts::{Collection, Convention};
pub use crate::trial::collection::PhasedCollection;
pub use crate::trial::egress::task_uses_allowlist;
pub use crate::trial::environment::{AgentEnvironment, ready_environment};
pub use crate::trial::log::TrialLog;
pub use crate::trial::phase_network::{NetworkPlan, access, switch_network};
pub use crate::trial::separate_verifier::{
    SeparateVerifierHooks, is_separate, trial_verifier_mode,
};
pub use crate::trial::steps::{StepStart, StepStartFailure, record_step_failure, start_step};
pub use crate::trial::verify_order::{VerifyDriver, VerifyPlace, verify};
