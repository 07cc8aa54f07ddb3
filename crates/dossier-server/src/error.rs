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
    /// The route writes or administers, and the key has no admin scope.
    AdminRequired,
    /// The route is store-wide (reaches every tenant), and the key is no operator's.
    OperatorRequired,
    /// A field of the request is larger than the server takes (`what`, `limit`).
    TooLarge { what: &'static str, limit: usize },
    /// The tenant sent more requests than its rate allows; retry after this many seconds.
    /// Over a rate: the tenant's, or the principal's own quota (`principal`).
    RateLimited {
        retry_after_secs: u64,
        principal: bool,
    },
    /// The tenant already runs as many expensive operations as it may at once.
    /// No expensive slot free: the tenant's, or the principal's own (`principal`).
    Busy {
        retry_after_secs: u64,
        principal: bool,
    },
    /// A write with this idempotency key is running now; retry after a second.
    IdempotencyInFlight,
    /// The idempotency key was used by this principal for a different write.
    IdempotencyKeyReused,
    /// The work did not finish within the request's deadline.
    DeadlineExceeded,
    /// The server is shutting down and takes no new work.
    ShuttingDown,
    /// A live record source failed; the detail is logged, not sent.
    SourceUnavailable(String),
    /// A failure of the server or the store; the detail is logged, not sent.
    Internal(String),
}

/// The JSON body of every error response.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema, PartialEq)]
pub struct ErrorBody {
    /// Human-readable; never echoes what was asked for on a 404.
    pub message: String,
    /// Stable machine-readable code: `unauthorized`, `unknown_principal`,
    /// `admin_required`, `operator_required`, `payload_too_large`, `invalid_request`, `invalid_body`, `not_found`, `no_route`,
    /// `method_not_allowed`, `rate_limited`, `too_many_concurrent`,
    /// `idempotency_in_flight`, `idempotency_key_reused`, `source_unavailable`,
    /// `deadline_exceeded`, `shutting_down`, `internal`.
    pub code: String,
    /// The class of error: `authentication_error`, `permission_error`,
    /// `invalid_request_error`, `not_found_error`, `rate_limit_error`, `api_error`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The request's id (also in the `x-request-id` header).
    pub request_id: String,
}

impl Failure {
    /// Status, code, type and message: the only mapping of failures to HTTP.
    /// Seconds a client should wait before retrying, for the `Retry-After` header.
    pub fn retry_after(&self) -> Option<u64> {
        match self {
            Failure::RateLimited {
                retry_after_secs, ..
            }
            | Failure::Busy {
                retry_after_secs, ..
            } => Some((*retry_after_secs).max(1)),
            Failure::ShuttingDown => Some(5),
            Failure::IdempotencyInFlight => Some(1),
            _ => None,
        }
    }

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
            Failure::AdminRequired => (
                StatusCode::FORBIDDEN,
                "admin_required",
                "permission_error",
                "this route needs an API key with the admin scope".into(),
            ),
            Failure::OperatorRequired => (
                StatusCode::FORBIDDEN,
                "operator_required",
                "permission_error",
                "this route reaches every tenant and needs an API key with the operator scope"
                    .into(),
            ),
            Failure::TooLarge { what, limit } => (
                StatusCode::PAYLOAD_TOO_LARGE,
                "payload_too_large",
                "invalid_request_error",
                format!("{what} is longer than the {limit} characters the server takes"),
            ),
            Failure::RateLimited {
                retry_after_secs,
                principal,
            } => (
                StatusCode::TOO_MANY_REQUESTS,
                "rate_limited",
                "rate_limit_error",
                format!(
                    "{} request rate is exceeded; retry after {retry_after_secs} s",
                    whose(*principal)
                ),
            ),
            Failure::Busy {
                retry_after_secs,
                principal,
            } => (
                StatusCode::TOO_MANY_REQUESTS,
                "too_many_concurrent",
                "rate_limit_error",
                format!(
                    "{} already runs as many expensive requests as it may; retry after {retry_after_secs} s",
                    if *principal { "this key's principal" } else { "the tenant" }
                ),
            ),
            Failure::IdempotencyInFlight => (
                StatusCode::CONFLICT,
                "idempotency_in_flight",
                "invalid_request_error",
                "a write with this Idempotency-Key is still running; retry after 1 s".into(),
            ),
            Failure::IdempotencyKeyReused => (
                StatusCode::UNPROCESSABLE_ENTITY,
                "idempotency_key_reused",
                "invalid_request_error",
                "this Idempotency-Key was used for a different request (route or body); use a new key".into(),
            ),
            Failure::DeadlineExceeded => (
                StatusCode::GATEWAY_TIMEOUT,
                "deadline_exceeded",
                "api_error",
                "the request did not finish within its deadline".into(),
            ),
            Failure::ShuttingDown => (
                StatusCode::SERVICE_UNAVAILABLE,
                "shutting_down",
                "api_error",
                "the server is shutting down".into(),
            ),
            Failure::SourceUnavailable(_) => (
                StatusCode::BAD_GATEWAY,
                "source_unavailable",
                "api_error",
                "the record's live source failed; try again later".into(),
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

/// Whose rate a `rate_limited` answer names.
fn whose(principal: bool) -> &'static str {
    if principal {
        "this key's principal's"
    } else {
        "the tenant's"
    }
}

impl From<dossier_engine::Error> for Failure {
    fn from(e: dossier_engine::Error) -> Failure {
        match e {
            dossier_engine::Error::NotFound(_) => Failure::NotFound,
            dossier_engine::Error::Invalid(m) => Failure::Invalid(m),
            dossier_engine::Error::Cancelled(_) => Failure::DeadlineExceeded,
            dossier_engine::Error::Busy(_) => Failure::Busy {
                principal: false,
                retry_after_secs: 1,
            },
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
        if let Failure::Internal(detail) | Failure::SourceUnavailable(detail) = &self.failure {
            eprintln!("dossier-server: request {}: {detail}", self.request_id.0);
        }
        let body = ErrorBody {
            message,
            code: code.into(),
            kind: kind.into(),
            request_id: self.request_id.0,
        };
        let retry_after = self.failure.retry_after();
        let mut resp = (status, Json(body)).into_response();
        if let Some(secs) = retry_after {
            resp.headers_mut()
                .insert(axum::http::header::RETRY_AFTER, secs.into());
        }
        resp
    }
}
