//! Attachment downloads through opaque tokens: `POST /attachments` registers one for a
//! (message, position) of the mirror; `GET /attachments/{token}` returns the bytes. No route
//! takes a path. Every download is `Content-Disposition: attachment` with `nosniff` and a
//! sandboxing CSP, so a mirrored HTML or SVG file never runs on this origin.

use axum::{
    Json,
    body::Body,
    extract::State,
    http::{HeaderValue, Method, StatusCode, header},
    response::{IntoResponse as _, Response},
    routing::{get, post},
};
use serde::Deserialize;
use steward_core::attachments::AttachmentGrant;

use super::{ApiError, ApiJson, ApiPath, AppState, Route, schema};

/// Largest attachment served in one response.
/// Fixed (not a setting).
pub const MAX_SERVED_BYTES: u64 = 64 * 1024 * 1024;

pub(super) fn routes() -> Vec<Route> {
    vec![
        Route::new(
            Method::POST,
            "/attachments",
            "Register a download token for an attachment of a mirrored message",
            schema::<AttachmentGrant>,
            post(grant),
        )
        .body(schema::<AttachmentRef>),
        Route::new(
            Method::GET,
            "/attachments/{token}",
            "Download an attachment by its token",
            schema::<String>,
            get(download),
        )
        .binary(),
    ]
}

/// Which attachment.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct AttachmentRef {
    /// The message (from search or read).
    message_id: i64,
    /// The attachment's position in the message (from read).
    position: i64,
}

async fn grant(
    State(state): State<AppState>,
    ApiJson(r): ApiJson<AttachmentRef>,
) -> Result<Json<AttachmentGrant>, ApiError> {
    let now = steward_core::time::now_secs();
    state.call(move |s| s.attachment_token(r.message_id, r.position, now)).await.map(Json)
}

/// `type/subtype` made of token characters, else `application/octet-stream`.
fn content_type(declared: &str) -> HeaderValue {
    let ok = declared.split_once('/').is_some_and(|(t, s)| {
        let token = |p: &str| {
            !p.is_empty()
                && p.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$&-^_.+".contains(&b))
        };
        token(t) && token(s)
    });
    HeaderValue::from_str(if ok { declared } else { "application/octet-stream" })
        .unwrap_or(HeaderValue::from_static("application/octet-stream"))
}

/// RFC 6266: an ASCII fallback and the UTF-8 name, percent-encoded.
fn disposition(name: &str) -> HeaderValue {
    let fallback: String = name
        .chars()
        .map(|c| if c.is_ascii_graphic() && c != '"' && c != '\\' || c == ' ' { c } else { '_' })
        .collect();
    let encoded: String = name
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect();
    HeaderValue::from_str(&format!(
        "attachment; filename=\"{fallback}\"; filename*=UTF-8''{encoded}"
    ))
    .unwrap_or(HeaderValue::from_static("attachment"))
}

async fn download(
    State(state): State<AppState>,
    ApiPath(token): ApiPath<String>,
) -> Result<Response, ApiError> {
    let now = steward_core::time::now_secs();
    let file = state.call(move |s| s.open_attachment(&token, now)).await?;
    if file.size > MAX_SERVED_BYTES {
        return Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "ATTACHMENT_TOO_LARGE",
            format!("attachments over {MAX_SERVED_BYTES} bytes are not served"),
        ));
    }
    let path = file.path.clone();
    let bytes = state.run(move |_| std::fs::read(&path)).await?.map_err(|e| {
        ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "ATTACHMENT_UNREADABLE", e.to_string())
    })?;
    let mut res = Body::from(bytes).into_response();
    let h = res.headers_mut();
    h.insert(header::CONTENT_TYPE, content_type(&file.mime_type));
    h.insert(header::CONTENT_DISPOSITION, disposition(&file.name));
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static("sandbox; default-src 'none'"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("private, no-store"));
    Ok(res)
}
