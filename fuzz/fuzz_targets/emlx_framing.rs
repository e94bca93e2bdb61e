//! Apple Mail .emlx framing (byte count, message, plist trailer) then the MIME adapter on the
//! framed message: arbitrary bytes must give a message or a typed error, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use steward_connectors::mail::{
    emlx::frame_emlx,
    mime::{MessageContext, parse_message},
};
use steward_core::{Limits, mirror::ParseLimits};

#[path = "../upstream_panics.rs"]
mod upstream_panics;

fuzz_target!(|data: &[u8]| {
    upstream_panics::install_hook();
    if let Ok(frame) = frame_emlx(data) {
        assert!(frame.message.len() <= data.len());
        let limits = ParseLimits::from(&Limits::default());
        let ctx = MessageContext { partial: data.len() % 2 == 0, ..MessageContext::default() };
        let _ = parse_message(frame.message, &ctx, &limits, None);
    }
});
