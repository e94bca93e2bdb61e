//! The web client: static files embedded in the binary and served at `/`.
//!
//! The app is a handful of ES modules, one stylesheet, a manifest and a service worker
//! (`steward-server/web/`); it talks only to the documented API. Its files are public (they
//! hold no data; every API call still needs the paired cookie or a token) and carry the
//! client's security headers: a Content-Security-Policy with no inline script and no other
//! origin, no framing, no referrer. Each file is gzipped once on first request when the
//! browser accepts it. `sw.js` is `no-store`, the others `no-cache` (revalidated, so a new
//! binary's app is picked up at once).

use std::{io::Write as _, sync::OnceLock};

use axum::{
    Router,
    extract::Path,
    http::{HeaderMap, HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
    routing::get,
};

use super::{ApiError, AppState};

/// The client's Content-Security-Policy: its own scripts, styles, images and connections
/// (`'self'` covers the same-origin WebSocket) and nothing else; never framed; and Trusted
/// Types with one policy (`steward`, app.js) that only vouches for the service worker's URL,
/// so no string can reach an HTML or script sink (`innerHTML` and the like throw).
pub const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; \
frame-ancestors 'none'; worker-src 'self'; manifest-src 'self'; \
require-trusted-types-for 'script'; trusted-types steward";

/// One embedded file.
struct Asset {
    path: &'static str,
    mime: &'static str,
    bytes: &'static [u8],
}

macro_rules! asset {
    ($path:literal, $file:literal, $mime:expr) => {
        Asset { path: $path, mime: $mime, bytes: include_bytes!(concat!("../../web/", $file)) }
    };
}

const JS: &str = "text/javascript; charset=utf-8";

/// Every file of the app, by the path it is served at.
static ASSETS: &[Asset] = &[
    asset!("/", "index.html", "text/html; charset=utf-8"),
    asset!("/sw.js", "sw.js", JS),
    asset!("/manifest.webmanifest", "manifest.webmanifest", "application/manifest+json"),
    asset!("/app/app.js", "app/app.js", JS),
    asset!("/app/api.js", "app/api.js", JS),
    asset!("/app/dom.js", "app/dom.js", JS),
    asset!("/app/live.js", "app/live.js", JS),
    asset!("/app/paged.js", "app/paged.js", JS),
    asset!("/app/style.css", "app/style.css", "text/css; charset=utf-8"),
    asset!("/app/icon.svg", "app/icon.svg", "image/svg+xml"),
    asset!("/app/pages/chat.js", "app/pages/chat.js", JS),
    asset!("/app/pages/approvals.js", "app/pages/approvals.js", JS),
    asset!("/app/pages/mail.js", "app/pages/mail.js", JS),
    asset!("/app/pages/memory.js", "app/pages/memory.js", JS),
    asset!("/app/pages/watches.js", "app/pages/watches.js", JS),
    asset!("/app/pages/journal.js", "app/pages/journal.js", JS),
    asset!("/app/pages/usage.js", "app/pages/usage.js", JS),
    asset!("/app/pages/audit.js", "app/pages/audit.js", JS),
    asset!("/app/pages/system.js", "app/pages/system.js", JS),
    asset!("/app/pages/devices.js", "app/pages/devices.js", JS),
];

/// The served paths, for tests and the service worker's list.
pub fn paths() -> impl Iterator<Item = &'static str> {
    ASSETS.iter().map(|a| a.path)
}

/// The gzipped bodies, made once.
fn gzipped(i: usize) -> &'static [u8] {
    static CACHE: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
    let all = CACHE.get_or_init(|| {
        ASSETS
            .iter()
            .map(|a| {
                let mut z = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
                // Writing to a Vec cannot fail.
                let _ = z.write_all(a.bytes);
                z.finish().unwrap_or_default()
            })
            .collect()
    });
    all.get(i).map_or(&[], Vec::as_slice)
}

/// The app's routes (public, outside the OpenAPI document: they are not the API).
pub(super) fn router() -> Router<AppState> {
    Router::new()
        .route("/", get(|h: HeaderMap| async move { serve("/", &h) }))
        .route("/sw.js", get(|h: HeaderMap| async move { serve("/sw.js", &h) }))
        .route(
            "/manifest.webmanifest",
            get(|h: HeaderMap| async move { serve("/manifest.webmanifest", &h) }),
        )
        .route(
            "/app/{*path}",
            get(|Path(p): Path<String>, h: HeaderMap| async move { serve(&format!("/app/{p}"), &h) }),
        )
}

fn serve(path: &str, req: &HeaderMap) -> Response {
    let Some((i, asset)) = ASSETS.iter().enumerate().find(|(_, a)| a.path == path) else {
        return ApiError::new(StatusCode::NOT_FOUND, "NO_SUCH_ROUTE", "no such route")
            .into_response();
    };
    let gzip =
        req.get(header::ACCEPT_ENCODING).and_then(|v| v.to_str().ok()).is_some_and(accepts_gzip);
    let body = if gzip { gzipped(i).to_vec() } else { asset.bytes.to_vec() };
    let mut res = (StatusCode::OK, body).into_response();
    let h = res.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(asset.mime));
    if gzip {
        h.insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
    }
    h.insert(header::VARY, HeaderValue::from_static("accept-encoding"));
    let cache = if path == "/sw.js" { "no-store" } else { "no-cache" };
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static(cache));
    h.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert("cross-origin-opener-policy", HeaderValue::from_static("same-origin"));
    h.insert("cross-origin-resource-policy", HeaderValue::from_static("same-origin"));
    res
}

/// Whether an `Accept-Encoding` value accepts gzip (`gzip;q=0` refuses it).
fn accepts_gzip(v: &str) -> bool {
    v.split(',').any(|e| {
        let mut parts = e.split(';').map(str::trim);
        parts.next() == Some("gzip")
            && parts.all(|p| {
                p.strip_prefix("q=").is_none_or(|q| q.parse::<f32>().is_ok_and(|q| q > 0.0))
            })
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn gzip_is_accepted_unless_refused() {
        for (v, want) in [
            ("gzip", true),
            ("br, gzip;q=0.9", true),
            ("gzip;q=0", false),
            ("gzip; q=0.0", false),
            ("identity", false),
            ("x-gzip", false),
        ] {
            assert_eq!(super::accepts_gzip(v), want, "{v}");
        }
    }
}
