use std::time::Duration;

use super::super::service::{Condition, parse_duration};
use super::*;

fn vars() -> BTreeMap<String, String> {
    BTreeMap::from([
        ("CONTEXT_DIR".to_owned(), "/task/environment".to_owned()),
        ("PORT".to_owned(), "8080".to_owned()),
        ("EMPTY".to_owned(), String::new()),
    ])
}

fn err(text: &str) -> String {
    parse(text, &vars()).unwrap_err().to_string()
}

const HELLO_MCP: &str = "\
services:
  main:
    depends_on:
      mcp-server:
        condition: service_healthy
  mcp-server:
    build:
      context: ./mcp-server
    expose:
      - \"8000\"
    healthcheck:
      test: [\"CMD\", \"python\", \"-c\", \"import socket\"]
      interval: 2s
      timeout: 5s
      retries: 15
      start_period: 5s
";

#[test]
fn harbors_hello_mcp_file_reads_as_harbor_runs_it() {
    let file = parse(HELLO_MCP, &vars()).unwrap();
    let server = &file.services["mcp-server"];
    assert_eq!(server.build.as_ref().unwrap().context(), "./mcp-server");
    let health = server.healthcheck.as_ref().unwrap().config().unwrap();
    assert_eq!(health.interval, Some(2_000_000_000));
    assert_eq!(health.start_period, Some(5_000_000_000));
    assert_eq!(health.retries, Some(15));
    assert_eq!(
        file.services["main"].dependencies(),
        [("mcp-server", Condition::Healthy)]
    );
    assert_eq!(file.start_order().unwrap(), ["mcp-server"]);
}

#[test]
fn sidecars_start_after_what_they_depend_on() {
    let text = "services:\n  web:\n    image: w\n    depends_on: [db, cache]\n  db:\n    image: d\n  cache:\n    image: c\n    depends_on:\n      db:\n        condition: service_started\n";
    let order = parse(text, &vars()).unwrap().start_order().unwrap();
    assert_eq!(order, ["db", "cache", "web"]);
    let cycle = "services:\n  a:\n    image: x\n    depends_on: [b]\n  b:\n    image: x\n    depends_on: [a]\n";
    assert!(err(cycle).contains("cycle"), "{}", err(cycle));
    let unknown = "services:\n  a:\n    image: x\n    depends_on: [nope]\n";
    assert!(err(unknown).contains("\"nope\""), "{}", err(unknown));
}

#[test]
fn variables_are_interpolated_in_values() {
    let text = "services:\n  s:\n    image: \"img:${PORT}\"\n    environment:\n      A: $PORT\n      B: ${MISSING:-fallback}\n      C: ${EMPTY:-was-empty}\n      D: ${EMPTY-kept-empty}\n      E: \"$$HOME\"\n";
    let file = parse(text, &vars()).unwrap();
    let s = &file.services["s"];
    assert_eq!(s.image.as_deref(), Some("img:8080"));
    let env: BTreeMap<_, _> = s.env().into_iter().collect();
    assert_eq!(env["A"], "8080");
    assert_eq!(env["B"], "fallback");
    assert_eq!(env["C"], "was-empty");
    assert_eq!(env["D"], "");
    assert_eq!(env["E"], "$HOME");
    let unset = err("services:\n  s:\n    image: \"${NOPE}\"\n");
    assert!(unset.contains("variable NOPE is not set"), "{unset}");
}

#[test]
fn environment_lists_and_maps_are_both_read() {
    let text = "services:\n  s:\n    image: x\n    environment:\n      - A=1\n      - B=two=2\n      - NOVALUE\n";
    let env = parse(text, &vars()).unwrap().services["s"].env();
    assert_eq!(
        env,
        [("A".into(), "1".into()), ("B".into(), "two=2".into())]
    );
    let text =
        "services:\n  s:\n    image: x\n    environment:\n      N: 3\n      T: true\n      U:\n";
    let env: BTreeMap<_, _> = parse(text, &vars()).unwrap().services["s"]
        .env()
        .into_iter()
        .collect();
    assert_eq!((env["N"].as_str(), env["T"].as_str()), ("3", "true"));
    assert!(!env.contains_key("U"));
}

#[test]
fn unsupported_keys_are_refused_by_name() {
    let ports = err("services:\n  s:\n    image: x\n    ports: [\"80:80\"]\n");
    assert!(
        ports.contains("services.s") && ports.contains("ports"),
        "{ports}"
    );
    let top = err("services: {}\nnetworks:\n  n: {}\n");
    assert!(top.contains("`networks`"), "{top}");
    assert!(parse("x-common: &c {}\nservices: {}\n", &vars()).is_ok());
    let bind = err("services:\n  s:\n    image: x\n    volumes: [\"./data:/data\"]\n");
    assert!(bind.contains("host bind mounts"), "{bind}");
    let undeclared = err("services:\n  s:\n    image: x\n    volumes: [\"v:/data\"]\n");
    assert!(undeclared.contains("top-level `volumes`"), "{undeclared}");
    let no_image = err("services:\n  s:\n    environment: {A: b}\n");
    assert!(no_image.contains("needs `build` or `image`"), "{no_image}");
    let main_image = err("services:\n  main:\n    image: alpine\n");
    assert!(main_image.contains("services.main.image"), "{main_image}");
    let on_main = err("services:\n  s:\n    image: x\n    depends_on: [main]\n");
    assert!(on_main.contains("depends_on main"), "{on_main}");
    let dockerfile = err("services:\n  s:\n    build: {context: ., dockerfile: Other}\n");
    assert!(dockerfile.contains("build.dockerfile"), "{dockerfile}");
}

#[test]
fn volumes_and_commands_are_read() {
    let text = "services:\n  s:\n    image: x\n    command: python3 -m 'http.server' \"80\"\n    entrypoint: [\"/bin/sh\", \"-c\"]\n    volumes: [\"data:/data:ro\", \"data:/rw\"]\nvolumes:\n  data:\n";
    let file = parse(text, &vars()).unwrap();
    let s = &file.services["s"];
    assert_eq!(
        s.command.as_ref().unwrap().argv(),
        ["python3", "-m", "http.server", "80"]
    );
    assert_eq!(s.entrypoint.as_ref().unwrap().argv(), ["/bin/sh", "-c"]);
    let mounts = s.named_volumes().unwrap();
    assert!(mounts[0].read_only && !mounts[1].read_only);
    assert_eq!(mounts[0].target, "/data");
    assert!(file.volumes.contains("data"));
}

#[test]
fn healthchecks_and_durations() {
    assert_eq!(parse_duration("1m30s"), Some(Duration::from_secs(90)));
    assert_eq!(parse_duration("500ms"), Some(Duration::from_millis(500)));
    assert_eq!(parse_duration("1.5s"), Some(Duration::from_millis(1500)));
    assert_eq!(parse_duration("5"), None);
    assert_eq!(parse_duration("5 parsecs"), None);
    let shell = "services:\n  s:\n    image: x\n    healthcheck:\n      test: curl -f localhost\n";
    let health = parse(shell, &vars()).unwrap().services["s"]
        .healthcheck
        .as_ref()
        .unwrap()
        .config()
        .unwrap();
    assert_eq!(
        health.test,
        Some(vec!["CMD-SHELL".to_owned(), "curl -f localhost".to_owned()])
    );
    let bad = err("services:\n  s:\n    image: x\n    healthcheck:\n      test: [\"curl\"]\n");
    assert!(bad.contains("CMD, CMD-SHELL or NONE"), "{bad}");
    let bad = err("services:\n  s:\n    image: x\n    healthcheck:\n      interval: soon\n");
    assert!(bad.contains("interval"), "{bad}");
}

#[test]
fn malformed_yaml_is_an_error_not_a_panic() {
    assert!(parse("services: [unclosed", &vars()).is_err());
    assert!(err("- a\n- b\n").contains("mapping"));
    assert!(parse("", &vars()).is_err());
}
