//! Scripts that solve `tasks/examples`: for each example a fragment of its instruction and
//! shell commands that solve it, served as a two-turn conversation in the dialect an agent
//! speaks ([`Dialect`]). The end-to-end tests use them, and so does the `scripted-upstream`
//! example binary a user starts to try the runner without a provider.

use serde_json::json;

use super::script::{Reply, Script, Usage};

/// How an agent expects to be told its commands, and how it is told to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// The reference agent's model mode: a ```` ```bash ```` block, then an answer without
    /// one (which submits).
    BashBlock,
    /// mini-swe-agent's `mini_textbased` config: a ```` ```mswea_bash_command ```` block per
    /// turn, then its completion command.
    MiniTextBased,
    /// mini-swe-agent's default `mini` config: a call of its `bash` tool per turn
    /// (`tool_calls`), then its completion command as a tool call.
    MiniToolCalls,
    /// Claude Code: a call of its `Bash` tool, then a final answer without one.
    ClaudeCode,
    /// Codex with `unified_exec`: a call of its `exec_command` tool, then a final answer.
    Codex,
}

/// The command mini-swe-agent recognises as "submit" when it is the first output line.
const MINI_SUBMIT: &str = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT";

impl Dialect {
    /// Its name on the `scripted-upstream` command line.
    pub fn name(self) -> &'static str {
        match self {
            Dialect::BashBlock => "bash-block",
            Dialect::MiniTextBased => "mini-textbased",
            Dialect::MiniToolCalls => "mini-tool-calls",
            Dialect::ClaudeCode => "claude-code",
            Dialect::Codex => "codex",
        }
    }

    /// Every dialect, for `--dialect` and its help.
    pub const ALL: [Dialect; 5] = [
        Dialect::BashBlock,
        Dialect::MiniTextBased,
        Dialect::MiniToolCalls,
        Dialect::ClaudeCode,
        Dialect::Codex,
    ];

    /// The two replies of a conversation that runs `commands` and then finishes, each
    /// reporting `usage`.
    pub fn replies(self, commands: &str, usage: Usage) -> Vec<Reply> {
        let (run, finish) = match self {
            Dialect::BashBlock => (
                Reply::text(format!("I will do it.\n```bash\n{commands}\n```")),
                Reply::text("Done."),
            ),
            Dialect::MiniTextBased => (
                Reply::text(format!(
                    "THOUGHT: I run the commands that solve it.\n\n```mswea_bash_command\n{commands}\n```"
                )),
                Reply::text(format!(
                    "THOUGHT: Done.\n\n```mswea_bash_command\n{MINI_SUBMIT}\n```"
                )),
            ),
            Dialect::MiniToolCalls => (
                Reply::tool_call(
                    "I run the commands that solve it.",
                    "bash",
                    json!({ "command": commands }),
                ),
                Reply::tool_call("Done.", "bash", json!({ "command": MINI_SUBMIT })),
            ),
            Dialect::ClaudeCode => (
                Reply::tool_call(
                    "I run the commands that solve it.",
                    "Bash",
                    json!({ "command": commands, "description": "Solve the task" }),
                ),
                Reply::text("Done: the task is solved."),
            ),
            Dialect::Codex => (
                Reply::tool_call(
                    "I run the commands that solve it.",
                    "exec_command",
                    json!({ "cmd": commands }),
                ),
                Reply::text("Done: the task is solved."),
            ),
        };
        vec![run.reporting(usage), finish.reporting(usage)]
    }
}

/// Per example: a fragment of its instruction (unique among the examples; the first match
/// wins, so an instruction naming two fragments has its own listed first) and commands that
/// solve it.
pub fn solutions() -> Vec<(&'static str, String)> {
    vec![
        ("Step 1 of 2 (draft)", "echo draft > /app/draft.txt".into()),
        (
            "Step 2 of 2 (finalize)",
            "printf '%s %s\\n' \"$(tr a-z A-Z < /app/draft.txt)\" \"$(cat /app/version.txt)\" > /app/final.txt".into(),
        ),
        (
            "/app/data.txt",
            "mkdir -p /app/logs && wc -l < /app/data.txt > /app/report.txt && echo 'counted the lines' > /app/logs/run.log".into(),
        ),
        // First: the separate-verifier instruction also names /app/numbers.txt.
        (
            "/logs/artifacts/sum.txt",
            "mkdir -p /logs/artifacts && python3 -c 'print(sum(int(l) for l in open(\"/app/numbers.txt\") if l.strip()))' > /logs/artifacts/sum.txt && echo 'summed /app/numbers.txt with python3' > /app/report.txt".into(),
        ),
        (
            "GET /token",
            "python3 -c 'import http.client; c = http.client.HTTPConnection(\"keeper\", 8080, timeout=10); c.request(\"GET\", \"/token\"); print(c.getresponse().read().decode(), end=\"\")' > /app/token.txt".into(),
        ),
        (
            "/app/interfaces.txt",
            "ls /sys/class/net | sort > /app/interfaces.txt && cat /proc/net/route > /app/routes.txt".into(),
        ),
        (
            "/app/hello.txt",
            "echo 'Hello, world!' > /app/hello.txt".into(),
        ),
        (
            "/app/numbers.txt",
            "python3 -c 'print(sum(int(l) for l in open(\"/app/numbers.txt\") if l.strip()))' > /app/sum.txt".into(),
        ),
        ("result.txt", "id -un > result.txt".into()),
        ("/app/answer.txt", "echo done > /app/answer.txt".into()),
        (
            "/app/orders.csv",
            "python3 - <<'PY'\nimport csv, json\nrows = list(csv.DictReader(open('/app/orders.csv', newline='')))\njson.dump({'orders': len(rows), 'total_quantity': sum(int(r['quantity']) for r in rows), 'revenue': round(sum(int(r['quantity']) * float(r['unit_price']) for r in rows), 2)}, open('/app/report.json', 'w'))\nPY".into(),
        ),
    ]
}

/// A script solving every example in `dialect`, each answer reporting `usage`.
pub fn examples_script(dialect: Dialect, usage: Usage) -> Script {
    solutions()
        .into_iter()
        .fold(Script::new(), |script, (fragment, commands)| {
            script.when(fragment, dialect.replies(&commands, usage))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_example_has_a_solution_recognised_by_its_own_instruction() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tasks/examples");
        let mut instructions = Vec::new();
        for entry in std::fs::read_dir(&root).unwrap() {
            let dir = entry.unwrap().path();
            let steps = dir.join("steps");
            if steps.is_dir() {
                for step in std::fs::read_dir(&steps).unwrap() {
                    instructions.push(step.unwrap().path().join("instruction.md"));
                }
            } else if dir.join("task.toml").is_file() {
                instructions.push(dir.join("instruction.md"));
            }
        }
        let solutions = solutions();
        for path in instructions {
            let text = std::fs::read_to_string(&path).unwrap();
            let first = solutions.iter().position(|(f, _)| text.contains(f));
            assert!(first.is_some(), "no solution for {}", path.display());
        }
    }
}
