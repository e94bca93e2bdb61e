//! The `Steward` object.

use std::sync::Arc;

use steward_connectors::mail::{EmlxSource, MaildirSource, MboxSource};
use steward_core::mirror::{MailSource, SyncOptions};

use crate::{EmbedReport, FfiError, MirrorStats, SyncSummary};

/// One person's Steward home.
#[derive(uniffi::Object)]
pub struct Steward {
    inner: Arc<steward_core::Steward>,
}

#[uniffi::export]
impl Steward {
    /// Opens (creating if needed) the home at `home`, with every watch source registered and
    /// the embedder its configuration names (none when embedding is off).
    #[uniffi::constructor]
    pub fn open(home: String) -> Result<Arc<Self>, FfiError> {
        let builder = steward_connectors::watches::register(
            steward_core::Steward::builder().embedder_from_config(),
        );
        Ok(Arc::new(Self { inner: Arc::new(builder.home(home).open()?) }))
    }

    /// Mirrors a Maildir.
    pub fn index_maildir(
        &self,
        path: String,
        account: Option<String>,
    ) -> Result<SyncSummary, FfiError> {
        self.sync(&MaildirSource::new(path), account)
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

    /// Mirrors an mbox file (mboxrd quoting).
    pub fn index_mbox(
        &self,
        path: String,
        account: Option<String>,
    ) -> Result<SyncSummary, FfiError> {
        self.sync(&MboxSource::new(path), account)
    }

    /// Mirrors an Apple Mail folder of `.emlx` files.
    pub fn index_emlx(
        &self,
        path: String,
        account: Option<String>,
    ) -> Result<SyncSummary, FfiError> {
        self.sync(&EmlxSource::new(path), account)
    }

    /// Counts over the mirror.
    pub fn mirror_stats(&self) -> Result<MirrorStats, FfiError> {
        Ok(self.inner.mirror().stats()?.into())
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

    fn sync(
        &self,
        source: &dyn MailSource,
        account: Option<String>,
    ) -> Result<SyncSummary, FfiError> {
        Ok(self
            .inner
            .mirror()
            .sync(source, &SyncOptions { account, cancel: None }, &mut |_| {})?
            .into())
    }
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
            )
            .unwrap();
        assert_eq!((sum.added, sum.mode.as_str()), (1, "backfill"));
        assert_eq!(s.mirror_stats().unwrap().messages_live, 1);
        let err = s.index_maildir("/no/such/dir".into(), None).unwrap_err();
        let FfiError::Steward { kind, code, .. } = err;
        assert_eq!((kind.as_str(), code.as_str()), ("not_found", "MAIL_SOURCE_NOT_FOUND"));
        assert!(!crate::steward_version().is_empty());
    }
}
