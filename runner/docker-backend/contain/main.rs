//! `contain`: the runner's verifier jail, a static binary that is PID 1 of a short-lived sibling
//! container (the *jail*) sharing the trial container's PID and network namespaces.
//!
//! It is the only code that ever holds `CAP_SYS_ADMIN` near an agent, so it execs nothing from
//! any container filesystem until it has dropped that capability, and it is statically linked
//! (no dynamic loader, no `/etc/ld.so.preload`). The runner uploads it, with the task's tests,
//! into the jail's own fresh root filesystem before starting the jail; the agent never sees it.
//!
//! `contain verify`:
//! 1. opens `/.runner/tests` (the tests) and `/.runner/out` (the results) in the jail's root;
//! 2. joins the trial container's mount, UTS and IPC namespaces (through PID 1 of the shared
//!    PID namespace);
//! 3. *anchors* `/tests`, `/logs` and `/logs/verifier` in the trial's namespace: read-only empty
//!    mounts (a bind of `/logs` onto itself), so no process the agent left can write there,
//!    remove or rename them (a mount point is busy in its own namespace) or unmount them (no
//!    `CAP_SYS_ADMIN`);
//! 4. unshares a private mount namespace and mounts fresh tmpfs on `/tests` and
//!    `/logs/verifier` that only the tests see, and copies the tests in;
//! 5. lists the processes the agent left running;
//! 6. runs the test command as the verifier user with the trial's bounding set plus
//!    `CAP_WAKE_ALARM`: a process holds a capability the agent's processes lack, so none of them
//!    passes the kernel's ptrace access check to reach its `/proc/<pid>/root`, `cwd` or `fd`;
//! 7. after the deadline (TERM, grace, KILL of the process group) or the exit, copies the
//!    private `/logs/verifier` (regular files and directories only, bounded) to `/.runner/out`
//!    and writes `/.runner/out/status` (with `artifacts\tempty` when the trial's
//!    `/logs/artifacts` is empty then); a fresh jail's results are downloaded from the stopped
//!    jail, a warm one sends them over its stdout as a tar (`stream.rs`).
//!
//! Exit codes: 0 the tests ran; 2 isolation could not be set up for a reason outside the
//! trial (nothing ran; an error of the trial, never a fallback); 3 a failure after the tests
//! started; 5 the trial's state, which the agent made, blocked the verification (the agent's
//! failure); 64 bad arguments.
//!
//! Kept std-only so the build script can compile it with `rustc` alone.

#![allow(unsafe_code)]

use std::ffi::CString;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt, PermissionsExt};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// Capabilities Docker gives a container by default; the fallback when the trial's bounding set
/// cannot be read.
pub(crate) const DOCKER_DEFAULT_CAPS: u64 = (1 << 0)
    | (1 << 1)
    | (1 << 3)
    | (1 << 4)
    | (1 << 5)
    | (1 << 6)
    | (1 << 7)
    | (1 << 8)
    | (1 << 10)
    | (1 << 13)
    | (1 << 18)
    | (1 << 27)
    | (1 << 29)
    | (1 << 31);
/// `CAP_WAKE_ALARM`: harmless in a container, and absent from the agent's processes, so every
/// test process has a capability no agent process has (see step 6 above).
pub(crate) const CAP_WAKE_ALARM: u32 = 35;
/// The highest capability number the kernel may know.
pub(crate) const CAP_LAST: u32 = 63;
/// At most this many leftover processes are listed.
pub(crate) const MAX_LISTED: usize = 200;
/// A command line is cut after this many bytes in the listing.
pub(crate) const MAX_CMDLINE: usize = 300;
/// `/etc/passwd` and `/etc/group` are read up to this size.
pub(crate) const MAX_ACCOUNT_FILE: u64 = 4 << 20;

mod accounts;
mod copy;
mod egress;
mod hooks;
mod launch;
mod logdirs;
mod mounts;
mod order;
mod pins;
mod procs;
mod rootview;
mod stream;
mod sys;
#[cfg(test)]
mod tests;
mod toolchain;

use accounts::{Identity, read_capped, resolve_identity};
use copy::{Budget, copy_tree};
use launch::{TestOutcome, run_tests};
use mounts::{Anchor, anchor, anchor_all, check, cstring, join_namespaces, mount};
use procs::{bounding_set_of, list_processes};
use toolchain::{
    PYTEST_CONFIGS, Pin, Plan, Source, in_trial, is_site_hook, note_change,
    without_executable_lines,
};

/// The tests' `PATH` when their environment has none (Docker's default).
const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("wait") {
        std::process::exit(order::wait_and_verify(&args[1..]));
    }
    if args.first().map(String::as_str) == Some("probe") {
        std::process::exit(probe());
    }
    let code = match Options::parse(&args) {
        Ok(options) => verify(&options),
        Err(message) => {
            eprintln!("contain: {message}");
            64
        }
    };
    std::process::exit(code);
}

/// What `contain verify` was asked to do.
#[derive(Debug, Clone, PartialEq)]
struct Options {
    user: Option<String>,
    workdir: Option<String>,
    keep_home: bool,
    command: String,
    timeout: Duration,
    grace: Duration,
    max_file_bytes: u64,
    max_total_bytes: u64,
    tests_tmpfs_bytes: u64,
    verifier_tmpfs_bytes: u64,
    /// The job opted into running the tests with the agent's programs and hooks
    /// (`toolchain.rs` still records what the agent changed).
    agent_toolchain: bool,
    /// The egress proxy's tests-side directory in the jail's root: the tests' relay starts
    /// from it (`egress.rs`).
    egress_dir: Option<String>,
}

impl Options {
    fn parse(args: &[String]) -> Result<Options, String> {
        let mut args = args.iter();
        if args.next().map(String::as_str) != Some("verify") {
            return Err("usage: contain verify --command CMD --timeout SECS [options]".into());
        }
        let mut options = Options {
            user: None,
            workdir: None,
            keep_home: false,
            command: String::new(),
            timeout: Duration::from_secs(600),
            grace: Duration::from_secs(5),
            max_file_bytes: 64 << 20,
            max_total_bytes: 256 << 20,
            tests_tmpfs_bytes: 1 << 30,
            verifier_tmpfs_bytes: 512 << 20,
            agent_toolchain: false,
            egress_dir: None,
        };
        while let Some(flag) = args.next() {
            let value = args.next().ok_or_else(|| format!("{flag} needs a value"))?;
            let number = || {
                value
                    .parse::<u64>()
                    .map_err(|_| format!("{flag}: {value:?} is not a whole number"))
            };
            let seconds = || {
                value
                    .parse::<f64>()
                    .ok()
                    .and_then(|s| Duration::try_from_secs_f64(s).ok())
                    .ok_or_else(|| format!("{flag}: {value:?} is not a duration in seconds"))
            };
            match flag.as_str() {
                "--user" => options.user = Some(value.clone()).filter(|u| !u.is_empty()),
                "--workdir" => options.workdir = Some(value.clone()).filter(|w| !w.is_empty()),
                "--keep-home" => options.keep_home = value == "1",
                "--command" => options.command = value.clone(),
                "--timeout" => options.timeout = seconds()?,
                "--grace" => options.grace = seconds()?,
                "--max-file-bytes" => options.max_file_bytes = number()?,
                "--max-total-bytes" => options.max_total_bytes = number()?,
                "--tests-tmpfs-bytes" => options.tests_tmpfs_bytes = number()?,
                "--verifier-tmpfs-bytes" => options.verifier_tmpfs_bytes = number()?,
                "--agent-toolchain" => options.agent_toolchain = value == "1",
                "--egress-dir" => {
                    options.egress_dir = Some(value.clone()).filter(|d| !d.is_empty())
                }
                other => return Err(format!("unknown flag {other}")),
            }
        }
        if options.command.is_empty() {
            return Err("--command is required".into());
        }
        Ok(options)
    }
}

/// A failure, and whether anything of the tests had run yet.
#[derive(Debug)]
enum Failure {
    /// Isolation could not be set up; the tests did not run.
    Unavailable(String),
    /// Something failed after the tests started.
    Error(String),
    /// What the agent left in the trial made the verification impossible (a program of the
    /// image it replaced with a directory, paths it kept swapping, an account it broke): the
    /// tests did not run, and that is the agent's failure.
    Blocked(String),
}

/// The status file the runner reads, one `key\tvalue` line each.
struct Status {
    lines: Vec<String>,
}

impl Status {
    fn push(&mut self, key: &str, value: &str) {
        let clean: String = value
            .chars()
            .map(|c| if c == '\n' || c == '\t' { ' ' } else { c })
            .collect();
        self.lines.push(format!("{key}\t{clean}"));
    }
}

fn verify(options: &Options) -> i32 {
    match open_dir_fd("/.runner/out") {
        Ok(out_dir) => verify_into(options, &out_dir, None),
        Err(e) => {
            eprintln!("contain: /.runner/out: {e}");
            3
        }
    }
}

/// `contain verify` with its results going to the open `/.runner/out` (the image's programs
/// taken from `ahead` where they were copied before the order); returns the exit code.
fn verify_into(options: &Options, out_dir: &DirFd, ahead: Option<pins::Precopied>) -> i32 {
    let mut status = Status { lines: Vec::new() };
    let code = match run(options, out_dir, &mut status, ahead) {
        Ok(()) => 0,
        Err(Failure::Unavailable(why)) => {
            status.push("unavailable", &why);
            2
        }
        Err(Failure::Error(why)) => {
            status.push("error", &why);
            3
        }
        Err(Failure::Blocked(why)) => {
            status.push("blocked", &why);
            5
        }
    };
    let text = status.lines.join("\n") + "\n";
    if let Err(e) = fs::write(out_dir.join("status"), text) {
        eprintln!("contain: writing the status: {e}");
        return 3;
    }
    code
}

/// An open directory, addressed through `/proc/self/fd` so it stays reachable after the mount
/// namespace changes.
struct DirFd {
    _file: File,
    path: PathBuf,
}

impl DirFd {
    fn join(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }
}

fn open_dir_fd(path: &str) -> io::Result<DirFd> {
    use std::os::fd::AsRawFd;
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(0o200000 | 0o400000) // O_DIRECTORY | O_NOFOLLOW
        .open(path)?;
    let path = PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd()));
    Ok(DirFd { _file: file, path })
}

fn run(
    options: &Options,
    out: &DirFd,
    status: &mut Status,
    ahead: Option<pins::Precopied>,
) -> Result<(), Failure> {
    let own = from_own_root(options, status, ahead)?;
    join_namespaces(1).map_err(|e| unavailable("joining the trial's namespaces", e))?;
    anchor_all().map_err(Failure::Unavailable)?;
    let image_top = match own.pinning {
        Some((prepared, links)) => {
            pins::apply(prepared.clones)?;
            Some(rootview::ImageTop {
                links,
                configs: prepared.configs,
            })
        }
        None => None,
    };
    let root = private_view(options, image_top, &own.tests_src)?;
    for change in &own.changes {
        status.push("toolchain_change", change);
    }
    if options.agent_toolchain {
        status.push("toolchain", "agent");
    }
    // The image's accounts first: an agent that broke /etc/group cannot break the tests' user.
    let spec = options.user.as_deref().unwrap_or("0");
    let identity = accounts::resolve_user(spec, &own.image_passwd, &own.image_group)
        .or_else(|_| resolve_identity(options.user.as_deref()))
        .map_err(Failure::Blocked)?;
    let passwd = read_capped("/etc/passwd").unwrap_or_default();
    let relay = own.relay;
    let helpers: Vec<u32> = relay.iter().map(egress::EgressRelay::pid).collect();
    let processes = list_processes(&passwd, &helpers);
    let listing: String = processes.iter().map(|p| p.to_line() + "\n").collect();
    fs::write(out.join("processes"), listing).map_err(|e| Failure::Error(e.to_string()))?;
    status.push("isolated", "private mount namespace");
    let keep = own.agent_caps | (1 << CAP_WAKE_ALARM);
    let outcome = run_tests(options, &identity, keep, root).map_err(Failure::Error)?;
    // The tests' network ends with them.
    drop(relay);
    match outcome {
        TestOutcome::Exited(code) => status.push("exit_code", &code.to_string()),
        TestOutcome::Signalled(signal) => status.push("signal", &signal.to_string()),
        TestOutcome::TimedOut => status.push("timed_out", "1"),
    }
    copy_results_out(options, out, status)
}

/// An I/O failure of setting up isolation: the tests did not run.
fn unavailable(what: &str, e: io::Error) -> Failure {
    Failure::Unavailable(format!("{what}: {e}"))
}

/// What the helper takes from its own root (the image as built, which the agent never
/// touched) before it joins the trial.
struct OwnRoot {
    /// The tests, uploaded into the jail's root.
    tests_src: DirFd,
    /// The trial's bounding set: the tests get it plus `CAP_WAKE_ALARM`.
    agent_caps: u64,
    /// What the agent changed of the programs the tests take from the image.
    changes: Vec<String>,
    /// The image's `/etc/passwd` and `/etc/group`, for the tests' user.
    image_passwd: String,
    image_group: String,
    /// The pinned programs, cloned and ready to attach, and the image's top-level links;
    /// `None` with `--agent-toolchain`.
    pinning: Option<(pins::Prepared, Vec<(String, PathBuf)>)>,
    /// The tests' egress relay, when the tests have an allowlist.
    relay: Option<egress::EgressRelay>,
}

/// Reads and prepares, still in the jail's own root, what the tests must take from the image,
/// and starts the tests' relay there (the only mount namespace where its socket is).
fn from_own_root(
    options: &Options,
    status: &mut Status,
    ahead: Option<pins::Precopied>,
) -> Result<OwnRoot, Failure> {
    let tests_src = open_dir_fd("/.runner/tests").map_err(|e| unavailable("/.runner/tests", e))?;
    let agent_caps = bounding_set_of(1).unwrap_or(DOCKER_DEFAULT_CAPS);
    if agent_caps & (1 << CAP_WAKE_ALARM) != 0 {
        return Err(Failure::Unavailable(
            "the trial's processes hold CAP_WAKE_ALARM, so test processes cannot be told apart \
             from them by capability"
                .into(),
        ));
    }
    // Still in the jail's own root, which is the image as built: what the tests take from it.
    let search = std::env::var("PATH").unwrap_or_else(|_| DEFAULT_PATH.to_owned());
    let plan = toolchain::plan(&search);
    let image_passwd = read_capped("/etc/passwd").unwrap_or_default();
    let image_group = read_capped("/etc/group").unwrap_or_default();
    let pinning = match options.agent_toolchain {
        true => None,
        false => Some((pins::prepare(&plan, ahead)?, rootview::image_links())),
    };
    // Started before joining: the relay stays in the jail's own mount namespace, the only
    // one where its socket is.
    let relay = match &options.egress_dir {
        Some(dir) => Some(egress::start(dir).map_err(Failure::Unavailable)?),
        None => None,
    };
    if let Some(relay) = &relay {
        for (key, value) in relay.env() {
            // SAFETY: the helper is single-threaded; nothing reads the environment meanwhile.
            unsafe { std::env::set_var(key, value) };
        }
        status.push("egress_relay", &format!("127.0.0.1:{}", relay.port));
    }
    Ok(OwnRoot {
        tests_src,
        agent_caps,
        changes: plan.changes,
        image_passwd,
        image_group,
        pinning,
        relay,
    })
}

/// In the trial's namespace, anchored: unshares the tests' private mount namespace, with a
/// fresh `/logs/verifier` and the tests copied into a fresh `/tests` (inside the tests' own
/// root view when the image's programs are pinned). Returns the root the tests `chroot` into
/// (`None`: the trial's).
fn private_view(
    options: &Options,
    image_top: Option<rootview::ImageTop>,
    tests_src: &DirFd,
) -> Result<Option<&'static str>, Failure> {
    check(unsafe { sys::unshare(sys::CLONE_NEWNS) })
        .map_err(|e| unavailable("unsharing the mount namespace", e))?;
    mount(None, "/", None, sys::MS_REC | sys::MS_PRIVATE, None)
        .map_err(|e| unavailable("making mounts private", e))?;
    let tmpfs = |target: &str, bytes: u64| {
        let data = format!("size={bytes},mode=0777");
        mount(
            Some("runner-verifier"),
            target,
            Some("tmpfs"),
            sys::MS_NOSUID | sys::MS_NODEV,
            Some(&data),
        )
        .map_err(|e| unavailable(&format!("mounting a private {target}"), e))
    };
    tmpfs("/logs/verifier", options.verifier_tmpfs_bytes)?;
    let (root, tests) = match image_top {
        Some(image_top) => {
            rootview::build(image_top, options.tests_tmpfs_bytes)?;
            (Some(rootview::ROOT), Path::new(rootview::TESTS_IN_ROOT))
        }
        None => {
            tmpfs("/tests", options.tests_tmpfs_bytes)?;
            (None, Path::new("/tests"))
        }
    };
    fs::set_permissions(tests, fs::Permissions::from_mode(0o755))
        .map_err(|e| unavailable("chmod /tests", e))?;
    copy_tree(
        &tests_src.path,
        tests,
        tests,
        &mut Budget::unlimited(),
        &mut |_, _| {},
    )
    .map_err(|e| unavailable("copying the tests into /tests", e))?;
    let script = tests.join("test.sh");
    if let Ok(meta) = fs::metadata(&script) {
        let mode = meta.permissions().mode() | 0o755;
        let _ = fs::set_permissions(&script, fs::Permissions::from_mode(mode));
    }
    Ok(root)
}

/// Once the tests are over: copies the private `/logs/verifier` (bounded) to the jail's
/// `out`, and notes whether the trial's `/logs/artifacts` is empty.
fn copy_results_out(options: &Options, out: &DirFd, status: &mut Status) -> Result<(), Failure> {
    let verifier_out = out.join("verifier");
    fs::create_dir_all(&verifier_out).map_err(|e| Failure::Error(e.to_string()))?;
    let mut budget = Budget {
        file: options.max_file_bytes,
        total: options.max_total_bytes,
    };
    let mut notes = Vec::new();
    copy_tree(
        Path::new("/logs/verifier"),
        &verifier_out,
        Path::new("/logs/verifier"),
        &mut budget,
        &mut |key, value| notes.push((key, value)),
    )
    .map_err(|e| Failure::Error(format!("copying /logs/verifier out: {e}")))?;
    for (key, value) in notes {
        status.push(key, &value);
    }
    if artifacts_are_empty() {
        status.push("artifacts", "empty");
    }
    Ok(())
}

/// `contain probe`, run once before a job's first trial in a container of its own
/// (`src/jail/preflight.rs`): the mount calls a verification makes, on `/probe`. Exit 0 when
/// they work; else 2 with the refused call on stderr.
fn probe() -> i32 {
    let steps = || -> Result<(), String> {
        check(unsafe { sys::unshare(sys::CLONE_NEWNS) }).map_err(|e| format!("unshare: {e}"))?;
        mount(None, "/", None, sys::MS_REC | sys::MS_PRIVATE, None)
            .map_err(|e| format!("making mounts private: {e}"))?;
        mount(Some("probe"), "/probe", Some("tmpfs"), 0, Some("size=64k"))
            .map_err(|e| format!("mounting a tmpfs: {e}"))?;
        fs::write("/probe/file", b"").map_err(|e| format!("writing on the tmpfs: {e}"))?;
        fs::create_dir("/probe/dir").map_err(|e| format!("a directory on the tmpfs: {e}"))?;
        mount(
            Some("/probe/dir"),
            "/probe/dir",
            None,
            sys::MS_BIND | sys::MS_REC,
            None,
        )
        .map_err(|e| format!("a bind mount: {e}"))?;
        let clone = pins::open_tree("/probe/file").map_err(|e| format!("open_tree: {e}"))?;
        fs::write("/probe/target", b"").map_err(|e| format!("writing on the tmpfs: {e}"))?;
        pins::attach(&clone, "/probe/target").map_err(|e| format!("move_mount: {e}"))
    };
    match steps() {
        Ok(()) => 0,
        Err(why) => {
            eprintln!("contain probe: {why}");
            2
        }
    }
}

/// True when the trial's `/logs/artifacts` is a directory with nothing in it once the tests
/// are over: the runner then has nothing to download from there (one archive call less on
/// every trial whose agent and tests leave no artifacts). Only a directory listing of the
/// trial's tree, nothing opened or followed in it; a symlink there is not "empty", and the
/// runner downloads as before.
fn artifacts_are_empty() -> bool {
    is_empty_dir(Path::new("/logs/artifacts"))
}

/// True when `path` itself (not a link to one) is a directory with no entries.
pub(crate) fn is_empty_dir(path: &Path) -> bool {
    fs::symlink_metadata(path).is_ok_and(|m| m.is_dir())
        && fs::read_dir(path).is_ok_and(|mut entries| entries.next().is_none())
}
