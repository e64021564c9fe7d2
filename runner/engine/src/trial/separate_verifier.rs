//! The separate verifier (`[verifier] environment_mode = "separate"`, or a
//! `[verifier.environment]`; for a multi-step task also `[steps.verifier]`): the tests run in a
//! container of their own, started from the verifier environment's `docker_image` or built
//! from its tests directory (a step's `steps/<name>/tests/` when it exists, else `tests/`, as
//! Harbor's `_verifier_env_build_context`) — the tests it runs are its image's own `/tests`,
//! never uploaded (Harbor's `skip_tests_upload`) — with only the declared artifacts uploaded from
//! where they were collected on the host (Harbor's `upload_artifacts`, see
//! [`super::artifacts::upload_artifacts`]). Nothing else of the agent's container reaches it,
//! and its network is its own: the verifier environment's baseline, switched to the phase's
//! `network_mode` when that differs (an allowlist through the trial's egress proxy, with a
//! relay of its own: see [`super::egress`]). One container per verification (per step), removed after.
//! That order is [`run_separately`], a trial's and a `runner serve` episode's alike; what only
//! a trial does around it (its watchdog's phases, the upload's bound, the egress relay) is
//! its [`SeparateVerifierHooks`].

use std::future::Future;
use std::path::Path;
use std::time::{Duration, Instant};

use tasks::config::{EnvironmentSection, StepConfig};
use tasks::{ExceptionType, Sandbox, Task};
use verifiers::{VerifierOutcome, VerifyNotes};

use super::artifacts::{ArtifactSpec, CONVENTION_DIR, upload_artifacts};
use super::log::TrialLog;
use super::phase_network::{self, NetworkPlan, access, verifier_environment};
use crate::backend::{Backend, Environment, EnvironmentSpec, OutputSink, SandboxOf, VerifierImage};
use crate::failure::TrialFailure;

/// The longest uploading the artifacts may take.
pub(super) const COPY_TIMEOUT: Duration = Duration::from_secs(300);
/// The longest removing the verifier's container may take (the job's sweep is the backstop).
const REMOVE_TIMEOUT: Duration = Duration::from_secs(120);

/// True when the verifier of `task` (`step` `None`) or of its step `step` runs in its own
/// environment.
pub fn is_separate(task: &Task, step: Option<&StepConfig>) -> bool {
    verifier_environment(&task.config, step).is_some()
}

/// Harbor 0.26's trial-level verifier mode of `task` (`verifier_environment_mode` of its result,
/// `verifier.environment_mode` of its lock entry): `separate` or `shared` for a single-step
/// task, resolved from the task whether or not verification then runs; `None` for a multi-step
/// task, whose steps each resolve their own. A `runner serve` episode records it too.
pub fn trial_verifier_mode(task: &Task) -> Option<&'static str> {
    task.config.steps.is_empty().then(|| {
        if is_separate(task, None) {
            "separate"
        } else {
            "shared"
        }
    })
}

/// What a separate verifier's image is made from: the environment's `docker_image`, else
/// a build of the step's tests directory when it has one, else of `tests/`.
fn verifier_image(task: &Task, venv: &EnvironmentSection, step: Option<&str>) -> VerifierImage {
    let own = step.map(|name| task.step_dir(name).join("tests"));
    let (context, name) = match own.filter(|dir| dir.is_dir()) {
        Some(dir) => (
            dir,
            format!(
                "{}-verifier-{}",
                task.short_name(),
                step.unwrap_or_default()
            ),
        ),
        None => (task.tests_dir(), format!("{}-verifier", task.short_name())),
    };
    VerifierImage {
        docker_image: venv.docker_image.clone(),
        context,
        name,
    }
}

/// A separate verifier's container as a trial starts it: its image, its spec, and the
/// networks it starts on and verifies under; `runner serve`'s `evaluate` makes its separate
/// verifier with it too (through [`crate::phases`]).
#[derive(Clone)]
pub(super) struct SeparateVerifierSetup {
    /// What its image is made from (the verifier environment's `docker_image`, else a build
    /// of the step's or the task's tests directory).
    pub image: VerifierImage,
    /// Its container: the agent environment's spec with the verifier environment's
    /// resources, env and network, no mounts, sidecars or compose services.
    pub spec: EnvironmentSpec,
    /// The network the container starts on (its environment's baseline).
    pub baseline: tasks::NetworkMode,
    /// The network the tests run under; the container is switched to it after the
    /// artifacts' upload when it differs from `baseline`.
    pub phase: tasks::NetworkMode,
}

/// The separate verifier of `task` (`step` `None`) or of its step `step`, made from the agent
/// environment's spec `agent_spec` (its job, trial dir, limits and observer carry over) for
/// the trial or episode named `session`; `None` when that verification runs in the agent's
/// container. Fails when the verifier environment's own `env` cannot be resolved.
pub(super) fn separate_verifier_setup(
    task: &Task,
    step: Option<usize>,
    agent_spec: EnvironmentSpec,
    session: &str,
) -> Result<Option<SeparateVerifierSetup>, TrialFailure> {
    let step_config = step.map(|index| &task.config.steps[index]);
    let Some(venv) = verifier_environment(&task.config, step_config) else {
        return Ok(None);
    };
    let network = NetworkPlan::resolve(&task.config, step_config);
    let baseline = network.verifier_baseline.unwrap_or(network.agent_baseline);
    let mut spec = agent_spec;
    // Harbor's session id: `<trial>__verifier__<key>`, the key being the step's name.
    spec.trial_name = match step_config {
        Some(step) => format!("{session}__verifier__{}", step.name),
        None => format!("{session}__verifier"),
    };
    spec.main.name = "verifier".into();
    spec.main.cpus = venv.cpus;
    // The agent's memory limit unless the verifier environment sets its own.
    spec.main.memory_mb = venv.memory_mb.or(spec.main.memory_mb);
    spec.main.network = access(baseline);
    spec.main.workdir = venv.workdir.clone();
    // A copy of [environment] keeps the trial's resolved env; a section of its own has
    // its own env.
    if !std::ptr::eq(venv, &task.config.environment) {
        spec.main.env = task.resolve_env(&venv.env).map_err(|e| {
            TrialFailure::new(
                ExceptionType::EnvironmentStartError,
                format!("task {}: verifier environment env: {e}", task.name),
            )
        })?;
    }
    spec.sidecars.clear();
    // Nothing of the agent's reaches the verifier, its host mounts included.
    spec.main.mounts.clear();
    spec.compose_task = None;
    spec.network_switchable = network.verifier_phase != baseline;
    spec.gpus = venv.gpus.unwrap_or(0);
    // Its tests are its image's own; nothing is placed early.
    spec.first_tests = None;
    let image = verifier_image(task, venv, step_config.map(|s| s.name.as_str()));
    Ok(Some(SeparateVerifierSetup {
        image,
        spec,
        baseline,
        phase: network.verifier_phase,
    }))
}

/// Where one separate verification takes its inputs and puts its outputs.
pub(super) struct SeparatePlace<'a> {
    /// The step verified (`None`: the task).
    pub step: Option<usize>,
    /// The trial's, the step's or the episode's directory: the outputs go to `verifier/`.
    pub out_dir: &'a Path,
    /// Where the artifacts were collected on the host.
    pub artifacts_dir: &'a Path,
    /// The artifacts to upload.
    pub specs: &'a [ArtifactSpec],
    /// The tests' time limit.
    pub timeout: Duration,
    /// The container's start's limit (a build, maybe): the task's build timeout, not the
    /// tests'.
    pub start_limit: Duration,
}

/// What a caller of [`run_separately`] does around the separate verification's own order;
/// every method but [`Self::tests_ran`] does nothing unless the caller says otherwise. A trial
/// moves its watchdog between phases, bounds the artifacts' upload and starts its egress
/// relay in the container; `runner serve` only keeps the notes.
pub trait SeparateVerifierHooks<S: Sandbox>: Send {
    /// Before the container starts.
    fn starting(&mut self) {}

    /// Once its start ended in time, whether it started or not.
    fn started(&mut self) {}

    /// The longest the artifacts' upload may take (`None`: as long as it takes).
    fn upload_limit(&self) -> Option<Duration> {
        None
    }

    /// In the container, its network set, just before the tests.
    fn before_tests(
        &mut self,
        verifier: &S,
    ) -> impl Future<Output = Result<(), TrialFailure>> + Send {
        let _ = verifier;
        async { Ok(()) }
    }

    /// After the tests ran (whatever their outcome), with what the verification noted.
    fn tests_ran(&mut self, notes: VerifyNotes);
}

/// One separate verification, as a trial's and `runner serve`'s episode's run: the container
/// of `setup` started on `backend` (its image's build output to `output`) within
/// `place.start_limit`, the artifacts collected in `place.artifacts_dir` uploaded, the
/// verification's network set, the image's own tests run within `place.timeout` (outputs
/// into `place.out_dir`), and the container removed, on every path.
pub(super) async fn run_separately<B: Backend, H: SeparateVerifierHooks<SandboxOf<B>>>(
    backend: &B,
    task: &Task,
    setup: &SeparateVerifierSetup,
    place: SeparatePlace<'_>,
    log: &TrialLog,
    output: &OutputSink,
    hooks: &mut H,
) -> Result<VerifierOutcome, TrialFailure> {
    // Starting it (a build, maybe) is watched as an environment start, not against the
    // verifier's deadline.
    hooks.starting();
    let started = tokio::time::timeout(
        place.start_limit,
        backend.start_verifier_environment(task, &setup.image, &setup.spec, output),
    )
    .await
    .map_err(|_| {
        TrialFailure::new(
            ExceptionType::EnvironmentStartTimeoutError,
            format!(
                "Verifier environment start timed out after {} seconds",
                place.start_limit.as_secs_f64()
            ),
        )
    })?;
    hooks.started();
    let environment = started?;
    log.line(&format!(
        "started the separate verifier environment: {}",
        environment.describe()
    ));
    let verified = verify_in(&environment, task, setup, place, log, hooks).await;
    let what = environment.describe();
    match tokio::time::timeout(REMOVE_TIMEOUT, environment.remove()).await {
        Ok(Ok(())) => log.line(&format!("removed {what}")),
        Ok(Err(e)) => log.line(&format!(
            "removing {what} failed: {e}; the job's sweep reaps it"
        )),
        Err(_) => log.line(&format!(
            "removing {what} took too long; the job's sweep reaps it"
        )),
    }
    verified
}

/// In the separate verifier's container: the artifacts uploaded, the verification's network
/// set, then the image's own tests run.
async fn verify_in<E: Environment, H: SeparateVerifierHooks<E::Sandbox>>(
    environment: &E,
    task: &Task,
    setup: &SeparateVerifierSetup,
    place: SeparatePlace<'_>,
    log: &TrialLog,
    hooks: &mut H,
) -> Result<VerifierOutcome, TrialFailure> {
    let verifier = environment.main();
    let fail = |message: String| TrialFailure::new(ExceptionType::EnvironmentError, message);
    // Its `/logs` directories were made as it started (`ServiceSpec::writable_dirs`).
    let upload = upload_artifacts(verifier, place.specs, place.artifacts_dir, CONVENTION_DIR);
    let uploaded = match hooks.upload_limit() {
        None => upload.await,
        Some(limit) => tokio::time::timeout(limit, upload).await.map_err(|_| {
            fail(format!(
                "uploading the artifacts to the verifier took longer than {} s",
                limit.as_secs()
            ))
        })?,
    };
    let uploaded =
        uploaded.map_err(|e| fail(format!("uploading the artifacts to the verifier: {e}")))?;
    for source in uploaded {
        log.line(&format!("artifact {source}: uploaded to the verifier"));
    }
    if setup.phase != setup.baseline {
        phase_network::switch(environment, "verifier", setup.phase).await?;
        log.line(&format!(
            "network for the verifier: {} (its environment's baseline {})",
            setup.phase.as_str(),
            setup.baseline.as_str()
        ));
    }
    hooks.before_tests(verifier).await?;
    let deadline = Instant::now()
        .checked_add(place.timeout)
        .unwrap_or_else(Instant::now);
    let mut notes = VerifyNotes::default();
    // The image owns /tests, as in Harbor: nothing of the task's tests is uploaded.
    let verified = verifiers::verify_with_image_tests(
        verifier,
        task,
        place.step,
        place.out_dir,
        deadline,
        &mut notes,
    )
    .await;
    hooks.tests_ran(notes);
    Ok(verified?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_steps_own_tests_dir_is_its_verifiers_build_context() {
        let dir = tempfile::tempdir().unwrap();
        let write = |rel: &str, text: &str| testkit::files::write(dir.path(), rel, text);
        write(
            "task.toml",
            "[verifier]\nenvironment_mode = \"separate\"\n[[steps]]\nname = \"a\"\n[[steps]]\nname = \"b\"\n\
             [steps.verifier.environment]\ndocker_image = \"verifier:1\"\n",
        );
        write("environment/Dockerfile", "FROM scratch\n");
        write("tests/Dockerfile", "FROM scratch\n");
        write("tests/test.sh", "exit 0\n");
        for step in ["a", "b"] {
            write(&format!("steps/{step}/instruction.md"), "Do.\n");
        }
        write("steps/b/tests/test.sh", "exit 0\n");
        let task = Task::load(dir.path()).unwrap();
        let [a, b] = [&task.config.steps[0], &task.config.steps[1]];
        assert!(is_separate(&task, Some(a)) && is_separate(&task, Some(b)));
        let venv_a = verifier_environment(&task.config, Some(a)).unwrap();
        assert!(std::ptr::eq(venv_a, &task.config.environment));
        let image_a = verifier_image(&task, venv_a, Some("a"));
        assert_eq!(image_a.context, task.tests_dir());
        assert_eq!(image_a.docker_image, None);
        let venv_b = verifier_environment(&task.config, Some(b)).unwrap();
        let image_b = verifier_image(&task, venv_b, Some("b"));
        assert_eq!(image_b.context, task.step_dir("b").join("tests"));
        assert_eq!(image_b.docker_image.as_deref(), Some("verifier:1"));
        assert_ne!(image_a.name, image_b.name);
    }
}
