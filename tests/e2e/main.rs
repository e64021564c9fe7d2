//! End-to-end tests of the `runner` binary: one integration-test binary, one module per area.
//! Docker tests need a running engine; in CI (`CI=true`) a missing engine fails them.

mod agent_blame;
mod agents;
mod bridge;
mod bridge_models;
mod bridge_phase;
mod command_agent;
mod compose;
mod containment;
mod datasets;
mod dry_run;
mod egress;
mod egress_leftover;
mod error_policy;
mod images;
mod installed;
mod integrity;
mod job_records;
mod oracle_run;
mod outputs;
mod pool;
mod pool_remote;
mod records_026;
mod redaction;
mod registry;
mod resume;
mod run;
mod schema14;
mod scrub;
mod serve;
mod shards;
mod slurm;
#[macro_use]
mod snapshot;
mod steering;
mod step_phases;
mod steps;
mod support;
mod tamper;
mod task_inputs;
mod task_qa;
mod toolchain;
mod validate;
mod view;
