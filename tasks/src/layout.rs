//! The files a task directory must have for its config, checked as Harbor 0.13.1's
//! `Task._validate_tests` does: `instruction.md` (or `steps/<name>/instruction.md` per step),
//! and a test script for the target OS (`test.sh` on Linux, `test.bat` on Windows) wherever the
//! verifier runs in the agent's container. A separate verifier owns its tests in its image, so
//! its tests are not required on the host.

use std::path::{Path, PathBuf};

use crate::config::{TaskConfig, TaskOs, VerifierEnvironmentMode};
use crate::error::TaskError;

/// The verifier mode of the single-step task (Harbor's `resolve_task_verifier_mode`).
pub fn task_verifier_mode(config: &TaskConfig) -> VerifierEnvironmentMode {
    config
        .verifier
        .declared_mode()
        .unwrap_or(VerifierEnvironmentMode::Shared)
}

/// The verifier mode of step `index` (Harbor's `resolve_step_verifier_mode`): the step's own
/// declaration, else the task's.
pub fn step_verifier_mode(config: &TaskConfig, index: usize) -> VerifierEnvironmentMode {
    config.steps[index]
        .verifier
        .declared_mode()
        .unwrap_or_else(|| task_verifier_mode(config))
}

/// The test script name for `os`.
pub fn test_script_name(os: TaskOs) -> &'static str {
    match os {
        TaskOs::Linux => "test.sh",
        TaskOs::Windows => "test.bat",
    }
}

/// `dir/<name>` when it is a file.
fn script_in(dir: &Path, name: &str) -> Option<PathBuf> {
    let path = dir.join(name);
    path.is_file().then_some(path)
}

/// Checks the files `config` needs in `task_dir`; `toml_path` is named in config-related errors.
pub fn check(task_dir: &Path, toml_path: &Path, config: &TaskConfig) -> Result<(), TaskError> {
    let os = config.environment.target_os();
    let script = test_script_name(os);
    if config.steps.is_empty() {
        let instruction = task_dir.join("instruction.md");
        if !instruction.is_file() {
            return Err(TaskError::Missing {
                path: instruction,
                what: "an instruction.md",
            });
        }
        if task_verifier_mode(config) == VerifierEnvironmentMode::Separate {
            return Ok(());
        }
        let tests = task_dir.join("tests");
        if script_in(&tests, script).is_none() {
            return Err(TaskError::Missing {
                path: tests.join(script),
                what: match os {
                    TaskOs::Linux => "a tests/test.sh",
                    TaskOs::Windows => "a tests/test.bat (its [environment] os is windows)",
                },
            });
        }
        return Ok(());
    }
    for (index, step) in config.steps.iter().enumerate() {
        let field = format!("steps[{index}].name");
        let step_dir = task_dir.join("steps").join(&step.name);
        if !step_dir.is_dir() {
            return Err(TaskError::invalid(
                toml_path,
                field,
                format!(
                    "step directory not found: {} (each [[steps]] entry needs steps/<name>/ with an instruction.md)",
                    step_dir.display()
                ),
            ));
        }
        let instruction = step_dir.join("instruction.md");
        if !instruction.is_file() {
            return Err(TaskError::invalid(
                toml_path,
                field,
                format!("step instruction not found: {}", instruction.display()),
            ));
        }
        if step_verifier_mode(config, index) == VerifierEnvironmentMode::Separate {
            continue;
        }
        let step_tests = step_dir.join("tests");
        let shared_tests = task_dir.join("tests");
        if script_in(&step_tests, script).is_none() && script_in(&shared_tests, script).is_none() {
            return Err(TaskError::invalid(
                toml_path,
                field,
                format!(
                    "step {:?} has no test script for os {:?}: expected steps/{}/tests/{script} or tests/{script}",
                    step.name,
                    match os {
                        TaskOs::Linux => "linux",
                        TaskOs::Windows => "windows",
                    },
                    step.name
                ),
            ));
        }
    }
    Ok(())
}
