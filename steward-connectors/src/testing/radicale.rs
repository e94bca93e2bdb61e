//! A real CalDAV/CardDAV server on loopback: Radicale (PyPI `radicale`, installed in
//! `target/py-venv` by `scripts/test`), with htpasswd authentication and its own filesystem
//! storage, which the tests fill the way Radicale itself lays it out (one folder per
//! collection with `.Radicale.props`, one file per item) and then change over HTTP.

use std::{
    net::TcpStream,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
};

use super::python;

/// Connection attempts while the server starts (50 ms apart).
/// Fixed (not a setting).
const START_ATTEMPTS: usize = 400;

/// A running Radicale; stopped when dropped.
#[derive(Debug)]
pub struct Radicale {
    child: Child,
    /// `http://127.0.0.1:<port>/`.
    pub url: String,
    /// The user's folder in Radicale's storage (`collection-root/<user>`).
    pub user_root: PathBuf,
    /// The user.
    pub user: String,
    /// Their password.
    pub password: String,
}

/// What a collection holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Collection {
    /// A calendar (`VCALENDAR`).
    Calendar,
    /// An address book (`VADDRESSBOOK`).
    AddressBook,
}

fn http() -> reqwest::blocking::Client {
    steward_core::net::install_crypto_provider();
    reqwest::blocking::Client::new()
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or_else(|e| panic!("no free loopback port: {e}"))
}

impl Radicale {
    /// Starts Radicale on a free loopback port with its storage under `dir`, accepting `user`
    /// with `password`.
    ///
    /// # Panics
    /// When Python or Radicale is missing (run `scripts/test`, which installs them) or the
    /// server does not start.
    #[allow(clippy::expect_used)]
    pub fn start(dir: &Path, user: &str, password: &str) -> Self {
        let storage = dir.join("radicale-storage");
        let user_root = storage.join("collection-root").join(user);
        std::fs::create_dir_all(&user_root).expect("radicale storage");
        let htpasswd = dir.join("radicale-users");
        std::fs::write(&htpasswd, format!("{user}:{password}\n")).expect("htpasswd");
        let port = free_port();
        let config = dir.join("radicale.conf");
        std::fs::write(
            &config,
            format!(
                "[server]\nhosts = 127.0.0.1:{port}\n\n[auth]\ntype = htpasswd\n\
                 htpasswd_filename = {}\nhtpasswd_encryption = plain\ndelay = 0\n\n\
                 [rights]\ntype = owner_only\n\n[storage]\nfilesystem_folder = {}\n\n\
                 [web]\ntype = none\n\n[logging]\nlevel = warning\n",
                htpasswd.display(),
                storage.display()
            ),
        )
        .expect("radicale config");
        let child = Command::new(python())
            .args(["-m", "radicale", "--config"])
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("cannot start {} (run scripts/test to create it): {e}", python().display())
            });
        let mut me = Self {
            child,
            url: format!("http://127.0.0.1:{port}/"),
            user_root,
            user: user.to_owned(),
            password: password.to_owned(),
        };
        for _ in 0..START_ATTEMPTS {
            if let Some(status) = me.child.try_wait().expect("radicale status") {
                panic!(
                    "radicale exited at start ({status}); is it installed in {}? \
                     (scripts/test installs it)",
                    python().display()
                );
            }
            if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return me;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let _ = me.child.kill();
        panic!("radicale did not listen on 127.0.0.1:{port}");
    }

    /// Creates the collection `id` in the storage, as Radicale lays it out.
    ///
    /// # Panics
    /// When the storage cannot be written.
    #[allow(clippy::expect_used)]
    pub fn collection(&self, id: &str, kind: Collection, name: &str, color: Option<&str>) {
        let dir = self.user_root.join(id);
        std::fs::create_dir_all(&dir).expect("collection folder");
        let tag = match kind {
            Collection::Calendar => "VCALENDAR",
            Collection::AddressBook => "VADDRESSBOOK",
        };
        let mut props = serde_json::json!({ "tag": tag, "D:displayname": name });
        if let Some(c) = color {
            props["ICAL:calendar-color"] = serde_json::json!(c);
        }
        std::fs::write(dir.join(".Radicale.props"), props.to_string()).expect("props");
    }

    /// Writes the item `name` of collection `id` straight into the storage (before a first
    /// sync; later changes go through [`Radicale::put`] and [`Radicale::delete`]).
    ///
    /// # Panics
    /// When the storage cannot be written.
    #[allow(clippy::expect_used)]
    pub fn seed(&self, id: &str, name: &str, text: &str) {
        std::fs::write(self.user_root.join(id).join(name), text).expect("seed item");
    }

    /// Writes the password to `path`, readable by its owner only (mode 0600), as a DAV
    /// source's `password_file` must be; returns `path`.
    ///
    /// # Panics
    /// When the file cannot be written.
    #[allow(clippy::expect_used)]
    pub fn password_file(&self, path: &Path) -> PathBuf {
        std::fs::write(path, format!("{}\n", self.password)).expect("password file");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
                .expect("chmod 600");
        }
        path.to_owned()
    }

    /// The URL of an item.
    pub fn item_url(&self, id: &str, name: &str) -> String {
        format!("{}{}/{id}/{name}", self.url, self.user)
    }

    /// `PUT`s an item over HTTP; returns the status.
    ///
    /// # Panics
    /// When the server cannot be reached.
    #[allow(clippy::expect_used)]
    pub fn put(&self, id: &str, name: &str, content_type: &str, text: &str) -> u16 {
        http()
            .put(self.item_url(id, name))
            .basic_auth(&self.user, Some(&self.password))
            .header("Content-Type", content_type)
            .body(text.to_owned())
            .send()
            .expect("PUT")
            .status()
            .as_u16()
    }

    /// `DELETE`s an item over HTTP; returns the status.
    ///
    /// # Panics
    /// When the server cannot be reached.
    #[allow(clippy::expect_used)]
    pub fn delete(&self, id: &str, name: &str) -> u16 {
        http()
            .delete(self.item_url(id, name))
            .basic_auth(&self.user, Some(&self.password))
            .send()
            .expect("DELETE")
            .status()
            .as_u16()
    }

    /// Stops the server now (a later sync finds nobody listening).
    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Radicale {
    fn drop(&mut self) {
        self.stop();
    }
}
