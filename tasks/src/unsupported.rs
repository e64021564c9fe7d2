//! Harbor task features this runner parses but cannot run yet. A task using one is refused at
//! load, naming the task and the feature, instead of being half-run and scored as if the agent
//! failed.
//!
//! Each feature is one [`UnsupportedFeature`] variant found by one detector in [`DETECTORS`];
//! when the runner learns a feature (issue 12), delete its detector and its variant.

use std::fmt;
use std::path::Path;

use crate::config::{NetworkMode, TaskConfig, TaskOs};

/// A feature of a task that the runner does not implement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UnsupportedFeature {
    /// `environment/docker-compose.yaml`: services beside the main container.
    ComposeEnvironment,
    /// The verifier in its own container.
    SeparateVerifier {
        /// What declares it: `environment_mode = "separate"` or `[verifier.environment]`.
        declared_by: &'static str,
    },
    /// `[agent]`/`[verifier]` `network_mode` different from the environment's.
    PhaseNetworkMode {
        /// `agent` or `verifier`.
        phase: &'static str,
        /// The phase's mode.
        mode: NetworkMode,
        /// The environment's effective mode.
        baseline: NetworkMode,
    },
    /// `network_mode = "allowlist"` with `allowed_hosts`.
    Allowlist {
        /// The section declaring it: `environment`, `agent` or `verifier`.
        section: &'static str,
    },
    /// `[environment] gpus` above zero.
    Gpus {
        /// How many.
        count: u32,
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
            UnsupportedFeature::ComposeEnvironment => "compose",
            UnsupportedFeature::SeparateVerifier { .. } => "separate-verifier",
            UnsupportedFeature::PhaseNetworkMode { .. } => "phase-network-mode",
            UnsupportedFeature::Allowlist { .. } => "allowlist",
            UnsupportedFeature::Gpus { .. } => "gpus",
            UnsupportedFeature::Tpu => "tpu",
            UnsupportedFeature::Windows => "windows",
        }
    }
}

impl fmt::Display for UnsupportedFeature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UnsupportedFeature::ComposeEnvironment => write!(
                f,
                "compose environments (environment/docker-compose.yaml) are not supported yet"
            ),
            UnsupportedFeature::SeparateVerifier { declared_by } => write!(
                f,
                "separate verifier environments ([verifier] {declared_by}) are not supported yet"
            ),
            UnsupportedFeature::PhaseNetworkMode {
                phase,
                mode,
                baseline,
            } => write!(
                f,
                "per-phase network policies ([{phase}] network_mode = {:?} while [environment] is {:?}) are not supported yet",
                mode.as_str(),
                baseline.as_str()
            ),
            UnsupportedFeature::Allowlist { section } => write!(
                f,
                "network allowlists ([{section}] network_mode = \"allowlist\" with allowed_hosts) are not supported yet"
            ),
            UnsupportedFeature::Gpus { count } => write!(
                f,
                "GPUs ([environment] gpus = {count}) are not supported yet"
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
    compose,
    separate_verifier,
    allowlist,
    phase_network_mode,
    gpus,
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

fn compose(_: &TaskConfig, task_dir: &Path) -> Option<UnsupportedFeature> {
    // Harbor's Docker backend switches to compose exactly when this file exists.
    task_dir
        .join("environment/docker-compose.yaml")
        .exists()
        .then_some(UnsupportedFeature::ComposeEnvironment)
}

fn separate_verifier(config: &TaskConfig, _: &Path) -> Option<UnsupportedFeature> {
    let verifier = &config.verifier;
    if verifier.environment_mode == Some(crate::config::VerifierEnvironmentMode::Separate) {
        return Some(UnsupportedFeature::SeparateVerifier {
            declared_by: "environment_mode = \"separate\"",
        });
    }
    (verifier.environment_mode.is_none() && verifier.environment.is_some()).then_some(
        UnsupportedFeature::SeparateVerifier {
            declared_by: "[verifier.environment]",
        },
    )
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

fn phase_network_mode(config: &TaskConfig, _: &Path) -> Option<UnsupportedFeature> {
    let baseline = config.environment.effective_network();
    // A phase override equal to the environment's mode changes nothing (Harbor applies none).
    [
        ("agent", config.agent.network_mode),
        ("verifier", config.verifier.network_mode),
    ]
    .into_iter()
    .find_map(|(phase, mode)| match mode {
        Some(mode) if mode != baseline && mode != NetworkMode::Allowlist => {
            Some(UnsupportedFeature::PhaseNetworkMode {
                phase,
                mode,
                baseline,
            })
        }
        _ => None,
    })
}

/// `feature` when the field is declared at all (Harbor acts on any value).
fn declared<T>(field: &Option<T>, feature: UnsupportedFeature) -> Option<UnsupportedFeature> {
    field.is_some().then_some(feature)
}

fn gpus(config: &TaskConfig, _: &Path) -> Option<UnsupportedFeature> {
    match config.environment.gpus {
        Some(count) if count > 0 => Some(UnsupportedFeature::Gpus { count }),
        _ => None,
    }
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
        assert!(keys("").is_empty());
        let plain = "[environment]\ngpus = 0\nmcp_servers = []\nnetwork_mode = \"no-network\"\n\
                     [agent]\nnetwork_mode = \"no-network\"\n[verifier]\nenvironment_mode = \"shared\"\n";
        assert!(keys(plain).is_empty(), "{:?}", keys(plain));
        assert!(keys("[environment]\nos = \"Linux\"\n").is_empty());
        let learnt = "[[steps]]\nname = \"one\"\n[environment]\nskills_dir = \"/skills\"\n\
                      [[environment.mcp_servers]]\nname = \"m\"\nurl = \"http://m:8000/sse\"\n";
        assert!(keys(learnt).is_empty(), "{:?}", keys(learnt));
    }

    #[test]
    fn each_feature_is_named() {
        let cases = [
            (
                "[verifier]\nenvironment_mode = \"separate\"\n",
                "separate-verifier",
            ),
            ("[verifier.environment]\ncpus = 1\n", "separate-verifier"),
            (
                "[agent]\nnetwork_mode = \"allowlist\"\nallowed_hosts = [\"pypi.org\"]\n",
                "allowlist",
            ),
            (
                "[environment]\nnetwork_mode = \"allowlist\"\nallowed_hosts = [\"pypi.org\"]\n",
                "allowlist",
            ),
            (
                "[agent]\nnetwork_mode = \"no-network\"\n",
                "phase-network-mode",
            ),
            (
                "[environment]\nallow_internet = false\n[verifier]\nnetwork_mode = \"public\"\n",
                "phase-network-mode",
            ),
            ("[environment]\ngpus = 1\n", "gpus"),
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
        let text = UnsupportedFeature::PhaseNetworkMode {
            phase: "agent",
            mode: NetworkMode::NoNetwork,
            baseline: NetworkMode::Public,
        }
        .to_string();
        assert!(
            text.contains("[agent] network_mode = \"no-network\""),
            "{text}"
        );
    }

    #[test]
    fn a_compose_file_is_detected_in_the_task_dir() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("environment")).unwrap();
        std::fs::write(
            dir.path().join("environment/docker-compose.yaml"),
            "services: {}\n",
        )
        .unwrap();
        let found = detect(&TaskConfig::default(), dir.path());
        assert_eq!(found, [UnsupportedFeature::ComposeEnvironment]);
    }
}
