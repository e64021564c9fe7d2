//! Compose environments through the engine API (never the `docker compose` CLI): a task whose
//! `environment/` has `docker-compose.yaml` gets, per trial, a user-defined bridge network
//! (service names resolve through Docker's DNS on it), its named volumes, and one container
//! per sidecar, started in `depends_on` order and waited for by condition; then the main
//! container (Harbor's service `main`, the agent's) joins the same network. Every network,
//! volume and container carries the job, trial and owner labels, so the job's sweep and the
//! reaper find them. Sidecar logs go to `<trial>/sidecars/<service>.log` (capped) when the
//! environment is removed.

pub(crate) mod file;
mod logs;
pub(crate) mod main_image;
mod service;
mod wait;

use file::{ComposeFile, MAIN_SERVICE, parse};

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use engine::{BackendError, BackendErrorKind, EnvironmentSpec, OutputSink};
use tasks::Task;

use crate::connect::DockerClient;
use crate::container::{ContainerExtra, ContainerSpec, TrialContainer, remove_container};
use crate::error::DockerError;
use crate::image::{ImageService, sanitize};
use crate::labels::{self, Owner};
use crate::network::{Bridge, create_network, remove_network, remove_volume};
use service::Condition;

/// The compose file of `task`, when it has one.
pub fn compose_path(task: &Task) -> Option<PathBuf> {
    let path = task.environment_dir().join("docker-compose.yaml");
    path.is_file().then_some(path)
}

/// What the main container takes from the compose file.
#[derive(Debug, Clone, Default)]
pub struct MainAdditions {
    /// The trial network to join, with the alias `main`.
    pub network: String,
    /// `environment:` of `services.main` (the task's `[environment].env` wins over it).
    pub env: Vec<(String, String)>,
    /// Named-volume mounts of `services.main`.
    pub binds: Vec<String>,
    /// `healthcheck:` of `services.main`.
    pub healthcheck: Option<bollard::models::HealthConfig>,
    /// `command:` of `services.main` (Harbor's default is `sh -c "sleep infinity"`, as
    /// runner's).
    pub cmd: Option<Vec<String>>,
    /// `entrypoint:` of `services.main`.
    pub entrypoint: Option<Vec<String>>,
    /// `user:` of `services.main`: the container's user, so every exec and the verifier
    /// without a user of their own run as it.
    pub user: Option<String>,
    /// `working_dir:` of `services.main`: the default directory when the task names no
    /// `[environment] workdir` (Harbor's exec passes `-w` only for that).
    pub working_dir: Option<String>,
}

/// The running sidecars, network and volumes of one trial.
#[derive(Debug, Clone)]
pub struct ComposeRun {
    /// What every container, network and volume of this run is named after (job and trial).
    prefix: String,
    network: String,
    volumes: Vec<String>,
    sidecars: Vec<(String, String)>,
    logs_dir: PathBuf,
}

fn start_error(message: impl Into<String>) -> BackendError {
    BackendError::new(BackendErrorKind::Start, message)
}

impl ComposeRun {
    /// Parses the task's compose file, makes the network and volumes, builds or pulls each
    /// sidecar's image, starts the sidecars in order and waits for what `main` depends on. On
    /// failure everything made so far is removed.
    pub async fn start(
        client: &DockerClient,
        images: &ImageService,
        task: &Task,
        spec: &EnvironmentSpec,
        owner: &Owner,
        path: &Path,
    ) -> Result<(ComposeRun, MainAdditions), BackendError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| start_error(format!("reading {}: {e}", path.display())))?;
        let file = parse(&text, &variables(task, spec)).map_err(|e| {
            BackendError::new(
                BackendErrorKind::Unsupported,
                format!("task {}: {e}", task.name),
            )
        })?;
        let prefix = format!(
            "runner-{}-{}",
            &spec.job_id[..spec.job_id.len().min(8)],
            sanitize(&spec.trial_name)
        );
        let mut run = ComposeRun {
            network: format!("{prefix}-net"),
            prefix,
            volumes: Vec::new(),
            sidecars: Vec::new(),
            logs_dir: spec.trial_dir.join("sidecars"),
        };
        match run.bring_up(client, images, task, spec, owner, &file).await {
            Ok(main) => Ok((run, main)),
            Err(e) => {
                // The sidecars' logs say why a service never became ready.
                let _ = run.remove(client, true).await;
                Err(e)
            }
        }
    }

    async fn bring_up(
        &mut self,
        client: &DockerClient,
        images: &ImageService,
        task: &Task,
        spec: &EnvironmentSpec,
        owner: &Owner,
        file: &ComposeFile,
    ) -> Result<MainAdditions, BackendError> {
        let prefix = self.prefix.clone();
        let mut labels = labels::for_job(&spec.job_id, owner);
        labels.insert(labels::TRIAL.to_owned(), spec.trial_name.clone());
        labels.insert(labels::TASK.to_owned(), spec.task_name.clone());
        create_network(client, &self.network, labels.clone(), Bridge::Shared).await?;
        let mut volume_names = BTreeMap::new();
        for volume in &file.volumes {
            let name = format!("{prefix}-{}", sanitize(volume));
            let request = bollard::models::VolumeCreateRequest {
                name: Some(name.clone()),
                labels: Some(labels.clone()),
                ..Default::default()
            };
            client
                .api()
                .create_volume(request)
                .await
                .map_err(|e| DockerError::api(format!("creating volume {name}"), e))?;
            self.volumes.push(name.clone());
            volume_names.insert(volume.clone(), name);
        }
        let binds = |service: &service::ServiceDef| -> Vec<String> {
            service
                .named_volumes()
                .unwrap_or_default()
                .into_iter()
                .map(|m| {
                    let ro = if m.read_only { ":ro" } else { "" };
                    format!("{}:{}{ro}", volume_names[&m.name], m.target)
                })
                .collect()
        };
        let env_dir = task.environment_dir();
        let log = spec.observer.output.clone();
        let mut ids: HashMap<String, String> = HashMap::new();
        for name in file.start_order().map_err(|e| start_error(e.to_string()))? {
            let service = &file.services[&name];
            self.wait_for(client, service, &ids, &log).await?;
            let image = sidecar_image(images, task, &env_dir, &name, service, &log).await?;
            let container_spec = self.sidecar_spec(spec, &name, service, &image.id, binds(service));
            let started = TrialContainer::start(client, &container_spec, owner)
                .await
                .map_err(|e| start_error(format!("compose service {name}: {e}")))?;
            log(
                "runner",
                format!(
                    "started compose service {name} ({}) from {}\n",
                    started.name, image.tag
                )
                .as_bytes(),
            );
            ids.insert(name.clone(), started.id.clone());
            self.sidecars.push((name, started.id));
        }
        let main = file.services.get(MAIN_SERVICE).cloned().unwrap_or_default();
        self.wait_for(client, &main, &ids, &log).await?;
        Ok(MainAdditions {
            network: self.network.clone(),
            env: main.env(),
            binds: binds(&main),
            healthcheck: main
                .healthcheck
                .as_ref()
                .map(|h| h.config().unwrap_or_default()),
            cmd: main.command.as_ref().map(|c| c.argv()),
            entrypoint: main.entrypoint.as_ref().map(|c| c.argv()),
            user: main.user.as_ref().map(service::StringOrInt::text),
            working_dir: main.working_dir.clone().filter(|w| !w.is_empty()),
        })
    }

    /// The container of sidecar `name` on the trial's network from image `image_id` with its
    /// named volumes' `binds`: the service's command, entrypoint, healthcheck, user, workdir
    /// and env, its image's command run as is, with the trial's labels and pids limit.
    fn sidecar_spec(
        &self,
        spec: &EnvironmentSpec,
        name: &str,
        service: &service::ServiceDef,
        image_id: &str,
        binds: Vec<String>,
    ) -> ContainerSpec {
        let extra = ContainerExtra {
            network_name: Some(self.network.clone()),
            aliases: vec![name.to_owned()],
            cmd: service.command.as_ref().map(|c| c.argv()),
            entrypoint: service.entrypoint.as_ref().map(|c| c.argv()),
            healthcheck: service
                .healthcheck
                .as_ref()
                .map(|h| h.config().unwrap_or_default()),
            user: service.user.as_ref().map(service::StringOrInt::text),
            image_cmd: true,
            no_init: true,
            labels: HashMap::from([(labels::SERVICE.to_owned(), name.to_owned())]),
            ..Default::default()
        };
        ContainerSpec {
            name: format!("{}-{}", self.prefix, sanitize(name)),
            image: image_id.to_owned(),
            job_id: spec.job_id.clone(),
            trial_name: spec.trial_name.clone(),
            task_name: spec.task_name.clone(),
            cpus: None,
            memory_mb: None,
            memory_swap_mb: None,
            pids_limit: Some(spec.limits.pids_limit),
            storage_quota_mb: None,
            network: true,
            workdir: service.working_dir.clone(),
            env: service
                .env()
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect(),
            binds,
            extra,
        }
    }

    /// Waits for each dependency of `service` to meet its condition.
    async fn wait_for(
        &self,
        client: &DockerClient,
        service: &service::ServiceDef,
        ids: &HashMap<String, String>,
        log: &OutputSink,
    ) -> Result<(), BackendError> {
        for (dependency, condition) in service.dependencies() {
            let id = &ids[dependency];
            wait::until(client, dependency, id, condition).await?;
            if condition != Condition::Started {
                log(
                    "runner",
                    format!("compose service {dependency}: {condition}\n").as_bytes(),
                );
            }
        }
        Ok(())
    }

    /// The container id of the sidecar service `name`, when this run started one.
    pub fn sidecar(&self, name: &str) -> Option<&str> {
        self.sidecars
            .iter()
            .find(|(service, _)| service == name)
            .map(|(_, id)| id.as_str())
    }

    /// A one-line description of the sidecars.
    pub fn describe(&self) -> String {
        let names: Vec<&str> = self.sidecars.iter().map(|(n, _)| n.as_str()).collect();
        format!(
            "sidecars [{}] on network {}",
            names.join(", "),
            self.network
        )
    }

    /// Saves the sidecars' logs (when `save_logs`), then removes the sidecars, the volumes
    /// and the network. Every removal is tried; the first failure is returned.
    pub async fn remove(&self, client: &DockerClient, save_logs: bool) -> Result<(), DockerError> {
        if save_logs {
            for (name, id) in &self.sidecars {
                logs::save(
                    client,
                    id,
                    &self.logs_dir.join(format!("{}.log", sanitize(name))),
                )
                .await;
            }
        }
        let mut first = None;
        for (_, id) in &self.sidecars {
            if let Err(e) = remove_container(client, id).await {
                first.get_or_insert(e);
            }
        }
        for volume in &self.volumes {
            if let Err(e) = remove_volume(client, volume).await {
                first.get_or_insert(e);
            }
        }
        if let Err(e) = remove_network(client, &self.network).await {
            first.get_or_insert(e);
        }
        first.map_or(Ok(()), Err)
    }
}

/// A sidecar's image: its `build` (context and Dockerfile under `environment/`, which they
/// must not leave) through the image service's BuildKit path, else its `image`.
async fn sidecar_image(
    images: &ImageService,
    task: &Task,
    env_dir: &Path,
    name: &str,
    service: &service::ServiceDef,
    log: &OutputSink,
) -> Result<engine::ImageInfo, BackendError> {
    match &service.build {
        Some(build) => {
            let spec = build.spec(env_dir).map_err(|e| {
                BackendError::new(
                    BackendErrorKind::Build,
                    format!("task {}: compose service {name}: {e}", task.name),
                )
            })?;
            let tag_name = format!("{}-{name}", task.short_name());
            images.ensure_other(task, None, &spec, &tag_name, log).await
        }
        None => {
            let spec = crate::image::build_spec::BuildSpec::context(env_dir.to_owned());
            images
                .ensure_other(task, service.image.as_deref(), &spec, name, log)
                .await
        }
    }
}

/// Harbor's compose variables (`ComposeInfraEnvVars`) over the task's resolved
/// `[environment].env` and the trial's limits.
fn variables(task: &Task, spec: &EnvironmentSpec) -> BTreeMap<String, String> {
    infra_variables(
        task,
        spec.main.env.clone(),
        spec.main.cpus,
        spec.main.memory_mb,
    )
}

/// Harbor's compose variables (`ComposeInfraEnvVars`) over `env`; the infrastructure's win
/// on a clash, as in Harbor. The host's own environment is not offered (it may hold
/// credentials).
fn infra_variables(
    task: &Task,
    mut vars: BTreeMap<String, String>,
    cpus: Option<f64>,
    memory_mb: Option<u64>,
) -> BTreeMap<String, String> {
    let env_dir = task.environment_dir();
    let context = env_dir.canonicalize().unwrap_or(env_dir);
    vars.insert("CONTEXT_DIR".into(), context.display().to_string());
    vars.insert(
        "MAIN_IMAGE_NAME".into(),
        format!("hb__{}", sanitize(task.short_name())),
    );
    if let Some(image) = &task.config.environment.docker_image {
        vars.insert("PREBUILT_IMAGE_NAME".into(), image.clone());
    }
    if let Some(cpus) = cpus {
        vars.insert("CPUS".into(), format!("{}", cpus.ceil() as i64));
    }
    if let Some(memory) = memory_mb {
        vars.insert("MEMORY".into(), format!("{memory}M"));
    }
    vars
}
