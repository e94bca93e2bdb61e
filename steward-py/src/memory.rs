//! Memory from Python: the review inbox and a person's decisions on it (`Human`), search over
//! the accepted notes, forget with its receipt, reconcile after editing the note files, import
//! of existing markdown and a promotion pass; each a dict or a list of dicts.

use super::*;
use steward_core::memory::{ForgetSelector, MemoryEdit, MemoryKind, MemoryQuery};

fn bad(message: &str) -> PyErr {
    coded(ErrorKind::InvalidInput, "PY_INVALID_ARGUMENT", message)
}

#[pymethods]
impl PySteward {
    /// The proposals waiting for review, oldest first, each with the notes it may replace.
    fn memory_inbox<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let inbox = py.detach(|| self.inner.memory_inbox()).map_err(|e| to_py(&e))?;
        to_python(py, &inbox)
    }

    /// One accepted note with its provenance (`MEMORY_NOT_FOUND` for a proposal or nothing).
    fn memory_note<'py>(&self, py: Python<'py>, id: &str) -> PyResult<Bound<'py, PyAny>> {
        let hit = py.detach(|| self.inner.memory_note(id)).map_err(|e| to_py(&e))?;
        to_python(py, &hit)
    }

    /// Accepted notes matching `text` (words and, with an embedder, meaning), filtered by
    /// `kinds`, `subject` and `as_of` (RFC 3339: what was true and known then).
    #[pyo3(signature = (text, kinds=None, subject=None, as_of=None, limit=10))]
    fn memory_search<'py>(
        &self,
        py: Python<'py>,
        text: &str,
        kinds: Option<Vec<String>>,
        subject: Option<String>,
        as_of: Option<&str>,
        limit: usize,
    ) -> PyResult<Bound<'py, PyAny>> {
        let kinds = kinds
            .unwrap_or_default()
            .iter()
            .map(|k| MemoryKind::parse(k).ok_or_else(|| bad(&format!("unknown kind {k:?}"))))
            .collect::<PyResult<Vec<_>>>()?;
        let as_of = as_of
            .map(|t| {
                chrono::DateTime::parse_from_rfc3339(t)
                    .map(|t| t.with_timezone(&chrono::Utc))
                    .map_err(|e| bad(&format!("as_of {t:?}: {e}")))
            })
            .transpose()?;
        let q = MemoryQuery { text: text.to_owned(), kinds, subject, as_of, limit };
        let hits = py.detach(|| self.inner.memory_search(&q)).map_err(|e| to_py(&e))?;
        to_python(py, &hits)
    }

    /// How many proposals wait, how many notes are indexed, and the promotion's outcomes by
    /// name (threads per outcome).
    fn memory_counts<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let (counts, outcomes) = py
            .detach(|| {
                let counts = self.inner.memory_counts()?;
                Ok::<_, steward_core::memory::MemoryError>((counts, self.inner.promotion_counts()?))
            })
            .map_err(|e| to_py(&e))?;
        to_python(
            py,
            &serde_json::json!({"proposals": counts.0, "notes": counts.1, "promotion": outcomes}),
        )
    }

    /// Reads the note files again (a person's edits are audited as theirs).
    fn memory_reconcile<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let r = py.detach(|| self.inner.memory_reconcile()).map_err(|e| to_py(&e))?;
        to_python(py, &r)
    }

    /// One mail-to-memory promotion pass (needs a chat model for the threads the prefilter
    /// lets through): a dict of what it did.
    fn promote_mail<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let r = py.detach(|| self.inner.promote_mail(None)).map_err(|e| to_py(&e))?;
        to_python(py, &r)
    }
}

#[pymethods]
impl records::PyHuman {
    /// Accepts proposal `id` (with `edit`, a dict of `text`, `kind`, `subject`, `valid_from`,
    /// `valid_to`, `supersedes`, `sensitivity`: accepted as changed). Returns the note.
    #[pyo3(signature = (id, edit=None))]
    fn accept_memory<'py>(
        &self,
        py: Python<'py>,
        id: &str,
        edit: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let edit: Option<MemoryEdit> = match edit {
            Some(e) => Some(
                serde_json::from_str(&json_object_of(py, Some(e))?)
                    .map_err(|e| bad(&e.to_string()))?,
            ),
            None => None,
        };
        let (steward, who) = self.parts();
        let note =
            py.detach(|| steward.memory_accept(who, id, edit.as_ref())).map_err(|e| to_py(&e))?;
        to_python(py, &note)
    }

    /// Rejects proposal `id` (`reason`: wrong, outdated, private or trivial): the same fact is
    /// never proposed again. Returns the tombstone.
    #[pyo3(signature = (id, reason=None))]
    fn reject_memory<'py>(
        &self,
        py: Python<'py>,
        id: &str,
        reason: Option<&str>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let reason = reason
            .map(|r| {
                steward_core::memory::RejectReason::parse(r).ok_or_else(|| {
                    bad(&format!("reason {r:?}: wrong, outdated, private or trivial"))
                })
            })
            .transpose()?;
        let (steward, who) = self.parts();
        let t = py.detach(|| steward.memory_reject(who, id, reason)).map_err(|e| to_py(&e))?;
        to_python(py, &t)
    }

    /// Forgets by `id` (with its history), `subject` or `query` words (exactly one); with
    /// `dry_run`, removes nothing. Returns the receipt.
    #[pyo3(signature = (id=None, subject=None, query=None, dry_run=false))]
    fn forget_memory<'py>(
        &self,
        py: Python<'py>,
        id: Option<String>,
        subject: Option<String>,
        query: Option<String>,
        dry_run: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let selector = match (id, subject, query) {
            (Some(id), None, None) => ForgetSelector::Id(id),
            (None, Some(s), None) => ForgetSelector::Subject(s),
            (None, None, Some(q)) => ForgetSelector::Query(q),
            _ => return Err(bad("give exactly one of id, subject or query")),
        };
        let (steward, who) = self.parts();
        let r =
            py.detach(|| steward.memory_forget(who, &selector, dry_run)).map_err(|e| to_py(&e))?;
        to_python(py, &r)
    }

    /// Imports the markdown under `dir` as notes of this person (`accept`) or as proposals.
    #[pyo3(signature = (dir, accept=false))]
    fn import_memory<'py>(
        &self,
        py: Python<'py>,
        dir: PathBuf,
        accept: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let (steward, who) = self.parts();
        let r = py
            .detach(|| steward.memory_import(&dir, accept.then_some(who)))
            .map_err(|e| to_py(&e))?;
        to_python(py, &r)
    }
}
