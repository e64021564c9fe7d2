//! Reading files an agent may have written, with a size cap, so that a huge or endless file
//! (`/dev/zero`, a 1 GB `result.json`) is refused with a clear error instead of being held in
//! memory whole. The caps are sized for real agents: Harbor's records are a few KB, the longest
//! trajectories seen from real agents are tens of MB.

use std::io::{self, Read};
use std::path::Path;

/// Largest trajectory (`agent/trajectory.json`) read whole for validation: 256 MiB.
pub const MAX_TRAJECTORY_BYTES: u64 = 256 << 20;
/// Largest JSON record (`config.json`, `result.json`, `lock.json`) read whole: 16 MiB.
pub const MAX_RECORD_BYTES: u64 = 16 << 20;

/// `bytes` for people: `256 MiB`, `16 MiB`, `512 KiB`, `100 bytes`.
pub fn human_bytes(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 30 && b % (1 << 30) == 0 => format!("{} GiB", b >> 30),
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{} MiB", b >> 20),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{} KiB", b >> 10),
        b => format!("{b} bytes"),
    }
}

/// Reads `path` whole when it holds at most `cap` bytes; never reads more than `cap + 1`.
/// A larger (or endless) file is an [`io::ErrorKind::FileTooLarge`] error whose message names
/// the cap and `what` the file is (e.g. "trajectory"). Other errors are the OS's.
pub fn read_capped(path: &Path, cap: u64, what: &str) -> io::Result<Vec<u8>> {
    let file = std::fs::File::open(path)?;
    let meta = file.metadata()?;
    let too_large = |size: Option<u64>| {
        let size = size.map_or_else(String::new, |s| format!(" ({})", human_bytes_approx(s)));
        io::Error::new(
            io::ErrorKind::FileTooLarge,
            format!(
                "larger than the {} limit for a {what}{size}; it is not read",
                human_bytes(cap)
            ),
        )
    };
    // A regular file says its size up front; a device or pipe has to be read to find out.
    if meta.is_file() && meta.len() > cap {
        return Err(too_large(Some(meta.len())));
    }
    let hint = if meta.is_file() { meta.len() } else { 0 };
    let mut bytes = Vec::with_capacity(usize::try_from(hint.min(cap) + 1).unwrap_or(0));
    file.take(cap + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > cap {
        return Err(too_large(None));
    }
    Ok(bytes)
}

/// `bytes` rounded for people: `1.0 GiB`, `3.5 MiB`.
fn human_bytes_approx(bytes: u64) -> String {
    let b = bytes as f64;
    if bytes >= 1 << 30 {
        format!("{:.1} GiB", b / f64::from(1 << 30))
    } else if bytes >= 1 << 20 {
        format!("{:.1} MiB", b / f64::from(1 << 20))
    } else {
        format!("{bytes} bytes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Asserts that `err` refuses a file as too large, saying `text`.
    fn assert_too_large(err: &io::Error, text: &str) {
        assert_eq!(err.kind(), io::ErrorKind::FileTooLarge);
        assert!(err.to_string().contains(text), "{err}");
    }

    #[test]
    fn files_up_to_the_cap_are_read_and_larger_ones_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, b"12345").unwrap();
        assert_eq!(read_capped(&path, 5, "record").unwrap(), b"12345");
        let err = read_capped(&path, 4, "record").unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::FileTooLarge);
        assert_eq!(
            err.to_string(),
            "larger than the 4 bytes limit for a record (5 bytes); it is not read"
        );
        // A sparse 1 GiB file is refused from its size, without reading it.
        let big = dir.path().join("big");
        std::fs::File::create(&big)
            .unwrap()
            .set_len(1 << 30)
            .unwrap();
        let err = read_capped(&big, MAX_RECORD_BYTES, "record").unwrap_err();
        assert!(
            err.to_string().contains("16 MiB") && err.to_string().contains("1.0 GiB"),
            "{err}"
        );
        assert_eq!(
            read_capped(&dir.path().join("missing"), 1, "record")
                .unwrap_err()
                .kind(),
            io::ErrorKind::NotFound
        );
    }

    #[test]
    fn an_endless_device_stops_at_the_cap() {
        let err = read_capped(Path::new("/dev/zero"), 1 << 20, "trajectory").unwrap_err();
        assert_too_large(&err, "1 MiB limit for a trajectory");
    }

    #[test]
    fn trajectory_validation_refuses_an_oversized_file_without_reading_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("trajectory.json");
        std::fs::File::create(&path)
            .unwrap()
            .set_len(MAX_TRAJECTORY_BYTES + 1)
            .unwrap();
        let err = crate::atif::validate_file(&path).unwrap_err();
        assert_too_large(&err, "256 MiB limit for a trajectory");
    }

    #[test]
    fn sizes_print_in_binary_units() {
        assert_eq!(human_bytes(MAX_TRAJECTORY_BYTES), "256 MiB");
        assert_eq!(human_bytes(MAX_RECORD_BYTES), "16 MiB");
        assert_eq!(human_bytes(1 << 30), "1 GiB");
        assert_eq!(human_bytes(1000), "1000 bytes");
    }
}
