//! The person's files: the roots `config.toml` names, and the guard every path passes before
//! a byte is read.

mod demo;
mod docs;
mod extract;
mod find;
mod roots;
mod shell;
