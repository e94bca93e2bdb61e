//! Authentication and origin checks, as two middleware layers.
//!
//! Outer, on every route: the `Host` header must name this server (a loopback name or a
//! configured host) — anything else may be DNS rebinding and gets 421; a browser `Origin` on a
//! state-changing request or a WebSocket handshake must be this server's or a configured one,
//! else 403. Inner, on every route but `/health`: `Authorization: Bearer <token>`, compared in
//! constant time. A token in the query string is refused outright (URLs end up in logs and
//! history) and no token is ever logged.

use axum::{
    extract::{Request, State},
    http::{HeaderMap, Method, StatusCode, header},
    middleware::Next,
    response::Response,
};

use super::{ApiError, AppState};

/// The person a request was authenticated as; inserted by [`require_token`].
#[derive(Debug, Clone)]
pub struct Person(pub String);

fn refuse(status: StatusCode, code: &str, message: &str) -> ApiError {
    ApiError::new(status, code, message)
}

/// Host and Origin checks (every route, `/health` included).
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

/// The bearer token check (every route but `/health`).
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
    let presented = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim);
    match presented {
        None => Err(refuse(
            StatusCode::UNAUTHORIZED,
            "TOKEN_MISSING",
            "this route needs Authorization: Bearer <token>",
        )),
        Some(t) if state.token.matches(t) => {
            req.extensions_mut().insert(Person(state.person.clone()));
            Ok(next.run(req).await)
        }
        Some(_) => Err(refuse(StatusCode::UNAUTHORIZED, "TOKEN_INVALID", "the token is not valid")),
    }
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
