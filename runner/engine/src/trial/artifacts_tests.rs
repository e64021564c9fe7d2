use super::*;

fn spec(source: &str, destination: Option<&str>) -> ArtifactSpec {
    ArtifactSpec {
        source: source.into(),
        destination: destination.map(Into::into),
        exclude: Vec::new(),
        service: None,
    }
}

#[test]
fn the_convention_dir_comes_first_unless_declared() {
    let task = [Artifact::Path("/app/out.txt".into())];
    let step = [Artifact::Spec {
        source: "/app/logs".into(),
        destination: Some("logs".into()),
        exclude: vec!["*.tmp".into()],
        service: None,
    }];
    let specs = normalized(&task, &step);
    let sources: Vec<_> = specs.iter().map(|s| s.source.as_str()).collect();
    assert_eq!(sources, [CONVENTION_DIR, "/app/out.txt", "/app/logs"]);
    assert_eq!(specs[2].exclude, ["*.tmp"]);
    let declared = [Artifact::Path("/logs/artifacts/".into())];
    assert_eq!(normalized(&declared, &[]).len(), 1);
}

#[test]
fn host_paths_follow_harbor_and_never_leave_the_dir() {
    let dir = Path::new("/t/artifacts");
    let at = |s: &ArtifactSpec| host_path(dir, s);
    assert_eq!(
        at(&spec(CONVENTION_DIR, Some(CONVENTION_DIR))),
        Some(dir.into())
    );
    assert_eq!(at(&spec("/logs/artifacts/", Some("."))), Some(dir.into()));
    assert_eq!(at(&spec("/app/out.txt", None)), Some(dir.join("out.txt")));
    assert_eq!(
        at(&spec("/app/out.txt", Some("/reports/final.txt"))),
        Some(dir.join("reports/final.txt"))
    );
    assert_eq!(at(&spec("/app/x", Some("../../etc/passwd"))), None);
    assert_eq!(manifest_destination(dir, dir), "artifacts");
    assert_eq!(
        manifest_destination(dir, &dir.join("reports/final.txt")),
        "artifacts/reports/final.txt"
    );
}

#[test]
fn staging_goes_to_the_runners_own_fresh_directory() {
    let file = stage_file_script("/app/x", "/tmp/runner-artifact.abc", "x", 10);
    assert!(
        file.contains("mkdir -m 700 '/tmp/runner-artifact.abc'"),
        "{file}"
    );
    assert!(!file.contains("mktemp"), "{file}");
    let dir = stage_dir_script("/app", "/tmp/runner-artifact.abc", &["*.o".into()], 10);
    assert!(
        dir.starts_with("mkdir -m 700 '/tmp/runner-artifact.abc' || exit 1"),
        "{dir}"
    );
}

#[test]
fn the_manifest_is_harbors_list_of_entries() {
    let entry = ManifestEntry {
        source: "/app/out.txt".into(),
        destination: "artifacts/out.txt".into(),
        kind: "file".into(),
        status: "ok".into(),
    };
    assert_eq!(
        serde_json::to_value([entry]).unwrap(),
        serde_json::json!([{
            "source": "/app/out.txt",
            "destination": "artifacts/out.txt",
            "type": "file",
            "status": "ok",
        }])
    );
}

#[tokio::test]
async fn a_file_sent_to_the_artifacts_dir_itself_stays_inside_it_under_its_name() {
    let sandbox = testkit::FakeSandbox::new();
    let workspace = sandbox.path("/workspace");
    std::fs::create_dir_all(&workspace).unwrap();
    std::fs::write(workspace.join("out.txt"), "made").unwrap();
    let trial = tempfile::tempdir().unwrap();
    let artifacts = trial.path().join("artifacts");
    let specs = [
        spec("/workspace/out.txt", Some(".")),
        spec("/workspace/out.txt", Some("/")),
        spec("/workspace/out.txt", Some("sub/renamed.txt")),
    ];
    let pass = Collection {
        artifacts_dir: &artifacts,
        convention: Convention::Download,
        copy_cap: 1 << 20,
        log: &|_| {},
    };
    let entries = collect_entries(&sandbox, &specs, &pass).await;
    let statuses: Vec<_> = entries.iter().map(|e| e.status.as_str()).collect();
    assert_eq!(statuses, ["ok", "ok", "ok"], "{entries:?}");
    assert_eq!(entries[0].destination, "artifacts/out.txt");
    assert_eq!(entries[1].destination, "artifacts/out.txt");
    assert_eq!(
        std::fs::read_to_string(artifacts.join("out.txt")).unwrap(),
        "made"
    );
    assert_eq!(
        std::fs::read_to_string(artifacts.join("sub/renamed.txt")).unwrap(),
        "made"
    );
    // Nothing beside artifacts/ in the trial directory.
    let beside: Vec<_> = std::fs::read_dir(trial.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(beside, ["artifacts"]);
}
