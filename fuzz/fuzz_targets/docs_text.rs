//! The text readers (HTML, RTF, Markdown, plain text in any encoding, saved mail): never a
//! panic, never past the bounds.
#![no_main]

use libfuzzer_sys::fuzz_target;

include!("docs_common.rs");

fuzz_target!(|data: &[u8]| {
    for name in ["x.html", "x.rtf", "x.txt", "x.eml", "x"] {
        check(name, data);
    }
});
