//! The agent told its deadline (`runner run --tell-agent-deadline`; off by default). The text
//! names the agent timeout of this run as the engine computed it (the task's
//! `[agent] timeout_sec` with the job's multipliers, per step for a multi-step task) and is
//! appended to the instruction as Harbor appends an `--extra-instruction`: after a blank line,
//! before the agent's own `instruction_suffix`. What was told is recorded in the trial's
//! `agent_result.metadata.deadline_told`, and the whole text sent in `agent/instruction.txt`.
//! A turn limit is the agent CLI's own flag, given as Harbor's kwarg (`--ak max_turns=N`).

use serde_json::{Value, json};

/// What an agent is told of its deadline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadlineTold {
    /// Whole seconds the run has (rounded down: never later than the real deadline); `None`
    /// when the run has no timeout, and then nothing is told.
    pub seconds: Option<u64>,
}

impl DeadlineTold {
    /// The deadline of a run whose agent timeout is `agent_timeout_sec`.
    pub fn of_run(agent_timeout_sec: Option<f64>) -> Self {
        Self {
            seconds: agent_timeout_sec.map(|s| s.max(0.0).floor() as u64),
        }
    }

    /// The extra instruction, when there is a deadline to tell.
    pub fn text(&self) -> Option<String> {
        self.seconds.map(|seconds| {
            format!(
                "You have {seconds} seconds to complete this task. Your run is stopped when they \
                 are up, and the task is checked as you leave it."
            )
        })
    }

    /// `instruction` with the extra instruction appended as Harbor joins them (`"\n\n"`).
    pub fn appended_to(&self, instruction: &str) -> String {
        match self.text() {
            Some(text) => format!("{instruction}\n\n{text}"),
            None => instruction.to_owned(),
        }
    }

    /// The record of `agent_result.metadata.deadline_told`.
    pub fn record(&self) -> Value {
        json!({"agent_timeout_sec": self.seconds, "extra_instruction": self.text()})
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_deadline_follows_the_instruction_after_a_blank_line_rounded_down() {
        let told = DeadlineTold::of_run(Some(90.9));
        assert_eq!(told.seconds, Some(90));
        let sent = told.appended_to("Create hello.txt\n");
        assert!(
            sent.starts_with("Create hello.txt\n\n\nYou have 90 seconds to complete this task."),
            "{sent:?}"
        );
        assert_eq!(told.record()["agent_timeout_sec"], 90);
        assert_eq!(
            told.record()["extra_instruction"].as_str(),
            told.text().as_deref()
        );
    }

    #[test]
    fn a_run_without_a_timeout_is_told_nothing_and_records_so() {
        let told = DeadlineTold::of_run(None);
        assert_eq!(told.appended_to("Do it."), "Do it.");
        assert_eq!(
            told.record(),
            json!({"agent_timeout_sec": null, "extra_instruction": null})
        );
    }
}
