//! `write_file`: the content written in base64 pieces as the policy's user, behind the
//! path guard (the workdir and `/tmp` only, symlinks resolved in the container).

use tasks::Sandbox;

use super::{Broken, Policy};
use crate::protocol::{Action, Observation};

/// `write_file` content goes into the container in pieces of this many bytes (base64 in a
/// command line; one argument may hold 128 KiB).
const WRITE_CHUNK: usize = 60 * 1024;

impl<S: Sandbox> Policy<S> {
    /// Writes `content` to `file_path` as the policy's user, refusing paths outside the
    /// workdir and `/tmp` (lexically, then in the container with symlinks resolved).
    pub(super) async fn write_file(
        &mut self,
        action: &Action,
        obs: Observation,
    ) -> Result<Observation, Broken> {
        let absolute = match crate::paths::check(&self.workdir, &action.file_path) {
            Ok(path) => path,
            Err(e) => return Ok(obs.failed(e.to_string())),
        };
        let guard = crate::paths::guard_script(&absolute, &self.workdir);
        let bytes = action.content.as_bytes();
        let chunks: Vec<&[u8]> = if bytes.is_empty() {
            vec![&[][..]]
        } else {
            bytes.chunks(WRITE_CHUNK).collect()
        };
        for (index, chunk) in chunks.iter().enumerate() {
            let redirect = if index == 0 { ">" } else { ">>" };
            let encoded = base64_encode(chunk);
            let script = format!("{guard}; printf %s '{encoded}' | base64 -d {redirect} \"$f\"");
            let out = self.run(self.as_policy(script)).await?;
            if out.exit_code == Some(crate::paths::ESCAPE_EXIT) {
                return Ok(obs.failed(format!(
                    "file_path {:?}: {}",
                    action.file_path,
                    out.stderr.trim()
                )));
            }
            if !out.success() {
                return Ok(obs.failed(format!("writing {absolute}: {}", out.stderr.trim())));
            }
        }
        let mut obs = obs;
        obs.output = format!("Wrote content to {}", action.file_path);
        Ok(obs)
    }
}

/// Standard base64 with padding.
fn base64_encode(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_the_standard() {
        assert_eq!(base64_encode(b""), "");
        assert_eq!(base64_encode(b"f"), "Zg==");
        assert_eq!(base64_encode(b"fo"), "Zm8=");
        assert_eq!(base64_encode(b"foo"), "Zm9v");
        assert_eq!(base64_encode(b"foob"), "Zm9vYg==");
        assert_eq!(base64_encode("é\n".as_bytes()), "w6kK");
    }
}
