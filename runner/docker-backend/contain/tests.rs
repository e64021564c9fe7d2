//! Unit tests of the helper's pure parts (and of its copy on a real directory).

use super::accounts::{resolve_user, user_name};
use super::copy::{Budget, copy_tree};
use super::mounts::is_mount_point;
use super::procs::{Process, command_line, is_keepalive, is_zombie};
use super::*;

const PASSWD: &str = "root:x:0:0:root:/root:/bin/bash\n\
    nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n\
    agent:x:1000:1000::/home/agent:/bin/bash\n";
const GROUP: &str = "root:x:0:\nnogroup:x:65534:\nagent:x:1000:\ndocker:x:999:agent,other\n";

#[test]
fn users_resolve_like_docker_exec() {
    let root = resolve_user("0", PASSWD, GROUP).unwrap();
    assert_eq!((root.uid, root.gid, root.home.as_str()), (0, 0, "/root"));
    let agent = resolve_user("agent", PASSWD, GROUP).unwrap();
    assert_eq!((agent.uid, agent.gid), (1000, 1000));
    assert_eq!(agent.groups, vec![1000, 999]);
    let with_group = resolve_user("nobody:agent", PASSWD, GROUP).unwrap();
    assert_eq!((with_group.uid, with_group.gid), (65534, 1000));
    let unknown_uid = resolve_user("4242", PASSWD, GROUP).unwrap();
    assert_eq!((unknown_uid.uid, unknown_uid.gid), (4242, 4242));
    assert!(resolve_user("ghost", PASSWD, GROUP).is_err());
    assert!(resolve_user("agent:ghosts", PASSWD, GROUP).is_err());
}

#[test]
fn options_parse_and_refuse_bad_values() {
    let args: Vec<String> = [
        "verify",
        "--command",
        "true",
        "--timeout",
        "2.5",
        "--user",
        "",
        "--max-file-bytes",
        "10",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let options = Options::parse(&args).unwrap();
    assert_eq!(options.timeout, Duration::from_millis(2500));
    assert_eq!(options.user, None);
    assert_eq!(options.max_file_bytes, 10);
    let bad = |args: &[&str]| {
        Options::parse(&args.iter().map(|s| s.to_string()).collect::<Vec<_>>()).is_err()
    };
    assert!(bad(&["verify", "--timeout", "1e300", "--command", "x"]));
    assert!(bad(&["verify", "--command"]));
    assert!(bad(&["verify"]));
    assert!(bad(&["run", "--command", "x"]));
}

#[test]
fn mount_points_are_matched_exactly() {
    let info = "74 48 0:40 / / rw - overlay o rw\n\
                90 74 0:50 / /logs/verifier ro - tmpfs runner-anchor ro\n";
    assert!(is_mount_point(info, "/logs/verifier"));
    assert!(!is_mount_point(info, "/logs"));
    assert!(is_mount_point(info, "/"));
}

#[test]
fn the_keepalive_is_not_listed_but_a_lookalike_elsewhere_is() {
    let keepalive = Process {
        pid: 7,
        user: String::new(),
        command: "\0keepalive sh -c sleep infinity".into(),
    };
    assert!(is_keepalive(1, "sh -c sleep infinity", &[]));
    assert!(is_keepalive(
        7,
        "sleep infinity",
        std::slice::from_ref(&keepalive)
    ));
    assert!(!is_keepalive(40, "sleep infinity", &[keepalive]));
    assert!(is_zombie("Name:\tbridge-relay\nState:\tZ (zombie)\n"));
    assert!(!is_zombie("Name:\tsleep\nState:\tS (sleeping)\n"));
    assert_eq!(user_name(65534, PASSWD), "nobody");
    assert_eq!(user_name(5, PASSWD), "5");
    let long = vec![b'x'; 1000];
    assert!(command_line(&long, "").chars().count() <= MAX_CMDLINE + 1);
    assert_eq!(command_line(b"", "Name:\tkworker\n"), "[kworker]");
    assert_eq!(command_line(b"a\0b\0", ""), "a b");
}

#[test]
fn copies_out_keep_files_and_dirs_skip_links_and_cut_at_the_budget() {
    let src = tempfile_dir("src");
    let dst = tempfile_dir("dst");
    fs::create_dir_all(src.join("sub")).unwrap();
    fs::write(src.join("reward.txt"), "1\n").unwrap();
    fs::write(src.join("sub/big.log"), vec![b'y'; 100]).unwrap();
    std::os::unix::fs::symlink("/etc/shadow", src.join("link")).unwrap();
    let mut budget = Budget {
        file: 50,
        total: 1000,
    };
    let mut notes = Vec::new();
    let shown = Path::new("/logs/verifier");
    copy_tree(&src, &dst, shown, &mut budget, &mut |k, v| {
        notes.push((k, v))
    })
    .unwrap();
    assert_eq!(fs::read_to_string(dst.join("reward.txt")).unwrap(), "1\n");
    assert_eq!(fs::read(dst.join("sub/big.log")).unwrap().len(), 50);
    assert!(fs::symlink_metadata(dst.join("link")).is_err());
    let kinds: Vec<&str> = notes.iter().map(|(k, _)| *k).collect();
    assert_eq!(kinds, ["skipped", "truncated"]);
    assert!(notes[0].1.starts_with("/logs/verifier/link: "), "{notes:?}");
    assert_eq!(budget.total, 1000 - 2 - 50);
    let _ = fs::remove_dir_all(src.parent().unwrap());
}

fn tempfile_dir(name: &str) -> PathBuf {
    let base = std::env::temp_dir().join(format!(
        "contain-test-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    let dir = base.join(name);
    fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn wait_takes_the_directories_to_make_and_refuses_anything_else() {
    let args = |list: &[&str]| list.iter().map(|a| (*a).to_owned()).collect::<Vec<_>>();
    assert_eq!(logdirs::parse(&[]).unwrap(), Vec::<String>::new());
    assert_eq!(
        logdirs::parse(&args(&[
            "--make-dir",
            "/logs/agent",
            "--make-dir",
            "/logs/x y"
        ]))
        .unwrap(),
        ["/logs/agent", "/logs/x y"]
    );
    assert!(logdirs::parse(&args(&["--make-dir"])).is_err());
    assert!(logdirs::parse(&args(&["--other", "x"])).is_err());
}

#[test]
fn an_order_is_read_whole_and_a_cut_one_means_nothing_to_do() {
    let order = order::read_order(
        &b"verify\0--command\0true\0--env\0A=b=c\0--timeout\x002.5\0\0trailing"[..],
    )
    .unwrap()
    .unwrap();
    assert_eq!(
        order.args,
        ["verify", "--command", "true", "--timeout", "2.5"]
    );
    assert_eq!(order.env, [("A".to_owned(), "b=c".to_owned())]);
    assert_eq!(
        order::read_order(&b"verify\0--command\0tr"[..]).unwrap(),
        None
    );
    assert_eq!(order::read_order(&b""[..]).unwrap(), None);
    assert!(order::read_order(&b"verify\0--env\0novalue\0\0"[..]).is_err());
}

#[test]
fn pax_records_count_their_own_length() {
    for value in ["a", &"x".repeat(90), &"y".repeat(995), &"z".repeat(9_994)] {
        let record = super::stream::pax_record("path", value);
        let (length, rest) = record.split_once(' ').unwrap();
        assert_eq!(length.parse::<usize>().unwrap(), record.len(), "{record:?}");
        assert_eq!(rest, format!("path={value}\n"));
    }
}

#[test]
fn a_ustar_header_carries_its_checksum_and_fields_as_tar_reads_them() {
    let block = super::stream::ustar_block("out/status", 0o644, 1234, b'0');
    let header = tar::Header::from_byte_slice(&block);
    assert_eq!(header.path().unwrap().to_str(), Some("out/status"));
    assert_eq!(header.size().unwrap(), 1234);
    assert_eq!(header.mode().unwrap(), 0o644);
    assert_eq!(header.cksum().unwrap(), {
        let mut copy = block;
        copy[148..156].fill(b' ');
        copy.iter().map(|&b| u32::from(b)).sum::<u32>()
    });
}

#[test]
fn the_results_stream_unpacks_whole_on_the_host_long_names_included() {
    let src = tempfile_dir("stream-src");
    let long = "n".repeat(150);
    fs::create_dir_all(src.join("verifier/deep")).unwrap();
    fs::write(src.join("status"), "exit_code\t0\n").unwrap();
    fs::write(src.join("verifier/reward.txt"), "1\n").unwrap();
    fs::write(src.join("verifier/empty"), "").unwrap();
    fs::write(src.join("verifier/deep").join(&long), vec![b'q'; 1500]).unwrap();
    fs::set_permissions(
        src.join("verifier/reward.txt"),
        fs::Permissions::from_mode(0o600),
    )
    .unwrap();
    let mut bytes = Vec::new();
    super::stream::write_tree(&src, "out", &mut bytes).unwrap();
    assert_eq!(bytes.len() % 512, 0);
    let dst = tempfile_dir("stream-dst");
    let budget = crate::container::archive::DownloadBudget::new(1 << 20);
    let report = crate::container::archive::unpack_stripped(&bytes[..], &dst, &budget).unwrap();
    assert_eq!(report, crate::container::archive::DownloadReport::default());
    assert_eq!(
        fs::read_to_string(dst.join("status")).unwrap(),
        "exit_code\t0\n"
    );
    assert_eq!(
        fs::read_to_string(dst.join("verifier/reward.txt")).unwrap(),
        "1\n"
    );
    assert_eq!(fs::read(dst.join("verifier/empty")).unwrap(), b"");
    assert_eq!(
        fs::read(dst.join("verifier/deep").join(&long)).unwrap(),
        vec![b'q'; 1500]
    );
    // Every entry, the PAX-named one under its whole name.
    let mut archive = tar::Archive::new(&bytes[..]);
    let names: Vec<String> = archive
        .entries()
        .unwrap()
        .map(|e| e.unwrap().path().unwrap().display().to_string())
        .collect();
    assert_eq!(names.len(), 7, "{names:?}");
    assert!(names.contains(&format!("out/verifier/deep/{long}")));
    let _ = fs::remove_dir_all(src.parent().unwrap());
}

#[test]
fn only_a_real_directory_with_nothing_in_it_is_empty() {
    let base = tempfile_dir("empty-check");
    let empty = base.join("empty");
    fs::create_dir_all(&empty).unwrap();
    assert!(is_empty_dir(&empty));
    let full = base.join("full");
    fs::create_dir_all(full.join("sub")).unwrap();
    assert!(!is_empty_dir(&full));
    let link = base.join("link");
    std::os::unix::fs::symlink(&empty, &link).unwrap();
    assert!(
        !is_empty_dir(&link),
        "a link to an empty directory is not one"
    );
    assert!(!is_empty_dir(&base.join("missing")));
    fs::write(base.join("file"), "").unwrap();
    assert!(!is_empty_dir(&base.join("file")));
    let _ = fs::remove_dir_all(base.parent().unwrap());
}

#[test]
fn the_programs_a_test_script_runs_are_tools_and_look_alikes_are_not() {
    use super::toolchain::is_tool_name;
    for name in [
        "bash",
        "sh",
        "dash",
        "env",
        "python3",
        "python3.12",
        "python3.12m",
        "perl5.36.0",
        "pip3.11",
        "pytest",
        "pytest-3",
        "uvx",
        "curl",
    ] {
        assert!(is_tool_name(name), "{name} is a tool");
    }
    for name in [
        "python3-config",
        "bashbug",
        "python3.12-config",
        "envsubst",
        "curlie",
        "ls",
    ] {
        assert!(!is_tool_name(name), "{name} is not a tool");
    }
}

#[test]
fn the_loader_and_the_c_library_family_are_pinned_and_other_libraries_are_not() {
    use super::toolchain::is_pinned_library;
    for name in [
        "ld-linux-x86-64.so.2",
        "ld-linux-aarch64.so.1",
        "libc.so.6",
        "libm.so.6",
        "libtinfo.so.6.4",
        "libpython3.12.so.1.0",
        "libz.so.1",
    ] {
        assert!(is_pinned_library(name), "{name} is pinned");
    }
    for name in [
        "libcap.so.2",
        "libcurl.so.4",
        "libcrypto.so.3",
        "libmagic.so.1",
        "libc++.so",
    ] {
        assert!(!is_pinned_library(name), "{name} is not pinned");
    }
}

#[test]
fn python_startup_hooks_are_recognised_and_pth_import_lines_dropped() {
    use super::toolchain::{is_site_hook, without_executable_lines};
    for name in [
        "sitecustomize.py",
        "usercustomize.py",
        "sitecustomize",
        "sitecustomize.cpython-312.pyc",
    ] {
        assert!(is_site_hook(name), "{name}");
    }
    assert!(!is_site_hook("sitecustomize_helpers.py"));
    assert_eq!(without_executable_lines(b"/opt/lib\n./vendor\n"), None);
    assert_eq!(
        without_executable_lines(b"/opt/lib\nimport os; os.system('forge')\nimport\tx\n"),
        Some(b"/opt/lib\n".to_vec())
    );
}

#[test]
fn runners_own_pins_from_an_earlier_step_are_not_the_agents_changes() {
    let mountinfo = "\
1014 980 0:93 / / rw,relatime master:1 - overlay overlay rw,lowerdir=/x\n\
1201 1014 0:140 /0 /usr/local/bin/bash ro,nosuid,nodev - tmpfs runner-pristine ro,mode=755\n\
1202 1014 0:140 /5 /etc/ld.so.preload ro,nosuid,nodev - tmpfs runner-pristine ro,mode=755\n\
1203 1014 0:140 /6 /opt/my\\040tools/python3 ro - tmpfs runner-pristine ro\n\
1204 1014 0:150 / /usr/bin/perl rw - tmpfs agent-made rw\n\
1205 1014 254:1 /docker/hosts /etc/hosts rw - ext4 /dev/vda1 rw\n";
    let ours = toolchain::runner_pins(mountinfo);
    let expected: Vec<&str> = vec![
        "/etc/ld.so.preload",
        "/opt/my tools/python3",
        "/usr/local/bin/bash",
    ];
    assert_eq!(
        ours.iter().map(String::as_str).collect::<Vec<_>>(),
        expected
    );
    let mut changes = vec![
        "/usr/local/bin/bash: added by the agent, earlier on PATH than the image's /usr/bin/bash"
            .to_owned(),
        "/etc/ld.so.preload: added by the agent".to_owned(),
        "/usr/bin/perl: changed by the agent".to_owned(),
        "/usr/local/bin/python3: added by the agent, earlier on PATH than the image's /usr/bin/python3"
            .to_owned(),
    ];
    toolchain::drop_runners_own(&mut changes, &ours);
    assert_eq!(
        changes,
        [
            "/usr/bin/perl: changed by the agent",
            "/usr/local/bin/python3: added by the agent, earlier on PATH than the image's /usr/bin/python3"
        ]
    );
}
