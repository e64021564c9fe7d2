//! Starting the tests with their privileges cut, and waiting for them or their deadline.

use super::*;

pub(crate) enum TestOutcome {
    Exited(i32),
    Signalled(i32),
    TimedOut,
}

/// Runs `bash -c <command>` as `identity` in its own session, with capabilities cut to `keep`,
/// and waits for it or the deadline (TERM to the group, grace, KILL).
/// With `root`, the tests start in that directory as their `/` (`rootview.rs`).
pub(crate) fn run_tests(
    options: &Options,
    identity: &Identity,
    keep: u64,
    root: Option<&str>,
) -> Result<TestOutcome, String> {
    let workdir = options
        .workdir
        .clone()
        .filter(|w| Path::new(w).is_dir())
        .unwrap_or_else(|| "/".to_owned());
    let into_root = match root {
        Some(root) => Some((
            cstring(root).map_err(|e| e.to_string())?,
            cstring(&workdir).map_err(|e| e.to_string())?,
        )),
        None => None,
    };
    let mut command = Command::new("bash");
    command
        .arg("-c")
        .arg(&options.command)
        .current_dir(&workdir)
        // The helper's stdin carries a warm jail's order and its stdout the results
        // (`stream.rs`): the tests get neither.
        .stdin(std::process::Stdio::null())
        .stdout(io::stderr());
    // As `docker exec --user` does: HOME is the user's, unless the verifier's env sets one.
    if !options.keep_home || std::env::var_os("HOME").is_none() {
        command.env("HOME", &identity.home);
    }
    let identity = identity.clone();
    // SAFETY: the closure runs in the forked child before exec and only makes system calls.
    unsafe {
        command.pre_exec(move || {
            if let Some((root, workdir)) = &into_root {
                // std changed into the workdir before this; it is then outside the new root.
                check(sys::chroot(root.as_ptr()))?;
                check(libc_chdir(workdir))?;
            }
            drop_privileges(&identity, keep)
        });
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

fn libc_chdir(path: &CString) -> i32 {
    unsafe { sys::chdir(path.as_ptr()) }
}

/// In the child: a new session, the bounding set cut to `keep`, the verifier's groups and ids,
/// and `CAP_WAKE_ALARM` kept ambient, so the agent cannot reach the tests even after they
/// switch to another user.
///
/// Why ambient for root too, and `SECBIT_NO_SETUID_FIXUP`: a test that becomes another user
/// (`su nobody`, `setpriv --reuid`, `subprocess.run(user=…)`) would otherwise lose every
/// capability, and a leftover of the agent running as that same user, holding none either,
/// could then open its `/proc/<pid>/root` and reach the private `/tests` and `/logs/verifier`.
/// With the fixup off (and locked), changing ids keeps the ambient set, so whatever the switched
/// process execs still holds `CAP_WAKE_ALARM`, which no agent process has. A set-user-ID exec
/// that changes the effective id (a non-root verifier user running `sudo`) still clears it: the
/// kernel's rule, noted in ARCHITECTURE.md.
pub(crate) fn drop_privileges(identity: &Identity, keep: u64) -> io::Result<()> {
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
    check(unsafe {
        sys::prctl(
            sys::PR_SET_SECUREBITS,
            sys::SECBIT_NO_SETUID_FIXUP | sys::SECBIT_NO_SETUID_FIXUP_LOCKED,
            0,
            0,
            0,
        )
    })?;
    if identity.uid != 0 {
        check(unsafe { sys::setresuid(identity.uid, identity.uid, identity.uid) })?;
        set_caps(1 << CAP_WAKE_ALARM)?;
    } else {
        // Root's permitted set after exec is its bounding set; inheritable must not carry more.
        set_caps(keep)?;
    }
    check(unsafe {
        sys::prctl(
            sys::PR_CAP_AMBIENT,
            sys::PR_CAP_AMBIENT_RAISE,
            CAP_WAKE_ALARM.into(),
            0,
            0,
        )
    })?;
    Ok(())
}

pub(crate) fn set_caps(caps: u64) -> io::Result<()> {
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
