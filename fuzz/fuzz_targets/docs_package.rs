//! The ZIP-based readers (DOCX, PPTX, ODT, ODS, ODP: ours over quick-xml; XLSX: calamine) on
//! the same bytes: ours never panic, none hangs or outgrows the bounds.
#![no_main]

use libfuzzer_sys::fuzz_target;

include!("docs_common.rs");

fuzz_target!(|data: &[u8]| {
    for name in ["x.docx", "x.pptx", "x.odt", "x.ods", "x.odp", "x.xlsx"] {
        check(name, data);
    }
});
