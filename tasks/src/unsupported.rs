//! Harbor task features this runner parses but cannot run yet. A task using one is refused at
//! load, naming the task and the feature, instead of being half-run and scored as if the agent
//! failed.
//!
//! Each feature is one [`UnsupportedFeature`] variant found by one detector in [`DETECTORS`];
//! when the runner learns a feature (issue 12), delete its detector and its variant.

use std::fmt;
use std::path::Path;

use crate::config::{
    AgentSection, NetworkMode, TaskConfig, TaskOs, VerifierEnvironmentMode, VerifierSection,
};

/// A feature of a task that the runner does not implement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UnsupportedFeature {
    /// A multi-step task whose verifier runs in its own environment (task- or step-level):
    /// steps are verified in the agent's container only.
    MultiStepSeparateVerifier,
    /// A multi-step task with a phase `network_mode` (task- or step-level): the network is
    /// switched around single-step phases only.
    MultiStepNetworkMode,
    /// `environment/docker-compose.yaml` whose `main` has neither `environment/Dockerfile` nor
    /// `[environment] docker_image` (its image would come from the compose file).
    ComposeMainImage,
    /// `network_mode = "allowlist"` with `allowed_hosts`.
    Allowlist {
        /// The section declaring it: `environment`, `agent` or `verifier`.
        section: &'static str,
    },
    /// `[environment.tpu]`.
    Tpu,
    /// `[environment] os = "windows"`.
    Windows,
}

impl UnsupportedFeature {
    /// A stable short name (`multi-step`, `compose`, …) for reports and tests.
    pub fn key(&self) -> &'static str {
        match self {
            UnsupportedFeature::MultiStepSeparateVerifier => "multi-step-separate-verifier",
            UnsupportedFeature::MultiStepNetworkMode => "multi-step-network-mode",
            UnsupportedFeature::ComposeMainImage => "compose-main-image",
            UnsupportedFeature::Allowlist { .. } => "allowlist",
            UnsupportedFeature::Tpu => "tpu",
            UnsupportedFeature::Windows => "windows",
        }
    }
}

impl fmt::Display for UnsupportedFeature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UnsupportedFeature::MultiStepSeparateVerifier => write!(
                f,
                "multi-step tasks ([[steps]]) with a separate verifier environment are not supported yet"
            ),
            UnsupportedFeature::MultiStepNetworkMode => write!(
                f,
                "multi-step tasks ([[steps]]) with an [agent] or [verifier] network_mode (task- or step-level) are not supported yet"
            ),
            UnsupportedFeature::ComposeMainImage => write!(
                f,
                "compose environments whose main service takes its image from docker-compose.yaml are not supported yet; add environment/Dockerfile or [environment] docker_image"
            ),
            UnsupportedFeature::Allowlist { section } => write!(
                f,
                "network allowlists ([{section}] network_mode = \"allowlist\" with allowed_hosts) are not supported yet"
            ),
            UnsupportedFeature::Tpu => {
                write!(f, "TPUs ([environment.tpu]) are not supported yet")
            }
            UnsupportedFeature::Windows => write!(
                f,
                "Windows containers ([environment] os = \"windows\") are not supported yet"
            ),
        }
    }
}

/// A rule that finds one feature in a parsed config and its task directory.
pub type Detector = fn(&TaskConfig, &Path) -> Option<UnsupportedFeature>;

/// Every detector, in the order features are reported.
pub const DETECTORS: &[Detector] = &[
    multi_step_separate_verifier,
    multi_step_network_mode,
    compose_main_image,
    allowlist,
    tpu,
    windows,
];

/// The features of the task at `task_dir` (with config `config`) that the runner cannot run.
pub fn detect(config: &TaskConfig, task_dir: &Path) -> Vec<UnsupportedFeature> {
    DETECTORS
        .iter()
        .filter_map(|detector| detector(config, task_dir))
        .collect()
}

fn multi_step_separate_verifier(config: &TaskConfig, _: &Path) -> Option<UnsupportedFeature> {
    let separate = |v: &VerifierSection| {
        v.environment_mode == Some(VerifierEnvironmentMode::Separate)
            || (v.environment_mode.is_none() && v.environment.is_some())
    };
    (!config.steps.is_empty()
        && (separate(&config.verifier) || config.steps.iter().any(|s| separate(&s.verifier))))
    .then_some(UnsupportedFeature::MultiStepSeparateVerifier)
}

fn multi_step_network_mode(config: &TaskConfig, _: &Path) -> Option<UnsupportedFeature> {
    // Any declared phase mode is refused, even one equal to the environment's: the step loop
    // never switches networks, so refusing is the only answer that cannot mis-run.
    let sets_mode = |agent: &AgentSection, verifier: &VerifierSection| {
        agent.network_mode.is_some() || verifier.network_mode.is_some()
    };
    (!config.steps.is_empty()
        && (sets_mode(&config.agent, &config.verifier)
            || config
                .steps
                .iter()
                .any(|s| sets_mode(&s.agent, &s.verifier))))
    .then_some(UnsupportedFeature::MultiStepNetworkMode)
}

fn compose_main_image(config: &TaskConfig, task_dir: &Path) -> Option<UnsupportedFeature> {
    // Harbor's Docker backend switches to compose exactly when this file exists; runner makes
    // `main` from the task's own image and the file's other services as sidecars.
    let env = task_dir.join("environment");
    (env.join("docker-compose.yaml").exists()
        && !env.join("Dockerfile").exists()
        && config.environment.docker_image.is_none())
    .then_some(UnsupportedFeature::ComposeMainImage)
}

fn allowlist(config: &TaskConfig, _: &Path) -> Option<UnsupportedFeature> {
    [
        ("environment", Some(config.environment.effective_network())),
        ("agent", config.agent.network_mode),
        ("verifier", config.verifier.network_mode),
    ]
    .into_iter()
    .find(|(_, mode)| *mode == Some(NetworkMode::Allowlist))
    .map(|(section, _)| UnsupportedFeature::Allowlist { section })
}

/// `feature` when the field is declared at all (Harbor acts on any value).
fn declared<T>(field: &Option<T>, feature: UnsupportedFeature) -> Option<UnsupportedFeature> {
    field.is_some().then_some(feature)
}

fn tpu(config: &TaskConfig, _: &Path) -> Option<UnsupportedFeature> {
    declared(&config.environment.tpu, UnsupportedFeature::Tpu)
}

fn windows(config: &TaskConfig, _: &Path) -> Option<UnsupportedFeature> {
    (config.environment.target_os() == TaskOs::Windows).then_some(UnsupportedFeature::Windows)
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
    fn a_plain_task_has_no_unsupported_feature() {
        assert!(keys("[[steps]]\nname = \"one\"\n").is_empty());
        assert!(keys("").is_empty());
        let plain = "[environment]\ngpus = 0\nmcp_servers = []\nnetwork_mode = \"no-network\"\n\
                     [agent]\nnetwork_mode = \"no-network\"\n[verifier]\nenvironment_mode = \"shared\"\n";
        assert!(keys(plain).is_empty(), "{:?}", keys(plain));
        assert!(keys("[environment]\nos = \"Linux\"\n").is_empty());
    }

    #[test]
    fn each_feature_is_named() {
        let cases = [
            (
                "[verifier]\nenvironment_mode = \"separate\"\n[[steps]]\nname = \"one\"\n",
                "multi-step-separate-verifier",
            ),
            (
                "[[steps]]\nname = \"one\"\n[steps.verifier.environment]\ncpus = 1\n",
                "multi-step-separate-verifier",
            ),
            (
                "[[steps]]\nname = \"one\"\n[steps.agent]\nnetwork_mode = \"no-network\"\n",
                "multi-step-network-mode",
            ),
            (
                "[agent]\nnetwork_mode = \"allowlist\"\nallowed_hosts = [\"pypi.org\"]\n",
                "allowlist",
            ),
            (
                "[environment]\nnetwork_mode = \"allowlist\"\nallowed_hosts = [\"pypi.org\"]\n",
                "allowlist",
            ),
            (
                "[environment.tpu]\ntype = \"v6e\"\ntopology = \"2x4\"\n",
                "tpu",
            ),
            ("[environment]\nos = \"WINDOWS\"\n", "windows"),
        ];
        for (toml, key) in cases {
            assert_eq!(keys(toml), [key], "{toml}");
        }
    }

    #[test]
    fn messages_name_the_feature_and_say_not_yet() {
        let text = UnsupportedFeature::Tpu.to_string();
        assert_eq!(text, "TPUs ([environment.tpu]) are not supported yet");
    }
}
