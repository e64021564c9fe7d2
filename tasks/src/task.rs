//! One Harbor task directory: its config, instruction and paths.

use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use regex::Regex;

use crate::config::{TaskConfig, parse_task_config};
use crate::digest::task_digest;
use crate::error::TaskError;

/// A loaded task.
#[derive(Debug, Clone)]
pub struct Task {
    /// The task directory (absolute).
    pub dir: PathBuf,
    /// `[task].name` if present, else the directory name.
    pub name: String,
    /// The parsed `task.toml`.
    pub config: TaskConfig,
    /// `instruction.md` with leading canary lines stripped.
    pub instruction: String,
    /// The content digest, `sha256:<hex>` (Harbor's package digest).
    pub digest: String,
    /// Warnings found while loading (unknown keys).
    pub warnings: Vec<String>,
}

impl Task {
    /// Loads and checks a task directory.
    pub fn load(dir: &Path) -> Result<Task, TaskError> {
        let dir = std::path::absolute(dir).map_err(|e| TaskError::io(dir, e))?;
        let toml_path = dir.join("task.toml");
        if !toml_path.is_file() {
            return Err(TaskError::Missing {
                path: toml_path,
                what: "a task.toml",
            });
        }
        let text = std::fs::read_to_string(&toml_path).map_err(|e| TaskError::io(&toml_path, e))?;
        let parsed = parse_task_config(&toml_path, &text)?;
        let env_dir = dir.join("environment");
        if !env_dir.is_dir() {
            return Err(TaskError::Missing {
                path: env_dir,
                what: "an environment/ directory",
            });
        }
        if !env_dir.join("Dockerfile").is_file() && parsed.config.environment.docker_image.is_none()
        {
            return Err(TaskError::invalid(
                &toml_path,
                "environment.docker_image",
                "the task has no environment/Dockerfile, so it must name a docker_image",
            ));
        }
        let instruction_path = dir.join("instruction.md");
        if !instruction_path.is_file() {
            return Err(TaskError::Missing {
                path: instruction_path,
                what: "an instruction.md",
            });
        }
        let test_sh = dir.join("tests").join("test.sh");
        if !test_sh.is_file() {
            return Err(TaskError::Missing {
                path: test_sh,
                what: "a tests/test.sh",
            });
        }
        let raw = std::fs::read_to_string(&instruction_path)
            .map_err(|e| TaskError::io(&instruction_path, e))?;
        let name = parsed
            .config
            .task
            .as_ref()
            .and_then(|t| t.name.clone())
            .unwrap_or_else(|| {
                dir.file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default()
            });
        let digest = task_digest(&dir)?;
        Ok(Task {
            dir,
            name,
            config: parsed.config,
            instruction: strip_canary(&raw),
            digest,
            warnings: parsed.warnings,
        })
    }

    /// The part of the name after `/` (used in trial and image names).
    pub fn short_name(&self) -> &str {
        self.name.rsplit('/').next().unwrap_or(&self.name)
    }

    /// The `environment/` directory.
    pub fn environment_dir(&self) -> PathBuf {
        self.dir.join("environment")
    }

    /// The `tests/` directory.
    pub fn tests_dir(&self) -> PathBuf {
        self.dir.join("tests")
    }

    /// The `solution/` directory.
    pub fn solution_dir(&self) -> PathBuf {
        self.dir.join("solution")
    }

    /// The digest without its `sha256:` prefix.
    pub fn digest_hex(&self) -> &str {
        self.digest.trim_start_matches("sha256:")
    }
}

static CANARY: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)^(<!--.*canary.*-->|#.*canary.*)$").expect("canary pattern compiles")
});

/// Removes leading canary lines (and the blank lines after them), as Harbor's `strip_canary`.
pub fn strip_canary(text: &str) -> String {
    let mut rest = text;
    let mut stripped_any = false;
    loop {
        let (line, after) = match rest.find('\n') {
            Some(i) => (&rest[..i], &rest[i + 1..]),
            None => (rest, ""),
        };
        let line_trimmed = line.trim_end_matches('\r');
        if CANARY.is_match(line_trimmed)
            || (stripped_any && line_trimmed.trim().is_empty() && !rest.is_empty())
        {
            stripped_any = true;
            rest = after;
            if after.is_empty() {
                break;
            }
        } else {
            break;
        }
    }
    rest.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strips_leading_canaries_and_following_blanks() {
        let text = "<!-- BENCHMARK DATA SHOULD NEVER APPEAR. canary GUID 1234 -->\n# Canary string abc\n\nDo the thing.\n# canary inside stays\n";
        assert_eq!(strip_canary(text), "Do the thing.\n# canary inside stays\n");
    }

    #[test]
    fn leaves_text_without_canary_alone() {
        let text = "\nDo the thing.\n";
        assert_eq!(strip_canary(text), text);
        assert_eq!(strip_canary("# Title\nbody"), "# Title\nbody");
    }
}
