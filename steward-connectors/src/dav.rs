//! CalDAV and CardDAV (RFC 4791, RFC 6352) over WebDAV: discovery (the principal, its home set,
//! the calendars or address books under it), listings by ETag or by RFC 6578
//! `sync-collection` where the collection offers it, and multiget downloads in batches.
//!
//! The requests and the parsing of their answers are libdav's (the library of pimsync,
//! vdirsyncer's successor: its request types are I/O-agnostic); this module sends them with the
//! workspace's blocking reqwest client and bounds them: a timeout per request, at most
//! [`MAX_DAV_RESPONSE_BYTES`] read of an answer, [`MULTIGET_BATCH`] items per download,
//! [`MAX_DAV_COLLECTIONS`] collections. Credentials go only over TLS, or to this machine.

use std::{
    io::Read as _,
    path::{Path, PathBuf},
    sync::atomic::{AtomicUsize, Ordering},
    time::Duration,
};

use libdav::{
    FetchedResource, PropertyName,
    caldav::{FindCalendarHomeSet, FindCalendars, GetCalendarResources},
    carddav::{FindAddressBookHomeSet, FindAddressBooks, GetAddressBookResources},
    dav::{
        FindPropertyHrefs, FoundCollection, ListResources, SyncCollection, SyncCollectionParseError,
    },
    names,
    requests::{DavRequest, ParseResponseError},
};
use steward_core::{ErrorKind, StewardError};

/// Longest answer read from a DAV server, bytes.
/// Fixed (not a setting).
pub const MAX_DAV_RESPONSE_BYTES: usize = 64 * 1024 * 1024;
/// Items downloaded per multiget request.
/// Fixed (not a setting).
pub const MULTIGET_BATCH: usize = 100;
/// Most calendars or address books read from one account.
/// Fixed (not a setting).
pub const MAX_DAV_COLLECTIONS: usize = 200;
/// Most items listed in one collection.
/// Fixed (not a setting).
pub const MAX_DAV_ITEMS: usize = 200_000;
/// Seconds one request may take.
/// Fixed (not a setting).
pub const DAV_TIMEOUT_SECS: u64 = 60;

/// Why a DAV request failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DavError {
    /// The URL cannot be used.
    #[error("DAV URL {0:?}: expected http(s)://host[:port]/path")]
    BadUrl(String),
    /// Credentials would cross the network in clear text.
    #[error("{0}: credentials are sent only over https, or over http to this machine")]
    Insecure(String),
    /// The password or token cannot be read.
    #[error("{0}")]
    Secret(String),
    /// The server cannot be reached or did not answer in time.
    #[error("{url}: {reason}")]
    Unreachable {
        /// Where.
        url: String,
        /// Why.
        reason: String,
    },
    /// The server refused the credentials.
    #[error("{url}: the server refused the credentials (HTTP {status})")]
    Unauthorized {
        /// Where.
        url: String,
        /// 401 or 403.
        status: u16,
    },
    /// The server answered with an error status.
    #[error("{url}: HTTP {status}")]
    Status {
        /// Where.
        url: String,
        /// The status.
        status: u16,
    },
    /// The answer is larger than [`MAX_DAV_RESPONSE_BYTES`].
    #[error("{0}: the answer is larger than {MAX_DAV_RESPONSE_BYTES} bytes")]
    TooLarge(String),
    /// The answer cannot be read as WebDAV.
    #[error("{url}: {reason}")]
    BadResponse {
        /// Where.
        url: String,
        /// Why.
        reason: String,
    },
    /// The server keeps the account's collections on a host credentials are not sent to.
    #[error(
        "the server keeps these collections at {0}, a host outside its own domain: configure that URL as the source if you trust it"
    )]
    ForeignHome(String),
}

impl StewardError for DavError {
    fn code(&self) -> &'static str {
        match self {
            Self::BadUrl(_) => "DAV_BAD_URL",
            Self::Insecure(_) => "DAV_INSECURE",
            Self::Secret(_) => "DAV_SECRET_UNREADABLE",
            Self::Unreachable { .. } => "DAV_UNREACHABLE",
            Self::Unauthorized { .. } => "DAV_UNAUTHORIZED",
            Self::Status { .. } => "DAV_STATUS",
            Self::TooLarge(_) => "DAV_TOO_LARGE",
            Self::BadResponse { .. } => "DAV_BAD_RESPONSE",
            Self::ForeignHome(_) => "DAV_FOREIGN_HOME",
        }
    }

    fn kind(&self) -> ErrorKind {
        match self {
            Self::BadUrl(_) | Self::Insecure(_) | Self::Secret(_) | Self::ForeignHome(_) => {
                ErrorKind::InvalidInput
            }
            Self::Unauthorized { .. } => ErrorKind::Denied,
            Self::Unreachable { .. } | Self::Status { .. } => ErrorKind::Unavailable,
            Self::TooLarge(_) | Self::BadResponse { .. } => ErrorKind::Unavailable,
        }
    }
}

/// How to sign in.
#[derive(Clone, Default, PartialEq, Eq)]
pub enum DavAuth {
    /// No credentials.
    #[default]
    None,
    /// HTTP basic authentication.
    Basic {
        /// The user name.
        user: String,
        /// The password.
        password: String,
    },
    /// A bearer token (`Authorization: Bearer …`).
    Bearer(String),
}

impl std::fmt::Debug for DavAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::None => f.write_str("None"),
            Self::Basic { user, .. } => write!(f, "Basic({user:?}, <password>)"),
            Self::Bearer(_) => f.write_str("Bearer(<token>)"),
        }
    }
}

/// Where a secret comes from: a file only its owner can read, or the OS keyring.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecretSource {
    /// A file (mode 0600 or stricter), its first line.
    File(PathBuf),
    /// A keyring entry: the service, looked up for the user name.
    Keyring(String),
}

/// An account's connection settings as configured (`[[calendar.sources]] kind = "caldav"`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DavAccount {
    /// The server, the principal, or the home set (`https://dav.example.org/`).
    pub url: String,
    /// The user name (basic authentication).
    pub username: Option<String>,
    /// The password (with `username`), or a bearer token (without).
    pub secret: Option<SecretSource>,
}

impl DavAccount {
    /// The credentials, read now: basic with a user name, else a bearer token, else none.
    pub fn auth(&self) -> Result<DavAuth, DavError> {
        let secret = match &self.secret {
            None => None,
            Some(SecretSource::File(path)) => Some(read_secret_file(path)?),
            Some(SecretSource::Keyring(service)) => {
                let user = self.username.as_deref().ok_or_else(|| {
                    DavError::Secret(
                        "a keyring entry is looked up by the user name: set username".to_owned(),
                    )
                })?;
                Some(
                    crate::mail::smtp::read_keyring(service, user)
                        .map_err(|e| DavError::Secret(e.to_string()))?,
                )
            }
        };
        Ok(match (&self.username, secret) {
            (Some(user), Some(password)) => DavAuth::Basic { user: user.clone(), password },
            (Some(user), None) => DavAuth::Basic { user: user.clone(), password: String::new() },
            (None, Some(token)) => DavAuth::Bearer(token),
            (None, None) => DavAuth::None,
        })
    }
}

/// The first line of `path`, refused when others can read the file.
pub fn read_secret_file(path: &Path) -> Result<String, DavError> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let meta = std::fs::metadata(path)
            .map_err(|e| DavError::Secret(format!("{}: {e}", path.display())))?;
        if meta.permissions().mode() & 0o077 != 0 {
            return Err(DavError::Secret(format!(
                "{} is readable by others; chmod 600 it",
                path.display()
            )));
        }
    }
    let text = std::fs::read_to_string(path)
        .map_err(|e| DavError::Secret(format!("{}: {e}", path.display())))?;
    Ok(text.lines().next().unwrap_or_default().trim().to_owned())
}

/// Calendars or address books.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DavKind {
    /// CalDAV calendars.
    Calendars,
    /// CardDAV address books.
    AddressBooks,
}

/// A collection found by [`DavClient::discover`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DavCollection {
    /// Its path on the server (ends with `/`).
    pub href: String,
    /// Its id in Steward: the last segment of its path.
    pub id: String,
    /// Its name for people.
    pub name: Option<String>,
    /// Its color (calendars).
    pub color: Option<String>,
    /// Whether it answers `sync-collection` (RFC 6578).
    pub supports_sync: bool,
    /// The scheme and host its requests go to (the configured one, or the one its home set
    /// named).
    pub base: http::Uri,
}

/// A collection's items as listed now.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Listing {
    /// Items (names inside the collection) with their ETags: every item when `complete`, else
    /// those changed since the token given.
    pub items: Vec<(String, String)>,
    /// Items deleted since the token given (empty when `complete`).
    pub deleted: Vec<String>,
    /// Whether `items` is the whole collection.
    pub complete: bool,
    /// The token to ask from next time, when the collection gives one.
    pub token: Option<String>,
    /// Whether some items could not be listed (more than [`MAX_DAV_ITEMS`], or resources
    /// without a name in the collection or an ETag): the listing is then never taken as the
    /// whole collection, and its token is not kept.
    pub partial: bool,
}

/// One item downloaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetched {
    /// Its name inside the collection.
    pub name: String,
    /// Its ETag.
    pub etag: String,
    /// Its text (iCalendar or vCard).
    pub data: String,
}

/// One item of a download: its text, or (its name and) why it could not be had.
pub type ItemResult = Result<Fetched, (String, DavError)>;

/// A blocking CalDAV/CardDAV client for one account.
pub struct DavClient {
    http: reqwest::blocking::Client,
    /// The configured URL's scheme and authority, where every discovery starts (a collection
    /// keeps the host it was found on: see [`DavCollection::base`]).
    origin: http::Uri,
    /// The path configured (server root, principal or home set).
    start: String,
    auth: DavAuth,
    requests: AtomicUsize,
}

impl std::fmt::Debug for DavClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DavClient")
            .field("origin", &self.origin)
            .field("start", &self.start)
            .field("auth", &self.auth)
            .finish_non_exhaustive()
    }
}

fn is_loopback(host: &str) -> bool {
    let h = host.trim_matches(['[', ']']);
    h.eq_ignore_ascii_case("localhost")
        || h.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

impl DavClient {
    /// A client for `account` (its secret read now).
    pub fn new(account: &DavAccount) -> Result<Self, DavError> {
        Self::with_auth(&account.url, account.auth()?)
    }

    /// A client for `url` signing in with `auth`.
    pub fn with_auth(url: &str, auth: DavAuth) -> Result<Self, DavError> {
        let bad = || DavError::BadUrl(url.to_owned());
        let uri: http::Uri = url.trim().parse().map_err(|_| bad())?;
        let scheme = uri.scheme_str().ok_or_else(bad)?;
        let host = uri.host().ok_or_else(bad)?;
        if !matches!(scheme, "http" | "https") || !uri.query().is_none_or(str::is_empty) {
            return Err(bad());
        }
        // Credentials go in `username` and a secret file, never in the URL (where they would
        // travel unchecked and show in every report).
        if uri.authority().is_some_and(|a| a.as_str().contains('@')) {
            return Err(DavError::BadUrl("a URL with user:password@ in it".to_owned()));
        }
        if scheme == "http" && auth != DavAuth::None && !is_loopback(host) {
            return Err(DavError::Insecure(url.to_owned()));
        }
        let authority = uri.authority().ok_or_else(bad)?.clone();
        let base = http::Uri::builder()
            .scheme(scheme)
            .authority(authority)
            .path_and_query("/")
            .build()
            .map_err(|_| bad())?;
        let mut start = uri.path().to_owned();
        if !start.ends_with('/') {
            start.push('/');
        }
        steward_core::net::install_crypto_provider();
        let http = reqwest::blocking::Client::builder()
            .timeout(Duration::from_secs(DAV_TIMEOUT_SECS))
            .redirect(reqwest::redirect::Policy::limited(5))
            .user_agent(concat!("Steward/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| DavError::Unreachable { url: url.to_owned(), reason: e.to_string() })?;
        Ok(Self { http, origin: base, start, auth, requests: AtomicUsize::new(0) })
    }

    /// Where the collections under `home` are asked for: the configured host, or the host of
    /// a home set on another one (iCloud's `pNN-caldav.icloud.com`) — only one of the same
    /// registrable domain (the Public Suffix List's), or between two loopback hosts, and
    /// credentials only over https or to this machine.
    fn home_base(&self, home: &http::Uri) -> Result<http::Uri, DavError> {
        let base = &self.origin;
        let (Some(scheme), Some(authority), Some(host)) =
            (home.scheme_str(), home.authority(), home.host())
        else {
            return Ok(base.clone());
        };
        if base.authority() == Some(authority) && base.scheme_str() == Some(scheme) {
            return Ok(base.clone());
        }
        // An address is no domain: only loopback to loopback.
        let site = |h: &str| -> Option<String> {
            let h = h.trim_end_matches('.').to_ascii_lowercase();
            if h.trim_matches(['[', ']']).parse::<std::net::IpAddr>().is_ok() {
                return None;
            }
            psl::domain_str(&h).map(str::to_owned)
        };
        let ours = base.host().unwrap_or_default();
        let same_site = (is_loopback(ours) && is_loopback(host))
            || site(ours).is_some_and(|p| site(host).as_ref() == Some(&p));
        let shown = format!("{scheme}://{authority}");
        if !same_site || !matches!(scheme, "http" | "https") {
            return Err(DavError::ForeignHome(shown));
        }
        if scheme == "http" && self.auth != DavAuth::None && !is_loopback(host) {
            return Err(DavError::Insecure(shown));
        }
        http::Uri::builder()
            .scheme(scheme)
            .authority(authority.clone())
            .path_and_query("/")
            .build()
            .map_err(|_| DavError::BadUrl(shown))
    }

    /// Requests sent so far.
    pub fn requests(&self) -> usize {
        self.requests.load(Ordering::Relaxed)
    }

    /// Sends `r` and parses its answer; transport failures, 401 and oversized answers are the
    /// outer error, the request's own parse error the inner one.
    fn send<R: DavRequest>(
        &self,
        base: &http::Uri,
        r: &R,
    ) -> Result<Result<R::Response, R::ParseError>, DavError> {
        let req = r
            .prepare_request(base.clone())
            .map_err(|e| DavError::BadUrl(format!("{base}: {e}")))?;
        let (parts, body) = req.into_parts();
        let url = parts.uri.to_string();
        let mut b = self.http.request(parts.method, &url).headers(parts.headers).body(body);
        b = match &self.auth {
            DavAuth::None => b,
            DavAuth::Basic { user, password } => b.basic_auth(user, Some(password)),
            DavAuth::Bearer(t) => b.bearer_auth(t),
        };
        self.requests.fetch_add(1, Ordering::Relaxed);
        let res = b.send().map_err(|e| DavError::Unreachable {
            url: url.clone(),
            reason: if e.is_timeout() {
                "timed out".to_owned()
            } else if e.is_connect() {
                "cannot connect".to_owned()
            } else {
                e.without_url().to_string()
            },
        })?;
        let status = res.status();
        if status == reqwest::StatusCode::UNAUTHORIZED {
            return Err(DavError::Unauthorized { url, status: status.as_u16() });
        }
        let mut head = http::Response::builder().status(status.as_u16());
        for (k, v) in res.headers() {
            head = head.header(k, v);
        }
        let (head, ()) = head
            .body(())
            .map_err(|e| DavError::BadResponse { url: url.clone(), reason: e.to_string() })?
            .into_parts();
        let mut bytes = Vec::new();
        res.take(MAX_DAV_RESPONSE_BYTES as u64 + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| DavError::Unreachable { url: url.clone(), reason: e.to_string() })?;
        if bytes.len() > MAX_DAV_RESPONSE_BYTES {
            return Err(DavError::TooLarge(url));
        }
        Ok(r.parse_response(&head, &bytes))
    }

    /// [`DavClient::send`] with the common parse errors typed.
    fn request<R>(&self, base: &http::Uri, r: &R, what: &str) -> Result<R::Response, DavError>
    where
        R: DavRequest<ParseError = ParseResponseError>,
    {
        self.send(base, r)?.map_err(|e| parse_error(base, e, what))
    }
}

fn parse_error(base: &http::Uri, e: ParseResponseError, what: &str) -> DavError {
    let url = format!("{}{}", base.to_string().trim_end_matches('/'), what);
    match e {
        ParseResponseError::BadStatusCode(s) if s.as_u16() == 403 => {
            DavError::Unauthorized { url, status: 403 }
        }
        ParseResponseError::BadStatusCode(s) => DavError::Status { url, status: s.as_u16() },
        other => DavError::BadResponse { url, reason: other.to_string() },
    }
}

impl DavClient {
    /// The first href of `property` at `path`, if the server names one.
    fn property_href(
        &self,
        path: &str,
        property: &PropertyName<'_, '_>,
    ) -> Result<Option<String>, DavError> {
        let found = self.request(&self.origin, &FindPropertyHrefs::new(path, property), path)?;
        Ok(found.hrefs.first().map(|u| u.path().to_owned()))
    }

    /// The account's calendars or address books: the configured URL's principal
    /// (`current-user-principal`, else the URL itself), its home set, the collections under
    /// it — or, when the configured URL is itself one collection, that one.
    pub fn discover(&self, kind: DavKind) -> Result<Vec<DavCollection>, DavError> {
        let principal = match self.property_href(&self.start, &names::CURRENT_USER_PRINCIPAL) {
            Ok(Some(p)) => p,
            Ok(None) | Err(DavError::Status { status: 404 | 405, .. }) => self.start.clone(),
            Err(e) => return Err(e),
        };
        let home_set = match kind {
            DavKind::Calendars => self
                .request(&self.origin, &FindCalendarHomeSet::new(&principal), &principal)
                .map(|r| r.home_sets),
            DavKind::AddressBooks => self
                .request(&self.origin, &FindAddressBookHomeSet::new(&principal), &principal)
                .map(|r| r.home_sets),
        };
        let (home, base) = match home_set {
            Ok(h) => match h.first() {
                // A home set on another host: its collections are asked for there.
                Some(u) => (u.path().to_owned(), self.home_base(u)?),
                None => (self.start.clone(), self.origin.clone()),
            },
            Err(DavError::Status { status: 404 | 405, .. }) => {
                (self.start.clone(), self.origin.clone())
            }
            Err(e) => return Err(e),
        };
        let found: Vec<FoundCollection> = match kind {
            DavKind::Calendars => self.request(&base, &FindCalendars::new(&home), &home)?.calendars,
            DavKind::AddressBooks => {
                self.request(&base, &FindAddressBooks::new(&home), &home)?.addressbooks
            }
        };
        let mut out: Vec<DavCollection> = found
            .into_iter()
            .filter(|c| c.href != home)
            .map(|c| {
                let prop = |p: &PropertyName<'_, '_>| {
                    c.properties
                        .iter()
                        .find(|(n, _)| **n == *p)
                        .and_then(|(_, v)| v.clone())
                        .map(|v| v.trim().to_owned())
                        .filter(|v| !v.is_empty())
                };
                let id =
                    c.href.trim_end_matches('/').rsplit('/').next().unwrap_or_default().to_owned();
                DavCollection {
                    name: prop(&names::DISPLAY_NAME),
                    color: prop(&names::CALENDAR_COLOUR),
                    supports_sync: c.supports_sync,
                    href: if c.href.ends_with('/') { c.href } else { format!("{}/", c.href) },
                    id,
                    base: base.clone(),
                }
            })
            .filter(|c| !c.id.is_empty())
            .collect();
        out.sort_by(|a, b| a.id.cmp(&b.id));
        out.truncate(MAX_DAV_COLLECTIONS);
        Ok(out)
    }

    /// The items of `c`: what changed since `token` when the collection offers
    /// `sync-collection` and the token is still valid, else the whole listing (with a fresh
    /// token where one is offered).
    pub fn list(&self, c: &DavCollection, token: Option<&str>) -> Result<Listing, DavError> {
        let name = |href: &str| item_name(&c.href, href);
        if c.supports_sync {
            let mut req = SyncCollection::new(&c.href);
            if let Some(t) = token {
                req = req.with_sync_token(t);
            }
            let answer = match self.send(&c.base, &req)? {
                Ok(a) => Some(a),
                // The token expired: list the whole collection again. (Servers say so with
                // DAV:valid-sync-token, or only with a 4xx status.)
                Err(SyncCollectionParseError::PreconditionFailed(_)) if token.is_some() => None,
                Err(SyncCollectionParseError::Parse(ParseResponseError::BadStatusCode(st)))
                    if token.is_some() && st.is_client_error() && st.as_u16() != 401 =>
                {
                    None
                }
                Err(SyncCollectionParseError::PreconditionFailed(p)) => {
                    return Err(DavError::BadResponse {
                        url: c.href.clone(),
                        reason: format!("precondition failed: {p}"),
                    });
                }
                Err(SyncCollectionParseError::Parse(e)) => {
                    return Err(parse_error(&c.base, e, &c.href));
                }
            };
            let complete = token.is_none() || answer.is_none();
            let answer = match answer {
                Some(a) => a,
                None => match self.send(&c.base, &SyncCollection::new(&c.href))? {
                    Ok(a) => a,
                    Err(SyncCollectionParseError::Parse(e)) => {
                        return Err(parse_error(&c.base, e, &c.href));
                    }
                    Err(SyncCollectionParseError::PreconditionFailed(p)) => {
                        return Err(DavError::BadResponse {
                            url: c.href.clone(),
                            reason: format!("precondition failed: {p}"),
                        });
                    }
                },
            };
            let (items, partial) = named(answer.changed, &name);
            return Ok(Listing {
                items,
                deleted: answer.deleted.iter().filter_map(|h| name(h)).collect(),
                complete: complete && !partial,
                token: Some(answer.new_sync_token).filter(|t| !t.is_empty() && !partial),
                partial,
            });
        }
        let answer = self.request(&c.base, &ListResources::new(&c.href), &c.href)?;
        let (items, partial) = named(answer.resources, &name);
        Ok(Listing { items, deleted: Vec::new(), complete: !partial, token: None, partial })
    }

    /// Downloads the items `names` of `c` in batches of [`MULTIGET_BATCH`]: each item's text,
    /// or its own error (gone since the listing, refused).
    pub fn fetch(
        &self,
        kind: DavKind,
        c: &DavCollection,
        names: &[String],
    ) -> Result<Vec<ItemResult>, DavError> {
        let mut out = Vec::with_capacity(names.len());
        for batch in names.chunks(MULTIGET_BATCH) {
            self.fetch_batch(kind, c, batch, &mut out)?;
        }
        Ok(out)
    }

    /// One multiget; an answer over [`MAX_DAV_RESPONSE_BYTES`] is asked for again item by
    /// item, and an item that alone is too large is that item's error.
    fn fetch_batch(
        &self,
        kind: DavKind,
        c: &DavCollection,
        batch: &[String],
        out: &mut Vec<ItemResult>,
    ) -> Result<(), DavError> {
        let hrefs: Vec<String> = batch.iter().map(|n| format!("{}{n}", c.href)).collect();
        let answer = match kind {
            DavKind::Calendars => self
                .request(&c.base, &GetCalendarResources::new(&c.href).with_hrefs(&hrefs), &c.href)
                .map(|r| r.resources),
            DavKind::AddressBooks => self
                .request(
                    &c.base,
                    &GetAddressBookResources::new(&c.href).with_hrefs(&hrefs),
                    &c.href,
                )
                .map(|r| r.resources),
        };
        let got: Vec<FetchedResource> = match answer {
            Ok(g) => g,
            Err(DavError::TooLarge(_)) if batch.len() > 1 => {
                for one in batch {
                    self.fetch_batch(kind, c, std::slice::from_ref(one), out)?;
                }
                return Ok(());
            }
            Err(e @ DavError::TooLarge(_)) => {
                if let Some(name) = batch.first() {
                    out.push(Err((name.clone(), e)));
                }
                return Ok(());
            }
            Err(e) => return Err(e),
        };
        for r in got {
            let Some(name) = item_name(&c.href, &r.href) else { continue };
            out.push(match r.content {
                Ok(content) => Ok(Fetched { name, etag: content.etag, data: content.data }),
                Err(status) => {
                    let url = r.href.clone();
                    Err((name, DavError::Status { url, status: status.as_u16() }))
                }
            });
        }
        Ok(())
    }

    /// Creates the item `name` of `c` with `text`, never over an existing one
    /// (`If-None-Match: *`); returns its ETag when the server gives one.
    pub fn put_new(
        &self,
        c: &DavCollection,
        name: &str,
        text: &str,
        content_type: &str,
    ) -> Result<Option<String>, DavError> {
        let href = format!("{}{name}", c.href);
        self.put(c, &href, libdav::dav::PutResource::new(&href).create(text, content_type))
    }

    /// Replaces the item `name` of `c` while its ETag is still `etag` (`If-Match`); returns
    /// its new ETag when the server gives one.
    pub fn put_if(
        &self,
        c: &DavCollection,
        name: &str,
        text: &str,
        content_type: &str,
        etag: &str,
    ) -> Result<Option<String>, DavError> {
        let href = format!("{}{name}", c.href);
        self.put(c, &href, libdav::dav::PutResource::new(&href).update(text, content_type, etag))
    }

    fn put<R>(&self, c: &DavCollection, href: &str, req: R) -> Result<Option<String>, DavError>
    where
        R: DavRequest<
                Response = libdav::dav::PutResourceResponse,
                ParseError = libdav::dav::PutResourceParseError,
            >,
    {
        let url = || format!("{}{href}", c.base.to_string().trim_end_matches('/'));
        match self.send(&c.base, &req)? {
            Ok(r) => Ok(r.etag),
            Err(libdav::dav::PutResourceParseError::BadStatusCode(s)) => {
                Err(DavError::Status { url: url(), status: s.as_u16() })
            }
            Err(e) => Err(DavError::BadResponse { url: url(), reason: e.to_string() }),
        }
    }

    /// Deletes the item `name` of `c` while its ETag is still `etag` (`If-Match`).
    pub fn delete_if(&self, c: &DavCollection, name: &str, etag: &str) -> Result<(), DavError> {
        let href = format!("{}{name}", c.href);
        self.request(&c.base, &libdav::dav::Delete::new(&href).with_etag(etag), &href).map(|_| ())
    }

    /// The URL this client was made for (scheme, host and the configured path).
    pub fn configured_url(&self) -> String {
        self.url_of(&self.start)
    }

    /// The URL of `href` on the configured server.
    pub fn url_of(&self, href: &str) -> String {
        format!("{}{}", self.origin.to_string().trim_end_matches('/'), href)
    }
}

/// The listed items' names and ETags (collections left out), at most [`MAX_DAV_ITEMS`], and
/// whether any item was left out for another reason (too many, no name here, no ETag).
fn named(
    listed: Vec<libdav::dav::ListedResource>,
    name: &impl Fn(&str) -> Option<String>,
) -> (Vec<(String, String)>, bool) {
    let mut partial = false;
    let mut items = Vec::new();
    for r in listed.into_iter().filter(|r| !r.resource_type.is_collection) {
        match (name(&r.href), r.etag) {
            (Some(n), Some(e)) if items.len() < MAX_DAV_ITEMS => items.push((n, e)),
            _ => partial = true,
        }
    }
    (items, partial)
}

/// The name of the item `href` inside the collection `collection` (`/u/cal/` + `x.ics` →
/// `x.ics`), `None` for the collection itself or an item of another one.
fn item_name(collection: &str, href: &str) -> Option<String> {
    // An absolute href (RFC 4918 allows one): its path.
    let path = if href.starts_with("http://") || href.starts_with("https://") {
        href.parse::<http::Uri>().ok().map(|u| u.path().to_owned())?
    } else {
        href.to_owned()
    };
    let rest = path.strip_prefix(collection)?;
    (!rest.is_empty() && !rest.contains('/')).then(|| rest.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_home_set_is_followed_within_its_site_only() {
        let auth = DavAuth::Basic { user: "u".into(), password: "p".into() };
        let rebased = |from: &str, to: &str| {
            let c = DavClient::with_auth(from, auth.clone()).unwrap();
            c.home_base(&to.parse().unwrap()).map(|b| b.to_string())
        };
        assert_eq!(
            rebased(
                "https://caldav.icloud.com/",
                "https://p42-caldav.icloud.com:443/123/calendars/"
            ),
            Ok("https://p42-caldav.icloud.com:443/".to_owned())
        );
        for (from, to) in [
            ("https://dav.example.co.uk/", "https://evil.co.uk/x/"),
            ("https://caldav.icloud.com/", "https://icloud.com.evil.org/x/"),
            ("https://192.168.1.10/", "https://10.168.1.10/x/"),
        ] {
            assert!(matches!(rebased(from, to), Err(DavError::ForeignHome(_))), "{from} -> {to}");
        }
        // Same site, but credentials would cross the network in clear text.
        assert!(matches!(
            rebased("https://dav.example.org/", "http://home.example.org/x/"),
            Err(DavError::Insecure(_))
        ));
    }

    #[test]
    fn credentials_go_only_over_tls_or_to_this_machine() {
        let basic = || DavAuth::Basic { user: "u".into(), password: "p".into() };
        assert!(matches!(
            DavClient::with_auth("http://dav.example.org/", basic()),
            Err(DavError::Insecure(_))
        ));
        assert!(DavClient::with_auth("http://127.0.0.1:5232/", basic()).is_ok());
        assert!(DavClient::with_auth("http://[::1]:5232/u/", basic()).is_ok());
        assert!(DavClient::with_auth("https://dav.example.org/", basic()).is_ok());
        assert!(DavClient::with_auth("http://dav.example.org/", DavAuth::None).is_ok());
        for bad in
            ["dav.example.org", "ftp://x/", "https://x/?q=1", "", "http://a:pw@dav.example.org/"]
        {
            assert!(
                matches!(DavClient::with_auth(bad, DavAuth::None), Err(DavError::BadUrl(_))),
                "{bad}"
            );
        }
        assert_eq!(format!("{:?}", basic()), "Basic(\"u\", <password>)", "no password in logs");
    }

    #[test]
    fn item_names_are_inside_their_collection() {
        assert_eq!(item_name("/u/cal/", "/u/cal/a.ics").as_deref(), Some("a.ics"));
        assert_eq!(item_name("/u/cal/", "/u/cal/"), None);
        assert_eq!(item_name("/u/cal/", "/u/other/a.ics"), None);
        assert_eq!(item_name("/u/cal/", "/u/cal/sub/a.ics"), None);
        assert_eq!(
            item_name("/u/cal/", "https://dav.example.org/u/cal/a.ics").as_deref(),
            Some("a.ics")
        );
    }
}
