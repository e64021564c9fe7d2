//! Preparing a started container: the `/logs` mount points, and for prebuilt images the
//! task's `environment/` files, as Harbor does.

use tasks::{ExecRequest, Sandbox, Task};

use super::record::Failure;

const LOG_DIRS: &str = "/logs/agent /logs/verifier /logs/artifacts";

/// Makes the `/logs` directories writable by any user and, when the task runs a prebuilt
/// `docker_image` without a Dockerfile, copies `environment/` into the workdir (Harbor uploads
/// it there because no build step could have copied it in).
pub(super) async fn prepare<S: Sandbox>(sandbox: &S, task: &Task) -> Result<(), Failure> {
    let fail = |message: String| Failure::new("EnvironmentStartError", message);
    let out = sandbox
        .exec(ExecRequest::new(format!("mkdir -p {LOG_DIRS} && chmod 777 {LOG_DIRS}")).user("root"))
        .await
        .map_err(|e| fail(e.to_string()))?;
    if !out.success() {
        return Err(fail(format!(
            "preparing /logs failed: {}",
            out.stderr.trim()
        )));
    }
    let env_dir = task.environment_dir();
    let has_files = std::fs::read_dir(&env_dir)
        .map(|mut d| d.next().is_some())
        .unwrap_or(false);
    if env_dir.join("Dockerfile").is_file() || !has_files {
        return Ok(());
    }
    let workdir = match &task.config.environment.workdir {
        Some(dir) => dir.clone(),
        None => {
            let pwd = sandbox
                .exec(ExecRequest::new("pwd"))
                .await
                .map_err(|e| fail(e.to_string()))?;
            pwd.stdout.trim().to_owned()
        }
    };
    sandbox
        .upload_dir(&env_dir, &workdir)
        .await
        .map_err(|e| fail(format!("uploading environment/ to {workdir}: {e}")))
}
