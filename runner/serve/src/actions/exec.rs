//! A blocking `exec`: the policy's command with its output capped inside the container, then
//! the sweep of every process it left.

use std::time::Instant;

use serde_json::json;
use tasks::Sandbox;

use super::{Broken, Policy};
use crate::output::cut;
use crate::protocol::{Action, Observation};
use crate::scripts;

impl<S: Sandbox> Policy<S> {
    /// A blocking command: run as the policy's user under the wall-clock cap, its output cut
    /// in the container; then every process it left is killed.
    pub(super) async fn exec(
        &mut self,
        action: &Action,
        mut obs: Observation,
    ) -> Result<Observation, Broken> {
        let max = self.max_output;
        let started = Instant::now();
        let out = self
            .run(self.as_policy(scripts::capped_command(&action.command, max)))
            .await?;
        let elapsed = started.elapsed();
        let dropped = scripts::dropped_bytes(&out.stderr);
        // A command killed at the time limit never reported its count: a full cap is then
        // a floor of what it wrote.
        let capped = out.timed_out && dropped == 0 && out.stdout.len() >= max;
        let shown = cut(&out.stdout, max, out.stdout.len() + dropped, capped);
        obs.output = shown.text;
        let killed = self.sweep().await?;
        obs.info.insert("exit_code".into(), json!(out.exit_code));
        obs.info.insert("timed_out".into(), json!(out.timed_out));
        obs.info.insert("truncated".into(), json!(shown.truncated));
        obs.info
            .insert("bytes_dropped".into(), json!(shown.dropped));
        obs.info
            .insert("elapsed_sec".into(), json!(elapsed.as_secs_f64()));
        obs.info.insert("processes_killed".into(), json!(killed));
        if out.timed_out {
            obs = obs.failed(format!(
                "the command was killed at the {} s limit",
                self.exec_timeout.as_secs_f64()
            ));
        } else if out.exit_code != Some(0) {
            let code = out.exit_code.map_or("none".into(), |c| c.to_string());
            obs = obs.failed(format!("exit code {code}"));
        }
        Ok(obs)
    }
}
