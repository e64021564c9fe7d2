//! Test support shared by the workspace's tests: one fake [`tasks::Sandbox`], the task
//! fixtures the agent and verifier tests build on, record fixtures, and file-tree helpers.
//!
//! Fakes are for unit tests of logic only: the runner's main paths are tested against the real
//! Docker engine in the `e2e` crate. [`FakeBackend`] runs the trial state machine with no Docker.

pub mod backend;
pub mod files;
pub mod fixtures;
pub mod records;
pub mod sandbox;

pub use backend::FakeBackend;
pub use fixtures::{TaskFixture, free_port};
pub use sandbox::FakeSandbox;
