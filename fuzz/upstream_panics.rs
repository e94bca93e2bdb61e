//! Shared by the targets that run the MIME adapter.

/// libfuzzer-sys aborts on every panic, even a caught one. The adapter deliberately contains
/// panics raised inside mail-parser (a known upstream bug, turned into a per-file error); any
/// other panic — ours — still aborts and is reported.
pub fn install_hook() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let upstream = info.location().is_some_and(|l| l.file().contains("mail-parser"));
            if !upstream {
                default(info);
                std::process::abort();
            }
        }));
    });
}

