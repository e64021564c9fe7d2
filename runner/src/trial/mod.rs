//! One trial: container from the task image, agent setup and run, verification, teardown,
//! and the records of every phase. Harbor's lifecycle (reference §5.1).

mod environment;
mod healthcheck;
mod log;
mod naming;
mod record;
pub(crate) mod run;
mod timeouts;
mod verify;

pub use naming::trial_name;
pub use timeouts::Multipliers;
