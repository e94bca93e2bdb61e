//! Bounded JSON Lines parsing, shared by the replay and evaluation inputs.

use serde::de::DeserializeOwned;

/// Why a JSONL text was refused.
#[derive(Debug)]
pub(crate) enum LineError {
    /// Line `line` (1-based) is not a `T`.
    Bad {
        /// 1-based line.
        line: usize,
        /// What serde said.
        message: String,
    },
    /// More than the bound (the count seen when it was exceeded).
    TooMany(usize),
}

/// Parses one `T` per non-blank line, at most `max`.
pub(crate) fn parse_lines<T: DeserializeOwned>(
    text: &str,
    max: usize,
) -> Result<Vec<T>, LineError> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        if out.len() == max {
            return Err(LineError::TooMany(out.len() + 1));
        }
        out.push(
            serde_json::from_str(line)
                .map_err(|e| LineError::Bad { line: i + 1, message: e.to_string() })?,
        );
    }
    Ok(out)
}
