//! The calendar sources that take writes (see `steward_core::calendar::write`): a vdir, where
//! a new item is written beside its name and linked into place (never over an existing item,
//! and never half-written where khal or vdirsyncer would read it), an edited one is written
//! beside it and renamed over it, and either is replaced or removed only while it is the file
//! the store last read; and a CalDAV account, through conditional requests
//! (`If-None-Match: *` to create, `If-Match` to update or delete).

use std::path::{Path, PathBuf};

use steward_core::calendar::write::{
    CalendarTarget, CalendarWrite, Observed, WriteAction, WriteError,
};

use crate::dav::{DavClient, DavError, DavKind};

fn failed(message: impl Into<String>) -> WriteError {
    WriteError { maybe_applied: false, message: message.into() }
}

/// A vdir root whose collections take writes.
#[derive(Debug, Clone)]
pub struct VdirTarget {
    account: String,
    root: PathBuf,
}

impl VdirTarget {
    /// The vdir at `root`, whose events the store keeps under `account`.
    pub fn new(account: impl Into<String>, root: impl Into<PathBuf>) -> Self {
        Self { account: account.into(), root: root.into() }
    }

    fn item(&self, w: &CalendarWrite) -> Result<PathBuf, WriteError> {
        let plain = |s: &str| !s.is_empty() && !s.contains(['/', '\\']) && s != "." && s != "..";
        if !plain(&w.collection) || !plain(&w.href) {
            return Err(failed(format!("{}/{}: not a name in the vdir", w.collection, w.href)));
        }
        // A root that itself holds the items is one collection named after it (the sync's
        // rule): its items are directly under it.
        let inside = self.root.join(&w.collection);
        let root_is_it = self.root.file_name().is_some_and(|n| n.to_string_lossy() == w.collection)
            && !inside.is_dir();
        Ok(if root_is_it { self.root.join(&w.href) } else { inside.join(&w.href) })
    }
}

/// Refuses when the item is not the file the store last read (another app changed it).
fn unchanged(path: &Path, w: &CalendarWrite) -> Result<(), WriteError> {
    let meta = std::fs::metadata(path).map_err(|e| failed(format!("{}: {e}", path.display())))?;
    if w.etag.as_deref() != Some(super::sync::etag(&meta).as_str()) {
        return Err(failed(format!(
            "{} changed since it was read: index the calendar again",
            path.display()
        )));
    }
    Ok(())
}

/// An item read back, with its events as the sync would read them.
fn present(etag: String, text: String) -> Observed {
    let events = super::ics::read_ics(&text).map(|r| r.events).unwrap_or_default();
    Observed::Present { etag, text, events }
}

fn sync_dir(dir: &Path) {
    // Best effort: the link is what makes the item appear; a directory fsync keeps it across a
    // power cut where the file system allows it.
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
}

impl CalendarTarget for VdirTarget {
    fn account(&self) -> &str {
        &self.account
    }

    fn apply(&self, w: &CalendarWrite) -> Result<Option<String>, WriteError> {
        let path = self.item(w)?;
        let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
        match w.action {
            WriteAction::Create => {
                let text = w.text.as_deref().ok_or_else(|| failed("a create without its text"))?;
                if !dir.is_dir() {
                    return Err(failed(format!("{}: no such calendar", dir.display())));
                }
                // `.tmp` files are never items (vdirsyncer's rule): readers skip it.
                let tmp = dir.join(format!("{}.tmp", w.href));
                let write = || -> std::io::Result<()> {
                    use std::io::Write as _;
                    let mut f = std::fs::File::create(&tmp)?;
                    f.write_all(text.as_bytes())?;
                    f.sync_all()?;
                    // A hard link fails when the name is taken: never over another item.
                    std::fs::hard_link(&tmp, &path)
                };
                let linked = write();
                let _ = std::fs::remove_file(&tmp);
                linked.map_err(|e| failed(format!("{}: {e}", path.display())))?;
                sync_dir(&dir);
                Ok(std::fs::metadata(&path).ok().map(|m| super::sync::etag(&m)))
            }
            WriteAction::Update => {
                let text = w.text.as_deref().ok_or_else(|| failed("an update without its text"))?;
                unchanged(&path, w)?;
                // Written beside its name, then renamed over it: a reader sees the old item or
                // the new one, never half of either; the name is kept (vdirsyncer's rule).
                let tmp = dir.join(format!("{}.tmp", w.href));
                let write = || -> std::io::Result<()> {
                    use std::io::Write as _;
                    let mut f = std::fs::File::create(&tmp)?;
                    f.write_all(text.as_bytes())?;
                    f.sync_all()?;
                    std::fs::rename(&tmp, &path)
                };
                let renamed = write();
                if renamed.is_err() {
                    let _ = std::fs::remove_file(&tmp);
                }
                renamed.map_err(|e| failed(format!("{}: {e}", path.display())))?;
                sync_dir(&dir);
                Ok(std::fs::metadata(&path).ok().map(|m| super::sync::etag(&m)))
            }
            WriteAction::Delete => {
                unchanged(&path, w)?;
                std::fs::remove_file(&path)
                    .map_err(|e| failed(format!("{}: {e}", path.display())))?;
                sync_dir(&dir);
                Ok(None)
            }
        }
    }

    fn observe(&self, w: &CalendarWrite) -> Result<Observed, WriteError> {
        let path = self.item(w)?;
        match std::fs::read(&path) {
            Ok(bytes) => {
                let etag =
                    std::fs::metadata(&path).map(|m| super::sync::etag(&m)).unwrap_or_default();
                Ok(present(etag, String::from_utf8_lossy(&bytes).into_owned()))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Observed::Absent),
            Err(e) => Err(failed(format!("{}: {e}", path.display()))),
        }
    }
}

/// A CalDAV account whose calendars take writes.
#[derive(Debug)]
pub struct DavTarget {
    account: String,
    client: DavClient,
}

impl DavTarget {
    /// The CalDAV account behind `client`, whose events the store keeps under `account`.
    pub fn new(account: impl Into<String>, client: DavClient) -> Self {
        Self { account: account.into(), client }
    }

    /// The item's calendar on the server (found by discovery).
    fn calendar(&self, w: &CalendarWrite) -> Result<crate::dav::DavCollection, WriteError> {
        // Nothing is sent before this: a failure here certainly wrote nothing.
        let cals = self.client.discover(DavKind::Calendars).map_err(|e| failed(e.to_string()))?;
        cals.into_iter()
            .find(|c| c.id == w.collection)
            .ok_or_else(|| failed(format!("no calendar {:?} on the server", w.collection)))
    }
}

/// Whether a failed request may still have been applied: only when it was sent and no answer
/// came back, or the server failed while handling it.
fn as_write_error(e: &DavError) -> WriteError {
    let maybe_applied = match e {
        DavError::Unreachable { reason, .. } => reason != "cannot connect",
        DavError::Status { status, .. } => *status >= 500,
        // An answer came that could not be read: the server may have done it.
        DavError::BadResponse { .. } | DavError::TooLarge(_) => true,
        _ => false,
    };
    WriteError { maybe_applied, message: e.to_string() }
}

impl CalendarTarget for DavTarget {
    fn account(&self) -> &str {
        &self.account
    }

    fn apply(&self, w: &CalendarWrite) -> Result<Option<String>, WriteError> {
        let cal = self.calendar(w)?;
        match w.action {
            WriteAction::Create => {
                let text = w.text.as_deref().ok_or_else(|| failed("a create without its text"))?;
                self.client
                    .put_new(&cal, &w.href, text, "text/calendar; charset=utf-8")
                    .map_err(|e| as_write_error(&e))
            }
            WriteAction::Update => {
                let text = w.text.as_deref().ok_or_else(|| failed("an update without its text"))?;
                let etag = w.etag.as_deref().ok_or_else(|| failed("an update without its ETag"))?;
                self.client
                    .put_if(&cal, &w.href, text, "text/calendar; charset=utf-8", etag)
                    .map_err(|e| as_write_error(&e))
            }
            WriteAction::Delete => {
                let etag = w.etag.as_deref().ok_or_else(|| failed("a delete without its ETag"))?;
                self.client
                    .delete_if(&cal, &w.href, etag)
                    .map(|()| None)
                    .map_err(|e| as_write_error(&e))
            }
        }
    }

    fn observe(&self, w: &CalendarWrite) -> Result<Observed, WriteError> {
        let cals = self.client.discover(DavKind::Calendars).map_err(|e| as_write_error(&e))?;
        let Some(cal) = cals.iter().find(|c| c.id == w.collection) else {
            return Err(failed(format!("no calendar {:?} on the server now", w.collection)));
        };
        let got = self
            .client
            .fetch(DavKind::Calendars, cal, std::slice::from_ref(&w.href))
            .map_err(|e| as_write_error(&e))?;
        // Gone only when the server says so (404, or nothing for that name in the answer);
        // any other refusal is no evidence.
        match got.into_iter().next() {
            Some(Ok(f)) => Ok(present(f.etag, f.data)),
            Some(Err((_, DavError::Status { status: 404, .. }))) | None => Ok(Observed::Absent),
            Some(Err((_, e))) => Err(as_write_error(&e)),
        }
    }
}
