//! Labels on every container and image the runner makes, so a later run can find and reap
//! what a crashed one left behind.

use std::collections::HashMap;

/// Marks objects made by this tool.
pub const MANAGED: &str = "runner.managed";
/// The job's id.
pub const JOB: &str = "runner.job";
/// The trial's name.
pub const TRIAL: &str = "runner.trial";
/// The task's name.
pub const TASK: &str = "runner.task";
/// The compose service a container runs (absent on the main container).
pub const SERVICE: &str = "runner.service";
/// `host:pid:start-ticks` of the owning process.
pub const OWNER: &str = "runner.owner";

/// The identity of a runner process: host name, pid and process start time, so a reused pid
/// is not mistaken for the original owner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner {
    /// Host name.
    pub host: String,
    /// Process id.
    pub pid: u32,
    /// Start time in clock ticks since boot (field 22 of `/proc/<pid>/stat`).
    pub start_ticks: u64,
}

impl Owner {
    /// The current process.
    pub fn current() -> Owner {
        let pid = std::process::id();
        Owner {
            host: host_name(),
            pid,
            start_ticks: start_ticks(pid).unwrap_or(0),
        }
    }

    /// Parses the label value.
    pub fn parse(label: &str) -> Option<Owner> {
        let mut parts = label.rsplitn(3, ':');
        let start_ticks = parts.next()?.parse().ok()?;
        let pid = parts.next()?.parse().ok()?;
        let host = parts.next()?.to_owned();
        Some(Owner {
            host,
            pid,
            start_ticks,
        })
    }

    /// The label value.
    pub fn label(&self) -> String {
        format!("{}:{}:{}", self.host, self.pid, self.start_ticks)
    }

    /// True when this owner runs on this host and is still the same live process (a zombie,
    /// killed but not yet waited for by its parent, is dead).
    pub fn is_alive_here(&self) -> bool {
        self.host == host_name()
            && process_state(self.pid)
                .is_some_and(|(state, ticks)| state != "Z" && ticks == self.start_ticks)
    }
}

/// Labels for an object of `job`.
pub fn for_job(job_id: &str, owner: &Owner) -> HashMap<String, String> {
    HashMap::from([
        (MANAGED.to_owned(), "1".to_owned()),
        (JOB.to_owned(), job_id.to_owned()),
        (OWNER.to_owned(), owner.label()),
    ])
}

fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_owned())
        .unwrap_or_else(|_| "localhost".into())
}

fn start_ticks(pid: u32) -> Option<u64> {
    process_state(pid).map(|(_, ticks)| ticks)
}

/// The state letter (`R`, `S`, `Z`, …) and start time in clock ticks of process `pid`.
fn process_state(pid: u32) -> Option<(String, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses; fields restart after the last ')'.
    let after = &stat[stat.rfind(')')? + 2..];
    let mut fields = after.split(' ');
    let state = fields.next()?.to_owned();
    Some((state, fields.nth(18)?.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owner_label_round_trips_and_current_is_alive() {
        let me = Owner::current();
        assert!(me.start_ticks > 0);
        assert_eq!(Owner::parse(&me.label()), Some(me.clone()));
        assert!(me.is_alive_here());
        let reused_pid = Owner {
            start_ticks: me.start_ticks + 1,
            ..me.clone()
        };
        assert!(!reused_pid.is_alive_here());
        let elsewhere = Owner {
            host: "other-host".into(),
            ..me
        };
        assert!(!elsewhere.is_alive_here());
    }

    #[test]
    fn a_killed_process_not_yet_waited_for_is_dead() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        // `true` exits at once; until it is waited for it stays a zombie with its start time.
        while process_state(pid).is_some_and(|(state, _)| state != "Z") {
            assert!(
                std::time::Instant::now() < deadline,
                "the child never exited"
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let (_, ticks) = process_state(pid).expect("a zombie keeps its /proc entry");
        let owner = Owner {
            pid,
            start_ticks: ticks,
            ..Owner::current()
        };
        assert!(!owner.is_alive_here());
        child.wait().unwrap();
    }
}
