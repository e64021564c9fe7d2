//! Whole-pipeline tests over corpora generated at test time: planted secrets in every form must
//! all be removed (100% recall per form), clean trees must copy byte-identical, aborts must leave
//! no DEST, a second scrub must change nothing, and the input must be untouched.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE};
use sha2::{Digest, Sha256};
use testkit::files::snapshot;

use super::*;

/// A small deterministic generator, so failures reproduce.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn string(&mut self, alphabet: &[u8], len: usize) -> String {
        (0..len)
            .map(|_| alphabet[(self.next() % alphabet.len() as u64) as usize] as char)
            .collect()
    }
}

const ALNUM: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

/// Synthetic secrets shaped like the keys a run holds, plus one with every awkward character.
fn generated_secrets(seed: u64) -> Vec<(String, String)> {
    let mut rng = Rng(seed);
    let url_safe = [ALNUM, b"-_"].concat();
    vec![
        (
            "ANTHROPIC_API_KEY".into(),
            format!("sk-ant-api03-{}AA", rng.string(&url_safe, 93)),
        ),
        (
            "GITHUB_TOKEN".into(),
            format!("ghp_{}", rng.string(ALNUM, 36)),
        ),
        (
            "OPENROUTER_API_KEY".into(),
            format!("sk-or-v1-{}", rng.string(b"0123456789abcdef", 64)),
        ),
        (
            "DB_PASSWORD".into(),
            format!("p@ss/w0rd \"q\" +{}ü\\", rng.string(ALNUM, 6)),
        ),
    ]
}

fn secret_set(secrets: &[(String, String)]) -> SecretSet {
    let mut builder = SecretSetBuilder::new(false);
    for (i, (name, value)) in secrets.iter().enumerate() {
        builder
            .add_pair("--secret", i + 1, &format!("{name}={value}"))
            .unwrap();
    }
    builder.build().unwrap()
}

/// Generated secrets and a scratch directory holding an empty input job dir `job/`.
fn job_case(seed: u64) -> (Vec<(String, String)>, tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("job");
    std::fs::create_dir_all(&input).unwrap();
    (generated_secrets(seed), dir, input)
}

fn options(input: &Path, output: &Path, secrets: &[(String, String)]) -> ScrubOptions {
    ScrubOptions {
        input: input.to_path_buf(),
        output: output.to_path_buf(),
        secrets: secret_set(secrets),
        drop_unscannable: false,
        disabled_forms: Vec::new(),
    }
}

fn percent(value: &str, upper: bool, plus: bool) -> String {
    value
        .bytes()
        .map(|b| match b {
            b if b.is_ascii_alphanumeric() || b"-._~".contains(&b) => (b as char).to_string(),
            b' ' if plus => "+".into(),
            b if upper => format!("%{b:02X}"),
            b => format!("%{b:02x}"),
        })
        .collect()
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

fn tar(files: &[(String, Vec<u8>)]) -> Vec<u8> {
    let mut builder = tar::Builder::new(Vec::new());
    for (name, data) in files {
        let mut header = tar::Header::new_gnu();
        header.set_size(data.len() as u64);
        header.set_mode(0o644);
        header.set_mtime(1_700_000_000);
        builder.append_data(&mut header, name, &data[..]).unwrap();
    }
    builder.into_inner().unwrap()
}

/// One planted occurrence: the file, the form, and the exact bytes written around the secret.
struct Planted {
    file: String,
    form: &'static str,
    blob: Vec<u8>,
}

/// Writes a job-shaped tree with every secret planted in every form; returns what was planted.
fn plant(root: &Path, secrets: &[(String, String)]) -> Vec<Planted> {
    let mut planted = Vec::new();
    let mut log = Vec::new();
    let mut add = |file: &str, form: &'static str, blob: Vec<u8>, log: &mut Vec<u8>| {
        log.extend_from_slice(b"2026-01-01T00:00:00Z INFO step ");
        log.extend_from_slice(&blob);
        log.extend_from_slice(b" done\n");
        planted.push(Planted {
            file: file.into(),
            form,
            blob,
        });
    };
    for (name, value) in secrets {
        let v = value.as_bytes();
        add(
            "agent/trace.log",
            "raw",
            format!("{name}={value};").into_bytes(),
            &mut log,
        );
        add(
            "agent/trace.log",
            "url-encoded",
            format!("?key={}&x", percent(value, true, false)).into_bytes(),
            &mut log,
        );
        add(
            "agent/trace.log",
            "url-encoded-lower",
            format!("?key={}&x", percent(value, false, false)).into_bytes(),
            &mut log,
        );
        add(
            "agent/trace.log",
            "form-encoded",
            format!("key={}&x", percent(value, true, true)).into_bytes(),
            &mut log,
        );
        for pad in 0..6 {
            let data = [&b"user:xx"[..pad], v, b":tail"].concat();
            add(
                "agent/trace.log",
                "base64-std",
                STANDARD.encode(&data).into_bytes(),
                &mut log,
            );
            add(
                "agent/trace.log",
                "base64-url",
                URL_SAFE.encode(&data).into_bytes(),
                &mut log,
            );
        }
        add(
            "agent/trace.log",
            "hex-lower",
            hex::encode([b"ab", v].concat()).into_bytes(),
            &mut log,
        );
        add(
            "agent/trace.log",
            "hex-upper",
            hex::encode_upper([v, b"z"].concat()).into_bytes(),
            &mut log,
        );
        let chars: Vec<char> = value.chars().collect();
        let head: String = chars[..4].iter().collect();
        let tail3: String = chars[chars.len() - 3..].iter().collect();
        let tail4: String = chars[chars.len() - 4..].iter().collect();
        add(
            "agent/trace.log",
            "masked-4-3",
            format!("{name}: {head}****{tail3}").into_bytes(),
            &mut log,
        );
        add(
            "agent/trace.log",
            "masked-4-4",
            format!("{name}: {head}****{tail4}").into_bytes(),
            &mut log,
        );
        // Split at every byte position by each kind of break a terminal log holds.
        for (form, sep) in [
            ("split-newline", &b"\n"[..]),
            ("split-crlf", b"\r\n"),
            ("split-ansi", b"\x1b[0m\x1b[32m"),
            ("split-json-escapes", b"\\u001b[0m\\r\\n"),
        ] {
            for at in 1..v.len() {
                if !value.is_char_boundary(at) {
                    continue;
                }
                add(
                    "agent/terminal.log",
                    form,
                    [&v[..at], sep, &v[at..]].concat(),
                    &mut log,
                );
            }
        }
    }
    // Both logs get every line; each planted entry names the log it is checked in.
    std::fs::create_dir_all(root.join("agent")).unwrap();
    std::fs::write(root.join("agent/trace.log"), &log).unwrap();
    std::fs::write(root.join("agent/terminal.log"), &log).unwrap();

    // Harness-shaped JSON: values verbatim (escaped by the serialiser), with `\/`, and masked.
    let env: serde_json::Map<String, serde_json::Value> = secrets
        .iter()
        .map(|(n, v)| (n.clone(), serde_json::Value::String(v.clone())))
        .collect();
    let config = serde_json::json!({"agent": {"name": "a", "env": env}, "note": "x * y"});
    let pretty = serde_json::to_string_pretty(&config).unwrap();
    std::fs::write(root.join("config.json"), &pretty).unwrap();
    let python_style = serde_json::to_string(&config).unwrap().replace('/', "\\/");
    std::fs::write(root.join("lock.json"), &python_style).unwrap();
    for (_, value) in secrets {
        let escaped = serde_json::to_string(value).unwrap();
        planted.push(Planted {
            file: "config.json".into(),
            form: "json-escaped",
            blob: escaped.clone().into_bytes(),
        });
        planted.push(Planted {
            file: "lock.json".into(),
            form: "json-escaped-slash",
            blob: escaped.replace('/', "\\/").into_bytes(),
        });
    }

    // Binary data with NULs around each value.
    let mut binary = vec![0u8, 1, 2, 0];
    for (_, value) in secrets {
        binary.extend_from_slice(value.as_bytes());
        binary.extend_from_slice(&[0, 0xff, 0]);
        planted.push(Planted {
            file: "cache.bin".into(),
            form: "binary",
            blob: value.clone().into_bytes(),
        });
    }
    std::fs::write(root.join("cache.bin"), &binary).unwrap();

    // Archives: gzip, tar and tar.gz, with secrets in member contents and member names.
    let (first_name, first) = &secrets[1];
    let text = format!("{first_name}={first}\nb64={}\n", STANDARD.encode(first)).into_bytes();
    std::fs::write(root.join("logs.log.gz"), gzip(&text)).unwrap();
    let members = vec![
        (format!("inner/{first}.txt"), text.clone()),
        ("nested.gz".into(), gzip(&text)),
    ];
    std::fs::write(root.join("bundle.tar"), tar(&members)).unwrap();
    std::fs::write(root.join("bundle.tar.gz"), gzip(&tar(&members))).unwrap();
    for file in ["logs.log.gz", "bundle.tar", "bundle.tar.gz"] {
        planted.push(Planted {
            file: file.into(),
            form: "in-archive",
            blob: first.clone().into_bytes(),
        });
    }

    // Names and a symlink target.
    std::fs::create_dir_all(root.join(format!("trials/{first}"))).unwrap();
    std::fs::write(
        root.join(format!("trials/{first}/out-{first}.txt")),
        b"fine\n",
    )
    .unwrap();
    std::os::unix::fs::symlink(format!("../{first}"), root.join("trials/link")).unwrap();
    planted.push(Planted {
        file: "<names>".into(),
        form: "name",
        blob: first.clone().into_bytes(),
    });
    planted
}

/// Every byte view of a file: itself, gunzipped, and tar member names and contents, recursively.
fn views(data: &[u8]) -> Vec<u8> {
    let mut all = data.to_vec();
    if data.starts_with(&[0x1f, 0x8b]) {
        let mut plain = Vec::new();
        flate2::read::MultiGzDecoder::new(data)
            .read_to_end(&mut plain)
            .unwrap();
        all.extend(views(&plain));
    } else if data.len() > 512 && &data[257..262] == b"ustar" {
        let mut archive = tar::Archive::new(data);
        for entry in archive.entries().unwrap() {
            let mut entry = entry.unwrap();
            all.extend_from_slice(&entry.path_bytes());
            let mut content = Vec::new();
            entry.read_to_end(&mut content).unwrap();
            all.extend(views(&content));
        }
    }
    all
}

fn tree_hash(root: &Path) -> String {
    let mut hasher = Sha256::new();
    for (path, data) in snapshot(root) {
        hasher.update(path.as_os_str().as_encoded_bytes());
        hasher.update([0]);
        hasher.update(Sha256::digest(&data));
    }
    hex::encode(hasher.finalize())
}

fn written(outcome: ScrubOutcome) -> Report {
    match outcome {
        ScrubOutcome::Written(report) => report,
        ScrubOutcome::Aborted(report) => {
            panic!("aborted: {:?} {:?}", report.unscannable, report.leftovers)
        }
    }
}

#[test]
fn planted_corpus_full_recall_idempotent_input_untouched() {
    let secrets = generated_secrets(0x5eed_1234_abcd_0001);
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("job");
    let planted = plant(&input, &secrets);
    let before = tree_hash(&input);
    let output = dir.path().join("public");
    let report = written(scrub(&options(&input, &output, &secrets)).unwrap());
    assert_eq!(tree_hash(&input), before, "the input must not change");

    // Recall per form: a planted occurrence is removed when its exact bytes are gone.
    let out = snapshot(&output);
    let all_paths: Vec<u8> = out
        .keys()
        .flat_map(|p| p.as_os_str().as_encoded_bytes().to_vec())
        .collect();
    let mut per_form: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for p in &planted {
        let haystack = if p.file == "<names>" {
            [all_paths.clone(), out.values().flatten().copied().collect()].concat()
        } else {
            let (_, data) = out
                .iter()
                .find(|(k, _)| k.to_str() == Some(p.file.as_str()))
                .expect("file written");
            views(data)
        };
        let slot = per_form.entry(p.form).or_default();
        slot.0 += 1;
        if !haystack.windows(p.blob.len()).any(|w| w == p.blob) {
            slot.1 += 1;
        }
    }
    for (form, (total, removed)) in &per_form {
        assert_eq!(removed, total, "recall for {form}: {removed}/{total}");
    }
    assert_eq!(per_form.len(), 19, "every form planted: {per_form:?}");

    // No value survives anywhere, in any file view or name; JSON stays JSON; binary keeps length.
    for (path, data) in &out {
        let data = views(data);
        for (_, value) in &secrets {
            assert!(
                !data.windows(value.len()).any(|w| w == value.as_bytes()),
                "{path:?} holds a value"
            );
        }
    }
    for (_, value) in &secrets {
        assert!(
            !all_paths
                .windows(value.len())
                .any(|w| w == value.as_bytes())
        );
    }
    for json in ["config.json", "lock.json", REPORT_FILE] {
        serde_json::from_slice::<serde_json::Value>(&out[Path::new(json)]).expect("valid JSON");
    }
    assert_eq!(
        out[Path::new("cache.bin")].len(),
        std::fs::read(input.join("cache.bin")).unwrap().len()
    );

    // The report counts by name and form, and never holds a value or an encoding of one.
    let report_bytes = &out[Path::new(REPORT_FILE)];
    for (_, value) in &secrets {
        for needle in [value.clone(), hex::encode(value), STANDARD.encode(value)] {
            assert!(
                !report_bytes
                    .windows(needle.len())
                    .any(|w| w == needle.as_bytes())
            );
        }
    }
    let forms: BTreeSet<&str> = report.redactions.iter().map(|r| r.form.as_str()).collect();
    for form in [
        "raw",
        "json-escaped",
        "json-escaped-slash",
        "url-encoded",
        "hex-upper",
        "masked-4-3",
        "masked-4-4",
    ] {
        assert!(forms.contains(form), "{form} missing from {forms:?}");
    }
    for align in 0..3 {
        assert!(forms.contains(format!("base64-std-{align}").as_str()));
    }
    assert!(report.redactions.iter().any(|r| r.split));
    assert!(
        report
            .redactions
            .iter()
            .any(|r| r.path.starts_with("bundle.tar.gz!"))
    );
    assert!(
        report
            .redactions
            .iter()
            .any(|r| r.location == Location::Name)
    );
    assert!(
        report
            .redactions
            .iter()
            .any(|r| r.location == Location::LinkTarget)
    );

    // Scrubbing the output again changes nothing but the report's counts.
    let again = dir.path().join("again");
    let second = written(scrub(&options(&output, &again, &secrets)).unwrap());
    assert_eq!(second.totals.redactions, 0, "{:?}", second.redactions);
    let mut first = snapshot(&output);
    let mut other = snapshot(&again);
    first.remove(Path::new(REPORT_FILE));
    other.remove(Path::new(REPORT_FILE));
    assert_eq!(first, other, "a second scrub must be a no-op");

    // Deterministic: the same input gives the same tree and report.
    let third = dir.path().join("third");
    written(scrub(&options(&input, &third, &secrets)).unwrap());
    assert_eq!(snapshot(&output), snapshot(&third));
}

#[test]
fn clean_corpus_copies_byte_identical() {
    let secrets = generated_secrets(0x0bad_cafe_0000_0002);
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("job");
    std::fs::create_dir_all(input.join("agent/sub")).unwrap();
    let mut rng = Rng(99);
    let mut text = String::new();
    for i in 0..400 {
        let sha = rng.string(b"0123456789abcdef", 40);
        let uuid = rng.string(b"0123456789abcdef", 32);
        text.push_str(&format!(
            "{i} commit {sha} uuid {uuid} model gpt-4o \x1b[1mbold\x1b[0m *** x\r\n"
        ));
    }
    std::fs::write(input.join("agent/log.txt"), &text).unwrap();
    let image: Vec<u8> = (0..3000).map(|_| rng.next() as u8).collect();
    let json = serde_json::json!({"img": STANDARD.encode(&image), "stars": "a****b", "n": 1});
    std::fs::write(
        input.join("result.json"),
        serde_json::to_vec_pretty(&json).unwrap(),
    )
    .unwrap();
    std::fs::write(input.join("agent/sub/blob.bin"), &image).unwrap();
    std::fs::write(input.join("agent/log.txt.gz"), gzip(text.as_bytes())).unwrap();
    std::fs::write(
        input.join("bundle.tar.gz"),
        gzip(&tar(&[("a.txt".into(), text.clone().into_bytes())])),
    )
    .unwrap();
    std::os::unix::fs::symlink("agent/log.txt", input.join("latest")).unwrap();
    std::fs::create_dir(input.join("empty")).unwrap();

    let output = dir.path().join("public");
    let report = written(scrub(&options(&input, &output, &secrets)).unwrap());
    assert_eq!(report.totals.redactions, 0);
    let mut out = snapshot(&output);
    assert!(out.remove(Path::new(REPORT_FILE)).is_some());
    assert_eq!(out, snapshot(&input), "clean files must be byte-identical");
}

#[test]
fn unscannable_files_abort_unless_dropped() {
    let (secrets, dir, input) = job_case(3);
    std::fs::write(input.join("notes.txt"), format!("k={}\n", secrets[0].1)).unwrap();
    std::fs::write(input.join("art.zip"), b"PK\x03\x04\x14\x00encrypted-ish").unwrap();
    std::fs::write(input.join("old.7z"), b"7z\xbc\xaf\x27\x1c\x00\x04").unwrap();
    std::fs::write(input.join("bad.gz"), b"\x1f\x8b\x08\x00not really gzip").unwrap();
    let before = tree_hash(&input);
    let output = dir.path().join("public");
    let ScrubOutcome::Aborted(report) = scrub(&options(&input, &output, &secrets)).unwrap() else {
        panic!("must abort");
    };
    let listed: Vec<&str> = report.unscannable.iter().map(|d| d.path.as_str()).collect();
    assert_eq!(listed, ["art.zip", "bad.gz", "old.7z"]);
    assert!(!output.exists());
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(leftovers, ["job"], "the staged copy is removed");
    assert_eq!(tree_hash(&input), before);

    let mut opts = options(&input, &output, &secrets);
    opts.drop_unscannable = true;
    let report = written(scrub(&opts).unwrap());
    assert_eq!(report.unscannable.len(), 3);
    assert!(!output.join("art.zip").exists());
    assert_eq!(
        std::fs::read_to_string(output.join("notes.txt")).unwrap(),
        "k=[REDACTED:ANTHROPIC_API_KEY]\n"
    );
}

#[test]
fn verifier_catches_what_a_crippled_scrubber_misses() {
    let (secrets, dir, input) = job_case(4);
    let value = secrets[1].1.as_bytes();
    let data = [&b"x"[..], value, b"yz"].concat();
    std::fs::write(
        input.join("a.log"),
        format!("auth {}\n", STANDARD.encode(&data)),
    )
    .unwrap();
    std::fs::write(input.join("b.log"), format!("hex {}\n", hex::encode(value))).unwrap();
    for disabled in [
        vec![Form::Base64Std(1), Form::Base64Url(1)],
        vec![Form::HexLower],
    ] {
        let output = dir.path().join("out");
        let mut opts = options(&input, &output, &secrets);
        opts.disabled_forms = disabled.clone();
        let ScrubOutcome::Aborted(report) = scrub(&opts).unwrap() else {
            panic!("{disabled:?} must abort")
        };
        assert!(!output.exists());
        let found: Vec<(&str, &str)> = report
            .leftovers
            .iter()
            .map(|l| (l.path.as_str(), l.form.as_str()))
            .collect();
        let expected = if disabled[0] == Form::HexLower {
            ("b.log", "hex-lower")
        } else {
            ("a.log", "base64-std-1")
        };
        assert!(found.contains(&expected), "{found:?}");
        assert!(
            report
                .leftovers
                .iter()
                .all(|l| l.secret.as_deref() == Some("GITHUB_TOKEN"))
        );
    }
}

#[test]
fn undeclared_provider_keys_abort() {
    let (secrets, dir, input) = job_case(5);
    let undeclared = format!("ghp_{}", Rng(77).string(ALNUM, 36));
    std::fs::write(
        input.join("a.log"),
        format!("token={undeclared}\ntask-abcdefghijklmnopqrstuvwxyz ok\n"),
    )
    .unwrap();
    let output = dir.path().join("out");
    let ScrubOutcome::Aborted(report) = scrub(&options(&input, &output, &secrets)).unwrap() else {
        panic!("must abort")
    };
    assert_eq!(report.leftovers.len(), 1, "{:?}", report.leftovers);
    assert_eq!(report.leftovers[0].form, PROVIDER_KEY_FORM);
    assert!(
        !serde_json::to_string(&report)
            .unwrap()
            .contains(&undeclared)
    );
    assert!(!output.exists());
}

#[test]
fn bad_paths_are_bad_input() {
    let (secrets, dir, input) = job_case(6);
    let missing = scrub(&options(
        &dir.path().join("nope"),
        &dir.path().join("o"),
        &secrets,
    ))
    .unwrap_err();
    assert!(matches!(missing, ScrubError::InputNotDir(_)) && missing.is_bad_input());
    let inside = scrub(&options(&input, &input.join("o"), &secrets)).unwrap_err();
    assert!(matches!(inside, ScrubError::OutputInsideInput { .. }));
    let exists = scrub(&options(&input, dir.path(), &secrets)).unwrap_err();
    assert!(matches!(exists, ScrubError::OutputExists(_)));
}
