//! Progress while a job runs, in one of three modes (`--progress`): `bar`, the live view on a
//! terminal (one indicatif bar whose multi-line message is [`frame::render`] of the job's
//! state, redrawn four times a second by a ticker thread so elapsed times and the ETA move);
//! `lines`, job.log's own lines (the same renderer, `engine::event_text`) with the progress
//! added to each finished trial's (logs, CI); `none`.

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use tasks::TrialOutcome;
use tasks::records::{TrialResult, TrialTotals};

use engine::event_text;
use engine::events::{Event, TimedEvent};

use super::ProgressMode;
use super::frame::{self, RunningRow, Snapshot};
use crate::note;

/// How often the live view redraws.
const TICK: Duration = Duration::from_millis(250);

/// The job's state as the display needs it.
struct State {
    total: u64,
    scored: u64,
    errored: u64,
    reward_sum: f64,
    concurrency: u32,
    started: Instant,
    /// Running trials by name: phase, start, attempt.
    running: BTreeMap<String, (String, Instant, u32)>,
    /// Start order, so rows do not jump around.
    order: Vec<String>,
    images: BTreeMap<String, String>,
    /// Wall times of the trials finished in this run.
    durations: Vec<Duration>,
    notice: Option<String>,
    /// A pool run's finished trials per engine: (scored, errored).
    engines: BTreeMap<String, (u64, u64)>,
    /// A pool run's running trials: the engine each one's environment is on.
    placed: BTreeMap<String, String>,
}

impl State {
    fn snapshot(&self, now: Instant) -> Snapshot {
        let running: Vec<RunningRow> = self
            .order
            .iter()
            .filter_map(|name| {
                let (phase, started, attempt) = self.running.get(name)?;
                Some(RunningRow {
                    trial: name.clone(),
                    phase: phase.clone(),
                    elapsed: now.saturating_duration_since(*started),
                    attempt: *attempt,
                })
            })
            .collect();
        let done = self.scored + self.errored;
        let mut s = Snapshot {
            total: self.total,
            scored: self.scored,
            errored: self.errored,
            running,
            images: self
                .images
                .iter()
                .map(|(t, l)| (t.clone(), l.clone()))
                .collect(),
            mean: (done > 0).then(|| self.reward_sum / done as f64),
            elapsed: now.saturating_duration_since(self.started),
            eta: None,
            notice: self.notice.clone(),
            engines: self.engine_rows(),
        };
        let elapsed: Vec<Duration> = s.running.iter().map(|r| r.elapsed).collect();
        s.eta = frame::eta(&self.durations, &elapsed, s.pending(), self.concurrency);
        s
    }
}

impl State {
    /// Each engine of a pool run that has run or is running a trial: (engine, running, scored,
    /// errored).
    fn engine_rows(&self) -> Vec<frame::EngineRow> {
        let mut rows: BTreeMap<&str, frame::EngineRow> = BTreeMap::new();
        let row = |name: &str| frame::EngineRow {
            engine: name.to_owned(),
            ..frame::EngineRow::default()
        };
        for engine in self.placed.values() {
            rows.entry(engine).or_insert_with(|| row(engine)).running += 1;
        }
        for (engine, (scored, errored)) in &self.engines {
            let entry = rows.entry(engine).or_insert_with(|| row(engine));
            entry.scored = *scored;
            entry.errored = *errored;
        }
        rows.into_values().collect()
    }
}

type Shared = Arc<Mutex<State>>;

fn lock(state: &Shared) -> std::sync::MutexGuard<'_, State> {
    state.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A handle that puts a notice on screen and keeps it there (the interrupt notice, which a
/// plain stderr line would lose at the next redraw).
#[derive(Clone)]
pub struct Notice {
    state: Shared,
    live: bool,
}

impl Notice {
    /// Shows `text` until the job ends.
    pub fn show(&self, text: &str) {
        if self.live {
            lock(&self.state).notice = Some(text.to_owned());
        } else {
            note!("{text}");
        }
    }
}

struct Live {
    bar: ProgressBar,
    stop: Arc<AtomicBool>,
    ticker: Option<std::thread::JoinHandle<()>>,
}

/// Turns events into output.
pub struct Reporter {
    mode: ProgressMode,
    state: Shared,
    live: Option<Live>,
}

fn draw(bar: &ProgressBar, state: &Shared) {
    let (rows, cols) = console::Term::stderr().size();
    let snapshot = lock(state).snapshot(Instant::now());
    let lines = frame::render(
        &snapshot,
        usize::from(rows),
        usize::from(cols),
        crate::output::stderr_colored(),
    );
    bar.set_message(lines.join("\n"));
}

impl Reporter {
    /// A reporter for `total` trials of which `done` are complete already (a resume), with
    /// `concurrency` trials at once; `mode` as `--progress` chose (default: the live view on
    /// a terminal, lines otherwise; nothing with `--quiet`).
    pub fn new(
        total: u64,
        done: &[TrialTotals],
        concurrency: u32,
        mode: Option<ProgressMode>,
    ) -> Reporter {
        let mode = mode.unwrap_or(if crate::output::quiet() {
            ProgressMode::None
        } else if std::io::stderr().is_terminal() {
            ProgressMode::Bar
        } else {
            ProgressMode::Lines
        });
        let scored = done
            .iter()
            .filter(|r| r.outcome == TrialOutcome::Scored)
            .count() as u64;
        let state: Shared = Arc::new(Mutex::new(State {
            total,
            scored,
            errored: done.len() as u64 - scored,
            reward_sum: done.iter().filter_map(TrialTotals::reward).sum(),
            concurrency,
            started: Instant::now(),
            running: BTreeMap::new(),
            order: Vec::new(),
            images: BTreeMap::new(),
            durations: Vec::new(),
            notice: None,
            engines: BTreeMap::new(),
            placed: BTreeMap::new(),
        }));
        let live = (mode == ProgressMode::Bar).then(|| {
            let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
            bar.set_style(ProgressStyle::with_template("{msg}").expect("static template"));
            let stop = Arc::new(AtomicBool::new(false));
            let ticker = {
                let (bar, state, stop) = (bar.clone(), state.clone(), stop.clone());
                std::thread::Builder::new()
                    .name("live-view".into())
                    .spawn(move || {
                        while !stop.load(Ordering::Relaxed) {
                            draw(&bar, &state);
                            std::thread::sleep(TICK);
                        }
                    })
                    .ok()
            };
            Live { bar, stop, ticker }
        });
        Reporter { mode, state, live }
    }

    /// The handle through which a notice stays on screen.
    pub fn notice(&self) -> Notice {
        Notice {
            state: self.state.clone(),
            live: self.live.is_some(),
        }
    }

    /// Handles one event: the live view's state, then its words, which are `job.log`'s
    /// (`engine::event_text`), stamped as there in lines mode.
    pub fn event(&mut self, timed: &TimedEvent) {
        let event = &timed.event;
        match event {
            Event::TrialStarted { trial, attempt } => {
                let mut s = lock(&self.state);
                s.running
                    .insert(trial.clone(), ("starting".into(), Instant::now(), *attempt));
                if !s.order.contains(trial) {
                    s.order.push(trial.clone());
                }
            }
            Event::Placed { trial, engine } => {
                lock(&self.state)
                    .placed
                    .insert(trial.clone(), engine.clone());
            }
            Event::Phase { trial, phase } => {
                if let Some(entry) = lock(&self.state).running.get_mut(trial) {
                    entry.0 = phase.label().to_owned();
                }
            }
            Event::ImageReady { task, .. } | Event::ImageFailed { task, .. } => {
                lock(&self.state).images.remove(task);
            }
            // Without a terminal, progress is left to `trial.log` (it would flood a CI log).
            Event::ImageProgress { task, line } => {
                if self.live.is_some() {
                    lock(&self.state).images.insert(task.clone(), line.clone());
                }
            }
            Event::TrialRetrying { trial, .. } => {
                lock(&self.state).running.remove(trial);
            }
            Event::TrialFinished(result) => return self.finished(timed, result),
            Event::Paused { .. } | Event::Warning(_) => {}
        }
        let Some(text) = event_text::describe(event) else {
            return;
        };
        match (&self.live, self.mode) {
            // The live view shows a started trial in its table.
            (_, ProgressMode::Bar | ProgressMode::None)
                if matches!(event, Event::TrialStarted { .. }) => {}
            (Some(live), _) => {
                if let Some(text) = crate::output::note_text(text) {
                    live.bar.println(text);
                }
            }
            (None, ProgressMode::Lines) => {
                if let Some(line) = event_text::line(timed) {
                    note!("{}", line.trim_end());
                }
            }
            (None, _) => note!("{text}"),
        }
    }

    fn finished(&mut self, timed: &TimedEvent, result: &TrialResult) {
        let (done, total, mean) = {
            let mut s = lock(&self.state);
            if let Some((_, started, _)) = s.running.remove(&result.trial_name) {
                let took = started.elapsed();
                s.durations.push(took);
            }
            s.order.retain(|name| name != &result.trial_name);
            s.placed.remove(&result.trial_name);
            let scored = result.outcome() == TrialOutcome::Scored;
            if scored {
                s.scored += 1;
            } else {
                s.errored += 1;
            }
            if let Some(engine) = &result.engine {
                let counts = s.engines.entry(engine.clone()).or_default();
                if scored {
                    counts.0 += 1;
                } else {
                    counts.1 += 1;
                }
            }
            s.reward_sum += result.reward().unwrap_or(0.0);
            let done = s.scored + s.errored;
            (done, s.total, s.reward_sum / done as f64)
        };
        let color = crate::output::stderr_colored();
        match (&self.live, self.mode) {
            (Some(live), _) => live.bar.println(frame::finished_text(
                &format!("[{done}/{total}]"),
                result,
                mean,
                color,
            )),
            (None, ProgressMode::Lines) => {
                let line = event_text::line(timed).unwrap_or_default();
                note!(
                    "{}",
                    frame::finished_line(
                        line.trim_end(),
                        done,
                        total,
                        timed.elapsed,
                        result,
                        mean,
                        color
                    )
                );
            }
            (None, _) => {}
        }
    }

    /// Clears the live view.
    pub fn finish(&mut self) {
        if let Some(mut live) = self.live.take() {
            live.stop.store(true, Ordering::Relaxed);
            if let Some(ticker) = live.ticker.take() {
                let _ = ticker.join();
            }
            live.bar.finish_and_clear();
            // The notice outlives the view: the summary that follows should not be the first
            // sign that the job was interrupted.
            if let Some(notice) = lock(&self.state).notice.take() {
                note!("{notice}");
            }
        }
    }
}

impl Drop for Reporter {
    fn drop(&mut self) {
        self.finish();
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
    // On a pool run, where it ran (the record's engine name, which holds no credentials).
    let on = result
        .engine
        .as_ref()
        .map(|e| format!(" on {e}"))
        .unwrap_or_default();
    match &result.exception_info {
        Some(e) => format!(
            "{}: {reward}{secs}{on} ({})",
            result.trial_name,
            e.headline()
        ),
        None => format!("{}: {reward}{secs}{on}", result.trial_name),
    }
}
