//! The validation report: per-rule outcomes with offending items, and the reported figures.
//! Its JSON form (`--format json`) is a stable schema documented in `docs/leaderboard-preflight.md`.

use std::collections::BTreeMap;

use serde::Serialize;
pub use stats::Interval;

use super::rule::{Rule, Verdict};
use super::trial::TrialFacts;

/// The `schema` value of the JSON report; bumped on incompatible changes (v2: the two
/// verdicts, the `not_recorded` status, `valid` decided by the verdict asked for).
pub const REPORT_SCHEMA: &str = "runner.validate-submission/v2";

/// One offending item of a rule.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Violation {
    /// The rule broken.
    #[serde(skip)]
    pub rule: Rule,
    /// The file at fault, as a path under a given job dir (or the metadata file), if any.
    pub file: Option<String>,
    /// 1-based line in `file`, when known.
    pub line: Option<usize>,
    /// What is wrong and what to do. Never contains a secret value.
    pub message: String,
    /// An evidence rule's note that the records do not say (a Harbor-written job), not that
    /// they show a problem.
    #[serde(skip)]
    pub not_recorded: bool,
}

impl Violation {
    /// A violation of `rule` at `file`.
    pub fn new(rule: Rule, file: Option<String>, message: impl Into<String>) -> Violation {
        Violation {
            rule,
            file,
            line: None,
            message: message.into(),
            not_recorded: false,
        }
    }

    /// An evidence rule's note that `file`'s records do not say what the rule needs.
    pub fn not_recorded(rule: Rule, file: Option<String>, message: impl Into<String>) -> Violation {
        Violation {
            not_recorded: true,
            ..Violation::new(rule, file, message)
        }
    }
}

/// Trial names grouped by job (its index) and offence: `offences` gives what is wrong with one
/// trial, so a rule can report once per job and offence, with the trial count, instead of once
/// per trial.
pub(crate) fn trials_by_offence<'t, K: Ord, I: IntoIterator<Item = K>>(
    trials: &'t [TrialFacts],
    offences: impl Fn(&'t TrialFacts) -> I,
) -> BTreeMap<(usize, K), Vec<&'t str>> {
    let mut grouped: BTreeMap<(usize, K), Vec<&'t str>> = BTreeMap::new();
    for trial in trials {
        for offence in offences(trial) {
            grouped
                .entry((trial.job, offence))
                .or_default()
                .push(&trial.name);
        }
    }
    grouped
}

/// The trials a violation is about, as its message starts: `trial NAME` for one, else `N
/// trials, e.g. FIRST,`.
pub(crate) fn trials_named(names: &[&str]) -> String {
    let example = names.first().copied().unwrap_or_default();
    match names.len() {
        1 => format!("trial {example}"),
        n => format!("{n} trials, e.g. {example},"),
    }
}

/// Whether a rule held.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// No violation.
    Passed,
    /// At least one violation.
    Failed,
    /// Not checked: it needs an option that was not given.
    Skipped,
    /// An evidence rule the records cannot answer (a Harbor-written job records none of it):
    /// shown, and failing only with `--require-evidence`.
    NotRecorded,
}

/// The outcome of one rule.
#[derive(Debug, Clone, Serialize)]
pub struct RuleOutcome {
    /// The rule's stable name.
    pub rule: &'static str,
    /// What it requires.
    pub description: &'static str,
    /// The verdict it counts toward.
    pub verdict: Verdict,
    /// Passed, failed, skipped or not recorded.
    pub status: Status,
    /// Why it was skipped, when it was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skipped_because: Option<&'static str>,
    /// Every offending item (for `not_recorded`: what does not say, per job).
    pub violations: Vec<Violation>,
}

/// One verdict over the rules that count toward it.
#[derive(Debug, Clone, Serialize)]
pub struct VerdictSummary {
    /// True iff none of its rules failed (and, for evidence, none is not recorded).
    pub valid: bool,
    /// True iff this verdict decides `valid` and the exit code.
    pub decides: bool,
    /// Its rules that failed.
    pub failed: Vec<&'static str>,
    /// Its rules the records cannot answer (evidence only).
    pub not_recorded: Vec<&'static str>,
}

/// The two verdicts of a report.
#[derive(Debug, Clone, Serialize)]
pub struct Verdicts {
    /// The rules the leaderboard applies, and the anti-gaming checks.
    pub leaderboard: VerdictSummary,
    /// runner's own evidence.
    pub evidence: VerdictSummary,
}

/// The figures a leaderboard would publish for the submission.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Figures {
    /// Job dirs validated together.
    pub n_jobs: usize,
    /// Tasks with at least one trial.
    pub n_tasks: usize,
    /// Trial dirs found.
    pub n_trials: usize,
    /// Trials with an exception recorded.
    pub n_errored: usize,
    /// Trials with reward > 0.
    pub n_successes: usize,
    /// Successes over all trials (errored trials count as 0), a fraction in [0, 1].
    pub accuracy: f64,
    /// Trials the jobs planned (`lock.json`), each job once; at least `n_trials`.
    pub n_planned_trials: usize,
    /// The leaderboard's accuracy: successes over every planned trial (errored and missing
    /// count as 0).
    pub leaderboard_accuracy: f64,
    /// Standard error of `accuracy` as the leaderboard computes it; null with a 1-trial task.
    pub accuracy_stderr: Option<f64>,
    /// Mean reward over all trials (missing rewards as 0), as Harbor's Mean metric.
    pub mean_reward: f64,
    /// 95% interval of `accuracy`, clustered by task (see `interval`); null with one task.
    pub accuracy_ci: Option<Interval>,
    /// 95% interval of `mean_reward`, clustered by task; null with one task.
    pub mean_reward_ci: Option<Interval>,
    /// Unbiased pass@k by k; empty when rewards are not all 0/1.
    pub pass_at_k: BTreeMap<String, f64>,
    /// 95% interval of each pass@k, clustered by task; empty with one task.
    pub pass_at_k_ci: BTreeMap<String, Interval>,
    /// How the `*_ci` intervals were computed.
    pub interval: IntervalMethod,
    /// Trials per task name.
    pub trials_per_task: BTreeMap<String, usize>,
    /// Errored trials by exception type.
    pub errored_by_exception_type: BTreeMap<String, usize>,
    /// Per job run through runner's LLM bridge: the models declared and actually called.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub models_called: Vec<super::models::JobModels>,
}

/// How the figures' intervals were computed, so anyone can reproduce them.
#[derive(Debug, Clone, Default, Serialize)]
pub struct IntervalMethod {
    /// Confidence level, 0.95.
    pub level: f64,
    /// `cluster bootstrap over tasks, percentile`: tasks resampled with all their trials.
    pub method: &'static str,
    /// Bootstrap resamples.
    pub resamples: usize,
    /// Seed of the resampling; the same seed gives the same intervals.
    pub seed: u64,
}

/// The whole report.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// Always [`REPORT_SCHEMA`].
    pub schema: &'static str,
    /// The deciding verdict: the leaderboard's, and with `require_evidence` the evidence's too.
    pub valid: bool,
    /// True when every evidence rule must pass (`--require-evidence`).
    pub require_evidence: bool,
    /// Both verdicts.
    pub verdicts: Verdicts,
    /// The job dirs, as given.
    pub jobs: Vec<String>,
    /// The agent the trials record (the most common, when they disagree).
    pub agent: Option<super::SubmittedAgent>,
    /// One outcome per rule, in a fixed order.
    pub rules: Vec<RuleOutcome>,
    /// The reported figures.
    pub figures: Figures,
}

impl Report {
    /// Assembles a report from violations; rules in `skipped` are reported as skipped.
    pub fn new(
        jobs: Vec<String>,
        mut violations: Vec<Violation>,
        skipped: &[(Rule, &'static str)],
        figures: Figures,
        require_evidence: bool,
    ) -> Report {
        // Stable output: rule order, then file, then line.
        violations.sort_by(|a, b| (a.rule, &a.file, a.line).cmp(&(b.rule, &b.file, b.line)));
        let rules: Vec<RuleOutcome> = Rule::ALL
            .iter()
            .map(|&rule| {
                let skip = skipped
                    .iter()
                    .find(|(r, _)| *r == rule)
                    .map(|(_, why)| *why);
                let mine: Vec<Violation> = violations
                    .iter()
                    .filter(|v| v.rule == rule)
                    .cloned()
                    .collect();
                let status = match (skip, mine.is_empty()) {
                    (Some(_), _) => Status::Skipped,
                    (None, true) => Status::Passed,
                    (None, false) if mine.iter().all(|v| v.not_recorded) => Status::NotRecorded,
                    (None, false) => Status::Failed,
                };
                RuleOutcome {
                    rule: rule.name(),
                    description: rule.description(),
                    verdict: rule.verdict(),
                    status,
                    skipped_because: skip,
                    violations: mine,
                }
            })
            .collect();
        let summary = |verdict: Verdict, decides: bool| {
            let of = |status: Status| -> Vec<&'static str> {
                rules
                    .iter()
                    .filter(|r| r.verdict == verdict && r.status == status)
                    .map(|r| r.rule)
                    .collect()
            };
            let (failed, not_recorded) = (of(Status::Failed), of(Status::NotRecorded));
            VerdictSummary {
                valid: failed.is_empty() && not_recorded.is_empty(),
                decides,
                failed,
                not_recorded,
            }
        };
        let verdicts = Verdicts {
            leaderboard: summary(Verdict::Leaderboard, true),
            evidence: summary(Verdict::Evidence, require_evidence),
        };
        let valid = verdicts.leaderboard.valid && (!require_evidence || verdicts.evidence.valid);
        Report {
            schema: REPORT_SCHEMA,
            valid,
            require_evidence,
            verdicts,
            jobs,
            agent: None,
            rules,
            figures,
        }
    }

    /// The outcome of `rule`.
    pub fn outcome(&self, rule: Rule) -> &RuleOutcome {
        self.rules
            .iter()
            .find(|r| r.rule == rule.name())
            .expect("every rule has an outcome")
    }

    /// Names of the rules that failed, of either verdict.
    pub fn failed_rules(&self) -> Vec<&'static str> {
        self.rules
            .iter()
            .filter(|r| r.status == Status::Failed)
            .map(|r| r.rule)
            .collect()
    }

    /// Names of the rules that make the deciding verdict invalid: failed leaderboard rules,
    /// and with `require_evidence` evidence rules failed or not recorded.
    pub fn deciding_failures(&self) -> Vec<&'static str> {
        let mut names = self.verdicts.leaderboard.failed.clone();
        if self.require_evidence {
            names.extend(&self.verdicts.evidence.failed);
            names.extend(&self.verdicts.evidence.not_recorded);
        }
        names
    }
}
