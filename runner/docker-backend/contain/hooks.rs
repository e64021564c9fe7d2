//! Startup hooks the tests' programs would run before any test: `/etc/ld.so.preload` and
//! Python's `sitecustomize`/`usercustomize` and `.pth` lines (see `toolchain.rs`).

use super::*;

/// Largest `.pth` file read; a bigger one is masked whole.
const MAX_PTH_BYTES: u64 = 1 << 20;

pub(crate) fn plan_hooks(plan: &mut Plan) {
    plan_preload(plan);
    for dir in site_dirs() {
        plan_site_dir(&dir, plan);
    }
}

/// `/etc/ld.so.preload` is always pinned (the image's, or an empty file), so one the agent
/// writes while the tests run is not read either.
fn plan_preload(plan: &mut Plan) {
    const PRELOAD: &str = "/etc/ld.so.preload";
    let image_has = Path::new(PRELOAD).is_file();
    if image_has {
        note_change(PRELOAD, PRELOAD, plan);
    } else if fs::symlink_metadata(in_trial(PRELOAD)).is_ok() {
        plan.changes.push(format!("{PRELOAD}: added by the agent"));
    }
    plan.pins.push(Pin {
        target: PRELOAD.into(),
        source: if image_has {
            Source::Image(PRELOAD.into())
        } else {
            Source::EmptyFile
        },
    });
}

/// Python's site directories in the image and in the trial (an interpreter the agent
/// installed has its own).
pub(crate) fn site_dirs() -> Vec<String> {
    let mut dirs = Vec::new();
    for base in [
        "/usr/lib",
        "/usr/local/lib",
        "/opt/conda/lib",
        "/root/.local/lib",
    ] {
        let mut versions = Vec::new();
        for root in [PathBuf::from(base), in_trial(base)] {
            if let Ok(entries) = fs::read_dir(&root) {
                versions.extend(
                    entries
                        .filter_map(|e| e.ok()?.file_name().into_string().ok())
                        .filter(|name| name.starts_with("python3")),
                );
            }
        }
        versions.sort();
        versions.dedup();
        for version in versions {
            let dir = format!("{base}/{version}");
            for sub in ["", "/site-packages", "/dist-packages"] {
                dirs.push(format!("{dir}{sub}"));
            }
        }
    }
    dirs.push("/usr/lib/python3/dist-packages".into());
    dirs
}

fn plan_site_dir(dir: &str, plan: &mut Plan) {
    let Ok(entries) = fs::read_dir(in_trial(dir)) else {
        return;
    };
    let mut names: Vec<String> = entries
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|name| is_site_hook(name) || name.ends_with(".pth"))
        .collect();
    names.sort();
    for name in names {
        let target = format!("{dir}/{name}");
        let image_has = fs::symlink_metadata(&target).is_ok();
        if image_has && fs::metadata(&target).is_ok_and(|m| m.is_file()) {
            // The image's own hook: pinned, so an edit (even mid-test) is not seen.
            note_change(&target, &target, plan);
            plan.pins.push(Pin {
                source: Source::Image(target.clone()),
                target,
            });
            continue;
        }
        if let Some(source) = mask_for(&target, &name) {
            plan.changes
                .push(format!("{target}: {}", describe(&source)));
            plan.pins.push(Pin { target, source });
        }
    }
}

/// What hides a hook the image does not have; `None` for a `.pth` of plain path lines.
fn mask_for(target: &str, name: &str) -> Option<Source> {
    let trial = in_trial(target);
    let meta = fs::symlink_metadata(&trial).ok()?;
    if is_site_hook(name) {
        return Some(if meta.is_dir() {
            Source::EmptyDir
        } else {
            Source::EmptyFile
        });
    }
    if !meta.is_file() || meta.len() > MAX_PTH_BYTES {
        return Some(Source::EmptyFile);
    }
    let content = OpenOptions::new()
        .read(true)
        .custom_flags(0o400000 | 0o4000) // O_NOFOLLOW | O_NONBLOCK
        .open(&trial)
        .and_then(|file| {
            let mut bytes = Vec::new();
            file.take(MAX_PTH_BYTES)
                .read_to_end(&mut bytes)
                .map(|_| bytes)
        });
    match content {
        Ok(bytes) => without_executable_lines(&bytes).map(Source::Filtered),
        Err(_) => Some(Source::EmptyFile),
    }
}

fn describe(source: &Source) -> &'static str {
    match source {
        Source::Filtered(_) => "a .pth file the agent added or changed, its import lines ignored",
        Source::EmptyDir | Source::EmptyFile => "a startup hook the agent added, ignored",
        Source::Image(_) => "changed by the agent",
    }
}
