//! `oracle`: runs the task's reference solution, as Harbor's OracleAgent does.

use std::collections::BTreeMap;
use std::time::Instant;

use tasks::{ExecRequest, Sandbox};

use crate::agent::{Agent, AgentError, AgentErrorKind, AgentRun, AgentRunReport};

/// The agent that uploads `solution/` to `/solution` and runs `solve.sh`.
#[derive(Debug, Default)]
pub struct OracleAgent;

impl Agent for OracleAgent {
    fn name(&self) -> &str {
        "oracle"
    }

    fn version(&self) -> String {
        "1.0.0".into()
    }

    async fn run<S: Sandbox>(
        &self,
        sandbox: &S,
        run: &AgentRun<'_>,
        _instruction: &str,
    ) -> Result<AgentRunReport, AgentError> {
        // A step runs its own solution when it has one, else the task's (as Harbor's oracle).
        let solution = match &run.step {
            Some(step) => run.task.step_solution_dir(step),
            None => run.task.solution_dir(),
        };
        if !solution.join("solve.sh").is_file() {
            return Err(AgentError::new(
                AgentErrorKind::NonZeroExit,
                format!(
                    "task {} has no {} for the oracle to run",
                    run.task.name,
                    solution
                        .join("solve.sh")
                        .strip_prefix(&run.task.dir)
                        .unwrap_or(&solution)
                        .display()
                ),
            ));
        }
        // A step's solution replaces the previous step's, never mixes with it.
        if run.step.is_some() {
            sandbox
                .exec(ExecRequest::new("rm -rf /solution").user("root"))
                .await?;
        }
        // Less what the task's `.harborignore` files exclude, as Harbor 0.26's oracle uploads it.
        let refused =
            |e: tasks::TaskError| AgentError::new(AgentErrorKind::SetupFailed, e.to_string());
        let filter = tasks::file_filter::TaskFileFilter::new(&run.task.dir).map_err(refused)?;
        filter
            .require_included(&solution.join("solve.sh"))
            .map_err(refused)?;
        let selected = filter.select(&solution).map_err(refused)?;
        sandbox.upload_dir(&selected.dir, "/solution").await?;
        sandbox
            .exec(ExecRequest::new("chmod +x /solution/solve.sh").user("root"))
            .await?;
        let mut env = BTreeMap::from([("DEBIAN_FRONTEND".to_owned(), "noninteractive".to_owned())]);
        let solution_env = run
            .task
            .resolve_env(&run.task.config.solution.env)
            .map_err(|e| {
                AgentError::new(
                    AgentErrorKind::SetupFailed,
                    format!("task {}: [solution] {e}", run.task.name),
                )
            })?;
        env.extend(solution_env);
        let mut request = ExecRequest::new(
            "mkdir -p /logs/agent; (/solution/solve.sh) > /logs/agent/oracle.txt 2>&1",
        )
        .maybe_user(run.user.as_deref())
        .envs(&env);
        if let Some(deadline) = run.run_deadline {
            request = request.timeout(deadline.saturating_duration_since(Instant::now()));
        }
        let output = sandbox.exec(request).await?;
        if output.timed_out {
            let secs = run.agent_timeout_sec.unwrap_or_default();
            return Err(AgentError::new(
                AgentErrorKind::Timeout,
                format!("Agent execution timed out after {secs} seconds"),
            ));
        }
        if let Some(code) = output.exit_code.filter(|c| *c != 0) {
            // Harbor records the exit code beside the output and raises nothing.
            std::fs::create_dir_all(run.trial_dir.join("agent")).ok();
            std::fs::write(
                run.trial_dir.join("agent/exit-code.txt"),
                format!("{code}\n"),
            )
            .ok();
        }
        Ok(AgentRunReport::default())
    }
}
