//! The verifier jail, started early: created, given the helper and started while the agent
//! runs, so a trial's verification waits only for an order on the jail's stdin, not for a
//! container start (the costliest step of the engine, about half a second here).
//!
//! Why this keeps the jail's guarantees (ARCHITECTURE.md, "Containment"): until the order
//! arrives the helper runs `contain wait`. Before any process of the trial runs, it may make
//! the trial's `/logs` directories (`contain/logdirs.rs`: it joins the trial's mount namespace
//! for that and leaves it again); then it copies the image's programs the tests are pinned to
//! from its own root into its own tmpfs (`pins::precopy`), and reads stdin. While the agent
//! runs it is in the trial's mount namespace not at all, has anchored nothing there, and its
//! tests (a single-step task's go in with the helper, a step's with the order) are in the
//! jail's own root, which no process of the trial can reach. The waiting helper shares the
//! trial's PID namespace, so the agent can
//! see it and signal it, but not reach its root, memory or environment: `/proc/<pid>/root`,
//! `mem` and `environ` need ptrace access, which the kernel grants only to a process whose
//! capabilities are a superset of the target's, and the helper holds `CAP_SYS_ADMIN`, which
//! no trial process has. An agent that kills it gains nothing: a jail that is not running at
//! verification is removed and a fresh one is made the old way, after the agent phase. If
//! the runner goes away, stdin ends and the helper exits having done nothing more.
//!
//! The results come back over the same attachment: the helper writes them to its stdout as a
//! tar (`contain/stream.rs`), which the runner unpacks as it arrives, so no archive call to the
//! stopped jail is on the trial's path. The jail keeps no log (its driver is `none`): what the
//! stream carries is read once, here, and the helper's own messages arrive on its stderr.

use std::collections::BTreeMap;
use std::pin::Pin;
use std::sync::Arc;

use std::path::Path;

use bollard::container::LogOutput;
use bollard::models::{ContainerCreateBody, HostConfigLogConfig};
use bollard::query_parameters::{AttachContainerOptionsBuilder, CreateContainerOptionsBuilder};
use engine::ExecObserver;
use futures_util::{Stream, StreamExt};
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::task::JoinHandle;

use crate::connect::DockerClient;
use crate::container::archive::{self, DownloadBudget, DownloadReport};
use crate::container::remove_container;
use crate::error::DockerError;
use crate::jail::upload::{HELPER_PATH, jail_root_parts, pack_off_thread};
use crate::jail::{JailSpec, jail_host_config, jail_name};

/// A started jail whose helper waits for its order.
pub(crate) struct WarmJail {
    /// The jail container's id.
    pub id: String,
    input: Pin<Box<dyn AsyncWrite + Send>>,
    /// The helper's stdout (its results, after the order) and stderr (its messages).
    output: Pin<Box<dyn Stream<Item = Result<LogOutput, bollard::errors::Error>> + Send>>,
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

    /// After the order: unpacks the results the helper sends on its stdout into `staging`
    /// (its `out/` stripped) within `budget`, relaying its stderr to `observer` meanwhile.
    /// `None` when the stream ended or failed before the archive did (the helper was killed,
    /// or could not send): the jail's exit code then tells what happened.
    pub async fn receive_results(
        &mut self,
        staging: &Path,
        budget: Arc<DownloadBudget>,
        observer: &ExecObserver,
    ) -> Option<DownloadReport> {
        let stdout = self.output.by_ref().filter_map(|frame| {
            let chunk = match frame {
                Ok(LogOutput::StdOut { message }) => Some(Ok(message)),
                Ok(LogOutput::StdErr { message }) => {
                    (observer.output)("runner", &message);
                    None
                }
                Ok(_) => None,
                Err(e) => Some(Err(e)),
            };
            std::future::ready(chunk)
        });
        let (report, stream_error) = archive::unpack_stream(stdout, staging, budget).await;
        let cut = match (&report, stream_error) {
            (Err(e), _) => e.to_string(),
            (Ok(_), Some(e)) => e.to_string(),
            (Ok(report), None) => return Some(report.clone()),
        };
        let text = format!("the verifier jail's results did not come back whole: {cut}\n");
        (observer.output)("runner", text.as_bytes());
        None
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

/// Tests packed to at most this many bytes go into the jail's root with the helper, before its
/// start; bigger ones after it, so the start (and the `/logs` directories the environment
/// phase waits for) never waits for a big upload.
const TESTS_BEFORE_START_BYTES: usize = 1 << 20;

/// Creates the jail of `spec`, puts the helper into its fresh root, attaches to its stdin and
/// starts it once `trial_running` fires (it joins the trial container's namespaces, so it
/// cannot start before that container does). With `spec.make_dirs`, the helper's answer
/// (true: it made them) goes to `dirs_answer` as soon as it arrives; dropped unsent, it means
/// no. On failure, or when the trial container never starts (`trial_running` dropped),
/// nothing of it is left.
pub(crate) async fn prestart(
    client: &DockerClient,
    spec: &JailSpec,
    trial_running: tokio::sync::oneshot::Receiver<()>,
    dirs_answer: tokio::sync::oneshot::Sender<bool>,
) -> Result<WarmJail, DockerError> {
    let name = jail_name(spec);
    let body = ContainerCreateBody {
        image: Some(spec.image.clone()),
        entrypoint: Some(wait_command(&spec.make_dirs)),
        cmd: Some(Vec::new()),
        env: Some(spec.env.clone()),
        user: Some("0".into()),
        labels: Some(spec.labels.clone()),
        open_stdin: Some(true),
        stdin_once: Some(true),
        attach_stdin: Some(true),
        attach_stdout: Some(true),
        attach_stderr: Some(true),
        host_config: Some(bollard::models::HostConfig {
            // The results stream is read from the attachment; a log would hold a second copy.
            log_config: Some(HostConfigLogConfig {
                typ: Some("none".into()),
                config: None,
            }),
            ..jail_host_config(spec)
        }),
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
        let tests = match &spec.early_tests {
            Some(tests) => Some(pack_off_thread(tests, archive::pack_tests).await?),
            None => None,
        };
        let (tests_now, tests_later) = match tests {
            Some(tests) if tests.len() > TESTS_BEFORE_START_BYTES => (None, Some(tests)),
            tests => (tests, None),
        };
        let parts = jail_root_parts(tests_now)?;
        archive::upload_parts(client, &id, parts, "the verifier helper").await?;
        let attach = AttachContainerOptionsBuilder::default()
            .stdin(true)
            .stdout(true)
            .stderr(true)
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
            async move { crate::jail::wait_exit(&client, &id).await }
        });
        let mut output = attached.output;
        if !spec.make_dirs.is_empty() {
            let _ = dirs_answer.send(read_dirs_answer(&mut output, &name).await?);
        }
        if let Some(tests) = tests_later {
            archive::upload(client, &id, tests, "the tests").await?;
        }
        Ok::<_, DockerError>((attached.input, output, exit))
    };
    match started.await {
        Ok((input, output, exit)) => Ok(WarmJail {
            id,
            input,
            output,
            exit: Some(exit),
        }),
        Err(e) => {
            let _ = remove_container(client, &id).await;
            Err(e)
        }
    }
}

/// The helper's command: `contain wait`, asked to make the trial's `make_dirs` first when
/// there are any (`contain/logdirs.rs`).
fn wait_command(make_dirs: &[String]) -> Vec<String> {
    let mut command = vec![HELPER_PATH.to_owned(), "wait".to_owned()];
    for dir in make_dirs {
        command.extend(["--make-dir".to_owned(), dir.clone()]);
    }
    command
}

/// The longest the helper may take to answer whether it made the trial's directories (a few
/// system calls; the bound only keeps a stuck engine from holding the trial).
const DIRS_ANSWER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// Reads the helper's one-byte answer to `--make-dir` from its stdout: true when it made the
/// directories, false when it could not (its reason is on its stderr, and the runner uploads
/// them instead). An answer that is not one of the two bytes, or none, is an error: the jail
/// is then removed and the verification makes a fresh one.
async fn read_dirs_answer(
    output: &mut Pin<Box<dyn Stream<Item = Result<LogOutput, bollard::errors::Error>> + Send>>,
    name: &str,
) -> Result<bool, DockerError> {
    let answer = async {
        while let Some(frame) = output.next().await {
            match frame {
                Ok(LogOutput::StdOut { message }) => return Ok(message.to_vec()),
                Ok(_) => continue,
                Err(e) => return Err(DockerError::api(format!("reading {name}"), e)),
            }
        }
        Ok(Vec::new())
    };
    let bytes = tokio::time::timeout(DIRS_ANSWER_TIMEOUT, answer)
        .await
        .map_err(|_| {
            DockerError::Jail(format!(
                "{name} did not answer within {} s",
                DIRS_ANSWER_TIMEOUT.as_secs()
            ))
        })??;
    match bytes.as_slice() {
        b"D" => Ok(true),
        b"F" => Ok(false),
        other => Err(DockerError::Jail(format!(
            "{name} answered {:?} to --make-dir",
            String::from_utf8_lossy(other)
        ))),
    }
}

/// Why a trial's verifier jail was not started early (the verifier then makes a fresh one).
#[derive(Debug, thiserror::Error)]
pub(crate) enum WarmJailError {
    /// The trial's image could not be inspected for its default user and workdir.
    #[error("inspecting the image of {trial}: {source}")]
    InspectImage {
        /// The trial whose image it is.
        trial: String,
        /// The engine's answer.
        #[source]
        source: DockerError,
    },
    /// This build carries no contain helper to run in a jail.
    #[error("no helper")]
    NoHelper,
    /// Creating or starting the jail failed.
    #[error(transparent)]
    Start(#[from] DockerError),
    /// The background preparation panicked or was cancelled.
    #[error("preparing the verifier jail failed: {0}")]
    Preparation(#[source] tokio::task::JoinError),
}

/// What the background preparation of a trial's jail came to.
pub(crate) struct Prepared {
    /// The jail's spec; `None` when the trial container could not be inspected (the trial
    /// then records isolation as unavailable).
    pub spec: Option<JailSpec>,
    /// The started jail, or why there is none (the verifier then makes a fresh one).
    pub warm: Result<WarmJail, WarmJailError>,
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
    pub async fn take(
        &self,
    ) -> (
        Option<Arc<JailSpec>>,
        Option<Result<WarmJail, WarmJailError>>,
    ) {
        let mut state = self.state.lock().await;
        match &mut *state {
            SlotState::Ready(spec) => (spec.clone(), None),
            SlotState::Preparing(task) => {
                let prepared = task.await.unwrap_or_else(|e| Prepared {
                    spec: None,
                    warm: Err(WarmJailError::Preparation(e)),
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
