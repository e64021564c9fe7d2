//! The rules themselves (see the module docs of [`super`]).

use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use regex::Regex;

use super::shell::{commands, downloads, logical_lines, packages, unpinned};
use super::{Area, Finding, Severity};
use crate::config::{EnvironmentSection, NetworkMode, VerifierEnvironmentMode};
use crate::layout::task_verifier_mode;
use crate::task::Task;

/// Solution files shorter than this are not looked for in the instruction (a one-word
/// answer file would match any instruction that names the answer's format).
const MIN_LEAK_BYTES: usize = 32;

/// Every finding of the static rules on `task`, in file then line order.
pub fn lint_task(task: &Task) -> Vec<Finding> {
    let mut out = Vec::new();
    let toml = PathBuf::from("task.toml");
    for warning in &task.warnings {
        out.push(finding(
            "unknown-config-field",
            Area::Loads,
            Severity::Warn,
            &toml,
            None,
            warning.clone(),
        ));
    }
    legacy_fields(task, &mut out);
    image_pins(task, &mut out);
    dockerfile(task, &mut out);
    test_script(task, &mut out);
    solution_script(task, &mut out);
    instruction_leak(task, &mut out);
    harborignore(task, &mut out);
    out.sort_by(|a, b| (&a.path, a.line).cmp(&(&b.path, b.line)));
    out
}

fn finding(
    rule: &'static str,
    area: Area,
    severity: Severity,
    path: &Path,
    line: Option<usize>,
    message: String,
) -> Finding {
    Finding {
        rule,
        area,
        severity,
        path: path.to_path_buf(),
        line,
        message,
    }
}

/// The environments of the task with their `task.toml` section.
fn environments(task: &Task) -> Vec<(String, &EnvironmentSection)> {
    let mut envs = vec![("environment".to_owned(), &task.config.environment)];
    if let Some(env) = task.config.verifier.environment.as_deref() {
        envs.push(("verifier.environment".to_owned(), env));
    }
    for (i, step) in task.config.steps.iter().enumerate() {
        if let Some(env) = step.verifier.environment.as_deref() {
            envs.push((format!("steps[{i}].verifier.environment"), env));
        }
    }
    envs
}

/// Harbor's deprecated fields, each with the field that replaces it.
fn legacy_fields(task: &Task, out: &mut Vec<Finding>) {
    let toml = Path::new("task.toml");
    for (section, env) in environments(task) {
        let sized = [
            ("memory", &env.memory, env.effective_memory_mb()),
            ("storage", &env.storage, env.effective_storage_mb()),
        ];
        for (field, legacy, megabytes) in sized {
            let Some(legacy) = legacy else { continue };
            let fix = megabytes.map_or(String::new(), |mb| format!(" = {mb}"));
            out.push(finding(
                "legacy-config-field",
                Area::Loads,
                Severity::Warn,
                toml,
                None,
                format!(
                    "{section}.{field} = {legacy:?} is deprecated; write {field}_mb{fix} instead"
                ),
            ));
        }
        if let Some(allow) = env.allow_internet {
            let mode = if allow { "public" } else { "no-network" };
            out.push(finding("legacy-config-field", Area::Loads, Severity::Warn, toml, None,
                format!("{section}.allow_internet = {allow} is deprecated; write network_mode = \"{mode}\" instead")));
        }
    }
}

/// A `docker_image` pinned by tag only can change under the task (Harbor's `unpinned-image`).
fn image_pins(task: &Task, out: &mut Vec<Finding>) {
    for (section, env) in environments(task) {
        if let Some(image) = &env.docker_image
            && !image.contains("@sha256:")
        {
            out.push(finding("unpinned-image", Area::Reproducible, Severity::Warn, Path::new("task.toml"), None,
                format!("{section}.docker_image = {image:?} is pinned by tag only; add its digest (name:tag@sha256:...) so the image cannot change under the task")));
        }
    }
}

/// `.harborignore` files (Harbor 0.26): one outside `tests/` and `solution/` (a step's too)
/// applies to nothing (Harbor's `unused-harborignore`); one that excludes the test or solution
/// script makes the task unrunnable (the verifier and the oracle refuse it).
fn harborignore(task: &Task, out: &mut Vec<Finding>) {
    use crate::file_filter::{IGNORE_FILE, TaskFileFilter, in_scope};
    for (rel, path) in files_under(&task.dir, &task.dir) {
        if path.file_name().is_some_and(|n| n == IGNORE_FILE) {
            let dir = crate::digest::posix_relative(&task.dir, path.parent().unwrap_or(&path));
            if !in_scope(&dir, true) {
                out.push(finding("unused-harborignore", Area::Loads, Severity::Warn, &rel, None,
                    "ignore rules only apply inside tests/ or solution/ (a step's too); move or remove this file".to_owned()));
            }
        }
    }
    let Ok(filter) = TaskFileFilter::new(&task.dir) else {
        return;
    };
    // A set: every step's tests include the shared `tests/test.sh`.
    let mut required = std::collections::BTreeSet::from([
        task.tests_dir().join("test.sh"),
        task.solution_dir().join("solve.sh"),
    ]);
    for step in &task.config.steps {
        required.insert(task.step_solution_dir(&step.name).join("solve.sh"));
        required.extend(
            task.step_tests_dirs(&step.name)
                .iter()
                .map(|d| d.join("test.sh")),
        );
    }
    for path in required.into_iter().filter(|p| p.exists()) {
        if filter.is_excluded(&path).unwrap_or(false) {
            let rel = path.strip_prefix(&task.dir).unwrap_or(&path);
            out.push(finding("invalid-task-files", Area::Loads, Severity::Fail, rel, None,
                format!("{} is excluded by a {IGNORE_FILE}, so it is never uploaded and the task cannot run; remove the rule that matches it", rel.display())));
        }
    }
}

/// `environment/Dockerfile`: unpinned installs, downloads at build time, and COPY/ADD of
/// grading or solution files into the agent's image (Harbor's `agent-image-test-leak`).
fn dockerfile(task: &Task, out: &mut Vec<Finding>) {
    static LEAK: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"(?:^|/)(?:solution/solve\.sh|tests/(?:test\.sh|test_[^/]+\.py))$")
            .expect("compiles")
    });
    let rel = PathBuf::from("environment/Dockerfile");
    let Ok(text) = std::fs::read_to_string(task.dir.join(&rel)) else {
        return;
    };
    for (line, logical) in logical_lines(&text) {
        let Some((instruction, value)) = logical.trim().split_once(char::is_whitespace) else {
            continue;
        };
        let value = strip_options(value.trim());
        match instruction.to_ascii_uppercase().as_str() {
            "RUN" => {
                let shell = exec_form(&value).map_or(value.clone(), |words| words.join(" "));
                for (command, _) in commands(&shell) {
                    if packages(&command).iter().any(|p| unpinned(p)) && !constrained(&command) {
                        out.push(unpinned_finding(&rel, line));
                    }
                }
            }
            "COPY" | "ADD" => {
                let words = exec_form(&value)
                    .unwrap_or_else(|| value.split_whitespace().map(str::to_owned).collect());
                let sources = &words[..words.len().saturating_sub(1)];
                if sources.iter().any(|s| LEAK.is_match(s)) {
                    out.push(finding("agent-image-test-leak", Area::Leaks, Severity::Fail, &rel, Some(line),
                        "COPY/ADD puts a grading or solution file into the agent's image; keep tests/ and solution/ out of environment/".into()));
                }
            }
            _ => {}
        }
    }
}

/// `--from=x --chown=y` and the like, before a Dockerfile instruction's arguments.
fn strip_options(value: &str) -> String {
    let mut rest = value;
    while rest.starts_with("--") {
        rest = rest
            .split_once(char::is_whitespace)
            .map_or("", |(_, r)| r.trim_start());
    }
    rest.to_owned()
}

/// The words of a JSON exec form (`["a", "b"]`), if `value` is one.
fn exec_form(value: &str) -> Option<Vec<String>> {
    value
        .starts_with('[')
        .then(|| serde_json::from_str(value).ok())
        .flatten()
}

fn constrained(command: &[String]) -> bool {
    command.iter().any(|a| {
        let flag = a.split('=').next().unwrap_or(a);
        flag == "-c" || flag == "--constraint"
    })
}

fn unpinned_finding(path: &Path, line: usize) -> Finding {
    finding(
        "unpinned-python-dependency",
        Area::Reproducible,
        Severity::Warn,
        path,
        Some(line),
        "pin Python dependencies to exact versions or install from a requirements/constraint file"
            .into(),
    )
}

/// The network the tests run under: `[verifier].network_mode`, else the baseline of the
/// environment they run in (the separate verifier's, else the agent's).
pub fn verifier_network(task: &Task) -> NetworkMode {
    let config = &task.config;
    let separate = task_verifier_mode(config) == VerifierEnvironmentMode::Separate;
    let baseline = match config.verifier.environment.as_deref() {
        Some(env) if separate => env.effective_network(),
        _ => config.environment.effective_network(),
    };
    config.verifier.network_mode.unwrap_or(baseline)
}

/// `tests/test.sh`: what it fetches from the internet when it runs. A verifier that needs the
/// network where it has none fails every trial; one that has network depends on the internet
/// staying the same (Harbor's `verifier-runtime-install`, `verifier-network-download`).
fn test_script(task: &Task, out: &mut Vec<Finding>) {
    let rel = PathBuf::from("tests/test.sh");
    let Ok(text) = std::fs::read_to_string(task.dir.join(&rel)) else {
        return;
    };
    let offline = verifier_network(task) == NetworkMode::NoNetwork;
    for (line, logical) in logical_lines(&text) {
        let found = commands(&logical);
        for (index, (command, operator)) in found.iter().enumerate() {
            let following = match (operator.as_str(), found.get(index + 1)) {
                ("|", Some((next, _))) => next.clone(),
                _ => Vec::new(),
            };
            let local = command
                .iter()
                .any(|a| a == "--offline" || a == "--no-index");
            let installs = !local && !packages(command).is_empty();
            let apt = matches!(
                command.first().map(String::as_str),
                Some("apt-get" | "apt" | "apk")
            ) && command
                .iter()
                .any(|a| a == "install" || a == "add" || a == "update");
            if installs || apt || downloads(command, &following) {
                let what = command.join(" ");
                let (rule, fetch) = if installs || apt {
                    ("verifier-runtime-install", "installs packages")
                } else {
                    ("verifier-network-download", "downloads")
                };
                let (severity, message) = if offline {
                    (
                        Severity::Fail,
                        format!(
                            "the verifier {fetch} at test time ({what}) but runs without network; bake it into the image"
                        ),
                    )
                } else {
                    (
                        Severity::Warn,
                        format!(
                            "the verifier {fetch} at test time ({what}); bake it into the image so results do not depend on the internet"
                        ),
                    )
                };
                out.push(finding(
                    rule,
                    Area::Reproducible,
                    severity,
                    &rel,
                    Some(line),
                    message,
                ));
            }
            if packages(command).iter().any(|p| unpinned(p)) && !constrained(command) {
                out.push(unpinned_finding(&rel, line));
            }
        }
    }
}

/// `solution/solve.sh`: unpinned installs only (Harbor lints it for that too).
fn solution_script(task: &Task, out: &mut Vec<Finding>) {
    let rel = PathBuf::from("solution/solve.sh");
    let Ok(text) = std::fs::read_to_string(task.dir.join(&rel)) else {
        return;
    };
    for (line, logical) in logical_lines(&text) {
        for (command, _) in commands(&logical) {
            if packages(&command).iter().any(|p| unpinned(p)) && !constrained(&command) {
                out.push(unpinned_finding(&rel, line));
            }
        }
    }
}

/// The instruction must not contain a solution file.
fn instruction_leak(task: &Task, out: &mut Vec<Finding>) {
    let instruction = normalise(&task.instruction);
    for (rel, path) in files_under(&task.solution_dir(), &task.dir) {
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let text = normalise(&text);
        if text.len() >= MIN_LEAK_BYTES && instruction.contains(&text) {
            out.push(finding(
                "instruction-contains-solution",
                Area::Leaks,
                Severity::Fail,
                Path::new("instruction.md"),
                None,
                format!(
                    "the instruction contains the solution file {}; the agent reads the answer",
                    rel.display()
                ),
            ));
        }
    }
}

/// Text with line ends and surrounding blank space made uniform.
fn normalise(text: &str) -> String {
    text.replace("\r\n", "\n").trim().to_owned()
}

/// Regular files under `dir` (recursively, symlinks not followed), relative to `base`.
pub fn files_under(dir: &Path, base: &Path) -> Vec<(PathBuf, PathBuf)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(current) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&current) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            let path = entry.path();
            if kind.is_dir() {
                stack.push(path);
            } else if kind.is_file() {
                let rel = path.strip_prefix(base).unwrap_or(&path).to_path_buf();
                out.push((rel, path));
            }
        }
    }
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_files::task_dir;

    fn lint(files: &[(&str, &str)]) -> Vec<Finding> {
        let mut all = vec![
            ("instruction.md", "Write the answer to /app/answer.txt.\n"),
            ("environment/Dockerfile", "FROM runner-base:bookworm-py\n"),
            (
                "tests/test.sh",
                "#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n",
            ),
            ("task.toml", ""),
        ];
        for (path, text) in files {
            all.retain(|(p, _)| p != path);
            all.push((path, text));
        }
        let dir = task_dir(&all);
        lint_task(&Task::read(dir.path()).unwrap())
    }

    fn rules(found: &[Finding]) -> Vec<(&'static str, Severity)> {
        found.iter().map(|f| (f.rule, f.severity)).collect()
    }

    #[test]
    fn a_harborignore_out_of_scope_warns_and_one_excluding_the_test_script_fails() {
        let found = lint(&[
            ("environment/.harborignore", "*.txt\n"),
            ("tests/.harborignore", "test.sh\n"),
        ]);
        assert_eq!(
            rules(&found),
            [
                ("unused-harborignore", Severity::Warn),
                ("invalid-task-files", Severity::Fail)
            ],
            "{found:?}"
        );
        assert_eq!(found[1].path, Path::new("tests/test.sh"));
    }

    #[test]
    fn a_plain_task_has_no_finding() {
        assert!(lint(&[]).is_empty(), "{:?}", lint(&[]));
    }

    #[test]
    fn downloads_at_test_time_fail_without_network_and_warn_with_it() {
        let script =
            "#!/bin/bash\ncurl -LsSf https://astral.sh/uv/install.sh | sh\npip install pytest\n";
        let offline = lint(&[
            ("tests/test.sh", script),
            ("task.toml", "[verifier]\nnetwork_mode = \"no-network\"\n"),
        ]);
        assert_eq!(
            rules(&offline),
            [
                ("verifier-network-download", Severity::Fail),
                ("verifier-runtime-install", Severity::Fail),
                ("unpinned-python-dependency", Severity::Warn),
            ]
        );
        assert_eq!(offline[0].line, Some(2));
        let online = lint(&[("tests/test.sh", script)]);
        assert!(
            online.iter().take(2).all(|f| f.severity == Severity::Warn),
            "{online:?}"
        );
        // The environment's baseline counts when [verifier] says nothing.
        let baseline = lint(&[
            ("tests/test.sh", script),
            (
                "task.toml",
                "[environment]\nnetwork_mode = \"no-network\"\n",
            ),
        ]);
        assert_eq!(baseline[0].severity, Severity::Fail);
    }

    #[test]
    fn leaks_legacy_fields_and_pins_are_named() {
        let found = lint(&[
            (
                "environment/Dockerfile",
                "FROM runner-base:bookworm-py\nCOPY solution/solve.sh /opt/\nRUN pip install requests\n",
            ),
            (
                "task.toml",
                "[environment]\nmemory = \"2G\"\nstorage = \"1G\"\nallow_internet = false\ndocker_image = \"python:3.12\"\n",
            ),
            (
                "solution/solve.sh",
                "#!/bin/bash\necho 'the secret answer is forty-two, always' > /app/answer.txt\n",
            ),
            (
                "instruction.md",
                "Run this:\n#!/bin/bash\necho 'the secret answer is forty-two, always' > /app/answer.txt\n",
            ),
        ]);
        let names: Vec<&str> = found.iter().map(|f| f.rule).collect();
        assert_eq!(
            names,
            [
                "agent-image-test-leak",
                "unpinned-python-dependency",
                "instruction-contains-solution",
                "legacy-config-field",
                "legacy-config-field",
                "legacy-config-field",
                "unpinned-image"
            ],
            "{found:?}"
        );
        assert!(
            found[3].message.contains("memory_mb = 2048"),
            "{}",
            found[3].message
        );
        assert!(
            found[4]
                .message
                .contains("storage = \"1G\" is deprecated; write storage_mb = 1024"),
            "{}",
            found[4].message
        );
        assert!(
            found[5].message.contains("network_mode = \"no-network\""),
            "{}",
            found[5].message
        );
    }
}
