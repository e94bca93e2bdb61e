//! Excel workbooks (XLSX) through calamine's streaming cell reader: each sheet a unit, each
//! row a line of tab-separated cached values (dates in ISO 8601), read cell by cell so a sheet
//! is never held whole; the text stops at the bound.

use std::io::Cursor;

use calamine::{DataRef, Reader as _, Xlsx};
use steward_core::docs::{DocKind, ExtractError, ExtractLimits, Extracted, Unit};

use super::{archive::Archive, xml::Sink};

/// Most empty cells written between two cells of a row (a sparse row is not a bomb).
/// Fixed (not a setting).
const MAX_GAP: u32 = 64;

/// A cell's value as shown.
fn shown(v: &DataRef<'_>) -> String {
    match v {
        DataRef::Int(i) => i.to_string(),
        DataRef::Float(f) => f.to_string(),
        DataRef::String(s) => s.replace(['\t', '\n', '\r'], " "),
        DataRef::SharedString(s) => s.replace(['\t', '\n', '\r'], " "),
        DataRef::Bool(b) => if *b { "TRUE" } else { "FALSE" }.to_owned(),
        DataRef::DateTime(d) => {
            if d.is_duration() {
                d.as_duration().map_or_else(String::new, |x| {
                    let s = x.num_seconds();
                    let (days, rest) = (s / 86_400, s % 86_400);
                    let hms = format!("{}:{:02}:{:02}", rest / 3600, rest % 3600 / 60, rest % 60);
                    match days {
                        0 => hms,
                        1 => format!("1 day, {hms}"),
                        n => format!("{n} days, {hms}"),
                    }
                })
            } else {
                d.as_datetime()
                    .map_or_else(String::new, |t| t.format("%Y-%m-%dT%H:%M:%S").to_string())
            }
        }
        DataRef::DateTimeIso(s) | DataRef::DurationIso(s) => s.clone(),
        DataRef::Error(e) => e.to_string(),
        DataRef::Empty => String::new(),
    }
}

/// An Excel workbook.
pub(crate) fn xlsx(bytes: &[u8], limits: &ExtractLimits) -> Result<Extracted, ExtractError> {
    // The container's caps first: calamine reads the entries it needs whole.
    drop(Archive::open(bytes, "xlsx", limits)?);
    let mut wb: Xlsx<_> =
        Xlsx::new(Cursor::new(bytes)).map_err(|e| ExtractError::damaged("xlsx", e))?;
    let mut sink = Sink::new(limits.max_chars);
    let mut units = Vec::new();
    let mut cells: u64 = 0;
    for name in wb.sheet_names().into_iter().take(limits.max_units) {
        // Chart sheets have no cells.
        let Ok(mut reader) = wb.worksheet_cells_reader(&name) else {
            continue;
        };
        let mut row: Option<u32> = None;
        let mut col: u32 = 0;
        let mut line = String::new();
        loop {
            let cell = reader.next_cell().map_err(|e| ExtractError::damaged("xlsx", e))?;
            let Some(cell) = cell else { break };
            cells += 1;
            if cells > limits.max_cells {
                return Err(ExtractError::Hostile(format!(
                    "the workbook holds more than {} cells",
                    limits.max_cells
                )));
            }
            let (r, c) = cell.get_position();
            let text = shown(cell.get_value());
            if text.is_empty() {
                continue;
            }
            if row != Some(r) {
                if row.is_some() {
                    line.push('\n');
                    if !sink.push(&line) {
                        break;
                    }
                    line.clear();
                }
                row = Some(r);
                for _ in 0..c.min(MAX_GAP) {
                    line.push('\t');
                }
            } else {
                for _ in 0..c.saturating_sub(col).min(MAX_GAP) {
                    line.push('\t');
                }
            }
            col = c;
            line.push_str(&text);
            if line.len() > sink.left() {
                break;
            }
        }
        if !line.is_empty() {
            line.push('\n');
            sink.push(&line);
        }
        units.push(Unit { name: Some(name), text: sink.take() });
        if sink.truncated {
            break;
        }
    }
    Ok(Extracted { kind: DocKind::Xlsx, title: None, units, truncated: sink.truncated })
}
