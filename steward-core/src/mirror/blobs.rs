//! The content-addressed attachment store: `blobs/<aa>/<sha256>`; identical content is stored
//! once whatever its file names. Writes go to a temporary file and are renamed into place, so a
//! crash leaves either nothing or a whole blob (an unreferenced blob is harmless and reusable).

use std::{
    fs,
    io::Write,
    path::{Path, PathBuf},
};

use sha2::{Digest, Sha256};

/// Lowercase hex of bytes (digests, content hashes).
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(char::from(DIGITS[usize::from(b >> 4)]));
        s.push(char::from(DIGITS[usize::from(b & 15)]));
    }
    s
}

/// The blob directory of one mirror.
#[derive(Debug, Clone)]
pub(crate) struct BlobStore {
    root: PathBuf,
}

impl BlobStore {
    pub(crate) fn new(root: PathBuf) -> Self {
        Self { root }
    }

    pub(crate) fn path_of(&self, sha_hex: &str) -> PathBuf {
        self.root.join(&sha_hex[..2]).join(sha_hex)
    }

    /// Stores `bytes` (if not already present) and returns their SHA-256 in hex.
    pub(crate) fn put(&self, bytes: &[u8]) -> std::io::Result<String> {
        let sha = hex(&Sha256::digest(bytes));
        let dest = self.path_of(&sha);
        if dest.exists() {
            return Ok(sha);
        }
        let dir = dest.parent().unwrap_or(&self.root);
        fs::create_dir_all(dir)?;
        let tmp = dir.join(format!(".tmp-{}-{:?}", sha, std::thread::current().id()));
        {
            let mut f = fs::File::create(&tmp)?;
            f.write_all(bytes)?;
        }
        fs::rename(&tmp, &dest)?;
        Ok(sha)
    }

    pub(crate) fn root(&self) -> &Path {
        &self.root
    }
}
