//! The MIME adapter on arbitrary bytes: a ParsedMessage within the limits, or a typed error.
#![no_main]

use libfuzzer_sys::fuzz_target;
use steward_connectors::mail::mime::{MessageContext, parse_message};
use steward_core::{Limits, mirror::ParseLimits};

#[path = "../upstream_panics.rs"]
mod upstream_panics;

fuzz_target!(|data: &[u8]| {
    upstream_panics::install_hook();
    let mut limits = ParseLimits::from(&Limits::default());
    limits.max_header_bytes = 4096;
    limits.max_body_chars = 1 << 16;
    if let Ok(m) = parse_message(data, &MessageContext::default(), &limits, None) {
        assert!(m.body_text.len() <= limits.max_body_chars);
        assert!(m.attachments.len() <= limits.max_attachments);
        assert!(m.to.len() <= limits.max_addresses_per_field);
        assert!(m.size as usize <= data.len());
    }
});
