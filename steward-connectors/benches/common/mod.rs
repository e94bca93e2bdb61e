//! Helpers shared by the benches.

use std::path::Path;

/// Bytes under `p` (a file, or a directory walked recursively; links not followed).
pub(crate) fn dir_size(p: &Path) -> u64 {
    let Ok(meta) = std::fs::symlink_metadata(p) else { return 0 };
    if meta.is_file() {
        return meta.len();
    }
    std::fs::read_dir(p)
        .map(|rd| rd.filter_map(Result::ok).map(|e| dir_size(&e.path())).sum())
        .unwrap_or(0)
}
