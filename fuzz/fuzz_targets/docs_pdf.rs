//! The PDF reader (pdf-extract over lopdf): it may panic (contained, typed), but never hangs,
//! never outgrows the bounds.
#![no_main]

use libfuzzer_sys::fuzz_target;

include!("docs_common.rs");

fuzz_target!(|data: &[u8]| check("x.pdf", data));
