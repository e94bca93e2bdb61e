//! The sign-in options of `--caldav URL` and `--carddav URL`.

use std::path::PathBuf;

use clap::Args;
use steward_connectors::dav::{DavAccount, DavClient, SecretSource};

use super::{Failure, usage};

/// How to sign in to a CalDAV or CardDAV server.
#[derive(Debug, Args)]
pub(super) struct DavLogin {
    /// The user name (basic authentication).
    #[arg(long, requires = "secret")]
    username: Option<String>,
    /// A file (mode 0600) whose first line is the password.
    #[arg(long, value_name = "FILE", group = "secret", requires = "username")]
    password_file: Option<PathBuf>,
    /// The OS keyring service holding the password for --username.
    #[arg(long, value_name = "SERVICE", group = "secret", requires = "username")]
    keyring: Option<String>,
    /// A file (mode 0600) whose first line is a bearer token (without --username).
    #[arg(long, value_name = "FILE", group = "secret", conflicts_with = "username")]
    token_file: Option<PathBuf>,
}

impl DavLogin {
    /// A client for `url` with these credentials (read now).
    pub(super) fn client(&self, url: &str) -> Result<DavClient, Failure> {
        let secret = match (&self.password_file, &self.keyring, &self.token_file) {
            (Some(f), None, None) | (None, None, Some(f)) => Some(SecretSource::File(f.clone())),
            (None, Some(k), None) => Some(SecretSource::Keyring(k.clone())),
            (None, None, None) => None,
            _ => return Err(usage("give one of --password-file, --keyring, --token-file".into())),
        };
        let account = DavAccount { url: url.to_owned(), username: self.username.clone(), secret };
        DavClient::new(&account).map_err(Failure::from)
    }
}
