//! The system `git`, so that whatever the user's git already knows applies unchanged:
//! credential helpers, `http.proxy`, `url.<base>.insteadOf`, SSH config and keys. Each fetch
//! asks for one commit, shallow (`--depth=1`) and without blobs (`--filter=blob:none`), then
//! checks out only the tasks' paths, so the blobs of other tasks are never downloaded (a
//! server that does not filter sends them, and the fetch still works).

use std::path::Path;
use std::process::{Command, Output, Stdio};

use crate::error::RegistryError;

/// `url` with any `user:password@` removed, for messages and records.
pub fn redact(url: &str) -> String {
    match url.split_once("://") {
        Some((scheme, rest)) => {
            let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
            match authority.rsplit_once('@') {
                Some((_, host)) => format!("{scheme}://{host}{path}"),
                None => url.to_owned(),
            }
        }
        None => url.to_owned(),
    }
}

fn git(dir: Option<&Path>, args: &[&str]) -> Result<Output, RegistryError> {
    let mut command = Command::new("git");
    if let Some(dir) = dir {
        command.arg("-C").arg(dir);
    }
    command
        .args(args)
        .stdin(Stdio::null())
        // Never wait for a password on a terminal nobody watches; credential helpers still run.
        .env("GIT_TERMINAL_PROMPT", "0")
        .output()
        .map_err(|e| RegistryError::Git {
            what: args.first().copied().unwrap_or("").to_owned(),
            detail: format!("cannot run git ({e}); install git"),
        })
}

/// git's last words on stderr.
fn said(output: &Output) -> String {
    let text = String::from_utf8_lossy(&output.stderr);
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let tail = lines[lines.len().saturating_sub(3)..].join(" / ");
    if tail.is_empty() {
        format!("git exited with {}", output.status)
    } else {
        tail
    }
}

/// The commit at the head of `repo`'s default branch (for a task pinned to none).
pub fn head_commit(repo: &str) -> Result<String, RegistryError> {
    let out = git(None, &["ls-remote", repo, "HEAD"])?;
    let network = |detail: String| RegistryError::Network {
        repo: redact(repo),
        commit: "HEAD".into(),
        detail,
    };
    if !out.status.success() {
        return Err(network(said(&out)));
    }
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .map(str::to_owned)
        .ok_or_else(|| network("the repository has no HEAD".into()))
}

/// Fetches `commit` of `repo` into a new repository at `into` and checks out `paths`
/// (`(task, path)` pairs). A path missing at that commit is named with its task.
pub fn checkout(
    repo: &str,
    commit: &str,
    paths: &[(&str, &str)],
    into: &Path,
) -> Result<(), RegistryError> {
    let network = |detail: String| RegistryError::Network {
        repo: redact(repo),
        commit: commit.to_owned(),
        detail,
    };
    let local = |what: &str, out: &Output| RegistryError::Git {
        what: what.to_owned(),
        detail: said(out),
    };
    let dir = into.to_str().ok_or_else(|| RegistryError::Git {
        what: "init".into(),
        detail: format!("{} is not UTF-8", into.display()),
    })?;
    let out = git(None, &["init", "--quiet", dir])?;
    if !out.status.success() {
        return Err(local("init", &out));
    }
    let out = git(Some(into), &["remote", "add", "origin", repo])?;
    if !out.status.success() {
        return Err(local("remote add", &out));
    }
    let fetch = git(
        Some(into),
        &[
            "fetch",
            "--quiet",
            "--no-tags",
            "--depth=1",
            "--filter=blob:none",
            "origin",
            commit,
        ],
    )?;
    if !fetch.status.success() {
        // Which failure: a repository that does not answer, or one without the commit.
        let probe = git(Some(into), &["ls-remote", "--heads", "origin"])?;
        if !probe.status.success() {
            return Err(network(said(&fetch)));
        }
        return Err(RegistryError::NoCommit {
            repo: redact(repo),
            commit: commit.to_owned(),
            task: paths.first().map(|p| p.0).unwrap_or("").to_owned(),
        });
    }
    for (task, path) in paths {
        let object = format!("{commit}:{path}");
        let kind = git(Some(into), &["cat-file", "-t", &object])?;
        if !kind.status.success() || String::from_utf8_lossy(&kind.stdout).trim() != "tree" {
            return Err(RegistryError::MissingPath {
                task: (*task).to_owned(),
                repo: redact(repo),
                commit: commit.to_owned(),
                path: (*path).to_owned(),
            });
        }
    }
    let mut args = vec![
        "-c",
        "advice.detachedHead=false",
        "checkout",
        "--quiet",
        commit,
        "--",
    ];
    args.extend(paths.iter().map(|p| p.1));
    let out = git(Some(into), &args)?;
    if !out.status.success() {
        // The blobs are fetched here (lazily, from the promisor remote): a failure is the network's.
        return Err(network(said(&out)));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_in_a_url_never_reach_a_message() {
        assert_eq!(
            redact("https://user:tok@example.invalid/o/r.git"),
            "https://example.invalid/o/r.git"
        );
        assert_eq!(redact("git://h/r"), "git://h/r");
        assert_eq!(redact("git@host:o/r.git"), "git@host:o/r.git");
    }
}
