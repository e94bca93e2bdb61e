//! UniFFI's binding generator, pinned to the workspace's uniffi version.

fn main() {
    uniffi::uniffi_bindgen_main();
}
