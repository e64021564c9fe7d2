//! Choosing a dataset's tasks as Harbor does (`DatasetConfig._filter_task_ids`): keep the
//! tasks any `--include-task-name` glob matches, drop those any `--exclude-task-name` glob
//! matches, then keep the first `--n-tasks`. Globs are Python's `fnmatch` (`*`, `?`, `[seq]`,
//! `[!seq]`; `*` crosses `/`; case-sensitive), matched against a task's full name, its short
//! name (after `/`) and its directory name, so patterns written for Harbor's local datasets
//! (which match directory names) work here too.
//!
//! Stricter than Harbor in one way: every pattern must match at least one task, so a typo in
//! `-x` is an error instead of a silent run of everything.

/// What the user asked for.
#[derive(Debug, Clone, Default, PartialEq, Eq, clap::Args)]
pub struct SelectionArgs {
    /// Run only the tasks whose name matches this glob (`*`, `?`, `[abc]`, `[!abc]`);
    /// repeatable or comma-separated, a task matching any of them is kept.
    #[arg(
        short = 'i',
        long = "include-task-name",
        value_name = "GLOB",
        env = "RUNNER_INCLUDE_TASK_NAME",
        value_delimiter = ','
    )]
    pub include: Vec<String>,
    /// Leave out the tasks whose name matches this glob; repeatable or comma-separated,
    /// applied after --include-task-name.
    #[arg(
        short = 'x',
        long = "exclude-task-name",
        value_name = "GLOB",
        env = "RUNNER_EXCLUDE_TASK_NAME",
        value_delimiter = ','
    )]
    pub exclude: Vec<String>,
    /// Run at most this many tasks: the first N, in name order, after the filters.
    #[arg(short = 'l', long = "n-tasks", value_name = "N", env = "RUNNER_N_TASKS",
          value_parser = clap::value_parser!(u32).range(1..))]
    pub n_tasks: Option<u32>,
    /// Harbor's registry task (`org/name[@ref]`): refused, runner reads tasks from --path only.
    #[arg(short = 't', long = "task", value_name = "ORG/NAME", hide = true)]
    pub registry_task: Option<String>,
}

/// The names one task answers to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskNames<'a> {
    /// `[task].name` or the directory name.
    pub name: &'a str,
    /// The directory name.
    pub dir_name: &'a str,
}

impl TaskNames<'_> {
    fn matches(&self, pattern: &str) -> bool {
        let short = self.name.rsplit('/').next().unwrap_or(self.name);
        [self.name, short, self.dir_name]
            .iter()
            .any(|name| fnmatch(name, pattern))
    }
}

/// A selection that cannot be honoured, naming the flag.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectionError {
    /// A pattern matched no task.
    #[error(
        "{flag} {pattern:?} matches no task of the {available} in the dataset (e.g. {examples}); names are matched with * ? [..] as in Harbor"
    )]
    NoMatch {
        /// `--include-task-name` or `--exclude-task-name`.
        flag: &'static str,
        /// The pattern.
        pattern: String,
        /// How many tasks there are.
        available: usize,
        /// A few task names.
        examples: String,
    },
    /// Everything was excluded.
    #[error("--exclude-task-name leaves no task to run")]
    NothingLeft,
    /// `-t/--task`.
    #[error(
        "--task {0:?}: registry tasks are not supported; point --path at the task directory and choose with --include-task-name"
    )]
    RegistryTask(String),
}

impl SelectionArgs {
    /// Whether anything is selected (the default keeps every task).
    pub fn is_empty(&self) -> bool {
        self.include.is_empty()
            && self.exclude.is_empty()
            && self.n_tasks.is_none()
            && self.registry_task.is_none()
    }
}

/// The indices of the tasks kept, in the order given.
pub fn select(tasks: &[TaskNames<'_>], args: &SelectionArgs) -> Result<Vec<usize>, SelectionError> {
    if let Some(task) = &args.registry_task {
        return Err(SelectionError::RegistryTask(task.clone()));
    }
    let no_match = |flag, pattern: &str| {
        let mut names: Vec<&str> = tasks.iter().map(|t| t.name).collect();
        names.sort_unstable();
        SelectionError::NoMatch {
            flag,
            pattern: pattern.to_owned(),
            available: tasks.len(),
            examples: names[..names.len().min(5)].join(", "),
        }
    };
    for (flag, patterns) in [
        ("--include-task-name", &args.include),
        ("--exclude-task-name", &args.exclude),
    ] {
        if let Some(pattern) = patterns
            .iter()
            .find(|p| !tasks.iter().any(|t| t.matches(p)))
        {
            return Err(no_match(flag, pattern));
        }
    }
    let mut kept: Vec<usize> = (0..tasks.len())
        .filter(|&i| args.include.is_empty() || args.include.iter().any(|p| tasks[i].matches(p)))
        .filter(|&i| !args.exclude.iter().any(|p| tasks[i].matches(p)))
        .collect();
    if kept.is_empty() {
        return Err(SelectionError::NothingLeft);
    }
    if let Some(n) = args.n_tasks {
        kept.truncate(n as usize);
    }
    Ok(kept)
}

/// Python's `fnmatch.fnmatchcase`: `*` any run (including `/`), `?` one character, `[seq]`
/// one of, `[!seq]` none of (ranges `a-z`); a `[` without its `]` is literal.
pub fn fnmatch(name: &str, pattern: &str) -> bool {
    let name: Vec<char> = name.chars().collect();
    let pattern: Vec<char> = pattern.chars().collect();
    // Iterative matching with one backtrack point for the last `*` (linear in practice, and
    // never exponential).
    let (mut n, mut p) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while n < name.len() {
        if p < pattern.len() {
            match pattern[p] {
                '*' => {
                    star = Some((p, n));
                    p += 1;
                    continue;
                }
                '?' => {
                    n += 1;
                    p += 1;
                    continue;
                }
                '[' => {
                    if let Some((matched, next)) = class(&pattern, p, name[n]) {
                        if matched {
                            n += 1;
                            p = next;
                            continue;
                        }
                    } else if name[n] == '[' {
                        n += 1;
                        p += 1;
                        continue;
                    }
                }
                c if c == name[n] => {
                    n += 1;
                    p += 1;
                    continue;
                }
                _ => {}
            }
        }
        match star {
            Some((sp, sn)) => {
                star = Some((sp, sn + 1));
                p = sp + 1;
                n = sn + 1;
            }
            None => return false,
        }
    }
    pattern[p..].iter().all(|&c| c == '*')
}

/// The class starting at `pattern[open] == '['`: whether `c` is in it and the index after its
/// `]`; `None` when it is not closed (then `[` is literal, as in Python).
fn class(pattern: &[char], open: usize, c: char) -> Option<(bool, usize)> {
    let mut i = open + 1;
    let negated = pattern.get(i) == Some(&'!');
    if negated {
        i += 1;
    }
    let start = i;
    let mut found = false;
    while i < pattern.len() {
        // A `]` right after `[` or `[!` is a member, not the end.
        if pattern[i] == ']' && i > start {
            return Some((found != negated, i + 1));
        }
        if i + 2 < pattern.len() && pattern[i + 1] == '-' && pattern[i + 2] != ']' {
            found |= pattern[i] <= c && c <= pattern[i + 2];
            i += 3;
        } else {
            found |= pattern[i] == c;
            i += 1;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnmatch_follows_python() {
        let cases = [
            ("hello-world", "hello-*", true),
            ("hello-world", "*world", true),
            ("hello-world", "hello", false),
            ("org/task", "org/*", true),
            ("org/a/b", "org*b", true),
            ("task-1", "task-?", true),
            ("task-10", "task-?", false),
            ("task-b", "task-[abc]", true),
            ("task-d", "task-[abc]", false),
            ("task-d", "task-[!abc]", true),
            ("task-5", "task-[0-9]", true),
            ("a]", "a[]]", true),
            ("a[", "a[", true),
            ("Hello", "hello", false),
            ("", "*", true),
            ("abc", "a*b*c*", true),
            ("abd", "a*b*c", false),
            ("aaaaaaaaaaaaaaaaaaaaaaab", "*a*a*a*a*a*a*c", false),
        ];
        for (name, pattern, expected) in cases {
            assert_eq!(fnmatch(name, pattern), expected, "{name} ~ {pattern}");
        }
    }

    fn names() -> Vec<TaskNames<'static>> {
        [
            ("org/alpha", "alpha"),
            ("org/beta", "beta-dir"),
            ("gamma", "gamma"),
            ("delta-1", "delta-1"),
        ]
        .into_iter()
        .map(|(name, dir_name)| TaskNames { name, dir_name })
        .collect()
    }

    fn args(include: &[&str], exclude: &[&str], n: Option<u32>) -> SelectionArgs {
        SelectionArgs {
            include: include.iter().map(|s| (*s).to_owned()).collect(),
            exclude: exclude.iter().map(|s| (*s).to_owned()).collect(),
            n_tasks: n,
            registry_task: None,
        }
    }

    #[test]
    fn include_then_exclude_then_the_first_n() {
        let tasks = names();
        assert_eq!(select(&tasks, &args(&[], &[], None)), Ok(vec![0, 1, 2, 3]));
        assert_eq!(select(&tasks, &args(&["org/*"], &[], None)), Ok(vec![0, 1]));
        // Short names and directory names match too.
        assert_eq!(select(&tasks, &args(&["beta"], &[], None)), Ok(vec![1]));
        assert_eq!(select(&tasks, &args(&["beta-dir"], &[], None)), Ok(vec![1]));
        assert_eq!(
            select(&tasks, &args(&["*a*", "delta-?"], &["gamma"], None)),
            Ok(vec![0, 1, 3])
        );
        assert_eq!(select(&tasks, &args(&[], &["org/*"], Some(1))), Ok(vec![2]));
        assert_eq!(select(&tasks, &args(&[], &[], Some(3))), Ok(vec![0, 1, 2]));
        assert_eq!(
            select(&tasks, &args(&[], &[], Some(9))),
            Ok(vec![0, 1, 2, 3])
        );
    }

    #[test]
    fn a_pattern_matching_nothing_names_its_flag() {
        let tasks = names();
        let err = select(&tasks, &args(&["alpha", "epsilon*"], &[], None)).unwrap_err();
        let text = err.to_string();
        assert!(
            text.starts_with("--include-task-name \"epsilon*\" matches no task of the 4"),
            "{text}"
        );
        assert!(text.contains("delta-1, gamma, org/alpha"), "{text}");
        let err = select(&tasks, &args(&[], &["zeta"], None)).unwrap_err();
        assert!(
            err.to_string().starts_with("--exclude-task-name \"zeta\""),
            "{err}"
        );
        let err = select(&tasks, &args(&["gamma"], &["gamma"], None)).unwrap_err();
        assert_eq!(err, SelectionError::NothingLeft);
        let mut registry = args(&[], &[], None);
        registry.registry_task = Some("org/x".into());
        assert!(
            select(&tasks, &registry)
                .unwrap_err()
                .to_string()
                .starts_with("--task \"org/x\": registry tasks are not supported")
        );
    }
}
