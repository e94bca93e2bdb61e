//! mbox splitting in both quoting flavours: never a panic, offsets inside the input, messages in
//! order, and no message larger than the limit.
#![no_main]

use libfuzzer_sys::fuzz_target;
use steward_connectors::mail::mbox::{MboxFlavor, split_mbox};

fuzz_target!(|data: &[u8]| {
    for flavor in [MboxFlavor::Mboxrd, MboxFlavor::Mboxo] {
        let mut last = None;
        split_mbox(data, flavor, 4096, |m, truncated| {
            assert!((m.offset as usize) < data.len());
            assert!(m.bytes.len() <= 4096);
            if !truncated {
                assert!(m.bytes.len() <= data.len());
            }
            if let Some(prev) = last {
                assert!(m.offset > prev);
            }
            last = Some(m.offset);
        })
        .expect("reading from memory cannot fail");
    }
});
