//! Files and documents from Python: walk and index the shared folders (`[files] roots`), find
//! files, a document's info, windows of its text, search inside one or across all; each a dict
//! or a list of dicts.

use super::*;

#[pymethods]
impl PySteward {
    /// Walks the shared folders into files.db, then indexes the documents' text: a dict with
    /// `files` (the walk) and `documents` (`indexed`, `unchanged`, `removed`, `failed`, `chunks`).
    fn index_files<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let report = py
            .detach(|| self.inner.index_shared_folders(None, &mut |_| {}))
            .map_err(|e| to_py(&e))?;
        to_python(py, &report)
    }

    /// Files under the shared folders whose name holds `name`'s words (and extension `ext`),
    /// newest first: a dict with `files`, `total` and `next_cursor`.
    #[pyo3(signature = (name=None, ext=None, limit=50, cursor=None))]
    fn find_files<'py>(
        &self,
        py: Python<'py>,
        name: Option<String>,
        ext: Option<String>,
        limit: usize,
        cursor: Option<String>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let q = steward_core::files::FileQuery {
            name,
            extension: ext,
            limit: Some(limit),
            cursor,
            ..Default::default()
        };
        let page = py.detach(|| self.inner.find_files(&q)).map_err(|e| to_py(&e))?;
        to_python(py, &page)
    }

    /// What the document at `path` is: `kind`, `unit`, `units`, `size`, `title`,
    /// `fingerprint`, `chars`, `has_text`…
    fn doc_info<'py>(&self, py: Python<'py>, path: PathBuf) -> PyResult<Bound<'py, PyAny>> {
        let info = py.detach(|| self.inner.doc_info(&path)).map_err(|e| to_py(&e))?;
        to_python(py, &info)
    }

    /// A window of the document at `path` (at most `chars` characters) from `cursor`, else
    /// `page` (from 1), else its start: a dict with `text`, `first_unit`, `last_unit`,
    /// `next_cursor` and `info`.
    #[pyo3(signature = (path, cursor=None, page=None, chars=None))]
    fn read_doc<'py>(
        &self,
        py: Python<'py>,
        path: PathBuf,
        cursor: Option<String>,
        page: Option<usize>,
        chars: Option<usize>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let w = py
            .detach(|| self.inner.read_doc(&path, cursor.as_deref(), page, chars))
            .map_err(|e| to_py(&e))?;
        to_python(py, &w)
    }

    /// The passages holding `query`'s words, best first: of the document at `path`, else of
    /// every indexed document; a list of dicts with `unit`, `snippet`, `cursor` (and `path`).
    #[pyo3(signature = (query, path=None, limit=5))]
    fn search_docs<'py>(
        &self,
        py: Python<'py>,
        query: &str,
        path: Option<PathBuf>,
        limit: usize,
    ) -> PyResult<Bound<'py, PyAny>> {
        match path {
            Some(p) => {
                let h = py
                    .detach(|| self.inner.search_doc(&p, query, Some(limit)))
                    .map_err(|e| to_py(&e))?;
                to_python(py, &h.hits)
            }
            None => {
                let h = py
                    .detach(|| self.inner.search_docs(query, Some(limit)))
                    .map_err(|e| to_py(&e))?;
                to_python(py, &h.hits)
            }
        }
    }
}
