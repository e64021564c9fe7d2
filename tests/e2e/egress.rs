//! Network allowlists through the egress proxy, against the real Docker engine: two HTTP
//! servers on the host's loopback under names the proxy is told to resolve
//! (`RUNNER_EGRESS_RESOLVE`), one allowed and one not. From inside the container (a probe run
//! by the oracle in the agent's phase and by the tests in the verifier's): the allowed host is
//! reached by plain HTTP and through CONNECT; the other host, an IP literal, DNS and a raw TCP
//! connection all fail; the phase change is honoured both ways (agent allowlist → verifier
//! public, agent public → verifier allowlist, a separate verifier's container under its
//! environment's allowlist, and the steps of a multi-step task each under its own). Each attempt is in the phase's network.jsonl
//! and counted in result.json; the servers saw exactly the allowed requests.

use std::path::Path;

use crate::support::{Job, ensure_base_image, exception, origin, reward, run_oracle_resolving};

/// The probe both phases run: what this phase can reach, as JSON on stdout.
const PROBE: &str = r#"
import http.client, json, os, socket, sys, urllib.request
phase, allowed_port, other_port = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def get(url):
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.read().decode()
    except Exception as e:
        return "ERR " + type(e).__name__
def tunnel(host, port, path):
    proxy = os.environ.get("HTTPS_PROXY", "")
    if not proxy:
        return "ERR no proxy"
    phost, pport = proxy.rsplit("/", 1)[1].split(":")
    try:
        c = http.client.HTTPConnection(phost, int(pport), timeout=5)
        c.set_tunnel(host, port)
        c.request("GET", path)
        return c.getresponse().read().decode()
    except Exception as e:
        return "ERR " + type(e).__name__
def raw(host, port):
    try:
        socket.create_connection((host, port), timeout=3).close()
        return "connected"
    except Exception as e:
        return "ERR " + type(e).__name__
def dns(name):
    try:
        socket.getaddrinfo(name, 80)
        return "resolved"
    except Exception as e:
        return "ERR " + type(e).__name__
routes = [l.split()[1] for l in open("/proc/net/route").read().splitlines()[1:]]
public = "00000000" in routes
# A phase with a route of its own is not probed beyond the proxy: no traffic leaves the trial.
print(json.dumps({
    "allowed_http": get(f"http://allowed.test:{allowed_port}/{phase}-http"),
    "allowed_tunnel": tunnel("allowed.test", allowed_port, f"/{phase}-tunnel"),
    "other_http": get(f"http://other.test:{other_port}/{phase}-http"),
    "other_tunnel": tunnel("other.test", other_port, f"/{phase}-tunnel"),
    "literal_tunnel": tunnel("127.0.0.1", allowed_port, f"/{phase}-literal"),
    "raw_gateway": "SKIP" if public else raw("172.17.0.1", allowed_port),
    "dns": "SKIP" if public else dns("allowed.test"),
    "default_route": public,
}))
"#;

/// What each phase must see: `reach` lists the names it reaches (through the proxy), and
/// whether it has a route out of its own.
struct Expect {
    reach: &'static [&'static str],
    default_route: bool,
}

/// Python that checks the probe's JSON (first argument) against `expect`; prints PASS/FAIL.
fn check(phase: &str, expect: &Expect, ports: (u16, u16)) -> String {
    let (allowed, other) = ports;
    let reaches = |name: &str| expect.reach.contains(&name);
    // Probes that would leave the trial are skipped where the phase has a route of its own.
    let unreached = if expect.default_route { "SKIP" } else { "ERR" };
    let want = |key: &str, name: &str, port: u16, path: &str| {
        if reaches(name) {
            format!("({key:?}, lambda v: v == \"{name}:/{phase}-{path}\", {port})")
        } else {
            format!("({key:?}, lambda v: v.startswith(\"ERR\"), {port})")
        }
    };
    let cases = [
        want("allowed_http", "allowed", allowed, "http"),
        want("allowed_tunnel", "allowed", allowed, "tunnel"),
        want("other_http", "other", other, "http"),
        want("other_tunnel", "other", other, "tunnel"),
        "(\"literal_tunnel\", lambda v: v.startswith(\"ERR\"), 0)".to_owned(),
        format!("(\"raw_gateway\", lambda v: v.startswith({unreached:?}), 0)"),
        format!("(\"dns\", lambda v: v.startswith({unreached:?}), 0)"),
        format!(
            "(\"default_route\", lambda v: v is {}, 0)",
            if expect.default_route {
                "True"
            } else {
                "False"
            }
        ),
    ];
    format!(
        "import json, sys\nseen = json.load(open(sys.argv[1]))\nok = True\nfor key, good, _ in [{}]:\n    passed = good(seen[key])\n    ok &= passed\n    print((\"PASS \" if passed else \"FAIL \") + key + \" \" + repr(seen[key]))\nsys.exit(0 if ok else 1)\n",
        cases.join(", ")
    )
}

/// Writes a task whose agent phase and verifier phase probe and check the network. When the
/// toml makes the verifier separate, its image is built from `tests/` with the same probe,
/// and the agent's probe reaches it as the declared artifact.
fn task(dir: &Path, name: &str, toml: &str, agent: &Expect, verifier: &Expect, ports: (u16, u16)) {
    let task = dir.join(name);
    for sub in ["environment", "solution", "tests"] {
        std::fs::create_dir_all(task.join(sub)).unwrap();
    }
    let (allowed, other) = ports;
    std::fs::write(
        task.join("task.toml"),
        format!(
            "schema_version = \"1.3\"\nartifacts = [\"/app/agent.json\"]\n\
             [task]\nname = \"egress/{name}\"\n{toml}\n\
             [environment]\nbuild_timeout_sec = 300.0\nworkdir = \"/app\"\n"
        ),
    )
    .unwrap();
    std::fs::write(task.join("instruction.md"), "Probe the network.\n").unwrap();
    std::fs::write(
        task.join("environment/Dockerfile"),
        "FROM runner-base:bookworm-py\nCOPY probe.py check_agent.py /opt/\nWORKDIR /app\n",
    )
    .unwrap();
    let check_agent = check("agent", agent, ports);
    for sub in ["environment", "tests"] {
        std::fs::write(task.join(sub).join("probe.py"), PROBE).unwrap();
        std::fs::write(task.join(sub).join("check_agent.py"), &check_agent).unwrap();
    }
    std::fs::write(
        task.join("tests/Dockerfile"),
        "FROM runner-base:bookworm-py\nCOPY probe.py check_agent.py /opt/\nCOPY . /tests/\n",
    )
    .unwrap();
    std::fs::write(
        task.join("solution/solve.sh"),
        format!("#!/bin/bash\npython3 /opt/probe.py agent {allowed} {other} > /app/agent.json\n"),
    )
    .unwrap();
    std::fs::write(
        task.join("tests/check_verifier.py"),
        check("verifier", verifier, ports),
    )
    .unwrap();
    std::fs::write(
        task.join("tests/test.sh"),
        format!(
            "#!/bin/bash\nmkdir -p /logs/verifier\n\
             python3 /opt/probe.py verifier {allowed} {other} > /tmp/verifier.json\n\
             echo '== agent phase'; python3 /opt/check_agent.py /app/agent.json; a=$?\n\
             echo '== verifier phase'; python3 /tests/check_verifier.py /tmp/verifier.json; v=$?\n\
             if [ $a -eq 0 ] && [ $v -eq 0 ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi\n"
        ),
    )
    .unwrap();
}

/// Writes a two-step task: step `one` under its own allowlists (agent: allowed.test,
/// verifier: other.test), step `two` under the task's (agent: other.test, verifier: public).
fn steps_task(dir: &Path, ports: (u16, u16)) {
    let task = dir.join("steps-allowlist");
    let (allowed, other) = ports;
    let none_public = Expect {
        reach: &[],
        default_route: true,
    };
    let phases: [(&str, Expect); 4] = [
        (
            "one-agent",
            Expect {
                reach: &["allowed"],
                default_route: false,
            },
        ),
        (
            "one-verifier",
            Expect {
                reach: &["other"],
                default_route: false,
            },
        ),
        (
            "two-agent",
            Expect {
                reach: &["other"],
                default_route: false,
            },
        ),
        ("two-verifier", none_public),
    ];
    let mut files = vec![
        (
            "task.toml".to_owned(),
            "schema_version = \"1.3\"\n[task]\nname = \"egress/steps-allowlist\"\n\
             [agent]\ntimeout_sec = 60.0\nnetwork_mode = \"allowlist\"\nallowed_hosts = [\"other.test\"]\n\
             [verifier]\ntimeout_sec = 60.0\nnetwork_mode = \"public\"\n\
             [environment]\nbuild_timeout_sec = 300.0\nworkdir = \"/app\"\n\
             [[steps]]\nname = \"one\"\n\
             [steps.agent]\nnetwork_mode = \"allowlist\"\nallowed_hosts = [\"allowed.test\"]\n\
             [steps.verifier]\nnetwork_mode = \"allowlist\"\nallowed_hosts = [\"other.test\"]\n\
             [[steps]]\nname = \"two\"\n"
                .to_owned(),
        ),
        (
            "environment/Dockerfile".to_owned(),
            "FROM runner-base:bookworm-py\nCOPY *.py /opt/\nWORKDIR /app\n".to_owned(),
        ),
        ("environment/probe.py".to_owned(), PROBE.to_owned()),
        ("tests/test.sh".to_owned(), "#!/bin/bash\nexit 0\n".to_owned()),
    ];
    for (phase, expect) in &phases {
        let script = format!("environment/check_{}.py", phase.replace('-', "_"));
        files.push((script, check(phase, expect, ports)));
    }
    for step in ["one", "two"] {
        files.push((
            format!("steps/{step}/instruction.md"),
            "Probe.\n".to_owned(),
        ));
        files.push((
            format!("steps/{step}/solution/solve.sh"),
            format!("#!/bin/bash\npython3 /opt/probe.py {step}-agent {allowed} {other} > /app/{step}-agent.json\n"),
        ));
        files.push((
            format!("steps/{step}/tests/test.sh"),
            format!(
                "#!/bin/bash\nmkdir -p /logs/verifier\n\
                 python3 /opt/probe.py {step}-verifier {allowed} {other} > /tmp/{step}-verifier.json\n\
                 python3 /opt/check_{step}_agent.py /app/{step}-agent.json; a=$?\n\
                 python3 /opt/check_{step}_verifier.py /tmp/{step}-verifier.json; v=$?\n\
                 if [ $a -eq 0 ] && [ $v -eq 0 ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt\n"
            ),
        ));
    }
    for (rel, text) in files {
        let path = task.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
}

/// The attempts in a trial's `network.jsonl` of `phase_dir`: (host, allowed) pairs.
fn attempts(job: &Job, trial: &str, phase_dir: &str) -> Vec<(String, bool)> {
    job.trial_file(trial, &format!("{phase_dir}/network.jsonl"))
        .lines()
        .map(|line| {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            (
                v["host"].as_str().unwrap().to_owned(),
                v["allowed"].as_bool().unwrap(),
            )
        })
        .collect()
}

#[test]
fn allowlists_let_each_phase_reach_its_hosts_and_nothing_else() {
    ensure_base_image();
    let (allowed_port, allowed_seen) = origin("allowed");
    let (other_port, other_seen) = origin("other");
    let ports = (allowed_port, other_port);
    let tasks = tempfile::tempdir().unwrap();
    // Agent allowlist, verifier public (the container's own route; the proxy keeps the
    // host's loopback out of reach, so it reaches neither server).
    task(
        tasks.path(),
        "agent-allowlist",
        "[agent]\ntimeout_sec = 60.0\nnetwork_mode = \"allowlist\"\nallowed_hosts = [\"allowed.test\"]\n\
         [verifier]\ntimeout_sec = 60.0\nnetwork_mode = \"public\"\n",
        &Expect {
            reach: &["allowed"],
            default_route: false,
        },
        &Expect {
            reach: &[],
            default_route: true,
        },
        ports,
    );
    // The reverse: agent public, verifier allowlist (a wildcard and an exact name).
    task(
        tasks.path(),
        "verifier-allowlist",
        "[agent]\ntimeout_sec = 60.0\nnetwork_mode = \"public\"\n\
         [verifier]\ntimeout_sec = 60.0\nnetwork_mode = \"allowlist\"\nallowed_hosts = [\"other.test\", \"*.unused.test\"]\n",
        &Expect {
            reach: &[],
            default_route: true,
        },
        &Expect {
            reach: &["other"],
            default_route: false,
        },
        ports,
    );
    // A separate verifier (its own container, built from tests/) under its environment's
    // allowlist, after an agent allowlisted to the other host.
    task(
        tasks.path(),
        "separate-verifier-allowlist",
        "[agent]\ntimeout_sec = 60.0\nnetwork_mode = \"allowlist\"\nallowed_hosts = [\"other.test\"]\n\
         [verifier]\ntimeout_sec = 60.0\nenvironment_mode = \"separate\"\n\
         [verifier.environment]\nnetwork_mode = \"allowlist\"\nallowed_hosts = [\"allowed.test\"]\n",
        &Expect {
            reach: &["other"],
            default_route: false,
        },
        &Expect {
            reach: &["allowed"],
            default_route: false,
        },
        ports,
    );
    steps_task(tasks.path(), ports);
    let jobs = tempfile::tempdir().unwrap();
    // Each name pinned to loopback with its service's port: only that port is listed.
    let (output, job) = run_oracle_resolving(
        jobs.path(),
        tasks.path(),
        &format!(
            "allowed.test:{allowed_port}=127.0.0.1,other.test:{other_port}=127.0.0.1,unused.test=127.0.0.1"
        ),
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    let results = job.trial_results();
    assert_eq!(results.len(), 4, "{stderr}");
    for (trial, result) in &results {
        let stdout = match trial.starts_with("steps-") {
            true => ["one", "two"]
                .map(|step| {
                    job.trial_file(trial, &format!("steps/{step}/verifier/test-stdout.txt"))
                })
                .join("\n"),
            false => job.trial_file(trial, "verifier/test-stdout.txt"),
        };
        assert_eq!(
            exception(result),
            None,
            "{trial}: {}\n{stderr}",
            result["exception_info"]
        );
        assert_eq!(reward(result), Some(1.0), "{trial}:\n{stdout}");
        assert!(!stdout.contains("FAIL"), "{trial}:\n{stdout}");
        // The runner's relay is not the agent's leftover.
        assert!(
            result.get("agent_leftover_processes").is_none(),
            "{trial}: {result}"
        );
    }
    let trial = |prefix: &str| {
        results
            .iter()
            .find(|(name, _)| name.starts_with(prefix))
            .unwrap_or_else(|| panic!("no trial of {prefix}"))
    };
    let (agent_trial, agent_result) = trial("agent-allowlist");
    let (verifier_trial, verifier_result) = trial("verifier-allowlist");
    let (separate_trial, separate_result) = trial("separate-verifier-allowlist");
    let (steps_trial, steps_result) = trial("steps-allowlist");
    assert_eq!(
        separate_result["verifier_environment_mode"], "separate",
        "{separate_result}"
    );

    // The logs: every attempt, in the phase it was made, allowed only for the listed name.
    let agent_log = attempts(&job, agent_trial, "agent");
    assert!(
        agent_log.contains(&("allowed.test".into(), true)),
        "{agent_log:?}"
    );
    assert!(
        agent_log.contains(&("other.test".into(), false)),
        "{agent_log:?}"
    );
    assert!(
        agent_log.contains(&("127.0.0.1".into(), false)),
        "{agent_log:?}"
    );
    assert!(
        agent_log
            .iter()
            .all(|(host, ok)| *ok == (host == "allowed.test")),
        "{agent_log:?}"
    );
    let verifier_log = attempts(&job, verifier_trial, "verifier");
    assert!(
        verifier_log.contains(&("other.test".into(), true)),
        "{verifier_log:?}"
    );
    assert!(
        verifier_log
            .iter()
            .all(|(host, ok)| *ok == (host == "other.test")),
        "{verifier_log:?}"
    );
    let separate_log = attempts(&job, separate_trial, "verifier");
    assert!(
        separate_log.contains(&("allowed.test".into(), true))
            && separate_log.contains(&("other.test".into(), false)),
        "{separate_log:?}"
    );
    assert!(
        separate_log
            .iter()
            .all(|(host, ok)| *ok == (host == "allowed.test")),
        "{separate_log:?}"
    );
    // Each step's phases under the step's own sections first, logged in the step's dir.
    let step_log = |rel: &str| attempts(&job, steps_trial, rel);
    let only = |log: &[(String, bool)], host: &str| {
        !log.is_empty() && log.iter().all(|(h, ok)| *ok == (h == host))
    };
    assert!(
        only(&step_log("steps/one/agent"), "allowed.test"),
        "{:?}",
        step_log("steps/one/agent")
    );
    assert!(
        only(&step_log("steps/one/verifier"), "other.test"),
        "{:?}",
        step_log("steps/one/verifier")
    );
    assert!(
        only(&step_log("steps/two/agent"), "other.test"),
        "{:?}",
        step_log("steps/two/agent")
    );
    for phase in ["one/agent", "one/verifier", "two/agent", "two/verifier"] {
        assert!(
            steps_result["network_attempts"][phase]["attempts"].as_u64() > Some(0),
            "{phase}: {}",
            steps_result["network_attempts"]
        );
    }
    // A public phase through the proxy reaches neither server on the host's loopback.
    let public_log = attempts(&job, agent_trial, "verifier");
    assert!(
        !public_log.is_empty() && public_log.iter().all(|(_, ok)| !ok),
        "{public_log:?}"
    );

    // result.json counts them by phase.
    let counts = &agent_result["network_attempts"]["agent"];
    let refused = agent_log.iter().filter(|(_, ok)| !ok).count() as u64;
    assert_eq!(
        counts["attempts"].as_u64(),
        Some(agent_log.len() as u64),
        "{counts}"
    );
    assert_eq!(counts["refused"].as_u64(), Some(refused), "{counts}");
    assert!(verifier_result["network_attempts"]["verifier"]["attempts"].as_u64() > Some(0));

    // runner view shows them on the trial's page.
    let report = crate::support::view_report(&job.dir);
    let pages: Vec<String> = walk_html(report.path())
        .into_iter()
        .filter(|page| page.contains("<h2>Network</h2>"))
        .collect();
    assert_eq!(
        pages.len(),
        4,
        "each trial's page shows its network attempts"
    );
    assert!(
        pages
            .iter()
            .any(|page| page.contains(agent_trial.as_str()) && page.contains("other.test")),
        "the agent-allowlist trial's log is shown"
    );

    // The servers saw exactly what was allowed.
    let mut allowed_paths = allowed_seen.lock().unwrap().clone();
    allowed_paths.sort();
    let both = [
        "/agent-http",
        "/agent-tunnel",
        "/verifier-http",
        "/verifier-tunnel",
    ];
    let with = |extra: &[&'static str]| {
        let mut want: Vec<&str> = both.iter().chain(extra).copied().collect();
        want.sort();
        want
    };
    assert_eq!(
        allowed_paths,
        with(&["/one-agent-http", "/one-agent-tunnel"])
    );
    let mut other_paths = other_seen.lock().unwrap().clone();
    other_paths.sort();
    let steps = [
        "/one-verifier-http",
        "/one-verifier-tunnel",
        "/two-agent-http",
        "/two-agent-tunnel",
    ];
    assert_eq!(other_paths, with(&steps));
}

/// The text of every `.html` file under `dir`.
fn walk_html(dir: &Path) -> Vec<String> {
    let mut pages = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            pages.extend(walk_html(&path));
        } else if path.extension().is_some_and(|e| e == "html") {
            pages.push(std::fs::read_to_string(&path).unwrap());
        }
    }
    pages
}
