//! `record_manifest.sig`: an ed25519 signature over the exact bytes of `record_manifest.jsonl`
//! (`runner run --signing-key FILE`), checked by `validate-submission --trusted-key FILE`, so
//! an operator can accept only runs made on machines whose keys it holds. Keys are the PEM
//! files OpenSSL writes (`openssl genpkey -algorithm ed25519`, PKCS#8; the public half with
//! `openssl pkey -pubout`, SPKI); a trusted key may also be the base64 `public_key` a
//! signature records.

use std::path::{Path, PathBuf};

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use ed25519_dalek::pkcs8::{DecodePrivateKey, DecodePublicKey};
use ed25519_dalek::{Signature, Signer, Verifier};
/// The key types, for crates that hold keys without depending on the signature crate.
pub use ed25519_dalek::{SigningKey, VerifyingKey};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The signature's file name in a job dir.
pub const RECORD_SIGNATURE: &str = "record_manifest.sig";

/// A key file that cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("{}: {problem}", path.display())]
pub struct KeyError {
    /// The key file.
    pub path: PathBuf,
    /// What is wrong and what to do.
    pub problem: String,
}

/// `record_manifest.sig`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ManifestSignature {
    /// `ed25519`.
    pub algorithm: String,
    /// The signer's public key, raw 32 bytes in base64.
    pub public_key: String,
    /// The signature, raw 64 bytes in base64.
    pub signature: String,
    /// Hex sha256 of the signed manifest bytes (to name which manifest it signed).
    pub manifest_sha256: String,
}

/// Why a signature does not hold.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureProblem {
    /// The signature file is not one runner writes.
    #[error("record_manifest.sig is malformed: {0}")]
    Malformed(String),
    /// The bytes are not what was signed.
    #[error(
        "the signature does not match record_manifest.jsonl: the manifest changed after it was signed"
    )]
    Mismatch,
    /// Valid, but by a key the operator does not trust.
    #[error("signed by a key not given with --trusted-key (public key {0})")]
    Untrusted(String),
}

/// Reads an ed25519 private key (PEM PKCS#8) from `path`.
pub fn read_signing_key(path: &Path) -> Result<SigningKey, KeyError> {
    let text = read_key_text(path)?;
    SigningKey::from_pkcs8_pem(&text).map_err(|e| KeyError {
        path: path.to_owned(),
        problem: format!(
            "not an ed25519 private key in PEM (PKCS#8) ({e}); make one with `openssl genpkey -algorithm ed25519 -out KEY.pem`"
        ),
    })
}

/// Reads a trusted ed25519 public key from `path`: PEM (SPKI), a PEM private key (its public
/// half), or the base64 `public_key` of a signature.
pub fn read_verifying_key(path: &Path) -> Result<VerifyingKey, KeyError> {
    let text = read_key_text(path)?;
    if let Ok(key) = VerifyingKey::from_public_key_pem(&text) {
        return Ok(key);
    }
    if let Ok(key) = SigningKey::from_pkcs8_pem(&text) {
        return Ok(key.verifying_key());
    }
    raw_public_key(text.trim()).ok_or_else(|| KeyError {
        path: path.to_owned(),
        problem: "not an ed25519 public key (PEM from `openssl pkey -in KEY.pem -pubout`, or the base64 public_key of a record_manifest.sig)".into(),
    })
}

fn read_key_text(path: &Path) -> Result<String, KeyError> {
    let bytes = crate::bounded::read_capped(path, 64 * 1024, "key file").map_err(|e| KeyError {
        path: path.to_owned(),
        problem: format!("cannot read the key file: {e}"),
    })?;
    String::from_utf8(bytes).map_err(|_| KeyError {
        path: path.to_owned(),
        problem: "not a text (PEM) key file".into(),
    })
}

fn raw_public_key(b64: &str) -> Option<VerifyingKey> {
    let bytes: [u8; 32] = B64.decode(b64).ok()?.try_into().ok()?;
    VerifyingKey::from_bytes(&bytes).ok()
}

/// The base64 form of a public key, as signatures record it.
pub fn public_key_text(key: &VerifyingKey) -> String {
    B64.encode(key.as_bytes())
}

/// Signs the manifest bytes `manifest`.
pub fn sign(key: &SigningKey, manifest: &[u8]) -> ManifestSignature {
    ManifestSignature {
        algorithm: "ed25519".into(),
        public_key: public_key_text(&key.verifying_key()),
        signature: B64.encode(key.sign(manifest).to_bytes()),
        manifest_sha256: hex::encode(Sha256::digest(manifest)),
    }
}

/// Checks `signature` over `manifest`; with `trusted` keys, also that one of them signed.
/// Returns the signer's public key.
pub fn verify(
    signature: &ManifestSignature,
    manifest: &[u8],
    trusted: &[VerifyingKey],
) -> Result<VerifyingKey, SignatureProblem> {
    if signature.algorithm != "ed25519" {
        return Err(SignatureProblem::Malformed(format!(
            "algorithm {:?} (runner signs with ed25519)",
            signature.algorithm
        )));
    }
    let key = raw_public_key(&signature.public_key).ok_or_else(|| {
        SignatureProblem::Malformed("public_key is not a base64 ed25519 key".into())
    })?;
    let sig: [u8; 64] = B64
        .decode(&signature.signature)
        .ok()
        .and_then(|b| b.try_into().ok())
        .ok_or_else(|| SignatureProblem::Malformed("signature is not 64 bytes of base64".into()))?;
    key.verify(manifest, &Signature::from_bytes(&sig))
        .map_err(|_| SignatureProblem::Mismatch)?;
    if !trusted.is_empty() && !trusted.contains(&key) {
        return Err(SignatureProblem::Untrusted(signature.public_key.clone()));
    }
    Ok(key)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ed25519_dalek::pkcs8::EncodePrivateKey;
    use ed25519_dalek::pkcs8::EncodePublicKey;

    #[test]
    fn a_signature_holds_for_its_bytes_and_its_key_only() {
        let dir = tempfile::tempdir().unwrap();
        let key = SigningKey::from_bytes(&[7; 32]);
        let pem = key
            .to_pkcs8_pem(ed25519_dalek::pkcs8::spki::der::pem::LineEnding::LF)
            .unwrap();
        std::fs::write(dir.path().join("key.pem"), pem.as_bytes()).unwrap();
        let public = key
            .verifying_key()
            .to_public_key_pem(ed25519_dalek::pkcs8::spki::der::pem::LineEnding::LF)
            .unwrap();
        std::fs::write(dir.path().join("pub.pem"), public).unwrap();
        let read = read_signing_key(&dir.path().join("key.pem")).unwrap();
        let trusted = read_verifying_key(&dir.path().join("pub.pem")).unwrap();
        assert_eq!(trusted, key.verifying_key());
        let sig = sign(&read, b"manifest");
        assert_eq!(verify(&sig, b"manifest", &[trusted]), Ok(trusted));
        assert_eq!(
            verify(&sig, b"manifesT", &[trusted]),
            Err(SignatureProblem::Mismatch)
        );
        let other = SigningKey::from_bytes(&[8; 32]).verifying_key();
        assert!(matches!(
            verify(&sig, b"manifest", &[other]),
            Err(SignatureProblem::Untrusted(_))
        ));
        std::fs::write(dir.path().join("raw"), &sig.public_key).unwrap();
        assert_eq!(
            read_verifying_key(&dir.path().join("raw")).unwrap(),
            trusted
        );
        let err = read_signing_key(&dir.path().join("pub.pem")).unwrap_err();
        assert!(err.to_string().contains("openssl genpkey"), "{err}");
    }
}
