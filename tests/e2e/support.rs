//! Shared helpers of the end-to-end tests.

use std::path::PathBuf;

/// The workspace root.
pub fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).parent().expect("tests/ has a parent").to_path_buf()
}

/// A `runner` command.
pub fn runner() -> assert_cmd::Command {
    assert_cmd::Command::cargo_bin("runner").expect("the runner binary is built")
}
