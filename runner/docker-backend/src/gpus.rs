//! GPUs for `[environment] gpus = N`: requested through a device request when the engine has
//! the NVIDIA runtime, refused by name otherwise (Harbor 0.26's Docker backend reserves NVIDIA GPUs through compose
//! the same way; 0.13's refused GPU tasks).

use bollard::models::DeviceRequest;

/// The device request for `count` GPUs (what `docker run --gpus N` sends).
pub fn device_requests(count: u32) -> Vec<DeviceRequest> {
    vec![DeviceRequest {
        driver: Some(String::new()),
        count: Some(i64::from(count)),
        capabilities: Some(vec![vec!["gpu".to_owned()]]),
        ..Default::default()
    }]
}

/// Whether an engine with these runtimes can hand GPUs to containers: one is the `nvidia`
/// runtime (the NVIDIA container toolkit registers it; `docker info` shows it under Runtimes).
pub fn is_gpu_runtime<'a>(mut runtimes: impl Iterator<Item = &'a String>) -> bool {
    runtimes.any(|name| name.contains("nvidia"))
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
        let names = |list: &[&str]| list.iter().map(|n| n.to_string()).collect::<Vec<_>>();
        assert!(is_gpu_runtime(names(&["runc", "nvidia"]).iter()));
        assert!(!is_gpu_runtime(
            names(&["runc", "io.containerd.runc.v2"]).iter()
        ));
        let text = refusal("examples/cuda", 1);
        assert!(text.contains("task examples/cuda"), "{text}");
        assert!(text.contains("[environment] gpus = 1"), "{text}");
    }
}
