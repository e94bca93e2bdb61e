//! Integration tests of the mail connectors against real files (one binary, one module per
//! capability). Tests that need `../shared/corpora` read it through `STEWARD_CORPORA` and say so
//! when they skip.

mod differential;
mod embed;
mod eval;
mod fixtures;
mod lexical;
mod reads;
mod search;
mod smtp;
mod sources;
mod sync;
mod threading;
