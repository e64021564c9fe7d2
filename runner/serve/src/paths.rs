//! Where `write_file` may write: inside the task's working directory or `/tmp`, judged
//! lexically here and again in the container after symlinks are resolved.

use tasks::shell_quote;

/// Exit code of the in-container check when the path leaves the allowed roots.
pub const ESCAPE_EXIT: i64 = 86;

/// The roots `write_file` may write under: the working directory and `/tmp`.
pub fn allowed_roots(workdir: &str) -> Vec<String> {
    let mut roots = vec![normalize("/", workdir).unwrap_or_else(|| "/".into())];
    if roots[0] != "/tmp" {
        roots.push("/tmp".into());
    }
    roots
}

/// The absolute, lexically normalised form of `path` relative to `workdir`, or `None` when
/// it climbs above `/` or holds a NUL.
pub fn normalize(workdir: &str, path: &str) -> Option<String> {
    if path.contains('\0') {
        return None;
    }
    let joined = if path.starts_with('/') {
        path.to_owned()
    } else {
        format!("{}/{path}", workdir.trim_end_matches('/'))
    };
    let mut parts: Vec<&str> = Vec::new();
    for part in joined.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            other => parts.push(other),
        }
    }
    Some(format!("/{}", parts.join("/")))
}

/// True when `path` is `root` or under it.
pub fn is_under(path: &str, root: &str) -> bool {
    root == "/" || path == root || path.starts_with(&format!("{}/", root.trim_end_matches('/')))
}

/// A `write_file` path the policy may not write; the message is the observation's error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathRefused {
    /// The path is empty or white space.
    #[error("file_path is empty")]
    Empty,
    /// The path holds a NUL or climbs above `/`.
    #[error("file_path {0:?} escapes the filesystem root")]
    Escapes(String),
    /// The path is an allowed root itself (a directory, not a file).
    #[error("file_path {0:?} names a directory")]
    NamesRoot(String),
    /// The path is outside the working directory and `/tmp`.
    #[error("file_path {path:?} ({absolute}) is outside the working directory {workdir} and /tmp")]
    Outside {
        /// The path as given.
        path: String,
        /// Its absolute form.
        absolute: String,
        /// The working directory.
        workdir: String,
    },
}

/// Why `path` may not be written, or its absolute form: empty, NUL, climbing out, or outside
/// the allowed roots, or naming a root itself.
pub fn check(workdir: &str, path: &str) -> Result<String, PathRefused> {
    if path.trim().is_empty() {
        return Err(PathRefused::Empty);
    }
    let Some(absolute) = normalize(workdir, path) else {
        return Err(PathRefused::Escapes(path.to_owned()));
    };
    let roots = allowed_roots(workdir);
    if roots.contains(&absolute) {
        return Err(PathRefused::NamesRoot(path.to_owned()));
    }
    if !roots.iter().any(|r| is_under(&absolute, r)) {
        return Err(PathRefused::Outside {
            path: path.to_owned(),
            absolute,
            workdir: roots[0].clone(),
        });
    }
    Ok(absolute)
}

/// The in-container half of the check, run as the policy's user before writing: the file's
/// directory, symlinks resolved, must still be under a root, and the file itself must not be
/// a symlink. Exits [`ESCAPE_EXIT`] otherwise; makes the directory when missing.
pub fn guard_script(absolute: &str, workdir: &str) -> String {
    let roots = allowed_roots(workdir);
    let patterns: Vec<String> = roots
        .iter()
        .map(|r| {
            let q = shell_quote(r.trim_end_matches('/'));
            if r == "/" {
                "/*".to_owned()
            } else {
                format!("{q}|{q}/*")
            }
        })
        .collect();
    let file = shell_quote(absolute);
    format!(
        "f={file}; d=$(dirname -- \"$f\"); mkdir -p -- \"$d\" || exit 1; \
         r=$(realpath -- \"$d\") || exit 1; \
         case \"$r\" in {}) ;; *) echo \"$f resolves outside the allowed directories\" >&2; exit {ESCAPE_EXIT};; esac; \
         if [ -L \"$f\" ]; then echo \"$f is a symbolic link\" >&2; exit {ESCAPE_EXIT}; fi",
        patterns.join("|")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_paths_land_in_the_workdir() {
        assert_eq!(check("/app", "a/b.txt").unwrap(), "/app/a/b.txt");
        assert_eq!(check("/app/", "./x").unwrap(), "/app/x");
        assert_eq!(check("/app", "/tmp/scratch").unwrap(), "/tmp/scratch");
        assert_eq!(check("/app", "/app/sub/../y").unwrap(), "/app/y");
    }

    #[test]
    fn escapes_are_refused() {
        for bad in [
            "../etc/passwd",
            "/etc/passwd",
            "/app/../../root/.bashrc",
            "",
            "a\0b",
            "/app",
            "/tmp/",
            "/../../..",
            "/application/x",
        ] {
            assert!(check("/app", bad).is_err(), "{bad:?} was allowed");
        }
    }

    #[test]
    fn a_root_workdir_allows_everything_but_itself() {
        assert_eq!(check("/", "etc/x").unwrap(), "/etc/x");
        assert!(check("/", "/").is_err());
    }

    #[test]
    fn the_guard_refuses_a_symlinked_directory_in_bash() {
        let tmp = std::env::temp_dir().join(format!("serve-guard-{}", std::process::id()));
        let work = tmp.join("work");
        std::fs::create_dir_all(&work).unwrap();
        // /etc is outside both the workdir and /tmp.
        std::os::unix::fs::symlink("/etc", work.join("link")).unwrap();
        let workdir = work.to_str().unwrap();
        let run = |file: &str| {
            std::process::Command::new("bash")
                .arg("-c")
                .arg(guard_script(file, workdir))
                .status()
                .unwrap()
                .code()
        };
        assert_eq!(run(&format!("{workdir}/ok/file")), Some(0));
        assert_eq!(
            run(&format!("{workdir}/link/file")),
            Some(ESCAPE_EXIT as i32)
        );
        std::fs::remove_dir_all(&tmp).unwrap();
    }
}
