//! steward-core integration tests: one binary, one module per capability.

mod store;
