//! The processes the agent left running, as the shared PID namespace shows them.

use super::accounts::user_name;
use super::*;

/// The bounding set of `pid` (`CapBnd` in its status).
pub(crate) fn bounding_set_of(pid: u32) -> Option<u64> {
    let text = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    parse_status_field(&text, "CapBnd:").and_then(|hex| u64::from_str_radix(hex, 16).ok())
}

pub(crate) fn parse_status_field<'a>(status: &'a str, key: &str) -> Option<&'a str> {
    status
        .lines()
        .find_map(|line| line.strip_prefix(key))
        .map(str::trim)
}

/// One process the agent left running.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Process {
    pub(crate) pid: u32,
    pub(crate) user: String,
    pub(crate) command: String,
}

impl Process {
    pub(crate) fn to_line(&self) -> String {
        let clean = |s: &str| s.replace(['\t', '\n'], " ");
        format!(
            "{}\t{}\t{}",
            self.pid,
            clean(&self.user),
            clean(&self.command)
        )
    }
}

/// Every process of the shared PID namespace but its init, the container's keep-alive, this
/// one and the helper's own children (`own`: the tests' egress relay), at most [`MAX_LISTED`]
/// (then a last line says how many more).
pub(crate) fn list_processes(passwd: &str, own_children: &[u32]) -> Vec<Process> {
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
        if pid == 1 || pid == own || own_children.contains(&pid) {
            continue;
        }
        let Ok(status) = fs::read_to_string(format!("/proc/{pid}/status")) else {
            continue;
        };
        if is_zombie(&status) {
            continue;
        }
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

/// Whether a process has exited and only waits to be reaped: it runs nothing and can change
/// nothing the tests read, so it is no leftover (a relay stopped a moment ago is one of these
/// until init reaps it).
pub(crate) fn is_zombie(status: &str) -> bool {
    parse_status_field(status, "State:").is_some_and(|state| state.starts_with('Z'))
}

/// The container's own keep-alive: `sh -c sleep infinity` under init, and its `sleep`.
pub(crate) fn is_keepalive(ppid: u32, command: &str, seen: &[Process]) -> bool {
    (ppid == 1 && command == "sh -c sleep infinity")
        || (command == "sleep infinity"
            && seen
                .iter()
                .any(|p| p.pid == ppid && p.command.starts_with("\0keepalive")))
}

pub(crate) fn command_line(raw: &[u8], status: &str) -> String {
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
