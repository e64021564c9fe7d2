//! The trial's phases as `runner serve` drives them: an episode is a session of one task's
//! container as a trial's is, so it starts and readies that container, prepares each step,
//! collects and makes a separate verifier through the functions the trial's sequence
//! (`trial/mod.rs`) calls itself. This is the engine's one door for serve: every item here is
//! also the trial's own, and nothing in `trial/` is public for serve alone.

pub use crate::trial::collection::PhasedCollection;
pub use crate::trial::egress::task_uses_allowlist;
pub use crate::trial::environment::{AgentEnvironment, upload_environment_dir};
pub use crate::trial::log::TrialLog;
pub use crate::trial::phase_network::{NetworkPlan, access};
pub use crate::trial::separate_verifier::{
    SeparateVerifierSetup, is_separate, separate_verifier_setup,
};
pub use crate::trial::steps::{open_step_record, prepare_step};
