//! The recorded invocation: argv with `--agent-env` values redacted (as Harbor's lock does),
//! and its replay by `runner jobs resume`, which takes the redacted values from the
//! environment again.

use std::path::Path;

use crate::exit::CliError;

const REDACTED: &str = "<redacted>";

/// argv with the values of `--agent-env`/`--ae` replaced.
pub fn redacted(args: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut out = Vec::new();
    let mut redact_next = false;
    for arg in args {
        if redact_next {
            out.push(redact_pair(&arg));
            redact_next = false;
        } else if arg == "--agent-env" || arg == "--ae" {
            out.push(arg);
            redact_next = true;
        } else if let Some(pair) = arg
            .strip_prefix("--agent-env=")
            .or_else(|| arg.strip_prefix("--ae="))
        {
            out.push(format!("--agent-env={}", redact_pair(pair)));
        } else {
            out.push(arg);
        }
    }
    out
}

fn redact_pair(pair: &str) -> String {
    match pair.split_once('=') {
        Some((name, _)) => format!("{name}={REDACTED}"),
        None => REDACTED.into(),
    }
}

/// `NAME=VALUE` pairs of `--agent-env` with every redacted value read from the environment
/// again; one that is unset is refused by name (`lock` names the file it was read from).
pub fn restore_agent_env(
    pairs: &[String],
    lock: &Path,
    env: impl Fn(&str) -> Option<String>,
) -> Result<Vec<String>, CliError> {
    pairs
        .iter()
        .map(|pair| match pair.split_once('=') {
            Some((name, value)) if value == REDACTED => match env(name) {
                Some(value) => Ok(format!("{name}={value}")),
                None => Err(CliError::bad_input(format!(
                    "{}: the job ran with --agent-env {name}=…, whose value is not recorded; export {name} \
                     and run `runner jobs resume` again, or resume with `runner run --resume` and the full flags",
                    lock.display()
                ))),
            },
            _ => Ok(pair.clone()),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(args: &[&str]) -> Vec<String> {
        args.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn agent_env_values_are_redacted_and_restored_from_the_environment() {
        let argv = strings(&[
            "runner",
            "run",
            "--agent-env",
            "KEY=secret",
            "--ae=B=2",
            "-k",
            "5",
        ]);
        let recorded = redacted(argv);
        assert_eq!(
            recorded,
            strings(&[
                "runner",
                "run",
                "--agent-env",
                "KEY=<redacted>",
                "--agent-env=B=<redacted>",
                "-k",
                "5"
            ])
        );
        let lock = Path::new("jobs/j/lock.json");
        let pairs = strings(&["KEY=<redacted>", "PLAIN=x"]);
        let restored =
            restore_agent_env(&pairs, lock, |n| (n == "KEY").then(|| "again".into())).unwrap();
        assert_eq!(restored, strings(&["KEY=again", "PLAIN=x"]));
        let err = restore_agent_env(&pairs, lock, |_| None).unwrap_err();
        assert!(err.to_string().contains("export KEY"), "{err}");
        assert!(err.to_string().contains("jobs/j/lock.json"), "{err}");
    }
}
