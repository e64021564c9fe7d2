//! Copying trees without following links: the tests in, the verifier's outputs out (bounded).

use super::*;

/// A byte budget for copies: per file and in all.
pub(crate) struct Budget {
    pub(crate) file: u64,
    pub(crate) total: u64,
}

impl Budget {
    pub(crate) fn unlimited() -> Budget {
        Budget {
            file: u64::MAX,
            total: u64::MAX,
        }
    }
}

/// Copies directories and regular files from `source` into `target`, never following links:
/// symlinks become symlinks when copying in (`budget` unlimited) and are skipped when copying
/// out; FIFOs, sockets and devices are skipped. Files past the budget are cut; `note` hears
/// `("skipped"|"truncated", "<path>: <why>")`.
pub(crate) fn copy_tree(
    source: &Path,
    target: &Path,
    shown: &Path,
    budget: &mut Budget,
    note: &mut dyn FnMut(&'static str, String),
) -> io::Result<()> {
    let copying_in = budget.total == u64::MAX;
    let mut entries: Vec<_> = fs::read_dir(source)?.collect::<Result<_, _>>()?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let name = entry.file_name();
        let from = source.join(&name);
        let to = target.join(&name);
        let shown_path = shown.join(&name);
        let shown = shown_path.display().to_string();
        let meta = fs::symlink_metadata(&from)?;
        let kind = meta.file_type();
        if kind.is_dir() {
            fs::create_dir_all(&to)?;
            fs::set_permissions(&to, fs::Permissions::from_mode(meta.permissions().mode()))?;
            copy_tree(&from, &to, &shown_path, budget, note)?;
        } else if kind.is_symlink() && copying_in {
            std::os::unix::fs::symlink(fs::read_link(&from)?, &to)?;
        } else if kind.is_file() {
            let mut input = OpenOptions::new()
                .read(true)
                .custom_flags(0o400000 | 0o4000) // O_NOFOLLOW | O_NONBLOCK
                .open(&from)?;
            if !input.metadata()?.is_file() {
                note("skipped", format!("{shown}: it changed while being copied"));
                continue;
            }
            let limit = budget.file.min(budget.total);
            let mut output = OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(meta.permissions().mode() & 0o777)
                .open(&to)?;
            let copied = io::copy(&mut (&mut input).take(limit), &mut output)?;
            budget.total = budget.total.saturating_sub(copied);
            if copied == limit && input.read(&mut [0u8; 1])? > 0 {
                note(
                    "truncated",
                    format!("{shown}: cut at {copied} bytes, the verifier output cap"),
                );
            }
        } else {
            let what = if kind.is_symlink() {
                "a symbolic link"
            } else if kind.is_fifo() {
                "a fifo"
            } else if kind.is_socket() {
                "a socket"
            } else {
                "a device or special file"
            };
            note("skipped", format!("{shown}: it is {what}"));
        }
    }
    Ok(())
}
