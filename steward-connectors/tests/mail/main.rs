//! Integration tests of the mail connectors against real files (one binary, one module per
//! capability). Tests that need `../shared/corpora` read it through `STEWARD_CORPORA`
//! (`fixtures::corpora`) and say so when they skip — or fail, under `CI` or
//! `STEWARD_REQUIRE_CORPORA=1`.

mod agent;
mod calibration;
mod conformance;
mod differential;
mod embed;
mod eval;
mod fixtures;
mod lexical;
mod memory;
mod notify;
mod reads;
mod save;
mod search;
mod smtp;
mod sources;
mod sync;
mod threading;
mod tools;
