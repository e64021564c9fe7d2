//! Progress while a job runs: on a terminal an indicatif view (trials done/total, each running
//! trial's phase, running mean); otherwise one plain line per event.

use crate::note;
use std::collections::BTreeMap;
use std::io::IsTerminal;

use indicatif::{MultiProgress, ProgressBar, ProgressStyle};
use tasks::records::TrialResult;

use engine::events::{Event, Phase};

/// Turns events into output.
pub struct Reporter {
    total: u64,
    done: u64,
    reward_sum: f64,
    live: Option<Live>,
}

struct Live {
    multi: MultiProgress,
    overall: ProgressBar,
    trials: BTreeMap<String, ProgressBar>,
    /// One line per task whose image is being pulled or built.
    images: BTreeMap<String, ProgressBar>,
}

impl Reporter {
    /// A reporter for `total` trials of which `done` are complete already (a resume); live
    /// when stderr is a terminal.
    pub fn new(total: u64, done: &[TrialResult]) -> Reporter {
        let live = std::io::stderr().is_terminal().then(|| {
            let multi = MultiProgress::new();
            let overall = multi.add(ProgressBar::new(total));
            overall.set_style(
                ProgressStyle::with_template(
                    "{spinner} {pos}/{len} trials [{bar:30}] {elapsed_precise} {msg}",
                )
                .expect("static template")
                .progress_chars("=> "),
            );
            overall.enable_steady_tick(std::time::Duration::from_millis(200));
            overall.set_position(done.len() as u64);
            Live {
                multi,
                overall,
                trials: BTreeMap::new(),
                images: BTreeMap::new(),
            }
        });
        Reporter {
            total,
            done: done.len() as u64,
            reward_sum: done.iter().filter_map(TrialResult::reward).sum(),
            live,
        }
    }

    /// Prints a line above the live view (or plainly).
    pub fn note(&self, text: &str) {
        match &self.live {
            Some(live) => live.multi.println(text).unwrap_or_default(),
            None => note!("{text}"),
        }
    }

    /// Handles one event.
    pub fn event(&mut self, event: &Event) {
        match event {
            Event::TrialStarted { trial, attempt } => {
                if let Some(live) = &mut self.live {
                    let bar = live.multi.add(ProgressBar::new_spinner());
                    bar.set_style(
                        ProgressStyle::with_template("  {spinner} {prefix}: {msg}")
                            .expect("static template"),
                    );
                    bar.set_prefix(trial.clone());
                    bar.set_message(if *attempt > 1 {
                        format!("starting attempt {attempt}")
                    } else {
                        "starting".to_owned()
                    });
                    bar.enable_steady_tick(std::time::Duration::from_millis(200));
                    live.trials.insert(trial.clone(), bar);
                }
            }
            Event::Phase { trial, phase } => {
                if let Some(bar) = self.live.as_ref().and_then(|l| l.trials.get(trial)) {
                    bar.set_message(phase.label());
                } else if self.live.is_none() && *phase != Phase::Teardown && *phase != Phase::Image
                {
                    note!("{trial}: {}", phase.label());
                }
            }
            Event::ImageReady {
                task,
                tag,
                seconds,
                image,
                ..
            } => {
                self.image_done(task);
                let how = match image.origin {
                    engine::ImageOrigin::Reused => "reused".to_owned(),
                    origin => format!("{} in {seconds:.1}s", origin.as_str()),
                };
                self.note(&format!("image of {task}: {tag} ({how})"));
            }
            Event::ImageProgress { task, line } => self.image_progress(task, line),
            Event::ImageFailed { task, message } => {
                self.image_done(task);
                // In full: for a build, its last lines say why.
                self.note(&format!("image of {task} failed: {message}"));
            }
            Event::TrialFinished(result) => self.finished(result),
            Event::TrialRetrying {
                trial,
                attempt,
                exception,
                message,
                delay,
            } => {
                if let Some(live) = &mut self.live
                    && let Some(bar) = live.trials.remove(trial)
                {
                    bar.finish_and_clear();
                    live.multi.remove(&bar);
                }
                self.note(&format!(
                    "{trial}: attempt {attempt} failed ({exception}: {}); retrying in {:.1}s",
                    first_line(message),
                    delay.as_secs_f64()
                ));
            }
            Event::Paused { seconds } => self.note(&format!(
                "warning: the runner was paused for {seconds:.1}s; trials that timed out meanwhile are recorded as RunnerPausedError (infrastructure) and retried"
            )),
            Event::Warning(text) => self.note(&format!("warning: {text}")),
        }
    }

    /// A pull's or build's progress: a line of its own in the live view, gone when it ends.
    /// Without a terminal, progress is left to `trial.log` (it would flood a CI log).
    fn image_progress(&mut self, task: &str, line: &str) {
        let Some(live) = &mut self.live else { return };
        let bar = live.images.entry(task.to_owned()).or_insert_with(|| {
            let bar = live.multi.add(ProgressBar::new_spinner());
            bar.set_style(
                ProgressStyle::with_template("  {spinner} image of {prefix}: {msg}")
                    .expect("static template"),
            );
            bar.set_prefix(task.to_owned());
            bar.enable_steady_tick(std::time::Duration::from_millis(200));
            bar
        });
        bar.set_message(line.to_owned());
    }

    fn image_done(&mut self, task: &str) {
        if let Some(live) = &mut self.live
            && let Some(bar) = live.images.remove(task)
        {
            bar.finish_and_clear();
            live.multi.remove(&bar);
        }
    }

    fn finished(&mut self, result: &TrialResult) {
        self.done += 1;
        self.reward_sum += result.reward().unwrap_or(0.0);
        let mean = self.reward_sum / self.done as f64;
        let line = format!("[{}/{}] {}", self.done, self.total, outcome_line(result));
        match &mut self.live {
            Some(live) => {
                if let Some(bar) = live.trials.remove(&result.trial_name) {
                    bar.finish_and_clear();
                    live.multi.remove(&bar);
                }
                live.multi.println(&line).unwrap_or_default();
                live.overall.set_position(self.done);
                live.overall.set_message(format!("Mean: {mean:.3}"));
            }
            None => note!("{line}  (mean so far {mean:.3})"),
        }
    }

    /// Clears the live view.
    pub fn finish(&mut self) {
        if let Some(live) = self.live.take() {
            live.overall.finish_and_clear();
            for bar in live.trials.values().chain(live.images.values()) {
                bar.finish_and_clear();
            }
        }
    }
}

/// `trial: reward 1.0` or `trial: no reward, infra_error (Type: message)`.
pub fn outcome_line(result: &TrialResult) -> String {
    let secs = match (result.started_at, result.finished_at) {
        (Some(s), Some(f)) => format!(" in {:.1}s", (f - s).num_milliseconds() as f64 / 1000.0),
        _ => String::new(),
    };
    let reward = match result.reward() {
        Some(r) => format!("reward {r}"),
        None => format!("no reward, {}", result.outcome()),
    };
    match &result.exception_info {
        Some(e) => format!(
            "{}: {reward}{secs} ({}: {})",
            result.trial_name,
            e.exception_type,
            first_line(&e.exception_message)
        ),
        None => format!("{}: {reward}{secs}", result.trial_name),
    }
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or("")
}
