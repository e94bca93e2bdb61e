//! The library half of the `steward` command: the HTTP + WebSocket server over steward-core.
//!
//! [`http::app`] is the whole server as a function (`Router`), so tests drive it without a
//! socket; [`http::serve`] binds it. Every behaviour is a core call: this crate only
//! authenticates, translates and transports.

pub mod http;
pub mod mcp;
