use super::*;
use crate::container::limits_host_config;

#[test]
fn status_lines_parse() {
    let status = parse_status(
        "isolated\tprivate mount namespace\nexit_code\t1\nskipped\t/logs/verifier/x: it is a fifo\n\
         truncated\t/logs/verifier/big: cut\nnonsense\n",
    );
    assert_eq!(status.exit_code, Some(1));
    assert!(!status.timed_out);
    assert_eq!(status.skipped, vec!["/logs/verifier/x: it is a fifo"]);
    assert_eq!(status.truncated.len(), 1);
    assert!(!status.artifacts_empty);
    let status = parse_status(
        "toolchain_change\t/usr/bin/python3.11: changed by the agent\n\
         toolchain_change\t/etc/ld.so.preload: added by the agent\nblocked\t/usr/bin/bash: x\n",
    );
    assert_eq!(status.toolchain_changes.len(), 2);
    assert_eq!(status.blocked.as_deref(), Some("/usr/bin/bash: x"));
    let status = parse_status("timed_out\t1\nunavailable\tno mount\nartifacts\tempty\n");
    assert!(status.artifacts_empty);
    assert!(status.timed_out);
    assert_eq!(status.exit_code, None);
    assert_eq!(status.unavailable.as_deref(), Some("no mount"));
}

#[test]
fn the_jail_joins_the_trial_and_gets_only_the_capabilities_it_needs() {
    let spec = JailSpec {
        trial_id: "abc".into(),
        trial_name: "runner-x-t".into(),
        image: "sha256:1".into(),
        env: vec!["A=1".into()],
        default_user: Some("agent".into()),
        workdir: Some("/app".into()),
        labels: HashMap::new(),
        limits: limits_host_config(Some(1.0), Some(512), Some(512), Some(64)),
        early_tests: None,
        tests_egress: None,
        make_dirs: Vec::new(),
    };
    let request = IsolatedVerifyRequest {
        tests_dir: "/t".into(),
        command: "(/tests/test.sh)".into(),
        user: None,
        env: [("B".to_owned(), "2".to_owned())].into(),
        timeout: Duration::from_secs(30),
        output_dir: "/o".into(),
        then_download: None,
        agent_toolchain: false,
    };
    let body = jail_body(&spec, &request);
    let host = body.host_config.unwrap();
    assert_eq!(host.pid_mode.as_deref(), Some("container:abc"));
    assert_eq!(host.network_mode.as_deref(), Some("container:abc"));
    assert_eq!(
        host.cap_add.unwrap(),
        vec![
            "SYS_ADMIN".to_string(),
            "WAKE_ALARM".to_string(),
            "SYS_PTRACE".to_string()
        ]
    );
    assert_eq!(host.pids_limit, Some(64));
    assert_eq!(host.memory_swap, host.memory);
    let entrypoint = body.entrypoint.unwrap();
    assert_eq!(entrypoint[0], HELPER_PATH);
    let user_at = entrypoint.iter().position(|a| a == "--user").unwrap();
    assert_eq!(entrypoint[user_at + 1], "agent");
    assert_eq!(
        body.env.unwrap(),
        vec!["A=1".to_string(), "B=2".to_string()]
    );
    assert_eq!(body.user.as_deref(), Some("0"));
}

#[test]
fn the_helper_is_embedded() {
    assert!(
        HELPER.starts_with(b"\x7fELF"),
        "the build script did not embed the static helper"
    );
}
