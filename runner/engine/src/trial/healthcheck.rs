//! The task healthcheck, run after the environment starts and before agent setup (and, through
//! [`crate::phases::ready_environment`], before an episode's first action).

use std::time::{Duration, Instant};

use tasks::config::Healthcheck;
use tasks::{ExceptionType, ExecRequest, Sandbox};

use super::log::TrialLog;
use crate::failure::TrialFailure;

/// Docker HEALTHCHECK semantics: failures in the start period do not count; then `retries`
/// consecutive failures make the environment unhealthy. The caller bounds the whole wait.
pub async fn run<S: Sandbox>(
    sandbox: &S,
    check: &Healthcheck,
    log: &TrialLog,
) -> Result<(), TrialFailure> {
    let fail = |message: String| TrialFailure::new(ExceptionType::HealthcheckError, message);
    let seconds = |s: f64| Duration::try_from_secs_f64(s).unwrap_or(Duration::ZERO);
    let start = Instant::now();
    let start_period = seconds(check.start_period_sec);
    let mut failures = 0;
    loop {
        let request = ExecRequest::new(check.command.clone()).timeout(seconds(check.timeout_sec));
        // A sandbox that cannot run the check at all is the plumbing's failure, not the
        // check's verdict (the trial then questions whose it was: see `attribution`).
        let healthy = sandbox
            .exec(request)
            .await
            .map_err(|e| TrialFailure::new(ExceptionType::EnvironmentError, e.to_string()))?
            .success();
        if healthy {
            log.line("healthcheck passed");
            return Ok(());
        }
        let in_start_period = start.elapsed() < start_period;
        if !in_start_period {
            failures += 1;
            if failures >= check.retries.max(1) {
                return Err(fail(format!(
                    "healthcheck `{}` failed {failures} times in a row",
                    check.command
                )));
            }
        }
        let pause = if in_start_period {
            check.start_interval_sec
        } else {
            check.interval_sec
        };
        tokio::time::sleep(seconds(pause)).await;
    }
}
