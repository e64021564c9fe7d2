//! Links from a report page to the job's own files, relative to the page's folder and
//! percent-encoded per path component (a file name may hold `#`, `?` or spaces).

use std::path::{Path, PathBuf};

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};

/// Everything but unreserved URL characters is encoded.
const COMPONENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// Makes hrefs for pages in one folder.
#[derive(Debug, Clone)]
pub struct Links {
    folder: PathBuf,
}

impl Links {
    /// Links for pages in `folder` (absolute).
    pub fn new(folder: &Path) -> Links {
        Links {
            folder: folder.to_path_buf(),
        }
    }

    /// A relative href to the file `target`; an absolute `file://` URL when no relative path
    /// exists (another drive, or a relative target that cannot be resolved).
    pub fn to_file(&self, target: &Path) -> String {
        let absolute = target
            .canonicalize()
            .unwrap_or_else(|_| target.to_path_buf());
        match pathdiff::diff_paths(&absolute, &self.folder) {
            Some(rel) if absolute.is_absolute() => encode(&rel),
            _ => format!("file://{}", encode(&absolute)),
        }
    }
}

/// Percent-encodes each component of `path`, joined by `/`.
pub fn encode(path: &Path) -> String {
    let mut out = String::new();
    for (i, part) in path.iter().enumerate() {
        let part = part.to_string_lossy();
        if i > 0 && !out.ends_with('/') {
            out.push('/');
        }
        if part == "/" {
            out.push('/');
        } else {
            out.extend(utf8_percent_encode(&part, COMPONENT));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_and_encoded() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let out = root.join("out/job1");
        std::fs::create_dir_all(&out).unwrap();
        let file = root.join("jobs/j/t #1/trial.log");
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, "x").unwrap();
        let links = Links::new(&out);
        assert_eq!(links.to_file(&file), "../../jobs/j/t%20%231/trial.log");
        assert_eq!(encode(Path::new("/a b/c\"<")), "/a%20b/c%22%3C");
    }
}
