//! Networks of trial environments: the per-trial bridge a compose environment's services share
//! (service names resolve through Docker's DNS on it), and switching the main container's
//! networks between phases (Harbor's per-phase `network_mode`; Harbor 0.26's Docker backend
//! refuses a change after the container starts, the engine API can do it on a running
//! container).
//!
//! No-network means no interface but loopback: the container is disconnected from every
//! network (the same namespace `--network none` gives), so neither the internet nor the
//! trial's sidecars are reachable. Public means attached to what the environment started
//! with: the default bridge, or the trial's own network for compose environments.

use std::collections::HashMap;

use bollard::models::NetworkDisconnectRequest;
use bollard::models::{EndpointSettings, NetworkConnectRequest, NetworkCreateRequest};
use bollard::query_parameters::{ListNetworksOptionsBuilder, ListVolumesOptionsBuilder};

use crate::connect::DockerClient;
use crate::error::DockerError;
use crate::labels;

/// A network the main container is attached to when public, and the DNS aliases it has there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attachment {
    /// The network's name (`bridge`, or the trial network).
    pub network: String,
    /// Names other containers on it reach the container by (the compose service name).
    pub aliases: Vec<String>,
}

/// Whether the containers on a bridge the runner creates can reach each other.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bridge {
    /// They can, by name through Docker's DNS: a compose environment's services.
    Shared,
    /// They cannot (`com.docker.network.bridge.enable_icc` off: the engine drops traffic
    /// between two containers of the bridge, while each still reaches outside as on the
    /// default bridge): `runner serve`'s public environments.
    Isolated,
}

/// Creates a user-defined bridge named `name` with `labels` (job, trial, owner), so a sweep
/// by label removes it with the trial's containers; `bridge` says whether its containers can
/// reach each other.
pub async fn create_network(
    client: &DockerClient,
    name: &str,
    labels: HashMap<String, String>,
    bridge: Bridge,
) -> Result<String, DockerError> {
    let options = match bridge {
        Bridge::Shared => None,
        Bridge::Isolated => Some(HashMap::from([(
            "com.docker.network.bridge.enable_icc".to_owned(),
            "false".to_owned(),
        )])),
    };
    let request = NetworkCreateRequest {
        name: name.to_owned(),
        driver: Some("bridge".into()),
        labels: Some(labels),
        options,
        ..Default::default()
    };
    let made = client
        .api()
        .create_network(request)
        .await
        .map_err(|e| DockerError::api(format!("creating network {name}"), e))?;
    Ok(made.id)
}

/// Removes a network; a missing one counts as removed.
pub async fn remove_network(client: &DockerClient, name: &str) -> Result<(), DockerError> {
    match client.api().remove_network(name).await {
        Ok(()) => Ok(()),
        Err(bollard::errors::Error::DockerResponseServerError {
            status_code: 404, ..
        }) => Ok(()),
        Err(e) => Err(DockerError::api(format!("removing network {name}"), e)),
    }
}

/// Connects `container` to `attachment`'s network (already connected is fine).
pub async fn connect(
    client: &DockerClient,
    container: &str,
    attachment: &Attachment,
) -> Result<(), DockerError> {
    let request = NetworkConnectRequest {
        container: container.to_owned(),
        endpoint_config: Some(EndpointSettings {
            aliases: (!attachment.aliases.is_empty()).then(|| attachment.aliases.clone()),
            ..Default::default()
        }),
    };
    match client
        .api()
        .connect_network(&attachment.network, request)
        .await
    {
        Ok(()) => Ok(()),
        Err(bollard::errors::Error::DockerResponseServerError { message, .. })
            if message.contains("already exists") =>
        {
            Ok(())
        }
        Err(e) => Err(DockerError::api(
            format!("connecting {container} to network {}", attachment.network),
            e,
        )),
    }
}

/// Disconnects `container` from `network` (not connected is fine).
pub async fn disconnect(
    client: &DockerClient,
    container: &str,
    network: &str,
) -> Result<(), DockerError> {
    let request = NetworkDisconnectRequest {
        container: container.to_owned(),
        force: Some(true),
    };
    match client.api().disconnect_network(network, request).await {
        Ok(()) => Ok(()),
        Err(bollard::errors::Error::DockerResponseServerError { message, .. })
            if message.contains("is not connected") =>
        {
            Ok(())
        }
        Err(e) => Err(DockerError::api(
            format!("disconnecting {container} from network {network}"),
            e,
        )),
    }
}

/// The networks `container` is attached to now.
pub async fn attached(client: &DockerClient, container: &str) -> Result<Vec<String>, DockerError> {
    let inspected = client
        .api()
        .inspect_container(container, None)
        .await
        .map_err(|e| DockerError::api(format!("inspecting container {container}"), e))?;
    Ok(inspected
        .network_settings
        .and_then(|n| n.networks)
        .map(|n| n.into_keys().collect())
        .unwrap_or_default())
}

/// Leaves `container` with loopback only (`public = false`) or attached to exactly
/// `attachments` (`public = true`), then checks the engine agrees.
pub async fn set_public(
    client: &DockerClient,
    container: &str,
    attachments: &[Attachment],
    public: bool,
) -> Result<(), DockerError> {
    if public {
        for attachment in attachments {
            connect(client, container, attachment).await?;
        }
    } else {
        for network in attached(client, container).await? {
            disconnect(client, container, &network).await?;
        }
    }
    let now = attached(client, container).await?;
    let want: Vec<&str> = if public {
        attachments.iter().map(|a| a.network.as_str()).collect()
    } else {
        Vec::new()
    };
    let missing = want.iter().any(|w| !now.iter().any(|n| n == w));
    if missing || (!public && !now.is_empty()) {
        return Err(DockerError::Jail(format!(
            "the network of {container} did not switch (attached to {now:?}, wanted {want:?})"
        )));
    }
    Ok(())
}

/// Removes every network and volume labelled with `job_id` (after its containers are gone).
/// Returns how many were removed.
pub async fn remove_job_networks_and_volumes(
    client: &DockerClient,
    job_id: &str,
) -> Result<usize, DockerError> {
    let label = format!("{}={job_id}", labels::JOB);
    remove_labelled(client, &label, |_| true).await
}

/// Removes the networks and volumes whose owner process on this host is gone.
pub async fn reap_dead_owner_networks_and_volumes(
    client: &DockerClient,
) -> Result<usize, DockerError> {
    let label = format!("{}=1", labels::MANAGED);
    let here = labels::Owner::current().host;
    remove_labelled(client, &label, |found| {
        found
            .get(labels::OWNER)
            .and_then(|l| labels::Owner::parse(l))
            .is_some_and(|o| o.host == here && !o.is_alive_here())
    })
    .await
}

/// Removes the networks, then the volumes, carrying `label` whose labels pass `chosen`.
async fn remove_labelled(
    client: &DockerClient,
    label: &str,
    chosen: impl Fn(&HashMap<String, String>) -> bool,
) -> Result<usize, DockerError> {
    let filters = HashMap::from([("label", vec![label.to_owned()])]);
    let networks = client
        .api()
        .list_networks(Some(
            ListNetworksOptionsBuilder::default()
                .filters(&filters)
                .build(),
        ))
        .await
        .map_err(|e| DockerError::api("listing runner networks", e))?;
    let volumes = client
        .api()
        .list_volumes(Some(
            ListVolumesOptionsBuilder::default()
                .filters(&filters)
                .build(),
        ))
        .await
        .map_err(|e| DockerError::api("listing runner volumes", e))?;
    let mut removed = 0;
    for network in networks {
        if let Some(name) = network.name
            && chosen(&network.labels.unwrap_or_default())
        {
            remove_network(client, &name).await?;
            removed += 1;
        }
    }
    for volume in volumes.volumes.unwrap_or_default() {
        if chosen(&volume.labels) {
            remove_volume(client, &volume.name).await?;
            removed += 1;
        }
    }
    Ok(removed)
}

/// Removes a volume; a missing one counts as removed.
pub async fn remove_volume(client: &DockerClient, name: &str) -> Result<(), DockerError> {
    let options = bollard::query_parameters::RemoveVolumeOptionsBuilder::default()
        .force(true)
        .build();
    match client.api().remove_volume(name, Some(options)).await {
        Ok(()) => Ok(()),
        Err(bollard::errors::Error::DockerResponseServerError {
            status_code: 404, ..
        }) => Ok(()),
        Err(e) => Err(DockerError::api(format!("removing volume {name}"), e)),
    }
}
