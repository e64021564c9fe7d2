//! The policy's actions on a running episode but `evaluate` and `close`: a blocking `exec`
//! (then the sweep of what it left running), the background processes (`exec` with
//! `block = false`, `write`, `view`, `wait`, `kill`) and `write_file`.

use std::time::{Duration, Instant};

use engine::Backend;
use serde_json::json;
use tasks::{ExecRequest, Sandbox};

use super::{Background, Broken, Episode, SWEEP_TIMEOUT, WRITE_CHUNK};
use crate::output::cut;
use crate::protocol::{Action, Observation};
use crate::scripts;

/// A background-process action that names no running background process.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(super) enum NoSession {
    /// The action has no `session_id` (its `action_type` is named).
    #[error("session_id is required for action_type='{0}'")]
    Missing(String),
    /// No background process of this id runs in the episode.
    #[error("no background process {0:?}")]
    Unknown(String),
}

impl<B: Backend> Episode<B> {
    /// A blocking command: run as the policy's user under the wall-clock cap, its output cut
    /// in the container; then every process it left is killed.
    pub(super) async fn exec(
        &mut self,
        action: &Action,
        mut obs: Observation,
    ) -> Result<Observation, Broken> {
        let max = self.config.max_output_bytes;
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
                self.config.exec_timeout.as_secs_f64()
            ));
        } else if out.exit_code != Some(0) {
            let code = out.exit_code.map_or("none".into(), |c| c.to_string());
            obs = obs.failed(format!("exit code {code}"));
        }
        Ok(obs)
    }

    /// Kills every process the policy left, but its background processes; returns how many.
    pub(super) async fn sweep(&self) -> Result<u64, Broken> {
        let keep: Vec<u32> = self.background.values().map(|b| b.pgid).collect();
        let request =
            ExecRequest::runner_own(scripts::kill_policy_processes(&keep, &self.own_pids))
                .timeout(SWEEP_TIMEOUT);
        let mut last = String::new();
        // A fork bomb can leave the container without a free pid for a moment.
        for attempt in 0..5u64 {
            match self.sandbox.exec(request.clone()).await {
                Ok(out) if out.success() => return Ok(out.last_line().parse().unwrap_or(0)),
                Ok(out) => last = format!("exit {:?}: {}", out.exit_code, out.stderr.trim()),
                Err(e) => last = e.to_string(),
            }
            tokio::time::sleep(Duration::from_millis(200 * (attempt + 1))).await;
        }
        Err(Broken(format!(
            "could not kill the policy's processes ({last})"
        )))
    }

    /// The background process an action names, or why not.
    pub(super) fn named(&self, action: &Action) -> Result<(String, Background), NoSession> {
        let Some(id) = action.session_id.as_deref() else {
            return Err(NoSession::Missing(action.action_type.clone()));
        };
        match self.background.get(id) {
            Some(bg) => Ok((id.to_owned(), *bg)),
            None => Err(NoSession::Unknown(id.to_owned())),
        }
    }

    pub(super) async fn bg_start(
        &mut self,
        action: &Action,
        obs: Observation,
    ) -> Result<Observation, Broken> {
        let id = action
            .session_id
            .clone()
            .unwrap_or_else(|| "tb2-session".into());
        if !scripts::valid_bg_id(&id) {
            return Ok(obs.failed(format!(
                "session_id {id:?}: use 1 to 64 letters, digits, '_', '.' or '-'"
            )));
        }
        if let Some(old) = self.background.remove(&id) {
            self.run(ExecRequest::runner_own(scripts::bg_kill(old.pgid)))
                .await?;
        }
        let out = self
            .run(self.as_policy(scripts::bg_start(&id, &action.command)))
            .await?;
        let Ok(pgid) = out.last_line().parse::<u32>() else {
            return Ok(obs.failed(format!(
                "could not start the background process: {}",
                out.stderr.trim()
            )));
        };
        self.background
            .insert(id.clone(), Background { pgid, offset: 0 });
        let mut obs = obs;
        obs.session_id = Some(id.clone());
        obs.output = format!("Started background process {id}");
        Ok(obs)
    }

    pub(super) async fn bg_write(
        &mut self,
        action: &Action,
        obs: Observation,
    ) -> Result<Observation, Broken> {
        let (id, _) = match self.named(action) {
            Ok(found) => found,
            Err(e) => return Ok(obs.failed(e.to_string())),
        };
        let out = self
            .run(self.as_policy(scripts::bg_write(&id, &action.command)))
            .await?;
        if !out.success() {
            return Ok(obs.failed(format!("writing to {id}: {}", out.stderr.trim())));
        }
        let mut obs = obs;
        obs.output = format!("Wrote to background process {id}");
        Ok(obs)
    }

    pub(super) async fn bg_view(
        &mut self,
        action: &Action,
        obs: Observation,
        seconds: f64,
    ) -> Result<Observation, Broken> {
        let (id, bg) = match self.named(action) {
            Ok(found) => found,
            Err(e) => return Ok(obs.failed(e.to_string())),
        };
        let max = self.config.max_output_bytes;
        // The wait runs inside the container; the command's own cap is past it.
        let request = self
            .as_policy(scripts::bg_view(&id, bg.offset, max, seconds))
            .timeout(self.config.exec_timeout + Duration::from_secs(10));
        let out = self.run(request).await?;
        let Some(view) = scripts::parse_bg_view(&out.stdout) else {
            return Ok(obs.failed(format!("reading {id}: {}", out.stderr.trim())));
        };
        let code = view.exit_code;
        if let Some(bg) = self.background.get_mut(&id) {
            bg.offset = view.offset;
        }
        let mut obs = obs;
        // What the process wrote past this view is not lost (the next view starts there),
        // but this observation is cut all the same, and says so.
        let waiting = view.size.saturating_sub(view.offset);
        obs.output = view.output;
        if waiting > 0 {
            obs.output.push_str(&crate::output::more_marker(waiting));
        }
        obs.info.insert("truncated".into(), json!(waiting > 0));
        obs.info.insert("bytes_remaining".into(), json!(waiting));
        obs.info.insert("running".into(), json!(code.is_none()));
        obs.info.insert("exit_code".into(), json!(code));
        Ok(obs)
    }

    pub(super) async fn bg_kill(
        &mut self,
        action: &Action,
        obs: Observation,
    ) -> Result<Observation, Broken> {
        let (id, bg) = match self.named(action) {
            Ok(found) => found,
            Err(e) => return Ok(obs.failed(e.to_string())),
        };
        self.run(ExecRequest::runner_own(scripts::bg_kill(bg.pgid)))
            .await?;
        self.background.remove(&id);
        let mut obs = obs;
        obs.output = format!("Killed session {id}");
        Ok(obs)
    }

    /// Writes `content` to `file_path` as the policy's user, refusing paths outside the
    /// workdir and `/tmp` (lexically, then in the container with symlinks resolved).
    pub(super) async fn write_file(
        &mut self,
        action: &Action,
        obs: Observation,
    ) -> Result<Observation, Broken> {
        let absolute = match crate::paths::check(&self.workdir, &action.file_path) {
            Ok(path) => path,
            Err(e) => return Ok(obs.failed(e.to_string())),
        };
        let guard = crate::paths::guard_script(&absolute, &self.workdir);
        let bytes = action.content.as_bytes();
        let chunks: Vec<&[u8]> = if bytes.is_empty() {
            vec![&[][..]]
        } else {
            bytes.chunks(WRITE_CHUNK).collect()
        };
        for (index, chunk) in chunks.iter().enumerate() {
            let redirect = if index == 0 { ">" } else { ">>" };
            let encoded = base64_encode(chunk);
            let script = format!("{guard}; printf %s '{encoded}' | base64 -d {redirect} \"$f\"");
            let out = self.run(self.as_policy(script)).await?;
            if out.exit_code == Some(crate::paths::ESCAPE_EXIT) {
                return Ok(obs.failed(format!(
                    "file_path {:?}: {}",
                    action.file_path,
                    out.stderr.trim()
                )));
            }
            if !out.success() {
                return Ok(obs.failed(format!("writing {absolute}: {}", out.stderr.trim())));
            }
        }
        let mut obs = obs;
        obs.output = format!("Wrote content to {}", action.file_path);
        Ok(obs)
    }
}

/// Standard base64 with padding.
fn base64_encode(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_the_standard() {
        assert_eq!(base64_encode(b""), "");
        assert_eq!(base64_encode(b"f"), "Zg==");
        assert_eq!(base64_encode(b"fo"), "Zm8=");
        assert_eq!(base64_encode(b"foo"), "Zm9v");
        assert_eq!(base64_encode(b"foob"), "Zm9vYg==");
        assert_eq!(base64_encode("é\n".as_bytes()), "w6kK");
    }
}
