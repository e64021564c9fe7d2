//! The policy's background processes: `exec` with `block = false` starts one (in its own
//! process group, its output kept in a file in the container), `write` sends it input,
//! `view` and `wait` read what it wrote since the last look, `kill` ends it.

use std::time::Duration;

use serde_json::json;
use tasks::{ExecRequest, Sandbox};

use super::{Background, Broken, Policy};
use crate::protocol::{Action, Observation};
use crate::scripts;

/// A background-process action that names no running background process.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum NoSession {
    /// The action has no `session_id` (its `action_type` is named).
    #[error("session_id is required for action_type='{0}'")]
    Missing(String),
    /// No background process of this id runs in the episode.
    #[error("no background process {0:?}")]
    Unknown(String),
}

impl<S: Sandbox> Policy<S> {
    /// The background process an action names, or why not.
    fn named(&self, action: &Action) -> Result<(String, Background), NoSession> {
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
        let max = self.max_output;
        // The wait runs inside the container; the command's own cap is past it.
        let request = self
            .as_policy(scripts::bg_view(&id, bg.offset, max, seconds))
            .timeout(self.exec_timeout + Duration::from_secs(10));
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
}
