//! Sweeping containers by label: those of dead runner processes at start, and a job's own
//! at its end as a backstop to per-trial teardown.

use std::collections::HashMap;

use bollard::query_parameters::ListContainersOptionsBuilder;

use crate::connect::DockerClient;
use crate::container::remove_container;
use crate::error::DockerError;
use crate::labels::{self, Owner};

async fn list_by_label(
    client: &DockerClient,
    label: String,
) -> Result<Vec<(String, HashMap<String, String>)>, DockerError> {
    let filters = HashMap::from([("label", vec![label])]);
    let options = ListContainersOptionsBuilder::default()
        .all(true)
        .filters(&filters)
        .build();
    let containers = client
        .api()
        .list_containers(Some(options))
        .await
        .map_err(|e| DockerError::api("listing runner containers", e))?;
    Ok(containers
        .into_iter()
        .filter_map(|c| Some((c.id?, c.labels.unwrap_or_default())))
        .collect())
}

/// Removes containers whose owning runner process (on this host) is no longer alive.
/// Returns how many were removed.
pub async fn reap_dead_owners(client: &DockerClient) -> Result<usize, DockerError> {
    let mut removed = 0;
    for (id, labels) in list_by_label(client, format!("{}=1", labels::MANAGED)).await? {
        let Some(owner) = labels.get(labels::OWNER).and_then(|l| Owner::parse(l)) else {
            continue;
        };
        let here = owner.host == Owner::current().host;
        if here && !owner.is_alive_here() {
            remove_container(client, &id).await?;
            removed += 1;
        }
    }
    // Networks and volumes of compose environments, once their containers are gone.
    removed += crate::network::reap_dead_owner_networks_and_volumes(client).await?;
    Ok(removed)
}

/// Removes every container of `job_id`, then its networks and volumes. Returns how many
/// objects were removed.
pub async fn remove_job_containers(
    client: &DockerClient,
    job_id: &str,
) -> Result<usize, DockerError> {
    let found = list_by_label(client, format!("{}={job_id}", labels::JOB)).await?;
    for (id, _) in &found {
        remove_container(client, id).await?;
    }
    let others = crate::network::remove_job_networks_and_volumes(client, job_id).await?;
    Ok(found.len() + others)
}
