//! The one place where failures become HTTP responses.
//!
//! Every failure a handler can meet is a [`Failure`]; [`Failure::describe`] is the only
//! mapping to a status, a stable `code` and a `type`. Engine errors go through
//! [`From<dossier_engine::Error>`]: `NotFound` → 404, `Invalid` → 400, anything else →
//! 500 with the detail logged, never sent.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::request_id::RequestId;

/// What went wrong, before it is turned into HTTP.
#[derive(Debug)]
pub enum Failure {
    /// No `Authorization: Bearer` key, or one the keys file does not hold.
    Unauthorized,
    /// The key is valid but names a principal the store does not know.
    UnknownPrincipal,
    /// Bad input (body, query, parameters).
    Invalid(String),
    /// The request body is not the JSON the route expects.
    BadBody(String),
    /// Does not exist, or is not the caller's: the two read the same.
    NotFound,
    /// No such route.
    NoRoute,
    /// The route exists, not with this method.
    MethodNotAllowed,
    /// A failure of the server or the store; the detail is logged, not sent.
    Internal(String),
}

/// The JSON body of every error response.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema, PartialEq)]
pub struct ErrorBody {
    /// Human-readable; never echoes what was asked for on a 404.
    pub message: String,
    /// Stable machine-readable code: `unauthorized`, `unknown_principal`,
    /// `invalid_request`, `invalid_body`, `not_found`, `no_route`,
    /// `method_not_allowed`, `internal`.
    pub code: String,
    /// The class of error: `authentication_error`, `permission_error`,
    /// `invalid_request_error`, `not_found_error`, `api_error`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The request's id (also in the `x-request-id` header).
    pub request_id: String,
}

impl Failure {
    /// Status, code, type and message: the only mapping of failures to HTTP.
    pub fn describe(&self) -> (StatusCode, &'static str, &'static str, String) {
        match self {
            Failure::Unauthorized => (
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                "authentication_error",
                "a valid API key is required: Authorization: Bearer KEY".into(),
            ),
            Failure::UnknownPrincipal => (
                StatusCode::FORBIDDEN,
                "unknown_principal",
                "permission_error",
                "the API key's principal is not known to this store".into(),
            ),
            Failure::Invalid(m) => (
                StatusCode::BAD_REQUEST,
                "invalid_request",
                "invalid_request_error",
                m.clone(),
            ),
            Failure::BadBody(m) => (
                StatusCode::BAD_REQUEST,
                "invalid_body",
                "invalid_request_error",
                m.clone(),
            ),
            Failure::NotFound => (
                StatusCode::NOT_FOUND,
                "not_found",
                "not_found_error",
                "not found".into(),
            ),
            Failure::NoRoute => (
                StatusCode::NOT_FOUND,
                "no_route",
                "not_found_error",
                "no such route".into(),
            ),
            Failure::MethodNotAllowed => (
                StatusCode::METHOD_NOT_ALLOWED,
                "method_not_allowed",
                "invalid_request_error",
                "this route does not take this method".into(),
            ),
            Failure::Internal(_) => (
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal",
                "api_error",
                "internal error".into(),
            ),
        }
    }
}

impl From<dossier_engine::Error> for Failure {
    fn from(e: dossier_engine::Error) -> Failure {
        match e {
            dossier_engine::Error::NotFound(_) => Failure::NotFound,
            dossier_engine::Error::Invalid(m) => Failure::Invalid(m),
            other => Failure::Internal(other.to_string()),
        }
    }
}

impl From<dossier_agent::Error> for Failure {
    fn from(e: dossier_agent::Error) -> Failure {
        match e {
            dossier_agent::Error::Engine(e) => e.into(),
            dossier_agent::Error::Invalid(m) => Failure::Invalid(m),
        }
    }
}

/// A failure bound to the request it happened in; what handlers return.
#[derive(Debug)]
pub struct ApiError {
    pub request_id: RequestId,
    pub failure: Failure,
}

impl ApiError {
    pub fn new(request_id: &RequestId, failure: impl Into<Failure>) -> ApiError {
        ApiError {
            request_id: request_id.clone(),
            failure: failure.into(),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, code, kind, message) = self.failure.describe();
        if let Failure::Internal(detail) = &self.failure {
            eprintln!("dossier-server: request {}: {detail}", self.request_id.0);
        }
        let body = ErrorBody {
            message,
            code: code.into(),
            kind: kind.into(),
            request_id: self.request_id.0,
        };
        (status, Json(body)).into_response()
    }
}
