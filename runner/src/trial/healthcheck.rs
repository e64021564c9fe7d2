//! The task healthcheck, run after the container starts and before agent setup.

use std::time::{Duration, Instant};

use tasks::{ExecRequest, Sandbox};

use super::log::TrialLog;
use super::record::Failure;
use crate::docker::DockerSandbox;

/// Docker HEALTHCHECK semantics: failures in the start period do not count; then `retries`
/// consecutive failures make the container unhealthy.
pub(super) async fn run_healthcheck(
    sandbox: &DockerSandbox,
    check: &tasks::config::Healthcheck,
    log: &TrialLog,
) -> Result<(), Failure> {
    let start = Instant::now();
    let start_period = Duration::from_secs_f64(check.start_period_sec);
    let mut failures = 0;
    loop {
        let request = ExecRequest::new(check.command.clone())
            .timeout(Duration::from_secs_f64(check.timeout_sec));
        let healthy = match sandbox.exec(request).await {
            Ok(out) => out.success(),
            Err(e) => return Err(Failure::new("HealthcheckError", e.to_string())),
        };
        if healthy {
            log.line("healthcheck passed");
            return Ok(());
        }
        let in_start_period = start.elapsed() < start_period;
        if !in_start_period {
            failures += 1;
            if failures >= check.retries.max(1) {
                return Err(Failure::new(
                    "HealthcheckError",
                    format!(
                        "healthcheck `{}` failed {failures} times in a row",
                        check.command
                    ),
                ));
            }
        }
        let pause = if in_start_period {
            check.start_interval_sec
        } else {
            check.interval_sec
        };
        tokio::time::sleep(Duration::from_secs_f64(pause)).await;
    }
}
