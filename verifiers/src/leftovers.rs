//! Listing the processes the agent left running, with a plain command inside the sandbox, for
//! sandboxes that cannot run the verifier isolated (an isolated run lists them itself).
//!
//! The script uses only bash builtins, so listing forks nothing that would list itself, and it
//! leaves out PID 1, the container's keep-alive (`sh -c sleep infinity` and its `sleep`),
//! zombies (exited, waiting to be reaped: they run nothing) and itself.

use tasks::records::LeftoverProcess;

/// At most this many processes are listed; a last line then says how many more there were.
pub const MAX_LISTED: usize = 200;

/// The bash script printing `pid\tuser\tcommand` lines.
pub fn listing_command() -> String {
    format!(
        r#"declare -A names
while IFS=: read -r n _ u _; do names[$u]=$n; done < /etc/passwd 2>/dev/null
n=0; more=0
for d in /proc/[0-9]*; do
  pid=${{d#/proc/}}
  if [ "$pid" = 1 ] || [ "$pid" = "$$" ] || [ "$pid" = "$PPID" ]; then continue; fi
  ppid=; uid=; state=
  {{ while read -r k v _; do case $k in PPid:) ppid=$v;; Uid:) uid=$v;; State:) state=$v;; esac; done < "$d/status"; }} 2>/dev/null || continue
  if [ "$state" = Z ]; then continue; fi
  argv=(); {{ mapfile -d '' -t argv < "$d/cmdline"; }} 2>/dev/null
  cmd="${{argv[*]}}"
  if [ "$ppid" = 1 ] && [ "$cmd" = "sh -c sleep infinity" ]; then continue; fi
  if [ "$cmd" = "sleep infinity" ]; then
    parent=(); {{ mapfile -d '' -t parent < "/proc/$ppid/cmdline"; }} 2>/dev/null
    if [ "${{parent[*]}}" = "sh -c sleep infinity" ]; then continue; fi
  fi
  if [ "$n" -ge {MAX_LISTED} ]; then more=$((more+1)); continue; fi
  n=$((n+1))
  cmd=${{cmd//$'\t'/ }}; cmd=${{cmd//$'\n'/ }}
  printf '%s\t%s\t%s\n' "$pid" "${{names[$uid]:-$uid}}" "${{cmd:0:300}}"
done
if [ "$more" -gt 0 ]; then printf '0\t\t... and %s more\n' "$more"; fi
"#
    )
}

/// Parses the script's output.
pub fn parse(output: &str) -> Vec<LeftoverProcess> {
    LeftoverProcess::parse_listing(output)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the script lists on this host now, and the pid of the bash that ran it (other
    /// tests may be running the script at the same time: only this one's must be absent).
    fn listed_now() -> (u32, Vec<LeftoverProcess>) {
        let child = std::process::Command::new("bash")
            .arg("-c")
            .arg(listing_command())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let pid = child.id();
        let out = child.wait_with_output().unwrap();
        (pid, parse(&String::from_utf8_lossy(&out.stdout)))
    }

    #[test]
    fn the_script_lists_a_background_process_and_not_itself() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        // Until the child has exec'd, its /proc entry still shows the test binary.
        let cmdline = format!("/proc/{}/cmdline", child.id());
        while !std::fs::read(&cmdline).is_ok_and(|c| c.starts_with(b"sleep\0")) {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let (script, listed) = listed_now();
        child.kill().unwrap();
        let _ = child.wait();
        let sleeper = listed
            .iter()
            .find(|p| p.pid == child.id())
            .expect("the sleep is listed");
        assert_eq!(sleeper.command, "sleep 30");
        assert!(!sleeper.user.is_empty());
        assert!(
            listed.iter().all(|p| p.pid != script),
            "the listing lists itself: {listed:?}"
        );
    }

    #[test]
    fn a_zombie_is_not_a_leftover() {
        // `true` exits at once and stays a zombie until it is waited for.
        let mut zombie = std::process::Command::new("true").spawn().unwrap();
        let status = format!("/proc/{}/status", zombie.id());
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !std::fs::read_to_string(&status).is_ok_and(|s| s.contains("State:\tZ")) {
            assert!(std::time::Instant::now() < deadline, "no zombie");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let (_, listed) = listed_now();
        let _ = zombie.wait();
        assert!(
            listed.iter().all(|p| p.pid != zombie.id()),
            "the zombie is listed: {listed:?}"
        );
    }
}
