//! OpenDocument (ODT, ODP, ODS), read from `content.xml` as a stream: paragraphs and headings
//! end lines, `text:s` is spaces, tables end cells with a tab; each `draw:page` of a
//! presentation is a slide and each `table:table` of a spreadsheet a named sheet. Repeat counts
//! are honoured with care: empty repeated rows and trailing cells add nothing, a gap of empty
//! cells inside a row at most 64 tabs, and a sheet whose cells
//! with content would come to more than [`ExtractLimits::max_cells`] is refused before any is
//! written out (a 1 KB file can declare 10^18).

use steward_core::docs::{DocKind, ExtractError, ExtractLimits, Extracted, Unit};

use super::{
    archive::Archive,
    ooxml::core_title,
    xml::{Flow, Node, Sink, attr, walk},
};

/// Most empty cells written for one repeated empty cell in a row.
/// Fixed (not a setting).
const MAX_GAP: u64 = 64;
/// Most spaces one `text:s` stands for.
/// Fixed (not a setting).
const MAX_SPACES: usize = 100;

/// The mimetype an ODF package declares (its first entry).
fn mimetype(zip: &mut Archive<'_>) -> Result<String, ExtractError> {
    Ok(zip
        .read("mimetype")?
        .map(|b| String::from_utf8_lossy(&b).trim().to_owned())
        .unwrap_or_default())
}

/// An OpenDocument file: text, presentation or spreadsheet by its mimetype (else `kind`).
pub(crate) fn odf(
    bytes: &[u8],
    kind: DocKind,
    limits: &ExtractLimits,
) -> Result<Extracted, ExtractError> {
    let name = kind.as_str();
    let mut zip = Archive::open(bytes, name, limits)?;
    let kind = match mimetype(&mut zip)?.as_str() {
        "application/vnd.oasis.opendocument.text" => DocKind::Odt,
        "application/vnd.oasis.opendocument.presentation" => DocKind::Odp,
        "application/vnd.oasis.opendocument.spreadsheet" => DocKind::Ods,
        _ => kind,
    };
    if zip.names().iter().any(|n| n == "META-INF/manifest.xml")
        && let Some(m) = zip.read("META-INF/manifest.xml")?
        && String::from_utf8_lossy(&m).contains("encryption-data")
    {
        return Err(ExtractError::Encrypted(name.to_owned()));
    }
    let content =
        zip.read("content.xml")?.ok_or_else(|| ExtractError::damaged(name, "no content.xml"))?;
    let (units, truncated) = if kind == DocKind::Ods {
        sheets(&content, limits)?
    } else {
        flowing(&content, kind, limits)?
    };
    Ok(Extracted { kind, title: core_title(&mut zip, "meta.xml", name), units, truncated })
}

/// A text or a presentation (one unit per `draw:page`).
fn flowing(
    content: &[u8],
    kind: DocKind,
    limits: &ExtractLimits,
) -> Result<(Vec<Unit>, bool), ExtractError> {
    let mut sink = Sink::new(limits.max_chars);
    let mut units = Vec::new();
    let mut in_body = false;
    let mut skip = 0usize;
    let slides = kind == DocKind::Odp;
    walk(content, kind.as_str(), |n| {
        let ok = match n {
            Node::Start { name, el, empty } => {
                // Every start, empty or not, is matched by an end (the walker sends one).
                if skip > 0 {
                    skip += 1;
                    return Flow::Go;
                }
                match name {
                    "body" => {
                        in_body = true;
                        true
                    }
                    // Deleted text kept for change tracking is not the document's text.
                    "tracked-changes" if !empty => {
                        skip = 1;
                        true
                    }
                    "s" => {
                        let n = attr(el, "c").and_then(|c| c.parse().ok()).unwrap_or(1usize);
                        sink.push(&" ".repeat(n.min(MAX_SPACES)))
                    }
                    "tab" => sink.push("\t"),
                    "line-break" => sink.push("\n"),
                    _ => true,
                }
            }
            Node::End { name } => {
                if skip > 0 {
                    skip -= 1;
                    return Flow::Go;
                }
                match name {
                    "p" | "h" | "table-row" => sink.push("\n"),
                    "table-cell" => sink.push("\t"),
                    "page" if slides => {
                        units.push(Unit { name: None, text: sink.take() });
                        units.len() < limits.max_units
                    }
                    _ => true,
                }
            }
            Node::Text(t) if in_body && skip == 0 => sink.push(t),
            Node::Text(_) => true,
        };
        if ok { Flow::Go } else { Flow::Stop }
    })?;
    if !slides || !sink.out.is_empty() {
        units.push(Unit { name: None, text: sink.take() });
    }
    let full = units.len() >= limits.max_units;
    Ok((units, sink.truncated || full))
}

/// A spreadsheet, one unit per named table, rows as lines of tab-separated cells.
fn sheets(content: &[u8], limits: &ExtractLimits) -> Result<(Vec<Unit>, bool), ExtractError> {
    let mut sink = Sink::new(limits.max_chars);
    let mut units: Vec<Unit> = Vec::new();
    let mut sheet: Option<String> = None;
    let mut rows_repeat = 1u64;
    let mut row: Vec<(String, u64)> = Vec::new();
    let mut cell: Option<(String, u64)> = None;
    let mut in_p = 0usize;
    let mut cells_with_content: u64 = 0;
    let mut refused: Option<ExtractError> = None;
    walk(content, "ods", |n| {
        let ok = match n {
            Node::Start { name, el, empty } => match name {
                "table" if !empty => {
                    sheet = Some(attr(el, "name").unwrap_or_default());
                    true
                }
                "table-row" => {
                    rows_repeat = attr(el, "number-rows-repeated")
                        .and_then(|v| v.parse().ok())
                        .unwrap_or(1u64)
                        .max(1);
                    row.clear();
                    true
                }
                "table-cell" | "covered-table-cell" => {
                    let r = attr(el, "number-columns-repeated")
                        .and_then(|v| v.parse().ok())
                        .unwrap_or(1u64)
                        .max(1);
                    cell = Some((String::new(), r));
                    true
                }
                "p" if !empty && cell.is_some() => {
                    if let Some((t, _)) = &mut cell
                        && !t.is_empty()
                    {
                        t.push(' ');
                    }
                    in_p += 1;
                    true
                }
                "s" if in_p > 0 => {
                    if let Some((t, _)) = &mut cell {
                        t.push(' ');
                    }
                    true
                }
                _ => true,
            },
            Node::End { name } => match name {
                "p" => {
                    in_p = in_p.saturating_sub(1);
                    true
                }
                "table-cell" | "covered-table-cell" => {
                    if let Some(c) = cell.take() {
                        row.push(c);
                    }
                    true
                }
                "table-row" => {
                    // Trailing empty cells are the sheet's padding.
                    while row.last().is_some_and(|(t, _)| t.is_empty()) {
                        row.pop();
                    }
                    if row.is_empty() {
                        return Flow::Go;
                    }
                    let per_row: u64 = row
                        .iter()
                        .filter(|(t, _)| !t.is_empty())
                        .map(|(_, r)| *r)
                        .fold(0u64, u64::saturating_add);
                    cells_with_content =
                        cells_with_content.saturating_add(per_row.saturating_mul(rows_repeat));
                    if cells_with_content > limits.max_cells {
                        refused = Some(ExtractError::Hostile(format!(
                            "the spreadsheet declares more than {} cells with content",
                            limits.max_cells
                        )));
                        return Flow::Stop;
                    }
                    // Built no longer than what the sink still takes.
                    let room = sink.left().saturating_add(1);
                    let mut line = String::new();
                    'cells: for (i, (t, r)) in row.iter().enumerate() {
                        // Empty repeated cells in a row are a gap, capped as in XLSX.
                        let r = if t.is_empty() { (*r).min(MAX_GAP) } else { *r };
                        for j in 0..r {
                            if i + usize::from(j > 0) > 0 {
                                line.push('\t');
                            }
                            line.push_str(t);
                            if line.len() > room {
                                break 'cells;
                            }
                        }
                    }
                    line.push('\n');
                    let mut ok = true;
                    for _ in 0..rows_repeat {
                        ok = sink.push(&line);
                        if !ok {
                            break;
                        }
                    }
                    ok
                }
                "table" => {
                    units.push(Unit { name: sheet.take(), text: sink.take() });
                    units.len() < limits.max_units
                }
                _ => true,
            },
            Node::Text(t) => {
                if in_p > 0
                    && let Some((c, _)) = &mut cell
                    && c.len() < limits.max_chars
                {
                    c.push_str(t);
                }
                true
            }
        };
        if ok { Flow::Go } else { Flow::Stop }
    })?;
    if let Some(e) = refused {
        return Err(e);
    }
    Ok((units, sink.truncated))
}
