//! Issue 39 item 1, through the real `runner` binary and Docker: each phase's network is its
//! own. The agent phase (allowlist `allowed.test`) leaves a process running that, all through
//! the tests (allowlist `other.test`), tries the verifier's policy every way it can: the
//! agent's proxy socket it was given (`/run/runner-egress/egress.sock`), every loopback port
//! listening in `/proc/net/tcp` (the tests' relay among them), and the tests' socket through
//! `/proc/<pid>/root` of every process. It gets nothing: `other.test` never sees it, while
//! the tests' own request through their proxy reaches it; `verifier/network.jsonl` holds only
//! the tests' request, and the leftover's socket attempts are in `agent/network.jsonl`,
//! refused under the agent side's last phase, `(closed)`.

use std::path::Path;

use crate::support::{ensure_base_image, exception, origin, reward, run_oracle_resolving};

/// The leftover: tries every way to `other.test` for `seconds`, one JSON line per attempt.
const LEFTOVER: &str = r#"
import glob, json, os, socket, sys, time
other_port, seconds, out = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
def ask(connect, how, path):
    head = (f"GET http://other.test:{other_port}/{path} HTTP/1.1\r\n"
            f"Host: other.test:{other_port}\r\n\r\n").encode()
    try:
        s = connect()
        s.settimeout(3)
        s.sendall(head)
        answer = b""
        while True:
            chunk = s.recv(4096)
            if not chunk:
                break
            answer += chunk
        s.close()
        result = answer.decode(errors="replace").split("\r\n")[0] or "EMPTY"
    except Exception as e:
        result = "ERR " + type(e).__name__
    with open(out, "a") as f:
        f.write(json.dumps({"how": how, "result": result, "at": time.time()}) + "\n")
def unix(path):
    def connect():
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(path)
        return s
    return connect
def tcp(port):
    return lambda: socket.create_connection(("127.0.0.1", port), timeout=3)
def listening():
    ports = set()
    for line in open("/proc/net/tcp").read().splitlines()[1:]:
        f = line.split()
        if f[3] == "0A" and f[1].startswith("0100007F:"):
            ports.add(int(f[1].split(":")[1], 16))
    return sorted(ports)
end = time.time() + seconds
while time.time() < end:
    ask(unix("/run/runner-egress/egress.sock"), "agent-socket", "leftover-socket")
    for port in listening():
        ask(tcp(port), f"port {port}", f"leftover-port-{port}")
    for sock in glob.glob("/proc/[0-9]*/root/run/runner-egress-tests/egress.sock"):
        ask(unix(sock), "proc-root " + sock, "leftover-proc-root")
    time.sleep(0.3)
"#;

/// The tests' clock: waits until the leftover's record holds, past its first SKIP lines,
/// COUNT attempts of each HOW named (`wait.py SKIP [HOW COUNT]...`), or a minute has passed
/// (then the test's own assertions say what is missing); prints the record's length. The
/// tests wait for the leftover's attempts, not for a time, so a loaded machine slows them
/// down without changing what they see.
const WAIT: &str = r#"
import json, sys, time
skip, rest = int(sys.argv[1]), sys.argv[2:]
wants = [(rest[i], int(rest[i + 1])) for i in range(0, len(rest), 2)]
def record():
    try:
        lines = open("/tmp/leftover.jsonl").read().splitlines()
    except FileNotFoundError:
        return []
    attempts = []
    for line in lines:
        try:
            attempts.append(json.loads(line))
        except ValueError:
            pass  # the line the leftover is writing
    return attempts
deadline = time.time() + 60
while True:
    attempts = record()
    new = attempts[skip:]
    if time.time() > deadline or all(
            sum(a["how"] == how for a in new) >= n for how, n in wants):
        print(len(attempts))
        break
    time.sleep(0.2)
"#;

fn write_task(dir: &Path, other_port: u16) {
    let task = dir.join("leftover");
    for sub in ["environment", "solution", "tests"] {
        std::fs::create_dir_all(task.join(sub)).unwrap();
    }
    std::fs::write(
        task.join("task.toml"),
        "schema_version = \"1.3\"\n[task]\nname = \"egress/leftover\"\n\
         [agent]\ntimeout_sec = 60.0\nnetwork_mode = \"allowlist\"\nallowed_hosts = [\"allowed.test\"]\n\
         [verifier]\ntimeout_sec = 120.0\nnetwork_mode = \"allowlist\"\nallowed_hosts = [\"other.test\"]\n\
         [environment]\nbuild_timeout_sec = 300.0\nworkdir = \"/app\"\n",
    )
    .unwrap();
    std::fs::write(task.join("instruction.md"), "Leave a process running.\n").unwrap();
    std::fs::write(
        task.join("environment/Dockerfile"),
        "FROM runner-base:bookworm-py\nCOPY leftover.py /opt/\nWORKDIR /app\n",
    )
    .unwrap();
    std::fs::write(task.join("environment/leftover.py"), LEFTOVER).unwrap();
    std::fs::write(task.join("tests/wait.py"), WAIT).unwrap();
    // The agent's phase starts the leftover, detached, and it outlives the agent's run; the
    // agent ends once the leftover has made its first attempt (at most 30 s).
    std::fs::write(
        task.join("solution/solve.sh"),
        format!(
            "#!/bin/bash\nsetsid nohup python3 /opt/leftover.py {other_port} 300 /tmp/leftover.jsonl \
             >/dev/null 2>&1 < /dev/null &\n\
             for _ in $(seq 300); do [ -s /tmp/leftover.jsonl ] && break; sleep 0.1; done\n"
        ),
    )
    .unwrap();
    // The tests wait until the leftover has tried, while they run, the agent's socket five
    // times and their relay's port three times; make their own request; wait for the
    // leftover's next try after it; then hand the leftover's record back with their proxy's
    // port.
    std::fs::write(
        task.join("tests/test.sh"),
        format!(
            "#!/bin/bash\nmkdir -p /logs/verifier\n\
             start=$(python3 /tests/wait.py 0)\n\
             python3 /tests/wait.py \"$start\" agent-socket 5 \"port ${{HTTP_PROXY##*:}}\" 3 >/dev/null\n\
             python3 - <<'EOF' > /logs/verifier/tests.txt\n\
import os, urllib.request\n\
print('proxy', os.environ.get('HTTP_PROXY', ''))\n\
try:\n    print(urllib.request.urlopen('http://other.test:{other_port}/verifier-tests', timeout=10).read().decode())\n\
except Exception as e:\n    print('ERR', type(e).__name__, e)\n\
EOF\n\
             after=$(python3 /tests/wait.py 0)\n\
             python3 /tests/wait.py \"$after\" agent-socket 1 >/dev/null\n\
             cp /tmp/leftover.jsonl /logs/verifier/leftover.jsonl\n\
             if grep -q 'other:/verifier-tests' /logs/verifier/tests.txt; then echo 1; else echo 0; fi > /logs/verifier/reward.txt\n"
        ),
    )
    .unwrap();
}

#[test]
fn an_agent_leftover_gets_no_network_while_the_tests_reach_their_listed_host() {
    ensure_base_image();
    let (allowed_port, _allowed_seen) = origin("allowed");
    let (other_port, other_seen) = origin("other");
    let tasks = tempfile::tempdir().unwrap();
    write_task(tasks.path(), other_port);
    let jobs = tempfile::tempdir().unwrap();
    let (output, job) = run_oracle_resolving(
        jobs.path(),
        &tasks.path().join("leftover"),
        &format!("allowed.test:{allowed_port}=127.0.0.1,other.test:{other_port}=127.0.0.1"),
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    let results = job.trial_results();
    let (trial, result) = results.first().unwrap_or_else(|| panic!("{stderr}"));
    let tests = job.trial_file(trial, "verifier/tests.txt");
    assert_eq!(exception(result), None, "{result:#}\n{stderr}");
    assert_eq!(
        reward(result),
        Some(1.0),
        "the tests' own request:\n{tests}"
    );

    // The leftover tried every way, during the tests, and got nothing.
    let leftover: Vec<serde_json::Value> = job
        .trial_file(trial, "verifier/leftover.jsonl")
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let tests_port = tests
        .lines()
        .find_map(|l| l.strip_prefix("proxy http://127.0.0.1:"))
        .unwrap_or_else(|| panic!("no proxy in the tests' env:\n{tests}"))
        .trim()
        .to_owned();
    let tried = |how: &str| leftover.iter().filter(|a| a["how"] == how).count();
    assert!(tried("agent-socket") >= 5, "{leftover:?}");
    assert!(
        tried(&format!("port {tests_port}")) >= 3,
        "the leftover found the tests' relay port {tests_port} in /proc/net/tcp: {leftover:?}"
    );
    for attempt in &leftover {
        let answer = attempt["result"].as_str().unwrap();
        assert!(
            !answer.contains(" 200"),
            "the leftover reached something: {attempt}"
        );
    }
    let seen = other_seen.lock().unwrap().clone();
    assert_eq!(
        seen,
        ["/verifier-tests"],
        "other.test saw only the tests' own request"
    );

    // The records: the tests' log holds their request only; the leftover's socket attempts
    // are the agent side's, refused after its phase (the baseline, `setup`, is restored after
    // the agent's run, so they are logged as `setup (closed)`).
    let attempts = |phase_dir: &str| -> Vec<serde_json::Value> {
        job.trial_file(trial, &format!("{phase_dir}/network.jsonl"))
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    let verifier = attempts("verifier");
    assert_eq!(verifier.len(), 1, "{verifier:#?}");
    assert_eq!(verifier[0]["host"], "other.test");
    assert_eq!(verifier[0]["allowed"], true);
    let agent = attempts("agent");
    let closed: Vec<_> = agent
        .iter()
        .filter(|a| a["phase"].as_str().unwrap().ends_with(" (closed)"))
        .collect();
    assert!(closed.len() >= 5, "{agent:#?}");
    assert!(closed.iter().all(|a| a["allowed"] == false));
    let log = job.trial_file(trial, "trial.log");
    assert!(log.contains("relay in the verifier jail"), "{log}");
}
