//! The shell scripts an episode runs in its container: the policy's command with its output
//! capped in the container, the sweep that kills the policy's processes, and the background
//! processes (`exec` with `block = false`, then `write`/`view`/`wait`/`kill`).
//!
//! Pure string builders; every value from the policy goes through [`shell_quote`].

use tasks::shell_quote;

/// Where background processes keep their input, output and exit code.
pub const BG_ROOT: &str = "/tmp/.runner-serve";

/// The policy's `command`, its stdout and stderr merged and cut in the container after
/// `max` bytes (the rest is read and dropped, so the command is not killed by a closed
/// pipe); exits with the command's own code. The line printed to stderr is the number of
/// bytes dropped past the cap, so the server can say how much was cut.
pub fn capped_command(command: &str, max: usize) -> String {
    format!(
        "bash -c {} < /dev/null 2>&1 | {{ head -c {max}; n=$(wc -c); echo \"$n\" >&2; }}; exit \"${{PIPESTATUS[0]}}\"",
        shell_quote(command)
    )
}

/// Reads what [`capped_command`] reported on stderr: the bytes dropped past the cap.
pub fn dropped_bytes(stderr: &str) -> usize {
    stderr
        .lines()
        .last()
        .and_then(|l| l.trim().parse().ok())
        .unwrap_or(0)
}

/// The test every sweep applies to `/proc/$n` (`$p`): skips PID 1, the sweep itself, the
/// processes in `keep_pids` (the container's own, there before the policy's first action),
/// processes of other containers (another cgroup: the verifier jail's helper shares the PID
/// namespace) and process groups in `keep` (the policy's background processes). `$PPID` is
/// the `timeout` that runs the sweep.
const SKIP: &str = r#"[ "$n" = 1 ] || [ "$n" = "$$" ] || [ "$n" = "$BASHPID" ] || [ "$n" = "$PPID" ] && continue
    case "$pids" in *" $n "*) continue;; esac
    c=; read -r -d '' c < "$p/cgroup" 2>/dev/null
    [ -n "$c" ] && [ "$c" = "$mine" ] || continue
    s=; read -r s < "$p/stat" 2>/dev/null || continue
    s=${s##*) }; set -- $s; pg=$3
    case "$keep" in *" $pg "*) continue;; esac"#;

/// Lists, as root, the pids of the container's processes but PID 1 and itself: taken once as
/// the episode starts (the container's own keep-alive process), so sweeps spare them.
pub fn list_processes() -> String {
    format!(
        r#"keep=" "; pids=" "; read -r -d '' mine < /proc/self/cgroup
for p in /proc/[0-9]*; do
    n=${{p#/proc/}}
    {SKIP}
    echo "$n"
done"#
    )
}

/// Kills, as root, every process of the episode's container but PID 1, itself, `keep_pids`
/// and the process groups `keep` (see [`SKIP`]): each pass stops them all (so none can fork),
/// then kills them, until a pass finds none (at most 50 passes). Prints how many it killed.
pub fn kill_policy_processes(keep: &[u32], keep_pids: &[u32]) -> String {
    let words = |list: &[u32]| {
        list.iter()
            .map(|p| p.to_string())
            .collect::<Vec<_>>()
            .join(" ")
    };
    format!(
        r#"keep=" {} "; pids=" {} "; read -r -d '' mine < /proc/self/cgroup; killed=0
for pass in $(seq 50); do
  found=
  for p in /proc/[0-9]*; do
    n=${{p#/proc/}}
    {SKIP}
    kill -STOP "$n" 2>/dev/null && found="$found $n"
  done
  [ -z "$found" ] && break
  for n in $found; do kill -KILL "$n" 2>/dev/null && killed=$((killed+1)); done
done
echo "$killed""#,
        words(keep),
        words(keep_pids)
    )
}

/// The directory of background process `id`.
pub fn bg_dir(id: &str) -> String {
    format!("{BG_ROOT}/{id}")
}

/// True when `id` may name a background process: 1 to 64 of `[A-Za-z0-9_.-]`, not `.`/`..`.
pub fn valid_bg_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 64
        && id != "."
        && id != ".."
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

/// Starts `command` in the background as its own session (its pid is its process group),
/// reading its stdin from the `in` file (`write` appends there) and writing both streams to
/// `out`; its exit code goes to `exit`. Prints the pid.
pub fn bg_start(id: &str, command: &str) -> String {
    let dir = shell_quote(&bg_dir(id));
    format!(
        "d={dir}; rm -rf -- \"$d\"; mkdir -p -- \"$d\" && : > \"$d/in\" && : > \"$d/out\" || exit 1; \
         setsid bash -c 'bash -c \"$2\" < <(exec tail -n +1 -f \"$1/in\" 2>/dev/null) > \"$1/out\" 2>&1; \
         echo $? > \"$1/exit\"; kill $! 2>/dev/null' _ \"$d\" {} < /dev/null > /dev/null 2>&1 & echo $!",
        shell_quote(command)
    )
}

/// Appends `input` (with a newline when it has none) to the process's stdin.
pub fn bg_write(id: &str, input: &str) -> String {
    let mut input = input.to_owned();
    if !input.ends_with('\n') {
        input.push('\n');
    }
    let dir = shell_quote(&bg_dir(id));
    format!(
        "d={dir}; [ -f \"$d/in\" ] || {{ echo 'no such background process' >&2; exit 2; }}; printf %s {} >> \"$d/in\"",
        shell_quote(&input)
    )
}

/// Waits up to `seconds` for the process to end (0: not at all), then prints its status line
/// (`running`, or `exited <code>`), the new offset and the output's whole size, and its
/// output from `offset`, at most `max` bytes.
pub fn bg_view(id: &str, offset: u64, max: usize, seconds: f64) -> String {
    let dir = shell_quote(&bg_dir(id));
    let tenths = (seconds.clamp(0.0, 86_400.0) * 10.0).round() as u64;
    format!(
        "d={dir}; [ -f \"$d/out\" ] || {{ echo 'no such background process' >&2; exit 2; }}; \
         i=0; while [ $i -lt {tenths} ] && [ ! -s \"$d/exit\" ]; do sleep 0.1; i=$((i+1)); done; \
         if [ -s \"$d/exit\" ]; then echo \"exited $(cat \"$d/exit\")\"; else echo running; fi; \
         n=$(stat -c %s \"$d/out\"); e=$(( n < {offset} + {max} ? n : {offset} + {max} )); \
         [ $e -lt {offset} ] && e={offset}; echo \"$e $n\"; \
         tail -c +$(({offset} + 1)) \"$d/out\" | head -c $((e - {offset}))"
    )
}

/// What [`bg_view`] printed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BgView {
    /// The exit code once the process ended.
    pub exit_code: Option<i64>,
    /// Where the next view starts.
    pub offset: u64,
    /// How many bytes the process has written in all.
    pub size: u64,
    /// The output read.
    pub output: String,
}

/// Reads what [`bg_view`] printed.
pub fn parse_bg_view(stdout: &str) -> Option<BgView> {
    let mut parts = stdout.splitn(3, '\n');
    let status = parts.next()?;
    let (offset, size) = parts.next()?.trim().split_once(' ')?;
    let offset = offset.parse().ok()?;
    let size = size.parse().ok()?;
    let output = parts.next().unwrap_or("").to_owned();
    let exit_code = match status.strip_prefix("exited ") {
        Some(code) => Some(code.trim().parse().unwrap_or(-1)),
        None if status == "running" => None,
        None => return None,
    };
    Some(BgView {
        exit_code,
        offset,
        size,
        output,
    })
}

/// Kills the process group `pgid` of a background process.
pub fn bg_kill(pgid: u32) -> String {
    format!("kill -KILL -- -{pgid} 2>/dev/null; true")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bash(script: &str) -> std::process::Output {
        std::process::Command::new("bash")
            .arg("-c")
            .arg(script)
            .output()
            .unwrap()
    }

    #[test]
    fn the_capped_command_keeps_its_exit_code_and_counts_what_it_dropped() {
        let out = bash(&capped_command(
            "printf 0123456789; echo err >&2; exit 3",
            4,
        ));
        assert_eq!(out.status.code(), Some(3));
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(stdout, "0123");
        // Both streams are merged: "0123456789err\n" is 14 bytes, 4 kept.
        assert_eq!(dropped_bytes(&String::from_utf8_lossy(&out.stderr)), 10);
        let out = bash(&capped_command("echo 'it''s' \"$HOME\"", 100));
        assert_eq!(out.status.code(), Some(0));
    }

    #[test]
    fn background_ids_are_plain_names() {
        assert!(valid_bg_id("srv-1.a_b"));
        for bad in ["", ".", "..", "a/b", "a b", &"x".repeat(65), "$(x)"] {
            assert!(!valid_bg_id(bad), "{bad:?}");
        }
    }

    #[test]
    fn views_parse() {
        let view = |exit_code, offset, size, output: &str| BgView {
            exit_code,
            offset,
            size,
            output: output.into(),
        };
        assert_eq!(
            parse_bg_view("running\n5 9\nhello"),
            Some(view(None, 5, 9, "hello"))
        );
        assert_eq!(
            parse_bg_view("exited 3\n0 0\n"),
            Some(view(Some(3), 0, 0, ""))
        );
        assert_eq!(parse_bg_view("junk"), None);
        assert_eq!(parse_bg_view("running\n5\nhello"), None);
    }

    #[test]
    fn a_background_process_takes_input_and_reports_its_exit_in_bash() {
        let id = format!("unit-{}", std::process::id());
        let start = bash(&bg_start(&id, "read -r line; echo got:$line; exit 4"));
        assert!(start.status.success(), "{start:?}");
        let pgid: u32 = String::from_utf8_lossy(&start.stdout)
            .trim()
            .parse()
            .unwrap();
        assert!(bash(&bg_write(&id, "ping")).status.success());
        let view = bash(&bg_view(&id, 0, 1000, 5.0));
        let seen = parse_bg_view(&String::from_utf8_lossy(&view.stdout)).unwrap();
        assert_eq!(
            (seen.exit_code, seen.output.as_str()),
            (Some(4), "got:ping\n")
        );
        assert_eq!((seen.offset, seen.size), (9, 9));
        // A view smaller than the output says how much is left.
        let part = bash(&bg_view(&id, 0, 4, 0.0));
        let part = parse_bg_view(&String::from_utf8_lossy(&part.stdout)).unwrap();
        assert_eq!(
            (part.output.as_str(), part.offset, part.size),
            ("got:", 4, 9)
        );
        bash(&bg_kill(pgid));
        std::fs::remove_dir_all(bg_dir(&id)).unwrap();
    }
}
