//! Test support shared by the workspace's tests: one fake [`tasks::Sandbox`], the task
//! fixtures the agent and verifier tests build on, record fixtures, and file-tree helpers.
//!
//! Fakes are for unit tests of logic only: the runner's main paths are tested against the real
//! Docker engine in the `e2e` crate. [`FakeBackend`] runs the trial state machine with no Docker;
//! [`InstantBackend`] does nothing at all, in no time, for measuring the engine itself.

pub mod alloc;
pub mod backend;
pub mod files;
pub mod fixtures;
pub mod instant;
pub mod one_trial;
pub mod records;
pub mod sandbox;
pub mod settings;
pub mod upstream;

pub use backend::FakeBackend;
pub use fixtures::{TaskFixture, free_port};
pub use instant::InstantBackend;
pub use one_trial::run_one_trial;
pub use sandbox::FakeSandbox;
pub use settings::job_settings;

/// The machine's 1, 5 and 15 minute load averages as `/proc/loadavg` gives them (empty where
/// it cannot be read): every benchmark prints them beside its figures, which mean little on a
/// busy machine.
pub fn load_average() -> String {
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    load.split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

/// Asserts that `text` contains every one of `fragments`, showing it when one is missing.
pub fn assert_says_all(text: &str, fragments: &[&str]) {
    for fragment in fragments {
        assert!(text.contains(fragment), "{fragment:?} not said: {text}");
    }
}

/// Asserts that `message` names every one of `names` and does not hold `secret`: what an error
/// about a secret must do (say which variable or file, never the value). The message is shown
/// only when a name is missing, never when it holds the secret.
pub fn assert_names_but_hides(message: &str, names: &[&str], secret: &str) {
    for name in names {
        assert!(message.contains(name), "{name:?} not named: {message}");
    }
    assert!(
        !message.contains(secret),
        "the message holds the secret value"
    );
}
