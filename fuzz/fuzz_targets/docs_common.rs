// Shared by the document fuzz targets (included with `include!`): runs a reader on the
// fuzzer's thread (no worker: a detached thread alive at exit reads as a leak to
// LeakSanitizer, and libFuzzer's own -timeout finds hangs) and checks the bounds of the answer.

use std::cell::Cell;

use steward_connectors::docs::Readers;
use steward_core::docs::{DocKind, ExtractError, ExtractLimits, Extractor, normalize};

thread_local! {
    /// Set while a third party's reader that panics by design runs: its panic is contained
    /// here as `extract_bounded` contains it in the handle.
    static CONTAINED: Cell<bool> = const { Cell::new(false) };
}

fn hook_once() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    // libFuzzer's hook (which aborts and reports) still sees every other panic: ours, and the
    // targets' own assertions.
    ONCE.call_once(|| {
        let fuzzer = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !CONTAINED.with(Cell::get) {
                fuzzer(info);
            }
        }));
    });
}

/// Reads `data` as the file `name`. Only the third parties' readers (pdf-extract for what is
/// detected as a PDF, calamine for XLSX) may panic (contained, typed); ours never may.
fn check(name: &str, data: &[u8]) {
    hook_once();
    let path = std::path::Path::new(name);
    let may_panic = matches!(
        steward_connectors::docs::detect(path, data),
        Ok(DocKind::Pdf | DocKind::Xlsx)
    );
    let limits = ExtractLimits {
        max_chars: 1 << 20,
        max_bytes: 16 << 20,
        max_unpacked_bytes: 64 << 20,
        ..ExtractLimits::default()
    };
    CONTAINED.with(|c| c.set(may_panic));
    let out = std::panic::catch_unwind(|| Readers.extract(path, data, &limits));
    CONTAINED.with(|c| c.set(false));
    match out {
        Err(_) => assert!(may_panic, "{name}: our reader panicked"),
        Ok(Ok(e)) => {
            assert!(e.units.len() <= limits.max_units);
            let bytes: usize = e.units.iter().map(|u| u.text.len()).sum();
            // Each reader stops at the bound.
            assert!(bytes <= limits.max_chars, "{bytes} bytes of text for {name}");
            let _ = normalize::normalize(e);
        }
        Ok(Err(ExtractError::TimedOut { .. } | ExtractError::Busy)) => {
            unreachable!("no worker here")
        }
        Ok(Err(_)) => {}
    }
}
