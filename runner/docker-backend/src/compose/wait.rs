//! Waiting for a compose service to meet a `depends_on` condition, by polling the engine's
//! view of its container. The whole environment start is bounded by the engine's environment
//! deadline, so no wait here can hang a trial; a service that can never meet its condition
//! (it exited, or its healthcheck failed for good) fails at once with its state.

use std::time::Duration;

use engine::{BackendError, BackendErrorKind};

use super::service::Condition;
use crate::connect::DockerClient;

const POLL: Duration = Duration::from_millis(250);

/// Returns once container `id` of service `name` meets `condition`.
pub async fn until(
    client: &DockerClient,
    name: &str,
    id: &str,
    condition: Condition,
) -> Result<(), BackendError> {
    let fail = |why: String| {
        BackendError::new(
            BackendErrorKind::Start,
            format!("compose service {name} never became {condition}: {why}"),
        )
    };
    loop {
        let inspected = client
            .api()
            .inspect_container(id, None)
            .await
            .map_err(|e| fail(format!("inspecting it failed: {e}")))?;
        let state = inspected.state.unwrap_or_default();
        let status = state.status.map(|s| s.to_string()).unwrap_or_default();
        let exit = state.exit_code.unwrap_or_default();
        let health = state
            .health
            .and_then(|h| h.status)
            .map(|s| s.to_string())
            .unwrap_or_default();
        match condition {
            Condition::Started if status == "running" || status == "exited" => {
                return Ok(());
            }
            Condition::CompletedSuccessfully if status == "exited" => {
                return if exit == 0 {
                    Ok(())
                } else {
                    Err(fail(format!("it exited with status {exit}")))
                };
            }
            Condition::Healthy => {
                if health == "healthy" {
                    return Ok(());
                }
                if health == "unhealthy" {
                    return Err(fail("its healthcheck failed".into()));
                }
                if health.is_empty() || health == "none" {
                    return Err(fail("it has no healthcheck".into()));
                }
                if status == "exited" || status == "dead" {
                    return Err(fail(format!("it exited with status {exit}")));
                }
            }
            _ if status == "dead" => return Err(fail("it died".into())),
            _ => {}
        }
        tokio::time::sleep(POLL).await;
    }
}
