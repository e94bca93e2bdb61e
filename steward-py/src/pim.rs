//! Calendars and contacts from Python: index a vdir or a file, then the agenda, free/busy,
//! event search, contact search and recipient resolution, each a dict or a list of dicts.

use super::*;
use steward_connectors::pim::PimFrom;

fn instant(text: &str, zone: chrono_tz::Tz) -> PyResult<chrono::DateTime<chrono::Utc>> {
    steward_core::calendar::instant_in(text, zone).map_err(|e| to_py(&e))
}

#[pymethods]
impl PySteward {
    /// Reconciles calendars (`vdir`: a folder of calendars; or `ics`: one file) into the
    /// calendar store: a dict with the report (`added`, `changed`, `removed`, `unchanged`,
    /// `events`) and `errors` (items that could not be read).
    #[pyo3(signature = (vdir=None, ics=None, account="local"))]
    fn index_calendar<'py>(
        &self,
        py: Python<'py>,
        vdir: Option<PathBuf>,
        ics: Option<PathBuf>,
        account: &str,
    ) -> PyResult<Bound<'py, PyAny>> {
        let from = match (&vdir, &ics) {
            (Some(root), None) => PimFrom::Vdir(root),
            (None, Some(file)) => PimFrom::File(file),
            _ => return Err(pyo3::exceptions::PyValueError::new_err("give one of vdir or ics")),
        };
        let (report, errors) = py
            .detach(|| steward_connectors::pim::index_calendars(&self.inner, account, from))
            .map_err(|e| to_py(&e))?;
        to_python(py, &serde_json::json!({ "report": report, "errors": errors }))
    }

    /// The occurrences of every indexed calendar in `[from_, to)` (`YYYY-MM-DD`, midnight in
    /// the person's zone, or RFC 3339), in order: dicts with `calendar`, `uid`,
    /// `recurrence_id`, `summary`, `location`, `start`, `end`, `all_day`, `status`,
    /// `transparent`.
    fn agenda<'py>(&self, py: Python<'py>, from_: &str, to: &str) -> PyResult<Bound<'py, PyAny>> {
        let zone = self.inner.calendar_settings().zone;
        let (from, to) = (instant(from_, zone)?, instant(to, zone)?);
        let items = py.detach(|| self.inner.agenda(from, to)).map_err(|e| to_py(&e))?;
        to_python(py, &items)
    }

    /// The busy occurrences and the free slots of at least `min_minutes` in working hours
    /// (`[calendar]` in config.toml) in `[from_, to)`: a dict with `busy` and `free`.
    #[pyo3(signature = (from_, to, min_minutes=30))]
    fn free_busy<'py>(
        &self,
        py: Python<'py>,
        from_: &str,
        to: &str,
        min_minutes: i64,
    ) -> PyResult<Bound<'py, PyAny>> {
        let zone = self.inner.calendar_settings().zone;
        let (from, to) = (instant(from_, zone)?, instant(to, zone)?);
        let fb =
            py.detach(|| self.inner.free_busy(from, to, min_minutes)).map_err(|e| to_py(&e))?;
        to_python(py, &fb)
    }

    /// Events whose summary, location, description or attendees hold every word of `text`
    /// (BM25; an empty text lists the window's events), each with its first occurrence in the
    /// window (default 30 days back to 90 ahead).
    #[pyo3(signature = (text="", from_=None, to=None, attendee=None, limit=20))]
    fn search_events<'py>(
        &self,
        py: Python<'py>,
        text: &str,
        from_: Option<&str>,
        to: Option<&str>,
        attendee: Option<String>,
        limit: usize,
    ) -> PyResult<Bound<'py, PyAny>> {
        let zone = self.inner.calendar_settings().zone;
        let q = steward_core::calendar::store::EventQuery {
            text: Some(text.to_owned()).filter(|t| !t.trim().is_empty()),
            from: from_.map(|t| instant(t, zone)).transpose()?,
            to: to.map(|t| instant(t, zone)).transpose()?,
            attendee,
            limit,
            ..steward_core::calendar::store::EventQuery::default()
        };
        let hits = py.detach(|| self.inner.search_events(&q)).map_err(|e| to_py(&e))?;
        to_python(py, &hits)
    }

    /// Indexes address books (`vdir`: a folder of books; or `vcf`: one file of cards) into
    /// the contacts store, phones read in `region` (`IT`, `US`…): a dict with the report and
    /// `errors`. A source none of which could be read changes nothing and raises
    /// `InvalidInputError`.
    #[pyo3(signature = (vdir=None, vcf=None, account="local", region=None))]
    fn index_contacts<'py>(
        &self,
        py: Python<'py>,
        vdir: Option<PathBuf>,
        vcf: Option<PathBuf>,
        account: &str,
        region: Option<&str>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let region =
            steward_connectors::contacts::phone::parse_region(region).map_err(|e| to_py(&e))?;
        let from = match (&vdir, &vcf) {
            (Some(root), None) => PimFrom::Vdir(root),
            (None, Some(file)) => PimFrom::File(file),
            _ => return Err(pyo3::exceptions::PyValueError::new_err("give one of vdir or vcf")),
        };
        let done = py
            .detach(|| steward_connectors::pim::index_books(&self.inner, account, from, region))
            .map_err(|e| to_py(&e))?;
        let (report, errors) = (done.report, done.errors);
        to_python(py, &serde_json::json!({ "report": report, "errors": errors }))
    }

    /// Every person of the indexed address books, by name.
    fn contacts<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let all = py.detach(|| self.inner.contacts()).map_err(|e| to_py(&e))?;
        to_python(py, &all)
    }

    /// The people that fit `text` best (names, nicknames, organization, addresses, phone
    /// digits), at most `limit`.
    #[pyo3(signature = (text, limit=20))]
    fn search_contacts<'py>(
        &self,
        py: Python<'py>,
        text: &str,
        limit: usize,
    ) -> PyResult<Bound<'py, PyAny>> {
        let found = py.detach(|| self.inner.search_contacts(text, limit)).map_err(|e| to_py(&e))?;
        to_python(py, &found)
    }

    /// Who `text` means: a dict with `status` (`resolved`, `ambiguous`, `not_found`) and the
    /// ranked `candidates` with their evidence. Never a guess: ask when it is not resolved.
    fn resolve_recipient<'py>(&self, py: Python<'py>, text: &str) -> PyResult<Bound<'py, PyAny>> {
        let r = py.detach(|| self.inner.resolve_recipient(text)).map_err(|e| to_py(&e))?;
        to_python(py, &r)
    }

    /// The people of the mirrored mail's headers: how often and when you last wrote to them
    /// and they to you, most written to first, at most `max`.
    #[pyo3(signature = (max=1000))]
    fn correspondents<'py>(&self, py: Python<'py>, max: usize) -> PyResult<Bound<'py, PyAny>> {
        let people = py.detach(|| self.inner.correspondents(max)).map_err(|e| to_py(&e))?;
        to_python(py, &people)
    }
}
