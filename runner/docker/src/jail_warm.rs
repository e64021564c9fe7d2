//! The verifier jail, started early: created, given the helper and started while the agent
//! runs, so a trial's verification waits only for an order on the jail's stdin, not for a
//! container start (the costliest step of the engine, about half a second here).
//!
//! Why this keeps the jail's guarantees (ARCHITECTURE.md, "Containment"): until the order
//! arrives the helper runs `contain wait`, which reads stdin and does nothing else: it has not
//! joined the trial's mount namespace, anchored or mounted anything, or seen the tests (they
//! are uploaded into the jail's own root, which no process of the trial can reach, only when
//! verification starts). The waiting helper shares the trial's PID namespace, so the agent can
//! see it and signal it, but not reach its root, memory or environment: `/proc/<pid>/root`,
//! `mem` and `environ` need ptrace access, which the kernel grants only to a process whose
//! capabilities are a superset of the target's, and the helper holds `CAP_SYS_ADMIN`, which
//! no trial process has. An agent that kills it gains nothing: a jail that is not running at
//! verification is removed and a fresh one is made the old way, after the agent phase. If
//! the runner goes away, stdin ends and the helper exits having done nothing.

use std::collections::BTreeMap;
use std::pin::Pin;
use std::sync::Arc;

use bollard::models::ContainerCreateBody;
use bollard::query_parameters::{AttachContainerOptionsBuilder, CreateContainerOptionsBuilder};
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::task::JoinHandle;

use super::archive;
use super::container::remove_container;
use super::jail::{HELPER, HELPER_PATH, JailSpec, jail_host_config, jail_name, pack_off_thread};
use super::{DockerClient, DockerError};

/// A started jail whose helper waits for its order.
pub(crate) struct WarmJail {
    /// The jail container's id.
    pub id: String,
    input: Pin<Box<dyn AsyncWrite + Send>>,
    /// The engine's wait for the jail's exit, asked for right after its start: it tells the
    /// verification whether the jail still runs without an inspection (a round trip on the
    /// trial's path), and it is already waiting when the tests end.
    exit: Option<JoinHandle<Result<i64, DockerError>>>,
}

impl Drop for WarmJail {
    fn drop(&mut self) {
        if let Some(exit) = self.exit.take() {
            exit.abort();
        }
    }
}

impl WarmJail {
    /// True when the engine has reported the jail's exit (the agent killed its helper, or
    /// the engine stopped it), or the wait itself failed: the jail cannot take the order.
    pub fn has_exited(&self) -> bool {
        self.exit.as_ref().is_none_or(JoinHandle::is_finished)
    }

    /// The jail's exit code, once it exits (see [`WarmJail::exit`]).
    pub async fn exit_code(&mut self) -> Result<i64, DockerError> {
        match self.exit.take() {
            Some(exit) => exit
                .await
                .map_err(|e| DockerError::Jail(format!("waiting for the verifier jail: {e}")))?,
            None => Err(DockerError::Jail(
                "the verifier jail's exit was already taken".into(),
            )),
        }
    }

    /// Sends the order: `contain verify` with `args`, the tests' extra environment `env`.
    pub async fn order(
        &mut self,
        args: &[String],
        env: &BTreeMap<String, String>,
    ) -> Result<(), DockerError> {
        let bytes = encode_order(args, env);
        let sent = async {
            self.input.write_all(&bytes).await?;
            self.input.flush().await
        };
        sent.await
            .map_err(|e| DockerError::Jail(format!("sending the verifier jail its order: {e}")))
    }
}

/// The order's bytes: every field NUL-terminated, the environment as `--env K=V`, then an
/// empty field (see `contain/order.rs`).
pub(crate) fn encode_order(args: &[String], env: &BTreeMap<String, String>) -> Vec<u8> {
    let mut bytes = Vec::new();
    let mut field = |text: &str| {
        bytes.extend_from_slice(text.as_bytes());
        bytes.push(0);
    };
    for arg in args {
        field(arg);
    }
    for (key, value) in env {
        field("--env");
        field(&format!("{key}={value}"));
    }
    bytes.push(0);
    bytes
}

/// Creates the jail of `spec`, puts the helper into its fresh root, attaches to its stdin and
/// starts it once `trial_running` fires (it joins the trial container's namespaces, so it
/// cannot start before that container does). On failure, or when the trial container never
/// starts (`trial_running` dropped), nothing of it is left.
pub(crate) async fn prestart(
    client: &DockerClient,
    spec: &JailSpec,
    trial_running: tokio::sync::oneshot::Receiver<()>,
) -> Result<WarmJail, DockerError> {
    let name = jail_name(spec);
    let body = ContainerCreateBody {
        image: Some(spec.image.clone()),
        entrypoint: Some(vec![HELPER_PATH.to_owned(), "wait".to_owned()]),
        cmd: Some(Vec::new()),
        env: Some(spec.env.clone()),
        user: Some("0".into()),
        labels: Some(spec.labels.clone()),
        open_stdin: Some(true),
        stdin_once: Some(true),
        attach_stdin: Some(true),
        host_config: Some(jail_host_config(spec)),
        ..Default::default()
    };
    let options = CreateContainerOptionsBuilder::default().name(&name).build();
    let id = client
        .api()
        .create_container(Some(options), body)
        .await
        .map_err(|e| DockerError::api(format!("creating {name}"), e))?
        .id;
    let started = async {
        // The tests go with the helper when they are known: the jail's root is out of every
        // trial process's reach (see above), so they are as safe there now as at the order.
        let tar = match &spec.early_tests {
            Some(tests) => {
                pack_off_thread(tests, |tests| {
                    archive::pack_jail(HELPER, HELPER_PATH, tests)
                })
                .await?
            }
            None => archive::pack_jail_root(HELPER, HELPER_PATH)
                .map_err(|e| DockerError::Jail(format!("packing the helper: {e}")))?,
        };
        archive::upload(client, &id, tar, "the verifier helper").await?;
        let attach = AttachContainerOptionsBuilder::default()
            .stdin(true)
            .stream(true)
            .build();
        let attached = client
            .api()
            .attach_container(&id, Some(attach))
            .await
            .map_err(|e| DockerError::api(format!("attaching to {name}"), e))?;
        trial_running
            .await
            .map_err(|_| DockerError::Jail(format!("{} did not start", spec.trial_name)))?;
        client
            .api()
            .start_container(&id, None)
            .await
            .map_err(|e| DockerError::api(format!("starting {name}"), e))?;
        let exit = tokio::spawn({
            let (client, id) = (client.clone(), id.clone());
            async move { super::jail::wait_exit(&client, &id).await }
        });
        Ok::<_, DockerError>((attached.input, exit))
    };
    match started.await {
        Ok((input, exit)) => Ok(WarmJail {
            id,
            input,
            exit: Some(exit),
        }),
        Err(e) => {
            let _ = remove_container(client, &id).await;
            Err(e)
        }
    }
}

/// What the background preparation of a trial's jail came to.
pub(crate) struct Prepared {
    /// The jail's spec; `None` when the trial container could not be inspected (the trial
    /// then records isolation as unavailable).
    pub spec: Option<JailSpec>,
    /// The started jail, or why there is none (the verifier then makes a fresh one).
    pub warm: Result<WarmJail, String>,
}

enum SlotState {
    Preparing(JoinHandle<Prepared>),
    Ready(Option<Arc<JailSpec>>),
}

/// A trial's jail as its sandbox sees it: being prepared in the background, then taken by the
/// first verification (later ones make fresh jails from the spec).
pub(crate) struct JailSlot {
    state: tokio::sync::Mutex<SlotState>,
}

impl JailSlot {
    /// A slot whose jail `task` prepares.
    pub fn preparing(task: JoinHandle<Prepared>) -> Self {
        Self {
            state: tokio::sync::Mutex::new(SlotState::Preparing(task)),
        }
    }

    /// Waits for the preparation: the spec, and the started jail the first time (or why
    /// there is none).
    pub async fn take(&self) -> (Option<Arc<JailSpec>>, Option<Result<WarmJail, String>>) {
        let mut state = self.state.lock().await;
        match &mut *state {
            SlotState::Ready(spec) => (spec.clone(), None),
            SlotState::Preparing(task) => {
                let prepared = task.await.unwrap_or_else(|e| Prepared {
                    spec: None,
                    warm: Err(format!("preparing the verifier jail failed: {e}")),
                });
                let spec = prepared.spec.map(Arc::new);
                *state = SlotState::Ready(spec.clone());
                (spec, Some(prepared.warm))
            }
        }
    }

    /// At teardown: the started jail no verification took, so it can be removed.
    pub async fn unused(&self) -> Option<String> {
        match self.take().await {
            (_, Some(Ok(warm))) => Some(warm.id.clone()),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_order_ends_every_field_and_itself_with_nul() {
        let env = BTreeMap::from([("K".to_owned(), "v=1".to_owned())]);
        let bytes = encode_order(&["verify".into(), "--command".into(), "true".into()], &env);
        assert_eq!(bytes, b"verify\0--command\0true\0--env\0K=v=1\0\0");
    }
}
