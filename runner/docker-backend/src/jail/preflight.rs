//! Before a job's first trial: can this engine run the verifier jail at all?
//!
//! Every trial's tests run in the jail (`jail/mod.rs`), and a jail that cannot be set up is an
//! error of the trial, never a fallback to verifying beside the agent's processes (issue 29
//! item 3). A host where that fails for every trial (a runner built without the static helper,
//! a security profile that denies `mount`, as Docker's default AppArmor profile does on
//! Ubuntu hosts) would fail every trial one by one; this check says so once, before any
//! trial, and names the fix. It runs the helper's `probe` (the mount calls a verification
//! makes) in a container of a tiny image made from the helper alone (`docker import`, once
//! per engine and helper build), with the jail's capabilities and security options.

use bollard::models::{ContainerCreateBody, HostConfig};
use bollard::query_parameters::{CreateContainerOptionsBuilder, CreateImageOptionsBuilder};
use futures_util::StreamExt;
use sha2::Digest;

use crate::connect::DockerClient;
use crate::container::remove_container;
use crate::error::DockerError;
use crate::jail::jail_security_opt;
use crate::jail::upload::HELPER;
use crate::labels::{MANAGED, OWNER, Owner};

/// The environment variable that runs the jail without AppArmor confinement, for hosts whose
/// default profile denies the mounts it needs. Only the jail (the runner's static helper and
/// the task's tests) is affected; the agent's container keeps the engine's profile.
pub const JAIL_APPARMOR_ENV: &str = "RUNNER_JAIL_APPARMOR";

/// Checks that the engine can run the verifier jail; the error names the cause and the fix.
pub async fn check_jail(client: &DockerClient) -> Result<(), DockerError> {
    if HELPER.is_empty() {
        return Err(DockerError::Jail(
            "this runner was built without the verifier jail's static helper (no libc.a when \
             it was compiled), so no trial's tests can be kept from the agent's processes; \
             install the C library's static archive (Debian: libc6-dev) and rebuild the runner"
                .into(),
        ));
    }
    let image = probe_image(client).await?;
    let mut labels = std::collections::HashMap::new();
    labels.insert(MANAGED.to_owned(), "1".to_owned());
    labels.insert(OWNER.to_owned(), Owner::current().label());
    let body = ContainerCreateBody {
        image: Some(image),
        entrypoint: Some(vec!["/contain".into(), "probe".into()]),
        cmd: Some(Vec::new()),
        labels: Some(labels),
        network_disabled: Some(true),
        host_config: Some(HostConfig {
            cap_add: Some(vec!["SYS_ADMIN".into()]),
            security_opt: jail_security_opt(),
            network_mode: Some("none".into()),
            ..HostConfig::default()
        }),
        ..ContainerCreateBody::default()
    };
    let since_epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let name = format!(
        "runner-jail-probe-{}-{}",
        std::process::id(),
        since_epoch.as_nanos()
    );
    let options = CreateContainerOptionsBuilder::default().name(&name).build();
    let created = client
        .api()
        .create_container(Some(options), body)
        .await
        .map_err(|e| DockerError::api("creating the verifier jail's probe", e))?;
    let outcome = run_probe(client, &created.id).await;
    let _ = remove_container(client, &created.id).await;
    outcome
}

async fn run_probe(client: &DockerClient, id: &str) -> Result<(), DockerError> {
    client
        .api()
        .start_container(id, None)
        .await
        .map_err(|e| DockerError::api("starting the verifier jail's probe", e))?;
    let exit = crate::jail::wait_exit(client, id).await?;
    if exit == 0 {
        return Ok(());
    }
    let options = bollard::query_parameters::LogsOptionsBuilder::default()
        .stderr(true)
        .stdout(true)
        .build();
    let mut said = String::new();
    let mut logs = client.api().logs(id, Some(options));
    while let Some(Ok(chunk)) = logs.next().await {
        said.push_str(&String::from_utf8_lossy(&chunk.into_bytes()));
    }
    Err(DockerError::Jail(format!(
        "this Docker engine refuses the mounts the verifier jail needs ({}); no trial could be \
         verified, so none was started. On hosts whose security profile denies mount to \
         containers (Docker's default AppArmor profile on Ubuntu), set {JAIL_APPARMOR_ENV}=unconfined \
         to run only the jail without AppArmor (the agent's container keeps its profile)",
        said.trim()
    )))
}

/// The probe image's tag: made from the helper, so a new build of the helper gets its own.
async fn probe_image(client: &DockerClient) -> Result<String, DockerError> {
    let digest = hex::encode(sha2::Sha256::digest(HELPER));
    let tag = format!("jail-probe-{}", &digest[..16]);
    let reference = format!("runner-jail-probe:{tag}");
    if client.api().inspect_image(&reference).await.is_ok() {
        return Ok(reference);
    }
    let tar = probe_tar().map_err(|source| DockerError::Io {
        operation: "packing the verifier jail's probe".into(),
        source,
    })?;
    let options = CreateImageOptionsBuilder::default()
        .from_src("-")
        .repo("runner-jail-probe")
        .tag(&tag)
        .build();
    let mut progress = client.api().create_image(
        Some(options),
        Some(bollard::body_full(bytes::Bytes::from(tar))),
        None,
    );
    while let Some(step) = progress.next().await {
        step.map_err(|e| DockerError::api("importing the verifier jail's probe image", e))?;
    }
    Ok(reference)
}

/// A root filesystem of the helper at `/contain` and an empty `/probe`.
fn probe_tar() -> std::io::Result<Vec<u8>> {
    let mut builder = tar::Builder::new(Vec::new());
    let mut dir = tar::Header::new_gnu();
    dir.set_entry_type(tar::EntryType::Directory);
    dir.set_mode(0o755);
    dir.set_size(0);
    builder.append_data(&mut dir, "probe/", std::io::empty())?;
    let mut file = tar::Header::new_gnu();
    file.set_mode(0o755);
    file.set_size(HELPER.len() as u64);
    builder.append_data(&mut file, "contain", HELPER)?;
    builder.into_inner()
}
