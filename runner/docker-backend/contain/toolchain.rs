//! Which programs and startup hooks the tests get from the image, not from the agent
//! (`verifier_toolchain_changes`; issue 29 item 1).
//!
//! The tests must see every file the agent made (its outputs, the packages it installed), but
//! the programs that *run* them must be the task's: a root agent that replaced `python3` with
//! `exit 0`, planted `/etc/ld.so.preload`, a `sitecustomize.py` or a `/conftest.py` would
//! otherwise forge the reward. The plan is made in the jail's own root, which is a fresh
//! container of the trial's image (the *pristine* image), before the helper joins the trial;
//! the trial's files are read through `/proc/1/root` without following links.
//!
//! What is pinned, always (so nothing the agent does after the comparison matters):
//! - the shells, interpreters, downloaders and test runners named by [`is_tool_name`] that the
//!   image has on the tests' `PATH`, at their place and in every earlier `PATH` directory (so
//!   no shim the agent puts earlier on `PATH`, even while the tests run, is found first);
//! - the dynamic loader and the C library family ([`is_pinned_library`]) in the image's
//!   library directories.
//!
//! What is masked, when the agent made or changed it: `/etc/ld.so.preload`;
//! `sitecustomize`/`usercustomize` modules and `.pth` files with executable lines in the
//! Python site directories (the image's version when it has one, else an empty file or a
//! filtered copy); pytest configuration files at `/` (see `rootview.rs`).
//!
//! Not covered (recorded in ARCHITECTURE.md): other shared libraries, the Python standard
//! library and installed packages' code, and hooks created after the plan while the tests run.

use super::*;
use std::collections::BTreeSet;

/// Shells, interpreters, downloaders and test runners: the programs a `test.sh` runs.
pub(crate) fn is_tool_name(name: &str) -> bool {
    const EXACT: &[&str] = &[
        "sh", "bash", "dash", "env", "python", "python3", "perl", "pytest", "py.test", "pip",
        "pip3", "uv", "uvx", "curl", "wget", "node", "nodejs", "ruby", "timeout",
    ];
    if EXACT.contains(&name) {
        return true;
    }
    // python3.12, python3.12m, perl5.36.0, pip3.12, pytest-3
    let versioned = |prefix: &str| {
        name.strip_prefix(prefix).is_some_and(|rest| {
            !rest.is_empty()
                && rest.starts_with(|c: char| c.is_ascii_digit() || c == '.' || c == '-')
                && rest
                    .chars()
                    .all(|c| c.is_ascii_digit() || c == '.' || c == '-' || c == 'm')
        })
    };
    versioned("python3") || versioned("perl5") || versioned("pip3") || versioned("pytest")
}

/// The loader and the libraries every pinned program loads: a replaced one runs the agent's
/// code inside the image's `bash` or `python3`.
pub(crate) fn is_pinned_library(name: &str) -> bool {
    const STEMS: &[&str] = &[
        "ld-linux",
        "libc",
        "libm",
        "libpthread",
        "libdl",
        "librt",
        "libresolv",
        "libutil",
        "libtinfo",
        "libz",
        "libexpat",
        "libffi",
        "libpython3",
        "libcrypt",
        "libgcc_s",
    ];
    STEMS.iter().any(|stem| {
        name.strip_prefix(stem).is_some_and(|rest| {
            // libc.so.6, ld-linux-x86-64.so.2, libpython3.12.so.1.0 — not libcap.so or libcurl.
            rest.starts_with(".so")
                || (*stem == "ld-linux" && rest.starts_with('-'))
                || (*stem == "libpython3" && rest.starts_with('.'))
        })
    })
}

/// Where the loader looks and the image's libraries live.
pub(crate) const LIBRARY_DIRS: &[&str] = &[
    "/lib64",
    "/lib",
    "/lib/x86_64-linux-gnu",
    "/lib/aarch64-linux-gnu",
    "/usr/lib64",
    "/usr/lib",
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/usr/local/lib",
];

/// Python's startup hooks that live in a site directory.
pub(crate) fn is_site_hook(name: &str) -> bool {
    ["sitecustomize", "usercustomize"].iter().any(|module| {
        name.strip_prefix(module).is_some_and(|rest| {
            rest.is_empty()
                || rest == ".py"
                || (rest.starts_with('.') && rest.ends_with(".pyc"))
                || (rest.starts_with('.') && rest.ends_with(".so"))
        })
    })
}

/// A `.pth` file's lines without the executable ones (`import …`), which `site` would run at
/// every interpreter start; `None` when it has none.
pub(crate) fn without_executable_lines(content: &[u8]) -> Option<Vec<u8>> {
    let text = String::from_utf8_lossy(content);
    let executable = |line: &str| line.starts_with("import ") || line.starts_with("import\t");
    if !text.lines().any(executable) {
        return None;
    }
    let kept: String = text
        .lines()
        .filter(|line| !executable(line))
        .map(|line| format!("{line}\n"))
        .collect();
    Some(kept.into_bytes())
}

/// pytest reads these at `/` when it takes `/` as its rootdir (see `rootview.rs`).
pub(crate) const PYTEST_CONFIGS: &[&str] = &[
    "conftest.py",
    "pytest.ini",
    ".pytest.ini",
    "pyproject.toml",
    "tox.ini",
    "setup.cfg",
];

/// What goes on a pinned path.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Source {
    /// The image's file at this path of the jail's root (links followed inside the image).
    Image(String),
    /// An empty file: a hook the image does not have.
    EmptyFile,
    /// An empty directory: a hook package the image does not have.
    EmptyDir,
    /// A `.pth` file with its executable lines dropped.
    Filtered(Vec<u8>),
}

/// One mount the tests' view gets in the trial's namespace.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Pin {
    /// The trial's path (its directories are the image's real directories, no links).
    pub target: String,
    pub source: Source,
}

/// The whole plan: the mounts, and what the agent changed (for the record).
#[derive(Debug, Default)]
pub(crate) struct Plan {
    pub pins: Vec<Pin>,
    pub changes: Vec<String>,
}

/// The trial's view of `path`, through its PID 1's root (never following the last link).
pub(crate) fn in_trial(path: &str) -> PathBuf {
    PathBuf::from(format!("/proc/1/root{path}"))
}

/// Makes the plan for the tests' `PATH` (`search`): see the module docs.
pub(crate) fn plan(search: &str) -> Plan {
    let mut plan = Plan::default();
    plan_tools(search, &mut plan);
    plan_libraries(&mut plan);
    hooks::plan_hooks(&mut plan);
    plan_top_level(&mut plan);
    let ours = runner_pins(&fs::read_to_string("/proc/1/mountinfo").unwrap_or_default());
    drop_runners_own(&mut plan.changes, &ours);
    plan
}

/// The mount source of the jail's pristine tmpfs (`pins.rs`).
pub(crate) const PRISTINE_SOURCE: &str = "runner-pristine";

/// The trial's paths that are pins an earlier verification of this trial left (a step before
/// this one): mount points whose source is the pristine tmpfs, in the trial's mountinfo
/// (`/proc/1/mountinfo`). Only `CAP_SYS_ADMIN` makes a mount, and no trial process holds it,
/// so such a mount is runner's own, and what it shows is the image's file (read-only at its
/// superblock): the tests would run the image's program there, not the agent's.
pub(crate) fn runner_pins(mountinfo: &str) -> BTreeSet<String> {
    mountinfo
        .lines()
        .filter_map(|line| {
            let (fields, after) = line.split_once(" - ")?;
            let mount_point = fields.split(' ').nth(4)?;
            let mut after = after.split(' ');
            let (_fstype, source) = (after.next()?, after.next()?);
            (source == PRISTINE_SOURCE).then(|| unescape_mountinfo(mount_point))
        })
        .collect()
}

/// Mountinfo's octal escapes (`\040` for a space, `\011`, `\012`, `\134`).
fn unescape_mountinfo(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes.get(i + 1..i + 4).and_then(|d| {
            let text = std::str::from_utf8(d).ok()?;
            u8::from_str_radix(text, 8).ok()
        });
        match (bytes[i], octal) {
            (b'\\', Some(byte)) => {
                out.push(byte);
                i += 4;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Drops the changes of paths runner itself pinned (`ours`): every change is `<path>: what`.
/// Comparing those with the image would accuse the agent of runner's own mounts (each step of
/// a multi-step task found the last step's pins as programs "added by the agent").
pub(crate) fn drop_runners_own(changes: &mut Vec<String>, ours: &BTreeSet<String>) {
    changes.retain(|change| {
        let path = change
            .split_once(": ")
            .map_or(change.as_str(), |(path, _)| path);
        !ours.contains(path)
    });
}

/// The image's top-level links and pytest configuration at `/` as the trial has them: the
/// tests' own root takes the image's (`rootview.rs`), so only the record needs them here.
fn plan_top_level(plan: &mut Plan) {
    for (name, target) in rootview::image_links() {
        let path = format!("/{name}");
        match fs::read_link(in_trial(&path)) {
            Ok(theirs) if theirs == target => {}
            Ok(_) => plan
                .changes
                .push(format!("{path}: the image's link was changed by the agent")),
            Err(_) if fs::symlink_metadata(in_trial(&path)).is_ok() => plan.changes.push(format!(
                "{path}: the image's link was replaced by the agent"
            )),
            Err(_) => plan
                .changes
                .push(format!("{path}: the image's link was removed by the agent")),
        }
    }
    for name in PYTEST_CONFIGS {
        let path = format!("/{name}");
        let theirs = fs::symlink_metadata(in_trial(&path)).is_ok();
        let ours = fs::symlink_metadata(&path).is_ok();
        match (ours, theirs) {
            (false, true) => plan.changes.push(format!(
                "{path}: pytest configuration outside /tests added by the agent"
            )),
            (true, _) => note_change(&path, &path, plan),
            (false, false) => {}
        }
    }
}

/// The `PATH` directories as the image resolves them, in order, each once.
pub(crate) fn path_dirs(search: &str) -> Vec<String> {
    let mut dirs: Vec<String> = Vec::new();
    for dir in search.split(':').filter(|d| d.starts_with('/')) {
        let real = fs::canonicalize(dir)
            .map(|p| p.display().to_string())
            .unwrap_or_else(|_| dir.trim_end_matches('/').to_owned());
        if !dirs.contains(&real) && !real.is_empty() {
            dirs.push(real);
        }
    }
    dirs
}

/// The image's programs the tests get (`search` resolved in the jail's own root, which is the
/// image as built): for each, the index of its `PATH` directory (`path_dirs`), its name and
/// its path. Only the image is read.
fn image_tools(dirs: &[String]) -> Vec<(usize, String, String)> {
    let mut tools = Vec::new();
    let mut seen: Vec<String> = Vec::new();
    for (k, dir) in dirs.iter().enumerate() {
        let Ok(entries) = fs::read_dir(dir) else {
            continue;
        };
        let mut names: Vec<String> = entries
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|name| is_tool_name(name) && !seen.contains(name))
            .collect();
        names.sort();
        for name in names {
            let source = format!("{dir}/{name}");
            if !Path::new(&source).is_file() {
                continue; // a dangling link in the image: nothing to pin
            }
            seen.push(name.clone());
            tools.push((k, name, source));
        }
    }
    tools
}

/// The image's pinned libraries ([`is_pinned_library`]), each at its real path: a merged-/usr
/// image has /lib -> usr/lib, so each real directory is read once (the links above it are the
/// image's, see `rootview.rs`). Only the image is read.
fn image_libraries() -> Vec<String> {
    let mut done: Vec<PathBuf> = Vec::new();
    let mut paths = Vec::new();
    for dir in LIBRARY_DIRS {
        let Ok(real) = fs::canonicalize(dir) else {
            continue;
        };
        if done.contains(&real) {
            continue;
        }
        if let Ok(entries) = fs::read_dir(&real) {
            let mut names: Vec<String> = entries
                .filter_map(|e| e.ok()?.file_name().into_string().ok())
                .filter(|name| is_pinned_library(name))
                .collect();
            names.sort();
            let dir = real.display().to_string();
            paths.extend(
                names
                    .into_iter()
                    .map(|name| format!("{dir}/{name}"))
                    .filter(|path| Path::new(path).is_file()),
            );
        }
        done.push(real);
    }
    paths
}

/// The image files the plan for `search` pins (its programs and libraries), as far as the
/// image alone tells: what `contain wait` copies while the agent runs (`pins::precopy`).
pub(crate) fn image_sources(search: &str) -> Vec<String> {
    let mut sources: Vec<String> = image_tools(&path_dirs(search))
        .into_iter()
        .map(|(_, _, source)| source)
        .collect();
    sources.extend(image_libraries());
    sources
}

fn plan_tools(search: &str, plan: &mut Plan) {
    let dirs = path_dirs(search);
    for (k, name, source) in image_tools(&dirs) {
        for (j, earlier) in dirs[..=k].iter().enumerate() {
            let target = format!("{earlier}/{name}");
            if j == k {
                note_change(&target, &source, plan);
            } else if fs::symlink_metadata(in_trial(&target)).is_ok() {
                plan.changes.push(format!(
                    "{target}: added by the agent, earlier on PATH than the image's {source}"
                ));
            }
            plan.pins.push(Pin {
                target,
                source: Source::Image(source.clone()),
            });
        }
    }
}

fn plan_libraries(plan: &mut Plan) {
    for path in image_libraries() {
        note_change(&path, &path, plan);
        plan.pins.push(Pin {
            target: path.clone(),
            source: Source::Image(path),
        });
    }
}

/// Records how the trial's `target` differs from the image's `source` (links followed in the
/// image, not in the trial: a link the agent retargeted is a change).
pub(crate) fn note_change(target: &str, source: &str, plan: &mut Plan) {
    if let Some(what) = difference(target, source) {
        plan.changes.push(format!("{target}: {what}"));
    }
}

/// How the trial's `target` differs from the image's same path, or `None`.
fn difference(target: &str, source: &str) -> Option<&'static str> {
    use std::os::unix::fs::MetadataExt;
    let trial = in_trial(target);
    let Ok(theirs) = fs::symlink_metadata(&trial) else {
        return Some("removed by the agent");
    };
    let image_entry = fs::symlink_metadata(target).ok();
    let (trial, theirs) = if theirs.file_type().is_symlink() {
        let same_link = image_entry.is_some_and(|m| m.file_type().is_symlink())
            && fs::read_link(target).ok() == fs::read_link(&trial).ok();
        if !same_link {
            return Some("a link the agent made or retargeted");
        }
        // The same link: what it leads to may still be the agent's (Debian's
        // sitecustomize.py -> /etc/python3.x/sitecustomize.py).
        let resolved = resolve_in_trial(target);
        match fs::metadata(&resolved) {
            Ok(meta) => (resolved, meta),
            Err(_) => return Some("its link leads nowhere now"),
        }
    } else {
        (trial, theirs)
    };
    if !theirs.is_file() {
        return Some("replaced by the agent with something that is not a file");
    }
    let ours = fs::metadata(source).ok()?;
    // The same lower-layer file shows the same times in both containers; nothing inside a
    // container can set a ctime, so equal metadata is an unchanged file.
    let same_meta = ours.size() == theirs.size()
        && ours.mtime() == theirs.mtime()
        && ours.mtime_nsec() == theirs.mtime_nsec()
        && ours.ctime() == theirs.ctime()
        && ours.ctime_nsec() == theirs.ctime_nsec()
        && ours.mode() == theirs.mode();
    if same_meta || (ours.size() == theirs.size() && same_content(source, &trial)) {
        return None;
    }
    Some("changed by the agent")
}

/// The trial's file a chain of links at `path` ends at, resolved inside the trial's root (the
/// last component only; at most 8 links).
fn resolve_in_trial(path: &str) -> PathBuf {
    let mut current = PathBuf::from(path);
    for _ in 0..8 {
        match fs::read_link(in_trial(&current.display().to_string())) {
            Ok(link) if link.is_absolute() => current = link,
            Ok(link) => current = current.parent().unwrap_or(Path::new("/")).join(link),
            Err(_) => break,
        }
    }
    in_trial(&current.display().to_string())
}

/// True when both files hold the same bytes (read in chunks; a read error is a difference).
pub(crate) fn same_content(a: impl AsRef<Path>, b: impl AsRef<Path>) -> bool {
    let (Ok(mut a), Ok(mut b)) = (File::open(a), File::open(b)) else {
        return false;
    };
    let (mut x, mut y) = (vec![0u8; 1 << 16], vec![0u8; 1 << 16]);
    loop {
        let n = match a.read(&mut x) {
            Ok(n) => n,
            Err(_) => return false,
        };
        if b.read_exact(&mut y[..n]).is_err() || x[..n] != y[..n] {
            return false;
        }
        if n == 0 {
            return b.read(&mut y[..1]).is_ok_and(|m| m == 0);
        }
    }
}
