//! A trial environment on Docker: the main service's container, and for compose tasks the
//! sidecars, network and volumes of `compose::ComposeRun`.

use engine::{
    BackendError, BackendErrorKind, Environment, EnvironmentSpec, NetworkAccess, ServiceState,
};
use tasks::records::StorageEnforcement;

use std::sync::Arc;

use crate::compose::file::MAIN_SERVICE;
use crate::compose::{ComposeRun, MainAdditions, compose_path};
use crate::connect::DockerClient;
use crate::container::removals::Removals;
use crate::container::{
    ContainerExtra, ContainerSpec, TrialContainer, limits_host_config, remove_container,
};
use crate::error::DockerError;
use crate::gpus;
use crate::image;
use crate::image::ImageService;
use crate::jail::JailSpec;
use crate::jail::upload::HELPER;
use crate::jail::warm::{JailSlot, Prepared, WarmJailError, prestart};
use crate::labels::{self, Owner};
use crate::network::{self, Attachment};
use crate::sandbox::DockerSandbox;

/// A started trial container and the sandbox over it.
pub struct DockerEnvironment {
    client: DockerClient,
    container: TrialContainer,
    sandbox: DockerSandbox,
    storage: StorageEnforcement,
    /// The networks "public" means for the main container (for per-phase switching).
    attachments: Vec<Attachment>,
    /// The compose sidecars, network and volumes, when the task has a compose file.
    compose: Option<ComposeRun>,
    /// The verifier jail, prepared in the background from the start (see `jail/warm.rs`).
    jail: Arc<JailSlot>,
    removals: Removals,
}

impl DockerEnvironment {
    /// Creates and starts the environment of `spec`: the compose services first (when its
    /// task has `environment/docker-compose.yaml`), then the main container. Sidecars given
    /// in `spec.sidecars` are refused before anything is created (services come from the
    /// compose file), and so is a GPU task on an engine without GPUs. The verifier jail is
    /// prepared in the background from here on, so only its order is on the trial's path.
    pub(crate) async fn start(
        client: &DockerClient,
        images: &ImageService,
        spec: &EnvironmentSpec,
        owner: &Owner,
        removals: &Removals,
        public_network: Option<&str>,
    ) -> Result<DockerEnvironment, BackendError> {
        if let Some(sidecar) = spec.sidecars.first() {
            return Err(BackendError::new(
                BackendErrorKind::Unsupported,
                format!(
                    "the Docker backend runs sidecars from environment/docker-compose.yaml only (service {:?} of task {})",
                    sidecar.name, spec.task_name
                ),
            ));
        }
        if spec.gpus > 0 && !images.facts().await?.gpu_runtime {
            return Err(BackendError::new(
                BackendErrorKind::Unsupported,
                gpus::refusal(&spec.task_name, spec.gpus),
            ));
        }
        let compose = match spec.compose_task.as_deref() {
            Some(task) => match compose_path(task) {
                Some(path) => {
                    Some(ComposeRun::start(client, images, task, spec, owner, &path).await?)
                }
                None => None,
            },
            None => None,
        };
        let (compose, additions) = match compose {
            Some((run, additions)) => (Some(run), Some(additions)),
            None => (None, None),
        };
        let started =
            Self::start_main(client, spec, owner, additions, removals, public_network).await;
        match (started, compose) {
            (Ok(mut environment), compose) => {
                environment.compose = compose;
                Ok(environment)
            }
            (Err(e), Some(compose)) => {
                let _ = compose.remove(client, true).await;
                Err(e)
            }
            (Err(e), None) => Err(e),
        }
    }

    /// Creates the main container, starts it with the verifier jail prepared beside it, and
    /// wraps both in the environment (its compose services are the caller's).
    async fn start_main(
        client: &DockerClient,
        spec: &EnvironmentSpec,
        owner: &Owner,
        additions: Option<MainAdditions>,
        removals: &Removals,
        public_network: Option<&str>,
    ) -> Result<DockerEnvironment, BackendError> {
        let container_spec = main_container_spec(spec, additions.as_ref(), public_network);
        let attachments = vec![Attachment {
            network: container_spec
                .extra
                .network_name
                .clone()
                .unwrap_or_else(|| "bridge".into()),
            aliases: container_spec.extra.aliases.clone(),
        }];
        let start_error =
            |e: DockerError| BackendError::new(BackendErrorKind::Start, e.to_string());
        let container = TrialContainer::create(client, &container_spec, owner)
            .await
            .map_err(start_error)?;
        let storage = match (spec.limits.storage_mb, container.storage_quota) {
            (None, _) => StorageEnforcement::None,
            (Some(_), true) => StorageEnforcement::Quota,
            (Some(_), false) => StorageEnforcement::Watched,
        };
        let jail_spec = main_jail_spec(spec, owner, &container, &container_spec);
        let (jail, made_by_jail) = start_with_jail(client, &container, &container_spec, jail_spec)
            .await
            .map_err(start_error)?;
        if made_by_jail {
            let dirs = container_spec.extra.writable_dirs.join(", ");
            let line = format!("{dirs} made by the verifier jail as it started\n");
            (spec.observer.output)("runner", line.as_bytes());
        }
        let limits = &spec.limits;
        let sandbox = DockerSandbox::new(
            client.clone(),
            container.id.clone(),
            container_spec.workdir,
            spec.observer.clone(),
            (limits.download_cap_bytes, limits.download_cap_entries),
            removals.clone(),
        )
        .with_jail(jail.clone());
        Ok(DockerEnvironment {
            client: client.clone(),
            sandbox,
            container,
            storage,
            attachments,
            compose: None,
            jail,
            removals: removals.clone(),
        })
    }
}

/// The main container of `spec`: the task's image, limits, env and mounts, with what a
/// compose file adds to its `main` service (`additions`), on the compose network, else on
/// `public_network`, else on the default bridge.
fn main_container_spec(
    spec: &EnvironmentSpec,
    additions: Option<&MainAdditions>,
    public_network: Option<&str>,
) -> ContainerSpec {
    let main = &spec.main;
    let limits = &spec.limits;
    // The task's workdir wins over the compose file's, as Harbor's exec passes `-w` for it.
    let workdir = main
        .workdir
        .clone()
        .or_else(|| additions.and_then(|a| a.working_dir.clone()));
    ContainerSpec {
        name: format!(
            "runner-{}-{}",
            &spec.job_id[..spec.job_id.len().min(8)],
            image::sanitize(&spec.trial_name)
        ),
        image: main.image.clone(),
        job_id: spec.job_id.clone(),
        trial_name: spec.trial_name.clone(),
        task_name: spec.task_name.clone(),
        cpus: main.cpus,
        memory_mb: main.memory_mb,
        memory_swap_mb: Some(limits.memory_swap_mb),
        pids_limit: Some(limits.pids_limit),
        storage_quota_mb: limits.storage_mb,
        network: main.network == NetworkAccess::Public,
        workdir,
        env: main_env(main, additions),
        // The trial's host mounts (the LLM bridge's socket), then the compose volumes.
        binds: main
            .mounts
            .iter()
            // The tests' egress directory goes into the verifier jail only.
            .filter(|m| !m.tests_egress)
            .map(|m| {
                let mode = if m.read_only { ":ro" } else { "" };
                format!("{}:{}{mode}", m.host.display(), m.container)
            })
            .chain(additions.iter().flat_map(|a| a.binds.clone()))
            .collect(),
        extra: ContainerExtra {
            // A compose task's own network, else the backend's network for public
            // environments (`runner serve`'s, whose containers cannot reach each other),
            // else the default bridge.
            network_name: additions
                .map(|a| a.network.clone())
                .or_else(|| public_network.map(str::to_owned)),
            aliases: additions
                .map(|_| vec![MAIN_SERVICE.to_owned()])
                .unwrap_or_default(),
            detach_before_start: spec.network_switchable && main.network == NetworkAccess::None,
            healthcheck: additions.and_then(|a| a.healthcheck.clone()),
            cmd: additions.and_then(|a| a.cmd.clone()),
            entrypoint: additions.and_then(|a| a.entrypoint.clone()),
            user: additions.and_then(|a| a.user.clone()),
            gpus: spec.gpus,
            writable_dirs: main.writable_dirs.clone(),
            ..Default::default()
        },
    }
}

/// The verifier jail of the trial `container` made from `container_spec`: the trial's image,
/// env, limits and labels, its user and workdir as defaults of the tests.
fn main_jail_spec(
    spec: &EnvironmentSpec,
    owner: &Owner,
    container: &TrialContainer,
    container_spec: &ContainerSpec,
) -> JailSpec {
    let main = &spec.main;
    let limits = &spec.limits;
    let mut jail_labels = labels::for_job(&spec.job_id, owner);
    jail_labels.insert(labels::TRIAL.to_owned(), spec.trial_name.clone());
    jail_labels.insert(labels::TASK.to_owned(), spec.task_name.clone());
    JailSpec {
        trial_id: container.id.clone(),
        trial_name: container.name.clone(),
        image: main.image.clone(),
        env: container_spec.env.clone(),
        // The compose `user` is the container's, so the tests' default too.
        default_user: container_spec.extra.user.clone(),
        workdir: container_spec.workdir.clone(),
        labels: jail_labels,
        limits: limits_host_config(
            main.cpus,
            main.memory_mb,
            Some(limits.memory_swap_mb),
            Some(limits.pids_limit),
        ),
        early_tests: spec.first_tests.clone(),
        tests_egress: main
            .mounts
            .iter()
            .find(|m| m.tests_egress)
            .map(|m| (m.host.clone(), m.container.clone())),
        make_dirs: Vec::new(),
    }
}

/// Starts the created trial `container` and its writable directories, with the verifier jail
/// of `jail_spec` prepared in the background meanwhile; true when that jail made the
/// directories (else they were uploaded). On failure the trial container is
/// removed, and so is whatever of the jail was made.
async fn start_with_jail(
    client: &DockerClient,
    container: &TrialContainer,
    container_spec: &ContainerSpec,
    mut jail_spec: JailSpec,
) -> Result<(Arc<JailSlot>, bool), DockerError> {
    // A main container that runs a command of its own (a compose `command` or
    // `entrypoint`, or its image's `ENTRYPOINT`) may write to `/logs` the moment it
    // starts, as it can under Harbor, whose `/logs` directories are mounts: they go in
    // before its start. Otherwise no process of the trial runs until the agent phase, and
    // the verifier jail makes them as it starts: an upload into the trial container then
    // would hold the container the jail's start must look at (`contain/logdirs.rs`). (The
    // image's defaults are inspected once per image and process; asked before the jail's
    // preparation, which reads them too, so that finds them cached.)
    let dirs = &container_spec.extra.writable_dirs;
    let dirs_first = container_spec.extra.cmd.is_some()
        || container_spec.extra.entrypoint.is_some()
        || image::defaults::of(client, &container_spec.image)
            .await
            .is_ok_and(|d| d.entrypoint);
    let ask_jail = !dirs_first && !dirs.is_empty();
    if ask_jail {
        jail_spec.make_dirs = dirs.clone();
    }
    // The jail is made while the trial container starts (only its own start must wait
    // for the trial's): on this engine that takes its create and upload off the path of
    // a quick agent's verification. A failed trial start drops `started`, and the jail's
    // preparation then removes what it made.
    let (started, trial_running) = tokio::sync::oneshot::channel();
    let (answer, dirs_answer) = tokio::sync::oneshot::channel();
    let jail = Arc::new(JailSlot::preparing(tokio::spawn(prepare_jail(
        client.clone(),
        jail_spec,
        trial_running,
        answer,
    ))));
    if dirs_first {
        // A failure drops `started`: the jail's preparation removes what it made.
        container.make_writable_dirs(client, dirs).await?;
    }
    container.start_created(client).await?;
    let _ = started.send(());
    // Without the jail's answer (no helper, a jail that failed to start, or directories it
    // could not make) they are uploaded, as before.
    let made_by_jail = ask_jail && dirs_answer.await.unwrap_or(false);
    if !dirs_first
        && !made_by_jail
        && let Err(e) = container.make_writable_dirs(client, dirs).await
    {
        // The trial container is gone; so must be the jail that joined it.
        if let Some(unused) = jail.unused().await {
            let _ = remove_container(client, &unused).await;
        }
        return Err(e);
    }
    Ok((jail, made_by_jail))
}

/// Completes the jail's spec with what the trial container has from its image (its default
/// user when the compose file names none, and its working directory when neither the task
/// nor the compose file names one), then makes the jail and starts
/// it once `trial_running` says the trial container runs. A failed inspection leaves the
/// trial without a jail (recorded as isolation unavailable); a failed early start leaves the
/// verifier to make a fresh jail.
async fn prepare_jail(
    client: DockerClient,
    mut spec: JailSpec,
    trial_running: tokio::sync::oneshot::Receiver<()>,
    dirs_answer: tokio::sync::oneshot::Sender<bool>,
) -> Prepared {
    let defaults = match image::defaults::of(&client, &spec.image).await {
        Ok(defaults) => defaults,
        Err(e) => {
            return Prepared {
                spec: None,
                warm: Err(WarmJailError::InspectImage {
                    trial: spec.trial_name.clone(),
                    source: e,
                }),
            };
        }
    };
    if spec.default_user.is_none() {
        spec.default_user = defaults.user;
    }
    if spec.workdir.is_none() {
        spec.workdir = defaults.working_dir;
    }
    let warm = if HELPER.is_empty() {
        Err(WarmJailError::NoHelper)
    } else {
        prestart(&client, &spec, trial_running, dirs_answer)
            .await
            .map_err(WarmJailError::Start)
    };
    Prepared {
        spec: Some(spec),
        warm,
    }
}

impl Environment for DockerEnvironment {
    type Sandbox = DockerSandbox;

    fn main(&self) -> &DockerSandbox {
        &self.sandbox
    }

    fn describe(&self) -> String {
        match &self.compose {
            Some(compose) => format!(
                "container {} and {}",
                self.container.name,
                compose.describe()
            ),
            None => format!("container {}", self.container.name),
        }
    }

    /// Asks for the removal of the container, of a jail no verification used and of the
    /// compose services, and returns: nothing of the trial depends on it, and the job's end
    /// waits for it.
    async fn remove(self) -> Result<(), BackendError> {
        let DockerEnvironment {
            client,
            container,
            jail,
            removals,
            sandbox,
            compose,
            ..
        } = self;
        let output = sandbox.observer().output.clone();
        removals.track(tokio::spawn(async move {
            // The trial goes first: the jail shares its PID namespace and stops with it, and
            // the compose network can only go once nothing is attached to it.
            let mut ids = vec![container.id.clone()];
            if let Some(unused) = jail.unused().await {
                ids.push(unused);
            }
            for id in ids {
                if let Err(e) = remove_container(&client, &id).await {
                    let text = format!("removing {id} failed: {e}; the job's sweep removes it\n");
                    output("runner", text.as_bytes());
                }
            }
            if let Some(compose) = compose
                && let Err(e) = compose.remove(&client, true).await
            {
                let text = format!(
                    "removing the compose services failed: {e}; the job's sweep removes them\n"
                );
                output("runner", text.as_bytes());
            }
        }));
        Ok(())
    }

    async fn set_network(&self, access: NetworkAccess) -> Result<(), BackendError> {
        let public = access == NetworkAccess::Public;
        Ok(
            network::set_public(&self.client, &self.container.id, &self.attachments, public)
                .await?,
        )
    }

    fn storage_enforcement(&self) -> StorageEnforcement {
        self.storage
    }

    fn service(&self, name: &str) -> Option<DockerSandbox> {
        let id = self.compose.as_ref()?.sidecar(name)?;
        Some(self.sandbox.for_sidecar(id.to_owned()))
    }

    /// Pauses or unpauses the main container (the engine's cgroup freezer): its processes,
    /// the agent's leftovers among them, stop where they are and keep their state. The jail is
    /// a container of its own and is not frozen.
    async fn freeze_main(&self, frozen: bool) -> Result<(), BackendError> {
        let id = &self.container.id;
        let done = if frozen {
            self.client.api().pause_container(id).await
        } else {
            self.client.api().unpause_container(id).await
        };
        done.map_err(|e| {
            BackendError::new(
                BackendErrorKind::Operation,
                format!(
                    "{} container {}: {e}",
                    if frozen { "pausing" } else { "unpausing" },
                    self.container.name
                ),
            )
        })
    }

    /// The main container's state by the engine's inspect: a 404 is `Gone`; any other
    /// failure is the engine's, returned as an error (nothing is blamed on the agent then).
    async fn main_state(&self) -> Result<Option<ServiceState>, BackendError> {
        let inspected = match self
            .client
            .api()
            .inspect_container(&self.container.id, None)
            .await
        {
            Ok(inspected) => inspected,
            Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 404, ..
            }) => return Ok(Some(ServiceState::Gone)),
            Err(e) => {
                return Err(BackendError::new(
                    BackendErrorKind::Operation,
                    format!("inspecting container {}: {e}", self.container.name),
                ));
            }
        };
        let state = inspected.state.unwrap_or_default();
        Ok(Some(if state.running.unwrap_or(false) {
            ServiceState::Running
        } else {
            ServiceState::Stopped {
                exit_code: state.exit_code.unwrap_or(-1),
                oom_killed: state.oom_killed.unwrap_or(false),
            }
        }))
    }
}

/// The main container's environment: `services.main.environment` of the compose file, then
/// the task's `[environment].env` over it.
fn main_env(main: &engine::ServiceSpec, additions: Option<&MainAdditions>) -> Vec<String> {
    let mut env: std::collections::BTreeMap<String, String> = additions
        .map(|a| a.env.iter().cloned().collect())
        .unwrap_or_default();
    env.extend(main.env.clone());
    env.iter().map(|(k, v)| format!("{k}={v}")).collect()
}
