#!/usr/bin/env python3
"""Writes a mixed document corpus for the indexing benchmark (`scripts/bench docs-index`):
`gen-docs.py DIR [COUNT] [MB]` makes COUNT documents (default 1,000) of about MB megabytes in all
(default 500) under DIR: 40% PDFs (8 text pages and a photo-sized image), 25% DOCX (text and an
embedded image), 15% XLSX (a 2,000-row sheet), 10% HTML, 10% Markdown and plain text. Every
document has its own text (words drawn from a generated vocabulary with a seeded generator), so
no two are the same bytes and the extraction cache cannot deduplicate them; images are random
bytes (they do not compress), which is where the size of real office documents and PDFs lies.
Only Python's standard library is used; the same seed writes the same corpus.
"""

import io
import os
import random
import sys
import zipfile

SEED = 20261207


def vocabulary(rng, n=3000):
    syllables = ["ka", "lo", "mi", "ter", "san", "vo", "ri", "pel", "da", "nu", "ghe", "stra",
                 "bi", "co", "fen", "tu", "gra", "ne", "po", "sil", "ar", "me", "zo", "qui"]
    words = set()
    while len(words) < n:
        words.add("".join(rng.choice(syllables) for _ in range(rng.randint(2, 4))))
    return sorted(words)


def sentence(rng, words):
    s = " ".join(rng.choice(words) for _ in range(rng.randint(6, 16)))
    return s[0].upper() + s[1:] + "."


def paragraph(rng, words, n=5):
    return " ".join(sentence(rng, words) for _ in range(n))


def pdf_string(s):
    return "(" + s.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)") + ")"


def pdf(rng, words, title, pages, image_bytes):
    width = 640
    height = max(1, image_bytes // (width * 3))
    image = rng.randbytes(width * height * 3)
    n = len(pages)
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        ("<< /Type /Pages /Kids [%s] /Count %d >>"
         % (" ".join("%d 0 R" % (6 + 2 * i) for i in range(n)), n)).encode(),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
        ("<< /Title %s /Producer (Steward benchmark) >>" % pdf_string(title)).encode(),
        ("<< /Type /XObject /Subtype /Image /Width %d /Height %d /ColorSpace /DeviceRGB "
         "/BitsPerComponent 8 /Length %d >>\nstream\n" % (width, height, len(image))).encode()
        + image + b"\nendstream",
    ]
    for i, lines in enumerate(pages):
        content = "BT\n/F1 10 Tf\n56 800 Td\n"
        for line in lines:
            content += "%s Tj\n0 -14 Td\n" % pdf_string(line)
        content += "ET\n"
        if i == 0:
            content += "q 480 0 0 %d 56 40 cm /Im1 Do Q\n" % min(300, height)
        objects.append(("<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Resources "
                        "<< /Font << /F1 3 0 R >> /XObject << /Im1 5 0 R >> >> /Contents %d 0 R >>"
                        % (7 + 2 * i)).encode())
        data = content.encode("latin-1", "replace")
        objects.append(b"<< /Length %d >>\nstream\n" % len(data) + data + b"endstream")
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for i, o in enumerate(objects):
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n" % (i + 1) + o + b"\nendobj\n")
    xref = out.tell()
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1))
    for off in offsets:
        out.write(b"%010d 00000 n \n" % off)
    out.write(b"trailer\n<< /Size %d /Root 1 0 R /Info 4 0 R >>\nstartxref\n%d\n%%%%EOF\n"
              % (len(objects) + 1, xref))
    return out.getvalue()


def xml_escape(s):
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


HEAD = '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
RELS = "http://schemas.openxmlformats.org/package/2006/relationships"
DOCREL = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"


def package(parts):
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as z:
        for name, data in parts:
            z.writestr(name, data)
    return out.getvalue()


def docx(rng, words, image_bytes):
    body = "".join('<w:p><w:r><w:t xml:space="preserve">%s</w:t></w:r></w:p>'
                   % xml_escape(paragraph(rng, words)) for _ in range(40))
    return package([
        ("[Content_Types].xml", HEAD + '<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
         '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
         '<Default Extension="xml" ContentType="application/xml"/><Default Extension="jpeg" ContentType="image/jpeg"/>'
         '<Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>'),
        ("_rels/.rels", HEAD + '<Relationships xmlns="%s"><Relationship Id="rId1" Type="%s/officeDocument" '
         'Target="word/document.xml"/></Relationships>' % (RELS, DOCREL)),
        ("word/document.xml", HEAD + '<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main">'
         "<w:body>%s</w:body></w:document>" % body),
        ("word/_rels/document.xml.rels", HEAD + '<Relationships xmlns="%s"><Relationship Id="rId9" '
         'Type="%s/image" Target="media/image1.jpeg"/></Relationships>' % (RELS, DOCREL)),
        ("word/media/image1.jpeg", rng.randbytes(image_bytes)),
    ])


def xlsx(rng, words, rows):
    data = []
    for r in range(1, rows + 1):
        a, b = rng.choice(words), sentence(rng, words)
        data.append('<row r="%d"><c r="A%d" t="inlineStr"><is><t>%s</t></is></c>'
                    '<c r="B%d" t="inlineStr"><is><t>%s</t></is></c><c r="C%d"><v>%d</v></c>'
                    '<c r="D%d"><v>%.2f</v></c></row>'
                    % (r, r, a, r, xml_escape(b), r, rng.randint(1, 10**6), r, rng.random() * 1000))
    return package([
        ("[Content_Types].xml", HEAD + '<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
         '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
         '<Default Extension="xml" ContentType="application/xml"/>'
         '<Override PartName="/xl/workbook.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml"/>'
         '<Override PartName="/xl/worksheets/sheet1.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.worksheet+xml"/></Types>'),
        ("_rels/.rels", HEAD + '<Relationships xmlns="%s"><Relationship Id="rId1" Type="%s/officeDocument" '
         'Target="xl/workbook.xml"/></Relationships>' % (RELS, DOCREL)),
        ("xl/workbook.xml", HEAD + '<workbook xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" '
         'xmlns:r="%s"><sheets><sheet name="Data" sheetId="1" r:id="rId1"/></sheets></workbook>' % DOCREL),
        ("xl/_rels/workbook.xml.rels", HEAD + '<Relationships xmlns="%s"><Relationship Id="rId1" '
         'Type="%s/worksheet" Target="worksheets/sheet1.xml"/></Relationships>' % (RELS, DOCREL)),
        ("xl/worksheets/sheet1.xml", HEAD + '<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main">'
         "<sheetData>%s</sheetData></worksheet>" % "".join(data)),
    ])


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: gen-docs.py DIR [COUNT] [MB]")
    root = sys.argv[1]
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
    megabytes = int(sys.argv[3]) if len(sys.argv) > 3 else 500
    rng = random.Random(SEED)
    words = vocabulary(rng)
    kinds = (["pdf"] * 40 + ["docx"] * 25 + ["xlsx"] * 15 + ["html"] * 10 + ["md"] * 5 + ["txt"] * 5)
    # Images carry what is left of the budget after the text: about 85% of it, in the PDFs and
    # the DOCX files.
    with_image = sum(1 for i in range(count) if kinds[i % 100] in ("pdf", "docx"))
    image_bytes = int(megabytes * 1024 * 1024 * 0.85 / max(1, with_image))
    total = 0
    for i in range(count):
        kind = kinds[i % 100]
        folder = os.path.join(root, "set-%02d" % (i // 100))
        os.makedirs(folder, exist_ok=True)
        if kind == "pdf":
            pages = [[sentence(rng, words)[:90] for _ in range(50)] for _ in range(8)]
            data = pdf(rng, words, "Report %d" % i, pages, image_bytes)
        elif kind == "docx":
            data = docx(rng, words, image_bytes)
        elif kind == "xlsx":
            data = xlsx(rng, words, 2000)
        elif kind == "html":
            body = "".join("<h2>%s</h2><p>%s</p>" % (rng.choice(words), paragraph(rng, words, 8))
                           for _ in range(120))
            data = ("<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>Page %d</title>"
                    "<script>var x = 1;</script></head><body>%s</body></html>" % (i, body)).encode()
        else:
            text = "\n\n".join(("## " if kind == "md" else "") + rng.choice(words) + "\n\n"
                               + paragraph(rng, words, 8) for _ in range(120))
            data = text.encode()
        path = os.path.join(folder, "doc-%04d.%s" % (i, kind))
        with open(path, "wb") as f:
            f.write(data)
        total += len(data)
    print("%d documents, %.1f MB in %s" % (count, total / 1024 / 1024, root))


if __name__ == "__main__":
    main()
