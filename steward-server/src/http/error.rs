//! One error type for every route, and extractors whose rejections use it.
//!
//! The body is always `{ "code", "message" }`: `code` is the core's stable code (or one of the
//! transport's own: `BAD_JSON`, `BAD_QUERY`, `BAD_PATH`, `TOKEN_MISSING`, …) and the status comes
//! from the error's kind. Internal errors say only that something failed; the detail goes to
//! the log.

use axum::{
    Json,
    extract::{FromRequest, FromRequestParts, Request},
    http::{StatusCode, request::Parts},
    response::{IntoResponse, Response},
};
use serde::{Serialize, de::DeserializeOwned};
use steward_core::{ErrorKind, StewardError};

/// The body of every error response.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct ErrorBody {
    /// Stable, SCREAMING_SNAKE_CASE.
    pub code: String,
    /// For a person.
    pub message: String,
}

/// An error on its way to becoming a response.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    code: String,
    message: String,
}

impl ApiError {
    /// An error with an explicit status (the transport's own errors).
    pub fn new(status: StatusCode, code: &str, message: impl Into<String>) -> Self {
        Self { status, code: code.to_owned(), message: message.into() }
    }

    /// The status this error answers with.
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// Its code.
    pub fn code(&self) -> &str {
        &self.code
    }
}

/// The status of each kind of core error.
pub fn status_of(kind: ErrorKind) -> StatusCode {
    match kind {
        ErrorKind::InvalidInput => StatusCode::BAD_REQUEST,
        ErrorKind::NotFound => StatusCode::NOT_FOUND,
        ErrorKind::Conflict => StatusCode::CONFLICT,
        ErrorKind::Denied => StatusCode::FORBIDDEN,
        ErrorKind::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

impl<E: StewardError> From<E> for ApiError {
    fn from(e: E) -> Self {
        let kind = e.kind();
        let message = if kind == ErrorKind::Internal {
            tracing::error!(code = e.code(), error = %e, "internal error");
            "internal error; the server log has the details".to_owned()
        } else {
            e.to_string()
        };
        Self { status: status_of(kind), code: e.code().to_owned(), message }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorBody { code: self.code, message: self.message };
        (self.status, Json(body)).into_response()
    }
}

/// A JSON body whose rejections are [`ApiError`]s (`BAD_JSON`, with axum's status: 400, 415
/// or 422).
#[derive(Debug, Clone, Copy, Default)]
pub struct ApiJson<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        match Json::<T>::from_request(req, state).await {
            Ok(Json(v)) => Ok(Self(v)),
            Err(r) => Err(ApiError::new(r.status(), "BAD_JSON", r.body_text())),
        }
    }
}

/// Query parameters whose rejections are [`ApiError`]s (`BAD_QUERY`, 400).
#[derive(Debug, Clone, Copy, Default)]
pub struct ApiQuery<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for ApiQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        match axum::extract::Query::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Query(v)) => Ok(Self(v)),
            Err(r) => Err(ApiError::new(StatusCode::BAD_REQUEST, "BAD_QUERY", r.body_text())),
        }
    }
}

/// Path parameters whose rejections are [`ApiError`]s (`BAD_PATH`, 400).
#[derive(Debug, Clone, Copy, Default)]
pub struct ApiPath<T>(pub T);

impl<T: DeserializeOwned + Send, S: Send + Sync> FromRequestParts<S> for ApiPath<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        match axum::extract::Path::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Path(v)) => Ok(Self(v)),
            Err(r) => Err(ApiError::new(StatusCode::BAD_REQUEST, "BAD_PATH", r.body_text())),
        }
    }
}
