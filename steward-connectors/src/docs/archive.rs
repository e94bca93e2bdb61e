//! The ZIP container of OOXML and ODF documents, opened with caps against bombs: at most
//! [`ExtractLimits::max_archive_entries`] entries, no two with the same name (a reader would
//! see one and a check the other), and every entry unpacked once up front to prove that it
//! unpacks to no more than it declares and that all of them together stay under
//! [`ExtractLimits::max_unpacked_bytes`]. Entries are never opened as archives themselves.

use std::io::{Cursor, Read as _};

use steward_core::docs::{ExtractError, ExtractLimits};

/// An archive whose entries were checked.
pub(crate) struct Archive<'a> {
    zip: zip::ZipArchive<Cursor<&'a [u8]>>,
    kind: &'static str,
    /// Bytes all reads may still unpack (a part read twice counts twice).
    left: u64,
}

/// The first bytes of an OLE compound file: what an encrypted Office document is.
pub(crate) const OLE_MAGIC: [u8; 8] = [0xD0, 0xCF, 0x11, 0xE0, 0xA1, 0xB1, 0x1A, 0xE1];

/// The entry count the end-of-central-directory record declares (`None` for ZIP64).
fn declared_entries(bytes: &[u8]) -> Option<usize> {
    let at = bytes.windows(4).rposition(|w| w == b"PK\x05\x06")?;
    let n = bytes.get(at + 10..at + 12)?;
    let n = u16::from_le_bytes([n[0], n[1]]);
    (n != u16::MAX).then_some(usize::from(n))
}

impl<'a> Archive<'a> {
    /// Opens and checks `bytes` as the container of a `kind` document.
    pub(crate) fn open(
        bytes: &'a [u8],
        kind: &'static str,
        limits: &ExtractLimits,
    ) -> Result<Self, ExtractError> {
        if bytes.starts_with(&OLE_MAGIC) {
            return Err(ExtractError::Encrypted(kind.to_owned()));
        }
        let mut zip = zip::ZipArchive::new(Cursor::new(bytes))
            .map_err(|e| ExtractError::damaged(kind, format!("not a ZIP container: {e}")))?;
        if zip.len() > limits.max_archive_entries {
            return Err(ExtractError::Hostile(format!(
                "the {kind} holds {} entries (more than {})",
                zip.len(),
                limits.max_archive_entries
            )));
        }
        if let Some(n) = declared_entries(bytes)
            && n != zip.len()
        {
            return Err(ExtractError::Hostile(format!(
                "the {kind} declares {n} entries but names only {}: two share a name",
                zip.len()
            )));
        }
        let mut total: u64 = 0;
        let mut sink = vec![0u8; 64 * 1024];
        for i in 0..zip.len() {
            let mut f = zip
                .by_index(i)
                .map_err(|e| ExtractError::damaged(kind, format!("entry {i}: {e}")))?;
            if f.encrypted() {
                return Err(ExtractError::Encrypted(kind.to_owned()));
            }
            let declared = f.size();
            total = total.saturating_add(declared);
            if total > limits.max_unpacked_bytes {
                return Err(ExtractError::Hostile(format!(
                    "the {kind} unpacks to more than {} bytes",
                    limits.max_unpacked_bytes
                )));
            }
            let mut seen: u64 = 0;
            let mut r = (&mut f).take(declared.saturating_add(1));
            loop {
                let n = r
                    .read(&mut sink)
                    .map_err(|e| ExtractError::damaged(kind, format!("entry {i}: {e}")))?;
                if n == 0 {
                    break;
                }
                seen += n as u64;
            }
            if seen > declared {
                return Err(ExtractError::Hostile(format!(
                    "an entry of the {kind} unpacks to more than it declares"
                )));
            }
        }
        Ok(Self { zip, kind, left: limits.max_unpacked_bytes })
    }

    /// The names of the entries.
    pub(crate) fn names(&self) -> Vec<String> {
        self.zip.file_names().filter_map(Result::ok).map(std::borrow::Cow::into_owned).collect()
    }

    /// The bytes of entry `name`, if it exists.
    pub(crate) fn read(&mut self, name: &str) -> Result<Option<Vec<u8>>, ExtractError> {
        let kind = self.kind;
        let mut f = match self.zip.by_name(name) {
            Ok(f) => f,
            Err(zip::result::ZipError::FileNotFound) => return Ok(None),
            Err(e) => return Err(ExtractError::damaged(kind, format!("{name}: {e}"))),
        };
        let size = f.size();
        if size > self.left {
            return Err(ExtractError::Hostile(format!(
                "the {kind} makes its parts be read past {} bytes in all",
                self.left
            )));
        }
        self.left -= size;
        let mut out = Vec::with_capacity(usize::try_from(size).unwrap_or(0).min(1 << 26));
        // Checked at open: no entry unpacks past what it declares.
        (&mut f)
            .take(size)
            .read_to_end(&mut out)
            .map_err(|e| ExtractError::damaged(kind, format!("{name}: {e}")))?;
        Ok(Some(out))
    }
}
