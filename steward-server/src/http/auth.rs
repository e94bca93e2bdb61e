//! Authentication and origin checks, as middleware layers.
//!
//! Outer, on every route: the `Host` header must name this server (a loopback name or a
//! configured host) — anything else may be DNS rebinding and gets 421; a browser `Origin` on a
//! state-changing request or a WebSocket handshake must be this server's or a configured one,
//! else 403. Inner, on every route but the public ones (`/health`, `/pair`): the owner's token
//! or a paired device's, as `Authorization: Bearer …` or (for a paired browser) the HttpOnly
//! cookie set by pairing. The owner's token is compared in constant time; a device token is
//! looked up by its SHA-256. A token in the query string is refused outright (URLs end up in
//! logs and history) and no token is ever logged.

use axum::{
    extract::{Request, State},
    http::{HeaderMap, Method, StatusCode, header},
    middleware::Next,
    response::Response,
};

use super::{ApiError, AppState};

/// The cookie a paired browser carries.
pub const DEVICE_COOKIE: &str = "steward_device";

/// Who a request was authenticated as; inserted by [`require_token`].
#[derive(Debug, Clone)]
pub struct Person {
    /// The person the server acts for.
    pub name: String,
    /// The paired device, when a device token was used (absent: the owner's token).
    pub device: Option<i64>,
}

impl Person {
    /// The identity idempotency keys are scoped to.
    pub fn principal(&self) -> String {
        match self.device {
            Some(id) => format!("device:{id}"),
            None => "owner".to_owned(),
        }
    }
}

fn refuse(status: StatusCode, code: &str, message: &str) -> ApiError {
    ApiError::new(status, code, message)
}

/// Host and Origin checks (every route, the public ones included).
pub(super) async fn check_origin(
    State(state): State<AppState>,
    req: Request,
    next: Next,
) -> Result<Response, ApiError> {
    let headers = req.headers();
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok()).unwrap_or("");
    if !state.origins.host_allowed(host) {
        return Err(refuse(
            StatusCode::MISDIRECTED_REQUEST,
            "HOST_NOT_ALLOWED",
            "this server does not answer for that host name",
        ));
    }
    let changes_state = !matches!(*req.method(), Method::GET | Method::HEAD | Method::OPTIONS);
    if (changes_state || is_websocket(headers))
        && let Some(origin) = headers.get(header::ORIGIN)
        && !origin.to_str().is_ok_and(|o| state.origins.origin_allowed(o, host))
    {
        return Err(refuse(
            StatusCode::FORBIDDEN,
            "ORIGIN_NOT_ALLOWED",
            "requests from that origin are not allowed (set STEWARD_ALLOWED_ORIGINS)",
        ));
    }
    Ok(next.run(req).await)
}

fn is_websocket(headers: &HeaderMap) -> bool {
    headers
        .get(header::UPGRADE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("websocket"))
}

fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
}

fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.trim())
}

/// The token check (every route but the public ones).
pub(super) async fn require_token(
    State(state): State<AppState>,
    mut req: Request,
    next: Next,
) -> Result<Response, ApiError> {
    if token_in_query(req.uri().query()) {
        return Err(refuse(
            StatusCode::UNAUTHORIZED,
            "TOKEN_IN_QUERY",
            "send the token in the Authorization header, never in a URL",
        ));
    }
    let presented = bearer(req.headers()).or_else(|| cookie(req.headers(), DEVICE_COOKIE));
    let Some(token) = presented else {
        return Err(refuse(
            StatusCode::UNAUTHORIZED,
            "TOKEN_MISSING",
            "this route needs Authorization: Bearer <token>",
        ));
    };
    let device = if state.token.matches(token) {
        None
    } else {
        let token = token.to_owned();
        match state.call(move |s| s.device_for_token(&token)).await? {
            Some(d) => Some(d.id),
            None => {
                return Err(refuse(
                    StatusCode::UNAUTHORIZED,
                    "TOKEN_INVALID",
                    "the token is not valid",
                ));
            }
        }
    };
    req.extensions_mut().insert(Person { name: state.person.clone(), device });
    Ok(next.run(req).await)
}

/// Whether a query string carries something named like a credential.
fn token_in_query(query: Option<&str>) -> bool {
    query.is_some_and(|q| {
        q.split('&').filter_map(|kv| kv.split('=').next()).any(|k| {
            let k = k.to_ascii_lowercase();
            k == "token" || k == "access_token" || k == "auth" || k == "authorization"
        })
    })
}
