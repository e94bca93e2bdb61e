//! `Idempotency-Key` on state-changing requests: the same key and request get the first
//! response again, with exactly one effect, also after a restart (the responses live in
//! `steward.db`); the same key with another request is refused (422).
//!
//! A 503 is not remembered (nothing was done; the retry should run). Responses are scoped to
//! the caller (the owner, or one paired device).

use axum::{
    body::{Body, to_bytes},
    extract::{Request, State},
    http::{HeaderValue, Method, StatusCode, header},
    middleware::Next,
    response::{IntoResponse as _, Response},
};
use steward_core::{
    StewardError as _,
    access::{AccessError, IdempotentStart, request_fingerprint},
};

use super::{ApiError, AppState, auth::Person};

/// The header.
pub const IDEMPOTENCY_KEY: &str = "idempotency-key";
/// The header set on a replayed response.
pub const REPLAYED: &str = "idempotent-replayed";
/// Largest request body read (the same bound as a JSON body).
/// Fixed (not a setting).
pub const MAX_REQUEST_BODY: usize = 2 * 1024 * 1024;
/// Largest response body buffered to remember it.
/// Fixed (not a setting).
const MAX_RESPONSE_BODY: usize = 4 * 1024 * 1024;

pub(super) async fn idempotency(
    State(state): State<AppState>,
    req: Request,
    next: Next,
) -> Result<Response, ApiError> {
    if matches!(*req.method(), Method::GET | Method::HEAD | Method::OPTIONS) {
        return Ok(next.run(req).await);
    }
    // Memory's answers hold the person's facts (an accepted note, a forget's receipt): they
    // are not kept for replay, where a forget could not reach them. Its operations need no
    // replay either: a second accept or reject finds no proposal, a second forget nothing.
    if req.uri().path().starts_with("/memory/") {
        return Ok(next.run(req).await);
    }
    let Some(key) = req.headers().get(IDEMPOTENCY_KEY) else {
        return Ok(next.run(req).await);
    };
    let key = key.to_str().map(str::to_owned).map_err(|_| {
        ApiError::new(StatusCode::BAD_REQUEST, "IDEMPOTENCY_KEY_INVALID", "not ASCII")
    })?;
    let principal =
        req.extensions().get::<Person>().map_or_else(|| "owner".to_owned(), Person::principal);
    let (parts, body) = req.into_parts();
    let bytes = to_bytes(body, MAX_REQUEST_BODY).await.map_err(|_| {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "BODY_TOO_LARGE",
            format!("a request body is at most {MAX_REQUEST_BODY} bytes"),
        )
    })?;
    let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let fingerprint = request_fingerprint(parts.method.as_str(), path, &bytes);
    let (p, k) = (principal.clone(), key.clone());
    let start = state.run(move |s| s.begin_idempotent(&p, &k, &fingerprint)).await?;
    match start {
        Ok(IdempotentStart::Replay { status, body }) => {
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::OK);
            let mut res = (status, body).into_response();
            let h = res.headers_mut();
            h.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
            h.insert(REPLAYED, HeaderValue::from_static("true"));
            Ok(res)
        }
        Ok(IdempotentStart::Fresh) => {
            let res = next.run(Request::from_parts(parts, Body::from(bytes))).await;
            let (rparts, rbody) = res.into_parts();
            let rbytes = to_bytes(rbody, MAX_RESPONSE_BODY).await.map_err(|_| {
                ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "INTERNAL", "response unreadable")
            })?;
            let status = rparts.status.as_u16();
            let remembered = rbytes.clone();
            let outcome = state
                .call(move |s| s.settle_idempotent(&principal, &key, status, &remembered))
                .await;
            if let Err(e) = outcome {
                tracing::error!(code = e.code(), "an idempotent response could not be remembered");
            }
            Ok(Response::from_parts(rparts, Body::from(rbytes)))
        }
        // The one status the error kinds do not give: the contract says 422 here.
        Err(e @ AccessError::IdempotencyKeyReused) => {
            Err(ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, e.code(), e.to_string()))
        }
        Err(e) => Err(e.into()),
    }
}
