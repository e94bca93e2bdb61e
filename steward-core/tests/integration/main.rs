//! steward-core integration tests: one binary, one module per capability.

mod approvals;
mod audit;
mod backup;
mod journal;
mod policy;
mod replay;
mod runner;
mod store;
mod upgrades;
mod watches;
