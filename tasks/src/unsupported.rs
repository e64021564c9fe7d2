//! Harbor task features this runner parses but cannot run yet. A task using one is refused at
//! load, naming the task and the feature, instead of being half-run and scored as if the agent
//! failed.
//!
//! Each feature is one [`UnsupportedFeature`] variant found by one detector in [`DETECTORS`];
//! when the runner learns a feature (issue 12), delete its detector and its variant.

use std::fmt;
use std::path::Path;

use crate::config::{TaskConfig, TaskOs};

/// A feature of a task that the runner does not implement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UnsupportedFeature {
    /// `[environment.tpu]`.
    Tpu,
    /// `os = "windows"` in `[environment]` or in a verifier environment (task- or step-level).
    Windows,
    /// No `environment/Dockerfile`, no `docker_image` and no compose file: Harbor reads and
    /// hashes such a task, but no environment can be made for it.
    NoImage,
}

impl UnsupportedFeature {
    /// A stable short name (`multi-step`, `compose`, …) for reports and tests.
    pub fn key(&self) -> &'static str {
        match self {
            UnsupportedFeature::Tpu => "tpu",
            UnsupportedFeature::Windows => "windows",
            UnsupportedFeature::NoImage => "no-image",
        }
    }
}

impl fmt::Display for UnsupportedFeature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UnsupportedFeature::Tpu => {
                write!(f, "TPUs ([environment.tpu]) are not supported yet")
            }
            UnsupportedFeature::Windows => write!(
                f,
                "Windows containers (os = \"windows\" in [environment] or a verifier environment) are not supported yet"
            ),
            UnsupportedFeature::NoImage => write!(
                f,
                "the task has no environment/Dockerfile, so it must name a docker_image (environment.docker_image)"
            ),
        }
    }
}

/// A rule that finds one feature in a parsed config and its task directory.
pub type Detector = fn(&TaskConfig, &Path) -> Option<UnsupportedFeature>;

/// Every detector, in the order features are reported.
pub const DETECTORS: &[Detector] = &[tpu, windows];

/// The features of the task at `task_dir` (with config `config`) that the runner cannot run
/// ([`DETECTORS`], config-level), then whether it has an image at all (files).
pub fn detect(config: &TaskConfig, task_dir: &Path) -> Vec<UnsupportedFeature> {
    DETECTORS
        .iter()
        .filter_map(|detector| detector(config, task_dir))
        .collect()
}

/// [`detect`] and [`no_image`]: everything that keeps the task at `task_dir` from running.
pub fn detect_in_dir(config: &TaskConfig, task_dir: &Path) -> Vec<UnsupportedFeature> {
    let mut found = detect(config, task_dir);
    found.extend(no_image(config, task_dir));
    found
}

/// `feature` when the field is declared at all (Harbor acts on any value).
fn declared<T>(field: &Option<T>, feature: UnsupportedFeature) -> Option<UnsupportedFeature> {
    field.is_some().then_some(feature)
}

fn tpu(config: &TaskConfig, _: &Path) -> Option<UnsupportedFeature> {
    declared(&config.environment.tpu, UnsupportedFeature::Tpu)
}

fn windows(config: &TaskConfig, _: &Path) -> Option<UnsupportedFeature> {
    let verifiers = std::iter::once(&config.verifier)
        .chain(config.steps.iter().map(|s| &s.verifier))
        .filter_map(|v| v.environment.as_deref());
    std::iter::once(&config.environment)
        .chain(verifiers)
        .any(|env| env.target_os() == TaskOs::Windows)
        .then_some(UnsupportedFeature::Windows)
}

/// A task with nothing to build or pull. A compose task may get its main image from the
/// compose file's `services.main` (Harbor's compose merge); the backend resolves it, and
/// refuses a file that gives none.
pub fn no_image(config: &TaskConfig, task_dir: &Path) -> Option<UnsupportedFeature> {
    let env = task_dir.join("environment");
    let has_image = config.environment.docker_image.is_some()
        || env.join("Dockerfile").is_file()
        || env.join("docker-compose.yaml").exists();
    (!has_image).then_some(UnsupportedFeature::NoImage)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::parse_task_config;

    fn keys(toml: &str) -> Vec<&'static str> {
        let config = parse_task_config(Path::new("t/task.toml"), toml)
            .unwrap()
            .config;
        detect(&config, Path::new("/nonexistent"))
            .iter()
            .map(UnsupportedFeature::key)
            .collect()
    }

    #[test]
    fn a_task_with_nothing_to_build_or_pull_is_named() {
        let config = |toml: &str| {
            parse_task_config(Path::new("t/task.toml"), toml)
                .unwrap()
                .config
        };
        let dir = tempfile::tempdir().unwrap();
        let found = detect_in_dir(&config(""), dir.path());
        assert_eq!(found, [UnsupportedFeature::NoImage]);
        assert!(
            found[0].to_string().contains("docker_image"),
            "{}",
            found[0]
        );
        let pinned = config("[environment]\ndocker_image = \"alpine@sha256:00\"\n");
        assert!(detect_in_dir(&pinned, dir.path()).is_empty());
        std::fs::create_dir(dir.path().join("environment")).unwrap();
        std::fs::write(dir.path().join("environment/Dockerfile"), "FROM scratch\n").unwrap();
        assert!(detect_in_dir(&config(""), dir.path()).is_empty());
    }

    #[test]
    fn a_plain_task_has_no_unsupported_feature() {
        assert!(keys("[[steps]]\nname = \"one\"\n").is_empty());
        assert!(keys("").is_empty());
        let plain = "[environment]\ngpus = 0\nmcp_servers = []\nnetwork_mode = \"no-network\"\n\
                     [agent]\nnetwork_mode = \"no-network\"\n[verifier]\nenvironment_mode = \"shared\"\n";
        assert!(keys(plain).is_empty(), "{:?}", keys(plain));
        assert!(keys("[environment]\nos = \"Linux\"\n").is_empty());
        // Multi-step tasks run with separate verifiers and phase networks, task- or step-level.
        let steps = "[agent]\nnetwork_mode = \"no-network\"\n[verifier]\nenvironment_mode = \"separate\"\n\
                     [[steps]]\nname = \"one\"\n[steps.verifier]\nnetwork_mode = \"public\"\n\
                     [steps.verifier.environment]\ncpus = 1\n";
        assert!(keys(steps).is_empty(), "{:?}", keys(steps));
    }

    #[test]
    fn each_feature_is_named() {
        let cases = [
            (
                "[environment.tpu]\ntype = \"v6e\"\ntopology = \"2x4\"\n",
                "tpu",
            ),
            ("[environment]\nos = \"WINDOWS\"\n", "windows"),
            (
                "[[steps]]\nname = \"one\"\n[steps.verifier.environment]\nos = \"windows\"\n",
                "windows",
            ),
        ];
        for (toml, key) in cases {
            assert_eq!(keys(toml), [key], "{toml}");
        }
    }

    #[test]
    fn allowlists_are_enforced_not_refused() {
        let shared = "[environment]\nnetwork_mode = \"allowlist\"\nallowed_hosts = [\"a.test\"]\n\
                      [agent]\nnetwork_mode = \"allowlist\"\nallowed_hosts = [\"b.test\"]\n\
                      [verifier]\nnetwork_mode = \"allowlist\"\nallowed_hosts = [\"c.test\"]\n";
        assert!(keys(shared).is_empty(), "{:?}", keys(shared));
        let separate = "[agent]\nnetwork_mode = \"allowlist\"\nallowed_hosts = [\"pypi.org\"]\n\
                        [verifier]\nenvironment_mode = \"separate\"\n\
                        [verifier.environment]\nnetwork_mode = \"allowlist\"\nallowed_hosts = [\"a.test\"]\n";
        assert!(keys(separate).is_empty(), "{:?}", keys(separate));
        let steps = "[environment]\nnetwork_mode = \"allowlist\"\nallowed_hosts = [\"pypi.org\"]\n\
                     [[steps]]\nname = \"one\"\n[steps.agent]\nnetwork_mode = \"allowlist\"\nallowed_hosts = [\"a.test\"]\n";
        assert!(keys(steps).is_empty(), "{:?}", keys(steps));
    }

    #[test]
    fn messages_name_the_feature_and_say_not_yet() {
        let text = UnsupportedFeature::Tpu.to_string();
        assert_eq!(text, "TPUs ([environment.tpu]) are not supported yet");
    }
}
