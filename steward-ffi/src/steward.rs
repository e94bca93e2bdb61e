//! The `Steward` object.

use std::sync::Arc;

use steward_connectors::mail::{EmlxSource, MaildirSource, MboxSource};
use steward_core::mirror::{MailSource, SyncOptions};

use crate::{EmbedReport, FfiError, MirrorStats, SyncSummary};

/// How to open a home: each setter takes the builder and returns a new one (the launcher
/// chains them), `open` makes the `Steward`.
#[derive(Debug, Clone, Default, uniffi::Object)]
pub struct StewardBuilder {
    home: Option<String>,
    watch_sources: bool,
    embedder_from_config: bool,
    llm_from_config: bool,
}

#[uniffi::export]
impl StewardBuilder {
    /// Nothing set: the default home (`$STEWARD_HOME` or the platform's data directory), no
    /// watch sources, no embedder, no chat models.
    #[uniffi::constructor]
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Uses `home` instead of the default.
    pub fn home(self: Arc<Self>, home: String) -> Arc<Self> {
        Arc::new(Self { home: Some(home), ..(*self).clone() })
    }

    /// Registers every watch source (`time`, `train`).
    pub fn watch_sources(self: Arc<Self>) -> Arc<Self> {
        Arc::new(Self { watch_sources: true, ..(*self).clone() })
    }

    /// Uses the embedder the home's configuration names (`[embed]`, `STEWARD_EMBED_*`).
    pub fn embedder_from_config(self: Arc<Self>) -> Arc<Self> {
        Arc::new(Self { embedder_from_config: true, ..(*self).clone() })
    }

    /// Uses the chat models the home's configuration names (`[llm]`, `STEWARD_LLM_*`).
    pub fn llm_from_config(self: Arc<Self>) -> Arc<Self> {
        Arc::new(Self { llm_from_config: true, ..(*self).clone() })
    }

    /// Opens (creating if needed) the home.
    pub fn open(self: Arc<Self>) -> Result<Arc<Steward>, FfiError> {
        let mut b = steward_core::Steward::builder();
        if let Some(h) = &self.home {
            b = b.home(h);
        }
        if self.watch_sources {
            b = steward_connectors::watches::register(b);
        }
        if self.embedder_from_config {
            b = b.embedder_from_config();
        }
        if self.llm_from_config {
            b = b.llm_from_config();
        }
        Ok(Arc::new(Steward { inner: Arc::new(b.open()?) }))
    }
}

/// One person's Steward home.
#[derive(uniffi::Object)]
pub struct Steward {
    inner: Arc<steward_core::Steward>,
}

#[uniffi::export]
impl Steward {
    /// Opens (creating if needed) the home at `home`, with every watch source registered and
    /// the embedder and chat models its configuration names (none when they are off): what
    /// `StewardBuilder().home(home).watch_sources().embedder_from_config().llm_from_config()
    /// .open()` does.
    #[uniffi::constructor]
    pub fn open(home: String) -> Result<Arc<Self>, FfiError> {
        // The one "open a configured home" path the command and the server use too.
        let s = steward_connectors::home::open(Some(home.into()))?;
        Ok(Arc::new(Self { inner: Arc::new(s) }))
    }

    /// Mirrors a Maildir.
    #[uniffi::method(default(listener = None))]
    pub fn index_maildir(
        &self,
        path: String,
        account: Option<String>,
        listener: Option<Box<dyn SyncListener>>,
    ) -> Result<SyncSummary, FfiError> {
        sync(&self.inner, &MaildirSource::new(path), account, listener.as_deref())
    }

    /// One drain of the mail embedding queue with the configured embedder: embeds what is new
    /// or changed. An endpoint that is down is reported, not an error; no embedder configured
    /// is `EMBED_NOT_CONFIGURED`.
    pub fn embed_mail(&self) -> Result<EmbedReport, FfiError> {
        self.inner
            .embed_mail(&Default::default(), &mut |_| {})
            .map(Into::into)
            .map_err(|e| FfiError::from_core(&e))
    }

    /// [`Steward::embed_mail`] as an async call: the drain runs on the library's runtime.
    pub async fn embed_mail_async(&self) -> Result<EmbedReport, FfiError> {
        let steward = self.handle();
        crate::runtime::blocking(move || {
            steward
                .embed_mail(&Default::default(), &mut |_| {})
                .map(Into::into)
                .map_err(|e| FfiError::from_core(&e))
        })
        .await
    }

    /// [`Steward::index_maildir`] as an async call: the sync runs on the library's runtime.
    #[uniffi::method(default(listener = None))]
    pub async fn index_maildir_async(
        &self,
        path: String,
        account: Option<String>,
        listener: Option<Box<dyn SyncListener>>,
    ) -> Result<SyncSummary, FfiError> {
        self.sync_async(MaildirSource::new(path), account, listener).await
    }

    /// [`Steward::index_mbox`] as an async call.
    #[uniffi::method(default(listener = None))]
    pub async fn index_mbox_async(
        &self,
        path: String,
        account: Option<String>,
        listener: Option<Box<dyn SyncListener>>,
    ) -> Result<SyncSummary, FfiError> {
        self.sync_async(MboxSource::new(path), account, listener).await
    }

    /// [`Steward::index_emlx`] as an async call (Apple Mail's folders, the launcher's usual
    /// source, can hold hundreds of thousands of files).
    #[uniffi::method(default(listener = None))]
    pub async fn index_emlx_async(
        &self,
        path: String,
        account: Option<String>,
        listener: Option<Box<dyn SyncListener>>,
    ) -> Result<SyncSummary, FfiError> {
        self.sync_async(EmlxSource::new(path), account, listener).await
    }

    /// Mirrors an mbox file (mboxrd quoting).
    #[uniffi::method(default(listener = None))]
    pub fn index_mbox(
        &self,
        path: String,
        account: Option<String>,
        listener: Option<Box<dyn SyncListener>>,
    ) -> Result<SyncSummary, FfiError> {
        sync(&self.inner, &MboxSource::new(path), account, listener.as_deref())
    }

    /// Mirrors an Apple Mail folder of `.emlx` files.
    #[uniffi::method(default(listener = None))]
    pub fn index_emlx(
        &self,
        path: String,
        account: Option<String>,
        listener: Option<Box<dyn SyncListener>>,
    ) -> Result<SyncSummary, FfiError> {
        sync(&self.inner, &EmlxSource::new(path), account, listener.as_deref())
    }

    /// Counts over the mirror.
    pub fn mirror_stats(&self) -> Result<MirrorStats, FfiError> {
        Ok(self.inner.mail_stats()?.into())
    }
}

impl Steward {
    pub(crate) fn inner(&self) -> &steward_core::Steward {
        &self.inner
    }

    /// A shared handle, for objects that outlive a call (a person's authority).
    pub(crate) fn handle(&self) -> Arc<steward_core::Steward> {
        Arc::clone(&self.inner)
    }

    /// [`sync`] on the library's runtime.
    async fn sync_async(
        &self,
        source: impl MailSource + 'static,
        account: Option<String>,
        listener: Option<Box<dyn SyncListener>>,
    ) -> Result<SyncSummary, FfiError> {
        let steward = self.handle();
        crate::runtime::blocking(move || sync(&steward, &source, account, listener.as_deref()))
            .await
    }
}

/// Follows a sync (the launcher's progress bar and its Cancel button).
#[uniffi::export(callback_interface)]
pub trait SyncListener: Send + Sync {
    /// After every batch, on the sync's thread: `phase` is `scanning`, `ingesting` or
    /// `finishing`. Returning false stops the run before its next batch: what was committed
    /// stays, and the call fails with `MIRROR_SYNC_CANCELLED`.
    fn on_progress(&self, phase: String, files_total: u64, files_done: u64) -> bool;
}

/// Mirrors `source` through the facade: the text index is current when it returns.
fn sync(
    steward: &steward_core::Steward,
    source: &dyn MailSource,
    account: Option<String>,
    listener: Option<&dyn SyncListener>,
) -> Result<SyncSummary, FfiError> {
    use std::sync::atomic::{AtomicBool, Ordering};
    use steward_core::mirror::ProgressPhase;
    let cancel = AtomicBool::new(false);
    let mut report = |p: &steward_core::mirror::Progress| {
        let Some(l) = listener else { return };
        let phase = match p.phase {
            ProgressPhase::Scanning => "scanning",
            ProgressPhase::Ingesting => "ingesting",
            ProgressPhase::Finishing => "finishing",
        };
        if !cancel.load(Ordering::Relaxed)
            && !l.on_progress(phase.into(), p.files_total, p.files_done)
        {
            cancel.store(true, Ordering::Relaxed);
        }
    };
    steward
        .sync_mail(source, &SyncOptions { account, cancel: Some(&cancel) }, &mut report)
        .map(Into::into)
        .map_err(|e| FfiError::from_core(&e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_index_and_typed_errors() {
        let dir = tempfile::tempdir().unwrap();
        let md = dir.path().join("Maildir/cur");
        std::fs::create_dir_all(&md).unwrap();
        std::fs::write(
            md.join("1:2,S"),
            b"From: a@b.c\nSubject: hi\nMessage-ID: <1@b.c>\n\nbody\n",
        )
        .unwrap();
        let s = Steward::open(dir.path().join("home").to_string_lossy().into_owned()).unwrap();
        let sum = s
            .index_maildir(
                dir.path().join("Maildir").to_string_lossy().into_owned(),
                Some("a".into()),
                None,
            )
            .unwrap();
        assert_eq!((sum.added, sum.mode.as_str()), (1, "backfill"));
        assert_eq!(s.mirror_stats().unwrap().messages_live, 1);
        let err = s.index_maildir("/no/such/dir".into(), None, None).unwrap_err();
        let FfiError::Steward { kind, code, .. } = err;
        assert_eq!((kind.as_str(), code.as_str()), ("not_found", "MAIL_SOURCE_NOT_FOUND"));
        assert!(!crate::steward_version().is_empty());
    }
}
