//! Determinism, exclusion, symlink and secret-check behaviour of `package_source` on real trees.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use provenance::{
    EntryKind, ExcludeRules, ProvenanceError, SourceOptions, build_tar, collect, package_source,
};
use testkit::files::{set_mtime, write, write_all};

/// The sample tree's files, `(path, contents)`, besides an empty dir and an outward symlink.
const SAMPLE_FILES: [(&str, &str); 7] = [
    ("server.py", "print('hi')\n"),
    ("pkg/mod.py", "X = 1\n"),
    ("pkg/__pycache__/mod.cpython-311.pyc", "junk"),
    ("node_modules/a/index.js", "junk"),
    ("data/big.csv", "1,2\n"),
    ("run.log", "log\n"),
    ("a.txt", "a\n"),
];

fn sample_tree(root: &Path) {
    write_all(root, &SAMPLE_FILES);
    std::fs::create_dir_all(root.join("empty")).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", root.join("link-out")).unwrap();
}

fn options(root: &Path) -> SourceOptions {
    SourceOptions {
        root: root.to_path_buf(),
        extra_excludes: vec!["*.log".into()],
        ..Default::default()
    }
}

#[test]
fn same_tree_same_digests_and_record_anywhere() {
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    // Same content, created in a different order (links and dirs first, files in reverse), in
    // different directories; only the excluded log differs.
    sample_tree(a.path());
    std::os::unix::fs::symlink("/etc/passwd", b.path().join("link-out")).unwrap();
    std::fs::create_dir_all(b.path().join("empty")).unwrap();
    for (rel, text) in SAMPLE_FILES.iter().rev() {
        let text = if *rel == "run.log" {
            "other log\n"
        } else {
            text
        };
        write(b.path(), rel, text);
    }

    let first = package_source(&options(a.path())).unwrap();
    let again = package_source(&options(a.path())).unwrap();
    let other = package_source(&options(b.path())).unwrap();
    assert_eq!(first.provenance.tar_sha256(), again.provenance.tar_sha256());
    assert_eq!(
        first.provenance.to_json(),
        again.provenance.to_json(),
        "records of one tree must be identical"
    );
    assert_eq!(first.provenance.tar_sha256(), other.provenance.tar_sha256());
    assert_eq!(
        first.provenance.predicate.archive.tree_digest,
        other.provenance.predicate.archive.tree_digest
    );
    assert_eq!(
        first.tar_gz, again.tar_gz,
        "gzip with mtime 0 is stable on one machine"
    );
    assert_eq!(first.provenance.tar_sha256().len(), 64);
}

#[test]
fn touching_mtimes_changes_nothing_but_chmod_x_does() {
    let dir = tempfile::tempdir().unwrap();
    sample_tree(dir.path());
    let before = package_source(&options(dir.path())).unwrap().provenance;
    for rel in ["server.py", "pkg/mod.py", "pkg", "empty", "link-out", "."] {
        set_mtime(&dir.path().join(rel), "2001-02-03 04:05:06");
    }
    let touched = package_source(&options(dir.path())).unwrap().provenance;
    assert_eq!(before.to_json(), touched.to_json());

    let path = dir.path().join("server.py");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    let exec = package_source(&options(dir.path())).unwrap().provenance;
    assert_ne!(
        before.tar_sha256(),
        exec.tar_sha256(),
        "the exec bit is part of the archive"
    );
    assert_eq!(
        before.predicate.archive.tree_digest, exec.predicate.archive.tree_digest,
        "dirHash1 ignores modes"
    );

    // Group/other bits are not kept: only the owner exec bit matters.
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o700)).unwrap();
    let exec_private = package_source(&options(dir.path())).unwrap().provenance;
    assert_eq!(exec.tar_sha256(), exec_private.tar_sha256());
}

#[test]
fn tar_holds_sorted_entries_fixed_metadata_and_unfollowed_symlinks() {
    let dir = tempfile::tempdir().unwrap();
    sample_tree(dir.path());
    let tree = collect(dir.path(), &ExcludeRules::new(&["*.log".into()]).unwrap()).unwrap();
    let names: Vec<&str> = tree.entries.iter().map(|e| e.rel_path.as_str()).collect();
    assert_eq!(
        names,
        [
            "a.txt",
            "empty",
            "link-out",
            "pkg",
            "pkg/mod.py",
            "server.py"
        ]
    );
    assert_eq!(tree.excluded.excluded_entry_count, 4);
    assert_eq!(tree.excluded.counts.get("__pycache__"), Some(&1));
    assert_eq!(tree.excluded.counts.get("*.log"), Some(&1));
    let link = tree
        .entries
        .iter()
        .find(|e| e.rel_path == "link-out")
        .unwrap();
    assert_eq!(
        link.kind,
        EntryKind::Symlink {
            target: "/etc/passwd".into()
        }
    );

    let archive = build_tar(&tree).unwrap();
    let mut reader = tar::Archive::new(archive.tar.as_slice());
    let mut seen = Vec::new();
    for entry in reader.entries().unwrap() {
        let entry = entry.unwrap();
        let header = entry.header();
        assert_eq!(header.mtime().unwrap(), 1_153_704_088);
        assert_eq!(header.uid().unwrap(), 0);
        assert_eq!(header.gid().unwrap(), 0);
        let path = entry
            .path()
            .unwrap()
            .to_string_lossy()
            .trim_end_matches('/')
            .to_owned();
        if path == "link-out" {
            assert!(header.entry_type().is_symlink());
            assert_eq!(
                entry.link_name().unwrap().unwrap().to_str(),
                Some("/etc/passwd")
            );
        } else if path == "server.py" {
            assert_eq!(header.mode().unwrap(), 0o644);
            assert_eq!(header.size().unwrap(), 12);
        }
        seen.push(path);
    }
    assert_eq!(seen, names);
}

#[test]
fn tree_digest_matches_the_shell_pipeline() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "b.txt", "b\n");
    write(dir.path(), "a/x y.txt", "spaced\n");
    write(dir.path(), "a.txt", "a\n");
    let record = package_source(&SourceOptions {
        root: dir.path().into(),
        ..Default::default()
    })
    .unwrap()
    .provenance;
    let out = Command::new("bash")
        .arg("-c")
        .arg("find . -type f | cut -c3- | LC_ALL=C sort | tr '\\n' '\\0' | xargs -0 -r sha256sum | sha256sum | cut -d' ' -f1")
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(
        record.predicate.archive.tree_digest,
        String::from_utf8_lossy(&out.stdout).trim()
    );
}

#[test]
fn planted_secret_is_refused_naming_file_and_variable_only() {
    let dir = tempfile::tempdir().unwrap();
    sample_tree(dir.path());
    let value = "sk-test-planted-0123456789abcdef";
    write(dir.path(), "pkg/settings.py", &format!("KEY = '{value}'\n"));
    let mut opts = options(dir.path());
    opts.known_secrets = vec![("MY_PROVIDER_API_KEY".into(), value.into())];
    let err = package_source(&opts).unwrap_err();
    assert!(matches!(err, ProvenanceError::SecretInSource { .. }));
    testkit::assert_names_but_hides(
        &err.to_string(),
        &["pkg/settings.py", "MY_PROVIDER_API_KEY"],
        value,
    );

    // The same secret inside an excluded directory is never read, so it does not block.
    std::fs::remove_file(dir.path().join("pkg/settings.py")).unwrap();
    write(
        dir.path(),
        "data/settings.py",
        &format!("KEY = '{value}'\n"),
    );
    let ok = package_source(&opts).unwrap();
    assert_eq!(ok.provenance.predicate.secret_check.known_values_checked, 1);
}

#[test]
fn symlink_to_a_secret_file_is_not_followed() {
    let outside = tempfile::tempdir().unwrap();
    let value = "supersecretvalue-42";
    write(outside.path(), "creds", value);
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "a.txt", "a\n");
    std::os::unix::fs::symlink(outside.path().join("creds"), dir.path().join("creds")).unwrap();
    let opts = SourceOptions {
        root: dir.path().into(),
        known_secrets: vec![("DB_PASSWORD".into(), value.into())],
        ..Default::default()
    };
    let packaged = package_source(&opts).unwrap();
    let tar = flate2::read::GzDecoder::new(packaged.tar_gz.as_slice());
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(&mut { tar }, &mut bytes).unwrap();
    assert!(!bytes.windows(value.len()).any(|w| w == value.as_bytes()));
}
