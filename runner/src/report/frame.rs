//! The text of progress, as pure functions of a snapshot: the live view's frame (counts, bar,
//! ETA, one row per running trial with its phase and elapsed time, "+N more" when the
//! terminal is too short, the interrupt notice) and the timestamped line of a finished trial
//! that non-terminal output gets. No clock and no terminal here, so snapshots test them.

use std::time::Duration;

use console::Style;
use tasks::records::TrialResult;

/// A running trial as the frame shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct RunningRow {
    /// The trial's name.
    pub trial: String,
    /// Its phase (`agent run`, `verifying`, …).
    pub phase: String,
    /// Since it started.
    pub elapsed: Duration,
    /// Its attempt, from 1.
    pub attempt: u32,
}

/// One engine of a pool run in the live view: its trials running now and finished so far.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EngineRow {
    /// The engine, as records name it.
    pub engine: String,
    /// Trials whose environment is on it now.
    pub running: u64,
    /// Its finished trials that were scored.
    pub scored: u64,
    /// Its finished trials that ended in an error.
    pub errored: u64,
}

/// Everything one frame shows.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Snapshot {
    /// Planned trials.
    pub total: u64,
    /// Finished with a reward.
    pub scored: u64,
    /// Finished without a reward (agent or infrastructure error).
    pub errored: u64,
    /// Running now, in the order they started.
    pub running: Vec<RunningRow>,
    /// Pulls and builds in progress: (task, last progress line).
    pub images: Vec<(String, String)>,
    /// Mean reward of the finished trials (errors count 0), once one finished.
    pub mean: Option<f64>,
    /// Since the job started.
    pub elapsed: Duration,
    /// Estimated time to the end.
    pub eta: Option<Duration>,
    /// A notice kept on screen (the interrupt).
    pub notice: Option<String>,
    /// On a pool run, each engine's load and finished trials so far, by engine name. Empty on
    /// one engine (its trials name none).
    pub engines: Vec<EngineRow>,
}

impl Snapshot {
    /// Trials neither finished nor running.
    pub fn pending(&self) -> u64 {
        self.total
            .saturating_sub(self.scored + self.errored + self.running.len() as u64)
    }
}

/// The estimated time left: the pending trials and the rest of the running ones, at the mean
/// duration of the trials finished in this run, spread over `concurrency` slots. `None` until
/// a trial has finished (nothing to estimate from).
pub fn eta(
    finished: &[Duration],
    running: &[Duration],
    pending: u64,
    concurrency: u32,
) -> Option<Duration> {
    if finished.is_empty() {
        return None;
    }
    let mean = finished.iter().map(Duration::as_secs_f64).sum::<f64>() / finished.len() as f64;
    let running_left: f64 = running
        .iter()
        .map(|e| (mean - e.as_secs_f64()).max(0.0))
        .sum();
    let work = running_left + pending as f64 * mean;
    let slots = f64::from(concurrency.max(1));
    Some(Duration::from_secs_f64(work / slots))
}

/// `1h02m03s`, `4m05s`, `12s`.
pub fn short_duration(d: Duration) -> String {
    let s = d.as_secs();
    match (s / 3600, s / 60 % 60, s % 60) {
        (0, 0, s) => format!("{s}s"),
        (0, m, s) => format!("{m}m{s:02}s"),
        (h, m, s) => format!("{h}h{m:02}m{s:02}s"),
    }
}

fn style(color: bool) -> Style {
    Style::new().force_styling(color).for_stderr()
}

/// The frame for a terminal of `rows` × `cols`: at most `rows - 1` lines (one is left for
/// the cursor), each cut to `cols` columns.
pub fn render(s: &Snapshot, rows: usize, cols: usize, color: bool) -> Vec<String> {
    let done = s.scored + s.errored;
    let width = 24usize;
    let filled = if s.total == 0 {
        width
    } else {
        (done as usize * width / s.total as usize).min(width)
    };
    let bar = format!(
        "[{}{}{}]",
        "=".repeat(filled.saturating_sub(1)),
        if filled > 0 { ">" } else { "" },
        " ".repeat(width - filled)
    );
    let mut head = format!(
        "{done}/{} trials {bar} {}",
        s.total,
        short_duration(s.elapsed)
    );
    if let Some(eta) = s.eta {
        head.push_str(&format!(" · ETA {}", short_duration(eta)));
    }
    if let Some(mean) = s.mean {
        head.push_str(&format!(" · mean {mean:.3}"));
    }
    let counts = format!(
        "{} · {} · {} · {}",
        style(color)
            .green()
            .apply_to(format!("scored {}", s.scored)),
        if s.errored > 0 {
            style(color)
                .red()
                .apply_to(format!("errored {}", s.errored))
        } else {
            style(color).apply_to(format!("errored {}", s.errored))
        },
        style(color)
            .cyan()
            .apply_to(format!("running {}", s.running.len())),
        style(color)
            .dim()
            .apply_to(format!("pending {}", s.pending()))
    );
    let mut top = vec![head, counts];
    if !s.engines.is_empty() {
        // One line for the pool, so running rows keep the room.
        let each: Vec<String> = s
            .engines
            .iter()
            .map(|row| {
                let mut text = format!(
                    "{} {} running, {} done",
                    row.engine,
                    row.running,
                    row.scored + row.errored
                );
                if row.errored > 0 {
                    text.push_str(&format!(" ({} errored)", row.errored));
                }
                text
            })
            .collect();
        top.push(format!("  engines: {}", each.join(" · ")));
    }
    let mut bottom: Vec<String> = s
        .images
        .iter()
        .map(|(task, line)| format!("  image of {task}: {line}"))
        .collect();
    if let Some(notice) = &s.notice {
        bottom.push(style(color).yellow().bold().apply_to(notice).to_string());
    }
    let budget = rows.saturating_sub(1 + top.len() + bottom.len());
    let name_width = s.running.iter().map(|r| r.trial.len()).max().unwrap_or(0);
    let phase_width = s.running.iter().map(|r| r.phase.len()).max().unwrap_or(0);
    let row = |r: &RunningRow| {
        let attempt = if r.attempt > 1 {
            format!(" (attempt {})", r.attempt)
        } else {
            String::new()
        };
        format!(
            "  {:<name_width$}  {:<phase_width$}  {:>8}{attempt}",
            r.trial,
            r.phase,
            short_duration(r.elapsed)
        )
    };
    if s.running.len() <= budget {
        top.extend(s.running.iter().map(row));
    } else {
        let shown = budget.saturating_sub(1);
        top.extend(s.running[..shown].iter().map(row));
        top.push(
            style(color)
                .dim()
                .apply_to(format!("  +{} more running", s.running.len() - shown))
                .to_string(),
        );
    }
    top.extend(bottom);
    top.truncate(rows.saturating_sub(1).max(1));
    top.into_iter()
        .map(|line| console::truncate_str(&line, cols, "…").into_owned())
        .collect()
}

/// How a finished trial reads: green with a full reward, yellow with a partial or zero one,
/// red without one.
pub fn finished_text(prefix: &str, result: &TrialResult, mean: f64, color: bool) -> String {
    let line = format!("{prefix} {}", super::live::outcome_line(result));
    let styled = match result.reward() {
        Some(r) if r >= 1.0 => style(color).green().apply_to(line),
        Some(_) => style(color).yellow().apply_to(line),
        None => style(color).red().apply_to(line),
    };
    format!("{styled}  (mean so far {mean:.3})")
}

/// The line non-terminal output prints when a trial finishes: `line`, the job.log line of
/// the event (stamped), coloured by outcome, then the progress: `[done/total, elapsed, mean
/// so far]`.
pub fn finished_line(
    line: &str,
    done: u64,
    total: u64,
    elapsed: Duration,
    result: &TrialResult,
    mean: f64,
    color: bool,
) -> String {
    let styled = match result.reward() {
        Some(r) if r >= 1.0 => style(color).green().apply_to(line),
        Some(_) => style(color).yellow().apply_to(line),
        None => style(color).red().apply_to(line),
    };
    // job.log's line names no engine; on a pool run the progress says where it ran.
    let on = result
        .engine
        .as_ref()
        .map(|e| format!(" on {e}"))
        .unwrap_or_default();
    format!(
        "{styled}  [{done}/{total} at +{}{on}, mean so far {mean:.3}]",
        short_duration(elapsed)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    fn running(n: usize) -> Vec<RunningRow> {
        let phases = ["environment", "agent setup", "agent run", "verifying"];
        (0..n)
            .map(|i| RunningRow {
                trial: format!("task-{i}__abc{i:04}"),
                phase: phases[i % phases.len()].to_owned(),
                elapsed: secs(30 + 97 * i as u64),
                attempt: if i == 2 { 2 } else { 1 },
            })
            .collect()
    }

    fn snapshot(n_running: usize) -> Snapshot {
        Snapshot {
            total: 40,
            scored: 10,
            errored: 2,
            running: running(n_running),
            images: Vec::new(),
            mean: Some(0.583),
            elapsed: secs(192),
            eta: Some(secs(460)),
            notice: None,
            engines: Vec::new(),
        }
    }

    #[test]
    fn eta_spreads_the_remaining_work_over_the_slots() {
        assert_eq!(eta(&[], &[secs(5)], 10, 4), None);
        // Mean 10 s; running: 4 s and 6 s left; 8 pending: 80 s; 90 s over 2 slots.
        assert_eq!(
            eta(&[secs(8), secs(12)], &[secs(6), secs(4), secs(30)], 8, 2),
            Some(secs(45))
        );
        assert_eq!(eta(&[secs(10)], &[], 0, 4), Some(secs(0)));
    }

    #[test]
    fn durations_read_short() {
        assert_eq!(short_duration(secs(12)), "12s");
        assert_eq!(short_duration(secs(245)), "4m05s");
        assert_eq!(short_duration(secs(3723)), "1h02m03s");
    }

    #[test]
    fn a_frame_with_room_for_every_trial() {
        let mut s = snapshot(4);
        s.images = vec![("task-9".into(), "pulling layer 3/7".into())];
        insta::assert_snapshot!(render(&s, 40, 100, false).join("\n"));
    }

    #[test]
    fn a_short_terminal_shows_what_fits_then_how_many_more() {
        let mut s = snapshot(16);
        s.notice = Some(
            "interrupted: removing containers and writing records; press Ctrl-C again to exit at once"
                .into(),
        );
        let frame = render(&s, 15, 80, false);
        assert_eq!(frame.len(), 14, "one row is left for the cursor");
        assert!(frame.iter().all(|l| console::measure_text_width(l) <= 80));
        insta::assert_snapshot!(frame.join("\n"));
    }

    #[test]
    fn a_pool_run_shows_each_engines_load_and_finished_trials_on_one_line() {
        let mut s = snapshot(2);
        assert!(
            !render(&s, 40, 100, false).join("\n").contains("engines:"),
            "no engine line on one engine"
        );
        let row = |engine: &str, running, scored, errored| EngineRow {
            engine: engine.into(),
            running,
            scored,
            errored,
        };
        s.engines = vec![
            row("ssh://127.0.0.1:2222", 2, 4, 0),
            row("tcp://127.0.0.1:2376", 0, 6, 2),
        ];
        let frame = render(&s, 40, 120, false);
        assert_eq!(
            frame[2],
            "  engines: ssh://127.0.0.1:2222 2 running, 4 done · tcp://127.0.0.1:2376 0 running, 8 done (2 errored)"
        );
        assert_eq!(frame.len(), 3 + 2, "the running rows follow");
        // Each finished trial says where it ran, in both modes.
        let mut ok = testkit::records::trial_result("t__1", "t", Some(1.0), None);
        ok.engine = Some("ssh://127.0.0.1:2222".into());
        let text = finished_text("[1/1]", &ok, 1.0, false);
        assert!(
            text.contains("t__1: reward 1 in 10.0s on ssh://127.0.0.1:2222"),
            "{text}"
        );
        let line = finished_line("trial t__1: scored", 1, 1, secs(3), &ok, 1.0, false);
        assert!(
            line.ends_with("[1/1 at +3s on ssh://127.0.0.1:2222, mean so far 1.000]"),
            "{line}"
        );
    }

    #[test]
    fn the_first_frame_has_no_eta_or_mean() {
        let s = Snapshot {
            total: 3,
            running: running(1),
            elapsed: secs(4),
            ..Snapshot::default()
        };
        insta::assert_snapshot!(render(&s, 24, 80, false).join("\n"));
    }

    #[test]
    fn colour_marks_outcomes_only_when_asked() {
        let plain = render(&snapshot(1), 24, 80, false).join("\n");
        assert!(!plain.contains('\x1b'));
        let colored = render(&snapshot(1), 24, 80, true).join("\n");
        assert!(colored.contains("\x1b[32mscored 10"), "{colored:?}");
        assert!(colored.contains("\x1b[31merrored 2"), "{colored:?}");
        let ok = testkit::records::trial_result("t__1", "t", Some(1.0), None);
        assert!(finished_text("[1/1]", &ok, 1.0, true).starts_with("\x1b[32m"));
        let err = testkit::records::trial_result("t__2", "t", None, Some("AgentSetupError"));
        assert!(finished_text("[1/1]", &err, 0.0, true).starts_with("\x1b[31m"));
    }

    #[test]
    fn lines_mode_prints_one_timestamped_line_per_finished_trial() {
        let results = [
            testkit::records::trial_result("hello__aaaaaaa", "hello", Some(1.0), None),
            testkit::records::trial_result("fix__bbbbbbb", "fix", Some(0.0), None),
            testkit::records::trial_result(
                "build__ccccccc",
                "build",
                None,
                Some("EnvironmentStartError"),
            ),
        ];
        let mut sum = 0.0;
        let lines: Vec<String> = results
            .iter()
            .enumerate()
            .map(|(i, r)| {
                sum += r.reward().unwrap_or(0.0);
                let done = i as u64 + 1;
                let timed = engine::events::TimedEvent {
                    at: chrono::DateTime::parse_from_rfc3339(&format!("2026-12-01T12:00:0{i}Z"))
                        .unwrap()
                        .to_utc(),
                    elapsed: secs(10 * done),
                    event: engine::events::Event::TrialFinished(Box::new(r.clone())),
                };
                let line = engine::event_text::line(&timed).unwrap();
                finished_line(
                    line.trim_end(),
                    done,
                    3,
                    timed.elapsed,
                    r,
                    sum / done as f64,
                    false,
                )
            })
            .collect();
        insta::assert_snapshot!(lines.join("\n"));
    }
}
