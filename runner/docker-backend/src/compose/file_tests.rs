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
    let deploy = err("services:\n  main:\n    deploy:\n      resources: {}\n");
    assert!(
        deploy.contains("services.main") && deploy.contains("`deploy`"),
        "{deploy}"
    );
    let mode = err("services:\n  main:\n    network_mode: host\n");
    assert!(mode.contains("`network_mode`"), "{mode}");
    let cache = err("services:\n  s:\n    build: {context: ., cache_from: [x]}\n");
    assert!(
        cache.contains("services.s") && cache.contains("`cache_from`"),
        "{cache}"
    );
    let on_main = err("services:\n  s:\n    image: x\n    depends_on: [main]\n");
    assert!(on_main.contains("depends_on main"), "{on_main}");
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

/// Harbor's financeagent adapter's `main` (its `network_mode`, `volumes` and `deploy` left
/// out: runner refuses those on main, see above).
const FINANCEAGENT_MAIN: &str = "\
services:
  main:
    build:
      context: ${CONTEXT_DIR}
    image: ${MAIN_IMAGE_NAME}
    command: [ \"sh\", \"-c\", \"sleep infinity\" ]
";

fn image_vars() -> BTreeMap<String, String> {
    let mut vars = vars();
    vars.insert("MAIN_IMAGE_NAME".into(), "hb__t".into());
    vars
}

#[test]
fn mains_build_image_command_user_and_workdir_are_read_not_refused() {
    let file = parse(FINANCEAGENT_MAIN, &image_vars()).unwrap();
    let main = &file.services["main"];
    assert_eq!(main.build.as_ref().unwrap().context(), "/task/environment");
    assert_eq!(main.image.as_deref(), Some("hb__t"));
    assert_eq!(
        main.command.as_ref().unwrap().argv(),
        ["sh", "-c", "sleep infinity"]
    );
    let text = "services:\n  main:\n    user: 1000\n    working_dir: /srv\n    entrypoint: [\"/bin/sh\", \"-c\"]\n";
    let main = &parse(text, &vars()).unwrap().services["main"];
    assert_eq!(main.user.as_ref().unwrap().text(), "1000");
    assert_eq!(main.working_dir.as_deref(), Some("/srv"));
    assert_eq!(main.entrypoint.as_ref().unwrap().argv(), ["/bin/sh", "-c"]);
}

#[test]
fn mains_image_keys_are_read_alone_and_interpolated() {
    let (build, image) = main_image_keys(FINANCEAGENT_MAIN, &image_vars()).unwrap();
    assert_eq!(build.unwrap().context.as_deref(), Some("/task/environment"));
    assert_eq!(image.as_deref(), Some("hb__t"));
    // Another service's variables are not needed before a trial exists.
    let text = "services:\n  main:\n    build:\n      context: ./main\n      dockerfile: Dockerfile.main\n      args:\n        - VERSION=${PORT}\n        - FROM_HOST\n      target: final\n  db:\n    image: \"db:${NOT_YET}\"\n";
    let (build, image) = main_image_keys(text, &vars()).unwrap();
    let build = build.unwrap();
    assert_eq!(build.context(), "./main");
    assert_eq!(build.dockerfile.as_deref(), Some("Dockerfile.main"));
    assert_eq!(
        build.args,
        BTreeMap::from([("VERSION".to_owned(), "8080".to_owned())])
    );
    assert_eq!((build.target.as_deref(), image), (Some("final"), None));
    let short = main_image_keys("services:\n  main:\n    build: ./m\n", &vars()).unwrap();
    assert_eq!(short.0.unwrap().context(), "./m");
    assert_eq!(
        main_image_keys("services:\n  db:\n    image: x\n", &vars()).unwrap(),
        (None, None)
    );
    let unset = main_image_keys("services:\n  main:\n    image: ${NOPE}\n", &vars()).unwrap_err();
    assert!(
        unset
            .to_string()
            .contains("services.main.image: variable NOPE"),
        "{unset}"
    );
    let bad = main_image_keys(
        "services:\n  main:\n    build: {context: ., network: host}\n",
        &vars(),
    )
    .unwrap_err();
    assert!(bad.to_string().contains("`network`"), "{bad}");
}

mod merge {
    //! Harbor's merge of its build or prebuilt file with the task's, on real task dirs.

    use std::path::Path;

    use engine::ImageSource;
    use tasks::Task;

    use super::super::super::main_image::{MainImage, resolve};
    use super::super::super::service::Build;

    /// A task with `toml` appended to its task.toml and `files` in `environment/`.
    fn task(toml: &str, files: &[&str]) -> (tempfile::TempDir, Task) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::write(
            root.join("task.toml"),
            format!("[task]\nname = \"org/t\"\n{toml}"),
        )
        .unwrap();
        std::fs::write(root.join("instruction.md"), "Do it.\n").unwrap();
        std::fs::create_dir_all(root.join("tests")).unwrap();
        std::fs::write(root.join("tests/test.sh"), "exit 0\n").unwrap();
        let env = root.join("environment");
        std::fs::create_dir_all(env.join("main")).unwrap();
        std::fs::write(env.join("docker-compose.yaml"), "services: {}\n").unwrap();
        for file in files {
            std::fs::write(env.join(file), "FROM runner-base:bookworm-py\n").unwrap();
        }
        let task = Task::load(root).unwrap();
        (dir, task)
    }

    fn build(context: Option<String>, dockerfile: Option<&str>) -> Option<Build> {
        Some(Build {
            context,
            dockerfile: dockerfile.map(str::to_owned),
            ..Build::default()
        })
    }

    fn env_dir(task: &Task) -> std::path::PathBuf {
        task.environment_dir().canonicalize().unwrap()
    }

    /// `${CONTEXT_DIR}` as runner gives it: the absolute environment dir.
    fn context_dir(task: &Task) -> Option<String> {
        Some(env_dir(task).display().to_string())
    }

    fn rel(path: &str) -> Option<String> {
        Some(path.to_owned())
    }

    #[test]
    fn restating_harbors_build_file_keeps_the_tasks_own_image() {
        let (_d, t) = task("", &["Dockerfile"]);
        let restated = resolve(
            &t,
            ImageSource::Build,
            build(context_dir(&t), Some("Dockerfile")),
            Some("hb__t".into()),
        );
        assert_eq!(restated.unwrap(), MainImage::Task);
        assert_eq!(
            resolve(&t, ImageSource::Build, None, None).unwrap(),
            MainImage::Task
        );
    }

    #[test]
    fn mains_build_names_another_dockerfile_or_context() {
        let (_d, t) = task("", &["Dockerfile.main", "main/Dockerfile"]);
        let MainImage::Build(spec) = resolve(
            &t,
            ImageSource::Build,
            build(context_dir(&t), Some("Dockerfile.main")),
            Some("hb__t".into()),
        )
        .unwrap() else {
            panic!("a build")
        };
        assert_eq!(
            (spec.context, spec.dockerfile),
            (env_dir(&t), "Dockerfile.main".into())
        );
        let MainImage::Build(spec) =
            resolve(&t, ImageSource::Build, build(rel("./main"), None), None).unwrap()
        else {
            panic!("a build")
        };
        assert_eq!(spec.context, env_dir(&t).join("main"));
        assert!(spec.is_plain());
    }

    #[test]
    fn args_or_a_target_over_the_tasks_dockerfile_are_a_build_of_their_own() {
        let (_d, t) = task("", &["Dockerfile"]);
        let staged = Some(Build {
            target: Some("final".into()),
            ..Build::default()
        });
        let MainImage::Build(spec) = resolve(&t, ImageSource::Build, staged, None).unwrap() else {
            panic!("a build")
        };
        assert_eq!(
            (
                spec.context,
                spec.dockerfile.as_str(),
                spec.target.as_deref()
            ),
            (env_dir(&t), "Dockerfile", Some("final"))
        );
    }

    #[test]
    fn the_prebuilt_file_gives_way_to_the_task_files_image_and_keeps_its_build_as_fallback() {
        let (_d, t) = task(
            "[environment]\ndocker_image = \"img:1\"\n",
            &["main/Dockerfile"],
        );
        let prebuilt = || ImageSource::Prebuilt("img:1".into());
        assert_eq!(
            resolve(&t, prebuilt(), None, None).unwrap(),
            MainImage::Task
        );
        assert_eq!(
            resolve(&t, prebuilt(), None, Some("img:1".into())).unwrap(),
            MainImage::Task
        );
        assert_eq!(
            resolve(&t, prebuilt(), None, Some("other:2".into())).unwrap(),
            MainImage::Prebuilt {
                image: "other:2".into(),
                fallback: None
            }
        );
        let MainImage::Prebuilt { image, fallback } =
            resolve(&t, prebuilt(), build(rel("main"), None), None).unwrap()
        else {
            panic!("prebuilt")
        };
        assert_eq!(image, "img:1");
        assert_eq!(fallback.unwrap().context, env_dir(&t).join("main"));
        // Restating Harbor's build file over a prebuilt task without Dockerfile: never built.
        assert_eq!(
            resolve(&t, prebuilt(), build(context_dir(&t), None), None).unwrap(),
            MainImage::Task
        );
    }

    #[test]
    fn a_main_without_any_image_source_names_the_file_and_what_to_add() {
        let (_d, t) = task("", &[]);
        for (build, image) in [
            (None, None),
            (build(context_dir(&t), None), Some("hb__t".to_owned())),
            (None, Some("python:3.12".to_owned())),
        ] {
            let named = image.is_some();
            let e = resolve(&t, ImageSource::Build, build, image)
                .unwrap_err()
                .to_string();
            assert!(
                e.starts_with("environment/docker-compose.yaml: services.main has no image")
                    && e.contains("add environment/Dockerfile, [environment] docker_image"),
                "{e}"
            );
            assert_eq!(e.contains("only names the image"), named, "{e}");
        }
    }

    #[test]
    fn a_build_outside_the_environment_or_without_its_dockerfile_is_refused() {
        let (_d, t) = task("", &["Dockerfile"]);
        let outside = resolve(&t, ImageSource::Build, build(rel(".."), None), None)
            .unwrap_err()
            .to_string();
        assert!(
            outside.contains("services.main.build.context \"..\""),
            "{outside}"
        );
        let escaping = resolve(
            &t,
            ImageSource::Build,
            build(rel("main"), Some("../Dockerfile")),
            None,
        )
        .unwrap_err()
        .to_string();
        assert!(
            escaping.contains("build.dockerfile \"../Dockerfile\""),
            "{escaping}"
        );
        let missing = resolve(&t, ImageSource::Build, build(None, Some("Nope")), None)
            .unwrap_err()
            .to_string();
        assert!(missing.contains("build.dockerfile \"Nope\""), "{missing}");
        assert!(Path::new(&t.environment_dir()).join("Dockerfile").is_file());
    }
}

#[test]
fn a_deeply_nested_file_is_refused_naming_it_not_a_stack_overflow() {
    for deep in [
        // Block nesting, which saphyr does not bound: `- - - … x` 300,000 levels deep.
        format!("x-deep:\n{}x\n", "- ".repeat(300_000)),
        // Flow nesting past saphyr's own limit of 255 is its syntax error.
        format!(
            "services: {}1{}\n",
            "[".repeat(300_000),
            "]".repeat(300_000)
        ),
    ] {
        let err = err(&deep);
        assert!(
            err.starts_with("environment/docker-compose.yaml: ")
                && (err.contains("nested deeper than 128") || err.contains("recursion limit")),
            "{err}"
        );
    }
}
