//! Mail sources: Maildir, mbox and Apple Mail `.emlx`, all parsed with the same MIME adapter,
//! plus a generator of realistic demo mailboxes.

pub mod demo;
pub mod emlx;
pub mod maildir;
pub mod mbox;
pub mod mime;
pub mod smtp;
pub mod watch;

pub use emlx::EmlxSource;
pub use maildir::MaildirSource;
pub use mbox::{MboxFlavor, MboxSource};
