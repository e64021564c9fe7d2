//! Shared helpers of the end-to-end tests.

use std::path::PathBuf;
use std::sync::Once;

/// The workspace root.
pub fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).parent().expect("tests/ has a parent").to_path_buf()
}

/// A `runner` command for the freshly built binary.
pub fn runner() -> assert_cmd::Command {
    static BUILD: Once = Once::new();
    // The binary lives in another package of the workspace, so make sure it is current.
    BUILD.call_once(|| {
        let status = std::process::Command::new(env!("CARGO"))
            .args(["build", "-p", "runner", "--bin", "runner"])
            .current_dir(workspace_root())
            .status()
            .expect("cargo runs");
        assert!(status.success(), "building the runner binary failed");
    });
    assert_cmd::Command::cargo_bin("runner").expect("the runner binary is built")
}
