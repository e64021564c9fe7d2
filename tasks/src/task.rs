//! One Harbor task directory: its config, instruction and paths.

use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use regex::Regex;

use crate::config::{TaskConfig, parse_task_config};
use crate::digest::task_digest_with;
use crate::error::TaskError;
use crate::layout;
use crate::template::{HostVars, ResolvedEnv, TemplateError};
use crate::unsupported::{self, UnsupportedFeature};

/// A loaded task.
#[derive(Debug, Clone)]
pub struct Task {
    /// The task directory (absolute).
    pub dir: PathBuf,
    /// `[task].name` if present, else the directory name.
    pub name: String,
    /// The parsed `task.toml`.
    pub config: TaskConfig,
    /// `instruction.md` with leading canary lines stripped; empty for a multi-step task.
    pub instruction: String,
    /// The steps of a multi-step task, in order, with their instructions; empty otherwise.
    pub steps: Vec<crate::steps::TaskStep>,
    /// The content digest, `sha256:<hex>` (Harbor's package digest, lock.json's).
    pub digest: String,
    /// Harbor 0.26's `task_checksum`: the dirhash of the whole directory, a different hash
    /// from [`Task::digest`] (see [`crate::checksum`]).
    pub checksum: String,
    /// Warnings found while loading (unknown keys, parts of the task that are not run).
    pub warnings: Vec<String>,
    /// Harbor features the task uses that the runner cannot run; always empty for a task from
    /// [`Task::load`], possibly not for one from [`Task::read`].
    pub unsupported: Vec<UnsupportedFeature>,
    /// The host variables its env templates may read (none until the job passes some, see
    /// [`crate::Dataset::pass_host_vars`]).
    pub host_vars: HostVars,
    /// Where the task came from when a registry gave it (`runner run -d`): its lock entry
    /// records the registry, repository, commit and path. `None` for a local task.
    pub origin: Option<crate::records::TaskOrigin>,
}

impl Task {
    /// Loads a task to run it: [`Task::read`], then refuses a task that uses a feature the
    /// runner cannot run yet ([`TaskError::Unsupported`], naming the task and each feature).
    pub fn load(dir: &Path) -> Result<Task, TaskError> {
        let task = Task::read(dir)?;
        if task.unsupported.is_empty() {
            Ok(task)
        } else {
            Err(TaskError::Unsupported {
                task: task.name,
                dir: task.dir,
                features: task.unsupported,
            })
        }
    }

    /// Reads and checks a task directory the way Harbor 0.13.1 loads it (plus the runner's
    /// ranges and its need for an image), listing in [`Task::unsupported`] what cannot run
    /// here. For tools that only read tasks, such as submission validation.
    pub fn read(dir: &Path) -> Result<Task, TaskError> {
        let dir = std::path::absolute(dir).map_err(|e| TaskError::io(dir, e))?;
        let toml_path = dir.join("task.toml");
        if !toml_path.is_file() {
            return Err(TaskError::Missing {
                path: toml_path,
                what: "a task.toml",
            });
        }
        // Before anything of the task is read: no link leads out of it.
        crate::confined::check_task_dir(&dir)?;
        let text = std::fs::read_to_string(&toml_path).map_err(|e| TaskError::io(&toml_path, e))?;
        let parsed = parse_task_config(&toml_path, &text)?;
        // Harbor reads a task without environment/ when it names a docker_image
        // (`Task.is_valid_dir`); one with neither is not a task.
        let env_dir = dir.join("environment");
        if !env_dir.is_dir() && parsed.config.environment.docker_image.is_none() {
            return Err(TaskError::Missing {
                path: env_dir,
                what: "an environment/ directory",
            });
        }
        layout::check(&dir, &toml_path, &parsed.config)?;
        // Harbor 0.26 refuses sidecar references without a compose file to define them.
        if let Some((field, service)) = crate::collect::sidecar_references(&parsed.config)
            .into_iter()
            .next()
            .filter(|_| !env_dir.join("docker-compose.yaml").is_file())
        {
            return Err(TaskError::invalid(
                &toml_path,
                field,
                format!(
                    "names the compose service {service:?}, but environment/docker-compose.yaml does not exist, so it cannot run; add the service there or collect from \"main\""
                ),
            ));
        }
        let instruction = if parsed.config.steps.is_empty() {
            let path = dir.join("instruction.md");
            strip_canary(&std::fs::read_to_string(&path).map_err(|e| TaskError::io(&path, e))?)
        } else {
            String::new()
        };
        let steps = crate::steps::read_steps(&dir, &parsed.config.steps)?;
        let name = match &parsed.config.task {
            Some(section) => section.name.clone(),
            None => dir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
        };
        // The two digests hash overlapping files: each is read once.
        let hashes = crate::file_hashes::FileHashes::default();
        let digest = task_digest_with(&dir, &hashes)?;
        let checksum = crate::checksum::task_checksum_with(&dir, &hashes)?;
        let warnings = parsed.warnings;
        let unsupported = unsupported::detect_in_dir(&parsed.config, &dir);
        Ok(Task {
            dir,
            name,
            config: parsed.config,
            instruction,
            steps,
            digest,
            checksum,
            warnings,
            unsupported,
            host_vars: HostVars::none(),
            origin: None,
        })
    }

    /// Resolves an env table of this task (`[environment].env`, `[verifier].env`,
    /// `[solution].env`, a step's) with the host variables the job passes.
    pub fn resolve_env(
        &self,
        env: &std::collections::BTreeMap<String, String>,
    ) -> Result<std::collections::BTreeMap<String, String>, TemplateError> {
        self.host_vars.resolve(env).map(|r| r.env)
    }

    /// [`Task::resolve_env`], saying whether a value came from the host.
    pub fn resolve_env_traced(
        &self,
        env: &std::collections::BTreeMap<String, String>,
    ) -> Result<ResolvedEnv, TemplateError> {
        self.host_vars.resolve(env)
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
    use crate::test_files::task_dir;

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

    #[test]
    fn a_compose_only_task_loads_for_its_compose_file_to_name_the_image() {
        let dir = task_dir(&[
            ("task.toml", "[task]\nname = \"org/compose\"\n"),
            ("instruction.md", "Query the sidecar.\n"),
            ("tests/test.sh", "exit 0\n"),
            (
                "environment/docker-compose.yaml",
                "services:\n  main:\n    build:\n      context: ./main\n",
            ),
        ]);
        let task = Task::load(dir.path()).unwrap();
        assert!(task.unsupported.is_empty(), "{:?}", task.unsupported);
    }
}
