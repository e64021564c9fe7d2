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
//!    and writes `/.runner/out/status`, which the runner downloads from the stopped jail.
//!
//! Exit codes: 0 the tests ran; 2 isolation could not be set up (nothing ran; the runner falls
//! back and records it); 3 a failure after the tests started; 64 bad arguments.
//!
//! Kept std-only and in one file so the build script can compile it with `rustc` alone.

#![allow(unsafe_code)]

use std::ffi::CString;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt, PermissionsExt};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

mod sys {
    //! The few libc calls std does not wrap.
    use std::os::raw::{c_char, c_int, c_ulong, c_void};

    pub const CLONE_NEWNS: c_int = 0x0002_0000;
    pub const CLONE_NEWUTS: c_int = 0x0400_0000;
    pub const CLONE_NEWIPC: c_int = 0x0800_0000;
    pub const MS_RDONLY: c_ulong = 1;
    pub const MS_NOSUID: c_ulong = 2;
    pub const MS_NODEV: c_ulong = 4;
    pub const MS_REMOUNT: c_ulong = 32;
    pub const MS_BIND: c_ulong = 4096;
    pub const MS_REC: c_ulong = 16384;
    pub const MS_PRIVATE: c_ulong = 1 << 18;
    pub const PR_CAPBSET_DROP: c_int = 24;
    pub const PR_SET_KEEPCAPS: c_int = 8;
    pub const PR_CAP_AMBIENT: c_int = 47;
    pub const PR_CAP_AMBIENT_RAISE: c_ulong = 2;
    pub const PR_CAP_AMBIENT_CLEAR_ALL: c_ulong = 4;
    pub const LINUX_CAPABILITY_VERSION_3: u32 = 0x2008_0522;

    #[repr(C)]
    pub struct CapHeader {
        pub version: u32,
        pub pid: c_int,
    }

    #[repr(C)]
    #[derive(Clone, Copy, Default)]
    pub struct CapData {
        pub effective: u32,
        pub permitted: u32,
        pub inheritable: u32,
    }

    unsafe extern "C" {
        pub fn setns(fd: c_int, nstype: c_int) -> c_int;
        pub fn unshare(flags: c_int) -> c_int;
        pub fn mount(
            source: *const c_char,
            target: *const c_char,
            fstype: *const c_char,
            flags: c_ulong,
            data: *const c_void,
        ) -> c_int;
        pub fn prctl(
            option: c_int,
            arg2: c_ulong,
            arg3: c_ulong,
            arg4: c_ulong,
            arg5: c_ulong,
        ) -> c_int;
        pub fn capset(header: *mut CapHeader, data: *const CapData) -> c_int;
        pub fn setgroups(size: usize, list: *const u32) -> c_int;
        pub fn setresgid(r: u32, e: u32, s: u32) -> c_int;
        pub fn setresuid(r: u32, e: u32, s: u32) -> c_int;
        pub fn setsid() -> c_int;
        pub fn kill(pid: c_int, sig: c_int) -> c_int;
    }
}

/// Capabilities Docker gives a container by default; the fallback when the trial's bounding set
/// cannot be read.
const DOCKER_DEFAULT_CAPS: u64 = (1 << 0)
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
const CAP_WAKE_ALARM: u32 = 35;
/// The highest capability number the kernel may know.
const CAP_LAST: u32 = 63;
/// At most this many leftover processes are listed.
const MAX_LISTED: usize = 200;
/// A command line is cut after this many bytes in the listing.
const MAX_CMDLINE: usize = 300;
/// `/etc/passwd` and `/etc/group` are read up to this size.
const MAX_ACCOUNT_FILE: u64 = 4 << 20;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
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
    command: String,
    timeout: Duration,
    grace: Duration,
    max_file_bytes: u64,
    max_total_bytes: u64,
    tests_tmpfs_bytes: u64,
    verifier_tmpfs_bytes: u64,
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
            command: String::new(),
            timeout: Duration::from_secs(600),
            grace: Duration::from_secs(5),
            max_file_bytes: 64 << 20,
            max_total_bytes: 256 << 20,
            tests_tmpfs_bytes: 1 << 30,
            verifier_tmpfs_bytes: 512 << 20,
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
                "--command" => options.command = value.clone(),
                "--timeout" => options.timeout = seconds()?,
                "--grace" => options.grace = seconds()?,
                "--max-file-bytes" => options.max_file_bytes = number()?,
                "--max-total-bytes" => options.max_total_bytes = number()?,
                "--tests-tmpfs-bytes" => options.tests_tmpfs_bytes = number()?,
                "--verifier-tmpfs-bytes" => options.verifier_tmpfs_bytes = number()?,
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
    let out_dir = match open_dir_fd("/.runner/out") {
        Ok(fd) => fd,
        Err(e) => {
            eprintln!("contain: /.runner/out: {e}");
            return 3;
        }
    };
    let mut status = Status { lines: Vec::new() };
    let code = match run(options, &out_dir, &mut status) {
        Ok(()) => 0,
        Err(Failure::Unavailable(why)) => {
            status.push("unavailable", &why);
            2
        }
        Err(Failure::Error(why)) => {
            status.push("error", &why);
            3
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

fn run(options: &Options, out: &DirFd, status: &mut Status) -> Result<(), Failure> {
    let unavailable = |what: &str, e: io::Error| Failure::Unavailable(format!("{what}: {e}"));
    let tests_src = open_dir_fd("/.runner/tests").map_err(|e| unavailable("/.runner/tests", e))?;
    let agent_caps = bounding_set_of(1).unwrap_or(DOCKER_DEFAULT_CAPS);
    if agent_caps & (1 << CAP_WAKE_ALARM) != 0 {
        return Err(Failure::Unavailable(
            "the trial's processes hold CAP_WAKE_ALARM, so test processes cannot be told apart \
             from them by capability"
                .into(),
        ));
    }
    join_namespaces(1).map_err(|e| unavailable("joining the trial's namespaces", e))?;
    anchor_all().map_err(Failure::Unavailable)?;
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
    tmpfs("/tests", options.tests_tmpfs_bytes)?;
    tmpfs("/logs/verifier", options.verifier_tmpfs_bytes)?;
    fs::set_permissions("/tests", fs::Permissions::from_mode(0o755))
        .map_err(|e| unavailable("chmod /tests", e))?;
    let tests = Path::new("/tests");
    copy_tree(
        &tests_src.path,
        tests,
        tests,
        &mut Budget::unlimited(),
        &mut |_, _| {},
    )
    .map_err(|e| unavailable("copying the tests into /tests", e))?;
    if let Ok(meta) = fs::metadata("/tests/test.sh") {
        let mode = meta.permissions().mode() | 0o755;
        let _ = fs::set_permissions("/tests/test.sh", fs::Permissions::from_mode(mode));
    }
    let identity = resolve_identity(options.user.as_deref()).map_err(Failure::Unavailable)?;
    let passwd = read_capped("/etc/passwd").unwrap_or_default();
    let processes = list_processes(&passwd);
    let listing: String = processes.iter().map(|p| p.to_line() + "\n").collect();
    fs::write(out.join("processes"), listing).map_err(|e| Failure::Error(e.to_string()))?;
    status.push("isolated", "private mount namespace");
    let keep = agent_caps | (1 << CAP_WAKE_ALARM);
    let outcome = run_tests(options, &identity, keep).map_err(Failure::Error)?;
    match outcome {
        TestOutcome::Exited(code) => status.push("exit_code", &code.to_string()),
        TestOutcome::Signalled(signal) => status.push("signal", &signal.to_string()),
        TestOutcome::TimedOut => status.push("timed_out", "1"),
    }
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
    Ok(())
}

fn check(result: i32) -> io::Result<()> {
    if result < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

fn cstring(text: &str) -> io::Result<CString> {
    CString::new(text).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in a path"))
}

fn mount(
    source: Option<&str>,
    target: &str,
    fstype: Option<&str>,
    flags: std::os::raw::c_ulong,
    data: Option<&str>,
) -> io::Result<()> {
    let source = source.map(cstring).transpose()?;
    let target = cstring(target)?;
    let fstype = fstype.map(cstring).transpose()?;
    let data = data.map(cstring).transpose()?;
    let ptr = |c: &Option<CString>| c.as_ref().map_or(std::ptr::null(), |c| c.as_ptr());
    check(unsafe {
        sys::mount(
            ptr(&source),
            target.as_ptr(),
            ptr(&fstype),
            flags,
            data.as_ref()
                .map_or(std::ptr::null(), |d| d.as_ptr().cast()),
        )
    })
}

/// The bounding set of `pid` (`CapBnd` in its status).
fn bounding_set_of(pid: u32) -> Option<u64> {
    let text = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    parse_status_field(&text, "CapBnd:").and_then(|hex| u64::from_str_radix(hex, 16).ok())
}

fn parse_status_field<'a>(status: &'a str, key: &str) -> Option<&'a str> {
    status
        .lines()
        .find_map(|line| line.strip_prefix(key))
        .map(str::trim)
}

fn join_namespaces(pid: u32) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    // Opened first, joined after: once the mount namespace changes, /proc/<pid> is the trial's.
    let open = |ns: &str| File::open(format!("/proc/{pid}/ns/{ns}"));
    let (uts, ipc, mnt) = (open("uts")?, open("ipc")?, open("mnt")?);
    check(unsafe { sys::setns(uts.as_raw_fd(), sys::CLONE_NEWUTS) })?;
    check(unsafe { sys::setns(ipc.as_raw_fd(), sys::CLONE_NEWIPC) })?;
    check(unsafe { sys::setns(mnt.as_raw_fd(), sys::CLONE_NEWNS) })
}

/// Anchors the paths the tests depend on in the trial's own mount namespace (step 3).
fn anchor_all() -> Result<(), String> {
    // /logs first: once it is a mount point nothing can move /logs/verifier out from under it.
    for (path, kind) in [
        ("/tests", Anchor::EmptyReadOnly),
        ("/logs", Anchor::SelfBind),
        ("/logs/verifier", Anchor::EmptyReadOnly),
    ] {
        anchor(path, kind)?;
    }
    let mounts = fs::read_to_string("/proc/self/mountinfo")
        .map_err(|e| format!("reading mountinfo: {e}"))?;
    for path in ["/tests", "/logs", "/logs/verifier"] {
        if !is_mount_point(&mounts, path) {
            return Err(format!(
                "{path} is not a mount point after anchoring it; something moved it"
            ));
        }
    }
    Ok(())
}

#[derive(Clone, Copy, PartialEq)]
enum Anchor {
    EmptyReadOnly,
    SelfBind,
}

/// Makes `path` a real directory and a mount point. A symlink or file there (left by the agent)
/// is removed; an open descriptor is mounted on, so a swap after the check cannot redirect the
/// mount; mountinfo then shows whether the mount landed at `path`, and the whole step is retried
/// a few times against an agent that keeps swapping it.
fn anchor(path: &str, kind: Anchor) -> Result<(), String> {
    use std::os::fd::AsRawFd;
    for _attempt in 0..20 {
        let mounts = fs::read_to_string("/proc/self/mountinfo")
            .map_err(|e| format!("reading mountinfo: {e}"))?;
        if kind == Anchor::SelfBind && is_mount_point(&mounts, path) {
            return Ok(());
        }
        let dir = match OpenOptions::new()
            .read(true)
            .custom_flags(0o200000 | 0o400000)
            .open(path)
        {
            Ok(dir) => dir,
            Err(_) => {
                let _ = match fs::symlink_metadata(path) {
                    Ok(meta) if meta.is_dir() => Ok(()),
                    Ok(_) => fs::remove_file(path),
                    Err(_) => Ok(()),
                };
                let _ = fs::create_dir(path);
                continue;
            }
        };
        let fd_path = format!("/proc/self/fd/{}", dir.as_raw_fd());
        let mounted = match kind {
            Anchor::SelfBind => mount(Some(&fd_path), &fd_path, None, sys::MS_BIND, None),
            Anchor::EmptyReadOnly => mount(
                Some("runner-anchor"),
                &fd_path,
                Some("tmpfs"),
                sys::MS_RDONLY | sys::MS_NOSUID | sys::MS_NODEV,
                Some("size=4k,mode=0755"),
            ),
        };
        mounted.map_err(|e| format!("mounting on {path}: {e}"))?;
        let mounts = fs::read_to_string("/proc/self/mountinfo")
            .map_err(|e| format!("reading mountinfo: {e}"))?;
        if is_mount_point(&mounts, path) {
            if kind == Anchor::SelfBind {
                // A bind keeps the source's flags; nodev/nosuid are not needed, rw is.
                let _ = mount(None, path, None, sys::MS_REMOUNT | sys::MS_BIND, None);
            }
            return Ok(());
        }
    }
    Err(format!(
        "{path} kept changing while it was being anchored (a process left by the agent?)"
    ))
}

/// True when `/proc/self/mountinfo` text has a mount at exactly `path` (field 5).
fn is_mount_point(mountinfo: &str, path: &str) -> bool {
    mountinfo
        .lines()
        .filter_map(|line| line.split(' ').nth(4))
        .any(|mount_point| mount_point == path)
}

/// A byte budget for copies: per file and in all.
struct Budget {
    file: u64,
    total: u64,
}

impl Budget {
    fn unlimited() -> Budget {
        Budget {
            file: u64::MAX,
            total: u64::MAX,
        }
    }
}

/// Copies directories and regular files from `source` into `target`, never following links:
/// symlinks become symlinks when copying in (`budget` unlimited) and are skipped when copying
/// out; FIFOs, sockets and devices are skipped. Files past the budget are cut; `note` hears
/// `("skipped"|"truncated", "<path>: <why>")`.
fn copy_tree(
    source: &Path,
    target: &Path,
    shown: &Path,
    budget: &mut Budget,
    note: &mut dyn FnMut(&'static str, String),
) -> io::Result<()> {
    let copying_in = budget.total == u64::MAX;
    let mut entries: Vec<_> = fs::read_dir(source)?.collect::<Result<_, _>>()?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let name = entry.file_name();
        let from = source.join(&name);
        let to = target.join(&name);
        let shown_path = shown.join(&name);
        let shown = shown_path.display().to_string();
        let meta = fs::symlink_metadata(&from)?;
        let kind = meta.file_type();
        if kind.is_dir() {
            fs::create_dir_all(&to)?;
            fs::set_permissions(&to, fs::Permissions::from_mode(meta.permissions().mode()))?;
            copy_tree(&from, &to, &shown_path, budget, note)?;
        } else if kind.is_symlink() && copying_in {
            std::os::unix::fs::symlink(fs::read_link(&from)?, &to)?;
        } else if kind.is_file() {
            let mut input = OpenOptions::new()
                .read(true)
                .custom_flags(0o400000 | 0o4000) // O_NOFOLLOW | O_NONBLOCK
                .open(&from)?;
            if !input.metadata()?.is_file() {
                note("skipped", format!("{shown}: it changed while being copied"));
                continue;
            }
            let limit = budget.file.min(budget.total);
            let mut output = OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(meta.permissions().mode() & 0o777)
                .open(&to)?;
            let copied = io::copy(&mut (&mut input).take(limit), &mut output)?;
            budget.total = budget.total.saturating_sub(copied);
            if copied == limit && input.read(&mut [0u8; 1])? > 0 {
                note(
                    "truncated",
                    format!("{shown}: cut at {copied} bytes, the verifier output cap"),
                );
            }
        } else {
            let what = if kind.is_symlink() {
                "a symbolic link"
            } else if kind.is_fifo() {
                "a fifo"
            } else if kind.is_socket() {
                "a socket"
            } else {
                "a device or special file"
            };
            note("skipped", format!("{shown}: it is {what}"));
        }
    }
    Ok(())
}

fn read_capped(path: &str) -> io::Result<String> {
    let mut text = String::new();
    File::open(path)?
        .take(MAX_ACCOUNT_FILE)
        .read_to_string(&mut text)?;
    Ok(text)
}

/// Who the tests run as.
#[derive(Debug, Clone, PartialEq)]
struct Identity {
    uid: u32,
    gid: u32,
    groups: Vec<u32>,
    home: String,
}

/// Resolves a Docker user spec (`name`, `uid`, `name:group`, `uid:gid`; none means root) against
/// the trial's account files, as `docker exec --user` does.
fn resolve_identity(spec: Option<&str>) -> Result<Identity, String> {
    let passwd = read_capped("/etc/passwd").unwrap_or_default();
    let group = read_capped("/etc/group").unwrap_or_default();
    resolve_user(spec.unwrap_or("0"), &passwd, &group)
}

fn resolve_user(spec: &str, passwd: &str, group: &str) -> Result<Identity, String> {
    let (user_part, group_part) = match spec.split_once(':') {
        Some((u, g)) => (u, Some(g)),
        None => (spec, None),
    };
    let entries: Vec<Vec<&str>> = passwd
        .lines()
        .map(|l| l.split(':').collect::<Vec<_>>())
        .filter(|f| f.len() >= 7)
        .collect();
    let by_name = entries.iter().find(|f| f[0] == user_part);
    let numeric = user_part.parse::<u32>().ok();
    let (uid, mut gid, home, name) = match (by_name, numeric) {
        (Some(f), _) => (
            f[2].parse::<u32>()
                .map_err(|_| format!("bad uid for {user_part} in /etc/passwd"))?,
            f[3].parse::<u32>()
                .map_err(|_| format!("bad gid for {user_part} in /etc/passwd"))?,
            f[5].to_owned(),
            Some(f[0]),
        ),
        (None, Some(uid)) => match entries.iter().find(|f| f[2].parse() == Ok(uid)) {
            Some(f) => (
                uid,
                f[3].parse().unwrap_or(uid),
                f[5].to_owned(),
                Some(f[0]),
            ),
            None => (uid, uid, "/".to_owned(), None),
        },
        (None, None) => return Err(format!("user {user_part:?} is not in /etc/passwd")),
    };
    let groups_file: Vec<Vec<&str>> = group
        .lines()
        .map(|l| l.split(':').collect::<Vec<_>>())
        .filter(|f| f.len() >= 4)
        .collect();
    if let Some(g) = group_part {
        gid = match g.parse::<u32>() {
            Ok(id) => id,
            Err(_) => groups_file
                .iter()
                .find(|f| f[0] == g)
                .and_then(|f| f[2].parse().ok())
                .ok_or_else(|| format!("group {g:?} is not in /etc/group"))?,
        };
    }
    let mut groups = vec![gid];
    if let Some(name) = name {
        for f in &groups_file {
            if f[3].split(',').any(|member| member == name)
                && let Ok(id) = f[2].parse::<u32>()
                && !groups.contains(&id)
            {
                groups.push(id);
            }
        }
    }
    Ok(Identity {
        uid,
        gid,
        groups,
        home,
    })
}

/// One process the agent left running.
#[derive(Debug, Clone, PartialEq)]
struct Process {
    pid: u32,
    user: String,
    command: String,
}

impl Process {
    fn to_line(&self) -> String {
        let clean = |s: &str| s.replace(['\t', '\n'], " ");
        format!(
            "{}\t{}\t{}",
            self.pid,
            clean(&self.user),
            clean(&self.command)
        )
    }
}

/// Every process of the shared PID namespace but its init, the container's keep-alive and this
/// one, at most [`MAX_LISTED`] (then a last line says how many more).
fn list_processes(passwd: &str) -> Vec<Process> {
    let own = std::process::id();
    let mut pids: Vec<u32> = fs::read_dir("/proc")
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    pids.sort_unstable();
    let mut seen = Vec::new();
    let mut more = 0usize;
    for pid in pids {
        if pid == 1 || pid == own {
            continue;
        }
        let Ok(status) = fs::read_to_string(format!("/proc/{pid}/status")) else {
            continue;
        };
        let ppid: u32 = parse_status_field(&status, "PPid:")
            .and_then(|p| p.parse().ok())
            .unwrap_or(0);
        let uid: u32 = parse_status_field(&status, "Uid:")
            .and_then(|u| u.split_whitespace().next()?.parse().ok())
            .unwrap_or(u32::MAX);
        let raw = fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let command = command_line(&raw, &status);
        if is_keepalive(ppid, &command, &seen) {
            seen.push(Process {
                pid,
                user: String::new(),
                command: format!("\0keepalive {command}"),
            });
            continue;
        }
        if seen.iter().filter(|p| !p.command.starts_with('\0')).count() >= MAX_LISTED {
            more += 1;
            continue;
        }
        seen.push(Process {
            pid,
            user: user_name(uid, passwd),
            command,
        });
    }
    let mut listed: Vec<Process> = seen
        .into_iter()
        .filter(|p| !p.command.starts_with('\0'))
        .collect();
    if more > 0 {
        listed.push(Process {
            pid: 0,
            user: String::new(),
            command: format!("... and {more} more"),
        });
    }
    listed
}

/// The container's own keep-alive: `sh -c sleep infinity` under init, and its `sleep`.
fn is_keepalive(ppid: u32, command: &str, seen: &[Process]) -> bool {
    (ppid == 1 && command == "sh -c sleep infinity")
        || (command == "sleep infinity"
            && seen
                .iter()
                .any(|p| p.pid == ppid && p.command.starts_with("\0keepalive")))
}

fn command_line(raw: &[u8], status: &str) -> String {
    let text: String = String::from_utf8_lossy(raw)
        .split('\0')
        .filter(|a| !a.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    let text = if text.is_empty() {
        // A kernel thread or a process that wiped its argv: show its name.
        format!("[{}]", parse_status_field(status, "Name:").unwrap_or("?"))
    } else {
        text
    };
    let mut cut = text;
    if cut.len() > MAX_CMDLINE {
        let mut end = MAX_CMDLINE;
        while !cut.is_char_boundary(end) {
            end -= 1;
        }
        cut.truncate(end);
        cut.push('…');
    }
    cut
}

fn user_name(uid: u32, passwd: &str) -> String {
    passwd
        .lines()
        .map(|l| l.split(':').collect::<Vec<_>>())
        .find(|f| f.len() >= 3 && f[2].parse() == Ok(uid))
        .map_or_else(|| uid.to_string(), |f| f[0].to_owned())
}

enum TestOutcome {
    Exited(i32),
    Signalled(i32),
    TimedOut,
}

/// Runs `bash -c <command>` as `identity` in its own session, with capabilities cut to `keep`,
/// and waits for it or the deadline (TERM to the group, grace, KILL).
fn run_tests(options: &Options, identity: &Identity, keep: u64) -> Result<TestOutcome, String> {
    let workdir = options
        .workdir
        .clone()
        .filter(|w| Path::new(w).is_dir())
        .unwrap_or_else(|| "/".to_owned());
    let mut command = Command::new("bash");
    command
        .arg("-c")
        .arg(&options.command)
        .current_dir(&workdir);
    if std::env::var_os("HOME").is_none() {
        command.env("HOME", &identity.home);
    }
    let identity = identity.clone();
    // SAFETY: the closure runs in the forked child before exec and only makes system calls.
    unsafe {
        command.pre_exec(move || drop_privileges(&identity, keep));
    }
    let mut child = command
        .spawn()
        .map_err(|e| format!("starting bash -c for the tests: {e}"))?;
    let group = child.id() as i32;
    let started = Instant::now();
    let mut signalled_at: Option<Instant> = None;
    let status = loop {
        if let Some(status) = child.try_wait().map_err(|e| e.to_string())? {
            break status;
        }
        let now = Instant::now();
        match signalled_at {
            None if now.duration_since(started) >= options.timeout => {
                unsafe { sys::kill(-group, 15) };
                signalled_at = Some(now);
            }
            Some(at) if now.duration_since(at) >= options.grace => {
                unsafe { sys::kill(-group, 9) };
            }
            _ => {}
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    // Background processes the tests left must not outlive the copy below.
    unsafe { sys::kill(-group, 9) };
    if signalled_at.is_some() {
        return Ok(TestOutcome::TimedOut);
    }
    Ok(match (status.code(), status.signal()) {
        (Some(code), _) => TestOutcome::Exited(code),
        (None, Some(signal)) => TestOutcome::Signalled(signal),
        (None, None) => TestOutcome::Exited(-1),
    })
}

/// In the child: a new session, the bounding set cut to `keep`, the verifier's groups and ids,
/// and `CAP_WAKE_ALARM` kept (ambient for a non-root user) so the agent cannot reach it.
fn drop_privileges(identity: &Identity, keep: u64) -> io::Result<()> {
    check(unsafe { sys::setsid() })?;
    for cap in 0..=CAP_LAST {
        if keep & (1 << cap) == 0 {
            // EINVAL: a number this kernel does not know; nothing to drop.
            let dropped = unsafe { sys::prctl(sys::PR_CAPBSET_DROP, cap.into(), 0, 0, 0) };
            if dropped < 0 && io::Error::last_os_error().raw_os_error() != Some(22) {
                return Err(io::Error::last_os_error());
            }
        }
    }
    check(unsafe { sys::setgroups(identity.groups.len(), identity.groups.as_ptr()) })?;
    check(unsafe { sys::setresgid(identity.gid, identity.gid, identity.gid) })?;
    check(unsafe { sys::prctl(sys::PR_CAP_AMBIENT, sys::PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) })?;
    if identity.uid != 0 {
        check(unsafe { sys::prctl(sys::PR_SET_KEEPCAPS, 1, 0, 0, 0) })?;
        check(unsafe { sys::setresuid(identity.uid, identity.uid, identity.uid) })?;
        set_caps(1 << CAP_WAKE_ALARM)?;
        check(unsafe {
            sys::prctl(
                sys::PR_CAP_AMBIENT,
                sys::PR_CAP_AMBIENT_RAISE,
                CAP_WAKE_ALARM.into(),
                0,
                0,
            )
        })?;
    } else {
        // Root's permitted set after exec is its bounding set; inheritable must not carry more.
        set_caps(keep)?;
    }
    Ok(())
}

fn set_caps(caps: u64) -> io::Result<()> {
    let mut header = sys::CapHeader {
        version: sys::LINUX_CAPABILITY_VERSION_3,
        pid: 0,
    };
    let word = |shift: u32| {
        let bits = (caps >> shift) as u32;
        sys::CapData {
            effective: bits,
            permitted: bits,
            inheritable: bits,
        }
    };
    let data = [word(0), word(32)];
    check(unsafe { sys::capset(&mut header, data.as_ptr()) })
}

#[cfg(test)]
mod tests {
    use super::*;

    const PASSWD: &str = "root:x:0:0:root:/root:/bin/bash\n\
        nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n\
        agent:x:1000:1000::/home/agent:/bin/bash\n";
    const GROUP: &str = "root:x:0:\nnogroup:x:65534:\nagent:x:1000:\ndocker:x:999:agent,other\n";

    #[test]
    fn users_resolve_like_docker_exec() {
        let root = resolve_user("0", PASSWD, GROUP).unwrap();
        assert_eq!((root.uid, root.gid, root.home.as_str()), (0, 0, "/root"));
        let agent = resolve_user("agent", PASSWD, GROUP).unwrap();
        assert_eq!((agent.uid, agent.gid), (1000, 1000));
        assert_eq!(agent.groups, vec![1000, 999]);
        let with_group = resolve_user("nobody:agent", PASSWD, GROUP).unwrap();
        assert_eq!((with_group.uid, with_group.gid), (65534, 1000));
        let unknown_uid = resolve_user("4242", PASSWD, GROUP).unwrap();
        assert_eq!((unknown_uid.uid, unknown_uid.gid), (4242, 4242));
        assert!(resolve_user("ghost", PASSWD, GROUP).is_err());
        assert!(resolve_user("agent:ghosts", PASSWD, GROUP).is_err());
    }

    #[test]
    fn options_parse_and_refuse_bad_values() {
        let args: Vec<String> = [
            "verify",
            "--command",
            "true",
            "--timeout",
            "2.5",
            "--user",
            "",
            "--max-file-bytes",
            "10",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let options = Options::parse(&args).unwrap();
        assert_eq!(options.timeout, Duration::from_millis(2500));
        assert_eq!(options.user, None);
        assert_eq!(options.max_file_bytes, 10);
        let bad = |args: &[&str]| {
            Options::parse(&args.iter().map(|s| s.to_string()).collect::<Vec<_>>()).is_err()
        };
        assert!(bad(&["verify", "--timeout", "1e300", "--command", "x"]));
        assert!(bad(&["verify", "--command"]));
        assert!(bad(&["verify"]));
        assert!(bad(&["run", "--command", "x"]));
    }

    #[test]
    fn mount_points_are_matched_exactly() {
        let info = "74 48 0:40 / / rw - overlay o rw\n\
                    90 74 0:50 / /logs/verifier ro - tmpfs runner-anchor ro\n";
        assert!(is_mount_point(info, "/logs/verifier"));
        assert!(!is_mount_point(info, "/logs"));
        assert!(is_mount_point(info, "/"));
    }

    #[test]
    fn the_keepalive_is_not_listed_but_a_lookalike_elsewhere_is() {
        let keepalive = Process {
            pid: 7,
            user: String::new(),
            command: "\0keepalive sh -c sleep infinity".into(),
        };
        assert!(is_keepalive(1, "sh -c sleep infinity", &[]));
        assert!(is_keepalive(
            7,
            "sleep infinity",
            std::slice::from_ref(&keepalive)
        ));
        assert!(!is_keepalive(40, "sleep infinity", &[keepalive]));
        assert_eq!(user_name(65534, PASSWD), "nobody");
        assert_eq!(user_name(5, PASSWD), "5");
        let long = vec![b'x'; 1000];
        assert!(command_line(&long, "").chars().count() <= MAX_CMDLINE + 1);
        assert_eq!(command_line(b"", "Name:\tkworker\n"), "[kworker]");
        assert_eq!(command_line(b"a\0b\0", ""), "a b");
    }

    #[test]
    fn copies_out_keep_files_and_dirs_skip_links_and_cut_at_the_budget() {
        let src = tempfile_dir("src");
        let dst = tempfile_dir("dst");
        fs::create_dir_all(src.join("sub")).unwrap();
        fs::write(src.join("reward.txt"), "1\n").unwrap();
        fs::write(src.join("sub/big.log"), vec![b'y'; 100]).unwrap();
        std::os::unix::fs::symlink("/etc/shadow", src.join("link")).unwrap();
        let mut budget = Budget {
            file: 50,
            total: 1000,
        };
        let mut notes = Vec::new();
        let shown = Path::new("/logs/verifier");
        copy_tree(&src, &dst, shown, &mut budget, &mut |k, v| {
            notes.push((k, v))
        })
        .unwrap();
        assert_eq!(fs::read_to_string(dst.join("reward.txt")).unwrap(), "1\n");
        assert_eq!(fs::read(dst.join("sub/big.log")).unwrap().len(), 50);
        assert!(fs::symlink_metadata(dst.join("link")).is_err());
        let kinds: Vec<&str> = notes.iter().map(|(k, _)| *k).collect();
        assert_eq!(kinds, ["skipped", "truncated"]);
        assert!(notes[0].1.starts_with("/logs/verifier/link: "), "{notes:?}");
        assert_eq!(budget.total, 1000 - 2 - 50);
        let _ = fs::remove_dir_all(src.parent().unwrap());
    }

    fn tempfile_dir(name: &str) -> PathBuf {
        let base = std::env::temp_dir().join(format!(
            "contain-test-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let dir = base.join(name);
        fs::create_dir_all(&dir).unwrap();
        dir
    }
}
