//! GPUs for `[environment] gpus = N`: requested through a device request when the engine has
//! the NVIDIA runtime, refused by name otherwise (Harbor's Docker backend refuses GPU tasks).

use bollard::models::DeviceRequest;

use super::{DockerClient, DockerError};

/// The device request for `count` GPUs (what `docker run --gpus N` sends).
pub fn device_requests(count: u32) -> Vec<DeviceRequest> {
    vec![DeviceRequest {
        driver: Some(String::new()),
        count: Some(i64::from(count)),
        capabilities: Some(vec![vec!["gpu".to_owned()]]),
        ..Default::default()
    }]
}

/// Whether the engine can hand GPUs to containers: it lists the `nvidia` runtime (the NVIDIA
/// container toolkit registers it; `docker info` shows it under Runtimes).
pub async fn engine_has_gpus(client: &DockerClient) -> Result<bool, DockerError> {
    let info = client
        .api()
        .info()
        .await
        .map_err(|e| DockerError::api("reading the engine's info", e))?;
    Ok(info
        .runtimes
        .is_some_and(|runtimes| runtimes.keys().any(|name| name.contains("nvidia"))))
}

/// The refusal of a GPU task on an engine without GPUs, naming the task and the field.
pub fn refusal(task: &str, count: u32) -> String {
    format!(
        "task {task}: [environment] gpus = {count}, but this Docker engine has no GPU runtime (no `nvidia` among its runtimes); run the task on a host with the NVIDIA container toolkit, or set gpus = 0"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_asks_for_that_many_gpus_and_the_refusal_names_task_and_field() {
        let request = &device_requests(2)[0];
        assert_eq!(request.count, Some(2));
        assert_eq!(request.capabilities, Some(vec![vec!["gpu".to_owned()]]));
        let text = refusal("examples/cuda", 1);
        assert!(text.contains("task examples/cuda"), "{text}");
        assert!(text.contains("[environment] gpus = 1"), "{text}");
    }
}
