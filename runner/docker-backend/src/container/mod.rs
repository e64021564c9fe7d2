//! One container per trial: created from the task image with the task's limits, network
//! mode and workdir, labelled with job, trial and owner, and always removed at the end.

pub(crate) mod archive;
pub(crate) mod exec;
pub(crate) mod layer_size;
pub(crate) mod reap;
pub(crate) mod removals;

use std::collections::HashMap;

use bollard::models::{ContainerCreateBody, HostConfig};
use bollard::query_parameters::{CreateContainerOptionsBuilder, RemoveContainerOptionsBuilder};

use crate::connect::DockerClient;
use crate::error::DockerError;
use crate::labels::{self, Owner};

/// What a trial container needs.
#[derive(Debug, Clone)]
pub struct ContainerSpec {
    /// The container name (unique per trial).
    pub name: String,
    /// The image tag or id.
    pub image: String,
    /// The job's id.
    pub job_id: String,
    /// The trial's name.
    pub trial_name: String,
    /// The task's name.
    pub task_name: String,
    /// CPU limit.
    pub cpus: Option<f64>,
    /// Memory limit in MB.
    pub memory_mb: Option<u64>,
    /// Memory plus swap in MB (equal to `memory_mb`: no swap beyond the memory limit).
    pub memory_swap_mb: Option<u64>,
    /// Most processes and threads at once.
    pub pids_limit: Option<u32>,
    /// A writable-layer quota in MB, for storage drivers that enforce one.
    pub storage_quota_mb: Option<u64>,
    /// False for `no-network` tasks.
    pub network: bool,
    /// Default working directory.
    pub workdir: Option<String>,
    /// Environment of every command.
    pub env: Vec<String>,
    /// Bind mounts, `host:container[:ro]`.
    pub binds: Vec<String>,
    /// More of the container: its network, command, mounts, GPUs (compose services and
    /// per-phase networks set these; a plain trial container keeps the defaults).
    pub extra: ContainerExtra,
}

/// The parts of a container only some trials need.
#[derive(Debug, Clone, Default)]
pub struct ContainerExtra {
    /// The network to attach instead of the default bridge (a compose environment's own),
    /// with the container's DNS aliases there.
    pub network_name: Option<String>,
    /// DNS aliases on `network_name` (the compose service name).
    pub aliases: Vec<String>,
    /// Create the container attached but disconnect it before start: it starts with loopback
    /// only and can be connected later (`--network none` could never be).
    pub detach_before_start: bool,
    /// The command; `None` keeps the main service's `sleep infinity`, or the image's own
    /// command when `image_cmd` is set.
    pub cmd: Option<Vec<String>>,
    /// Run the image's command when `cmd` is unset (compose services do).
    pub image_cmd: bool,
    /// The entrypoint, when the service overrides the image's.
    pub entrypoint: Option<Vec<String>>,
    /// The engine's healthcheck for the container.
    pub healthcheck: Option<bollard::models::HealthConfig>,
    /// The user the container's process runs as.
    pub user: Option<String>,
    /// No init process as PID 1 (compose services run their image's command as is).
    pub no_init: bool,
    /// GPUs requested through a device request.
    pub gpus: u32,
    /// Labels beyond job, trial, task and owner (the compose service).
    pub labels: HashMap<String, String>,
    /// Directories made (mode 0777) by one upload once the container runs
    /// ([`TrialContainer::make_writable_dirs`]): cheaper than an exec, which takes three round
    /// trips, and off the path of the container's start.
    pub writable_dirs: Vec<String>,
}

/// A started trial container.
#[derive(Debug, Clone)]
pub struct TrialContainer {
    /// The container id.
    pub id: String,
    /// The container name.
    pub name: String,
    /// True when the storage driver enforces `storage_quota_mb`.
    pub storage_quota: bool,
}

impl TrialContainer {
    /// Creates and starts the container described by `spec`.
    pub async fn start(
        client: &DockerClient,
        spec: &ContainerSpec,
        owner: &Owner,
    ) -> Result<TrialContainer, DockerError> {
        let container = Self::create(client, spec, owner).await?;
        container.start_created(client).await?;
        container
            .make_writable_dirs(client, &spec.extra.writable_dirs)
            .await?;
        Ok(container)
    }

    /// Creates the container described by `spec`, ready to start: its network detached when
    /// it must start with loopback only. On failure nothing of it is left. Its
    /// `writable_dirs` are for [`TrialContainer::make_writable_dirs`] once it runs.
    pub async fn create(
        client: &DockerClient,
        spec: &ContainerSpec,
        owner: &Owner,
    ) -> Result<TrialContainer, DockerError> {
        let extra = &spec.extra;
        let network = match (
            &extra.network_name,
            spec.network || extra.detach_before_start,
        ) {
            (Some(name), true) => name.clone(),
            (None, true) => "bridge".to_owned(),
            (_, false) => "none".to_owned(),
        };
        let body = create_body(spec, owner, &network);
        let (id, storage_quota) = create_with_quota(client, spec, body).await?;
        let container = TrialContainer {
            id,
            name: spec.name.clone(),
            storage_quota,
        };
        if extra.detach_before_start && network != "none" {
            // Attached at create (so it can be reconnected later), loopback only from the start.
            if let Err(e) = crate::network::disconnect(client, &container.id, &network).await {
                let _ = container.remove(client).await;
                return Err(e);
            }
        }
        Ok(container)
    }

    /// Makes `dirs` (the spec's `writable_dirs`) in the running container by one upload, as
    /// empty world-writable directories; on failure the container is removed. Done after the
    /// start, not between create and start: what waits for the start (the verifier jail's own
    /// start) then does not wait for this upload too, and nothing runs in the container
    /// before the caller's next step.
    pub async fn make_writable_dirs(
        &self,
        client: &DockerClient,
        dirs: &[String],
    ) -> Result<(), DockerError> {
        if dirs.is_empty() {
            return Ok(());
        }
        if let Err(e) = make_dirs(client, &self.id, dirs).await {
            let _ = self.remove(client).await;
            return Err(e);
        }
        Ok(())
    }

    /// Starts the container [`Self::create`] made; on failure it is removed.
    pub async fn start_created(&self, client: &DockerClient) -> Result<(), DockerError> {
        if let Err(e) = client.api().start_container(&self.id, None).await {
            let _ = self.remove(client).await;
            return Err(DockerError::api(
                format!("starting container {}", self.name),
                e,
            ));
        }
        Ok(())
    }

    /// Force-removes the container and its anonymous volumes; a missing container is fine.
    pub async fn remove(&self, client: &DockerClient) -> Result<(), DockerError> {
        remove_container(client, &self.id).await
    }
}

/// The engine's create request for `spec` on `network`: its labels (job, trial, task,
/// owner and the spec's own), limits, mounts, GPUs, command and aliases.
fn create_body(spec: &ContainerSpec, owner: &Owner, network: &str) -> ContainerCreateBody {
    let mut labels: HashMap<String, String> = labels::for_job(&spec.job_id, owner);
    labels.insert(labels::TRIAL.to_owned(), spec.trial_name.clone());
    labels.insert(labels::TASK.to_owned(), spec.task_name.clone());
    let extra = &spec.extra;
    labels.extend(extra.labels.clone());
    let host_config = HostConfig {
        network_mode: Some(network.to_owned()),
        // An init as PID 1 reaps the zombies agents leave and forwards signals.
        init: Some(!extra.no_init),
        auto_remove: Some(false),
        binds: (!spec.binds.is_empty()).then(|| spec.binds.clone()),
        device_requests: (extra.gpus > 0).then(|| crate::gpus::device_requests(extra.gpus)),
        ..limits_host_config(
            spec.cpus,
            spec.memory_mb,
            spec.memory_swap_mb,
            spec.pids_limit,
        )
    };
    let networking_config = (network != "none" && !extra.aliases.is_empty()).then(|| {
        bollard::models::NetworkingConfig {
            endpoints_config: Some(HashMap::from([(
                network.to_owned(),
                bollard::models::EndpointSettings {
                    aliases: Some(extra.aliases.clone()),
                    ..Default::default()
                },
            )])),
        }
    });
    ContainerCreateBody {
        image: Some(spec.image.clone()),
        // Keep the container alive; all work happens through exec, as in Harbor.
        cmd: match (&extra.cmd, extra.image_cmd) {
            (Some(cmd), _) => Some(cmd.clone()),
            (None, true) => None,
            (None, false) => Some(vec!["sh".into(), "-c".into(), "sleep infinity".into()]),
        },
        entrypoint: extra.entrypoint.clone(),
        labels: Some(labels),
        working_dir: spec.workdir.clone(),
        env: Some(spec.env.clone()),
        healthcheck: extra.healthcheck.clone(),
        user: extra.user.clone(),
        host_config: Some(host_config),
        networking_config,
        ..Default::default()
    }
}

/// Creates the container of `body` named as `spec` says, with its storage quota when it has
/// one and the engine has not refused quotas. Returns its id and whether the quota is on.
async fn create_with_quota(
    client: &DockerClient,
    spec: &ContainerSpec,
    body: ContainerCreateBody,
) -> Result<(String, bool), DockerError> {
    let options = CreateContainerOptionsBuilder::default()
        .name(&spec.name)
        .build();
    let with_quota = spec
        .storage_quota_mb
        .filter(|_| !client.quota_refused())
        .map(|mb| {
            let mut body = body.clone();
            if let Some(host) = body.host_config.as_mut() {
                host.storage_opt = Some(HashMap::from([("size".to_owned(), format!("{mb}M"))]));
            }
            body
        });
    // A quota is only possible on some drivers (overlay2 on xfs with pquota, btrfs, zfs):
    // where the engine refuses it, the container is made without and the runner watches.
    if let Some(body) = with_quota {
        match client
            .api()
            .create_container(Some(options.clone()), body)
            .await
        {
            Ok(made) => return Ok((made.id, true)),
            Err(e) if is_storage_opt_refusal(&e) => client.refuse_quotas(),
            Err(e) => {
                return Err(DockerError::api(
                    format!("creating container {}", spec.name),
                    e,
                ));
            }
        }
    }
    let made = client
        .api()
        .create_container(Some(options), body)
        .await
        .map_err(|e| DockerError::api(format!("creating container {}", spec.name), e))?;
    Ok((made.id, false))
}

/// Uploads `dirs` as empty world-writable directories into the container `id`.
async fn make_dirs(client: &DockerClient, id: &str, dirs: &[String]) -> Result<(), DockerError> {
    let tar =
        crate::container::archive::pack_dirs(dirs, 0o777).map_err(|source| DockerError::Io {
            operation: format!("packing {}", dirs.join(" ")),
            source,
        })?;
    crate::container::archive::upload(client, id, tar, &dirs.join(" ")).await
}

/// The resource limits of a container: CPUs, memory with swap capped at the memory limit (no
/// swap beyond it), and a pids limit (a fork bomb stops at it).
pub(crate) fn limits_host_config(
    cpus: Option<f64>,
    memory_mb: Option<u64>,
    memory_swap_mb: Option<u64>,
    pids_limit: Option<u32>,
) -> HostConfig {
    let bytes = |mb: u64| i64::try_from(mb.saturating_mul(1 << 20)).unwrap_or(i64::MAX);
    HostConfig {
        memory: memory_mb.map(bytes),
        memory_swap: memory_swap_mb.or(memory_mb).map(bytes),
        nano_cpus: cpus.map(|c| (c * 1e9) as i64),
        pids_limit: pids_limit.map(i64::from),
        ..Default::default()
    }
}

/// True when the engine refused a `size` storage option because its driver cannot do it.
fn is_storage_opt_refusal(error: &bollard::errors::Error) -> bool {
    let text = error.to_string().to_lowercase();
    text.contains("storage-opt") || text.contains("storage opt") || text.contains("storageopt")
}

/// Force-removes a container by id or name; a missing container counts as removed. A removal
/// the engine refused is asked once more: a container that exits while the engine kills it
/// fails the kill ("Could not kill running container …, cannot remove - … is not running",
/// seen under load with fuse-overlayfs), and the second removal finds it stopped.
pub(crate) async fn remove_container(client: &DockerClient, id: &str) -> Result<(), DockerError> {
    match remove_once(client, id).await {
        Err(_) => remove_once(client, id)
            .await
            .map_err(|e| DockerError::api(format!("removing container {id}"), e)),
        Ok(()) => Ok(()),
    }
}

async fn remove_once(client: &DockerClient, id: &str) -> Result<(), bollard::errors::Error> {
    let options = RemoveContainerOptionsBuilder::default()
        .force(true)
        .v(true)
        .build();
    match client.api().remove_container(id, Some(options)).await {
        Ok(()) => Ok(()),
        Err(bollard::errors::Error::DockerResponseServerError {
            status_code: 404, ..
        }) => Ok(()),
        // 409: removal already in progress (another sweep got there first).
        Err(bollard::errors::Error::DockerResponseServerError {
            status_code: 409, ..
        }) => Ok(()),
        Err(e) => Err(e),
    }
}
