//! OpenAI-style JSON errors: `{"error": {"message", "type", "param", "code"}}`
//! with the HTTP status that says who must act (400 the request, 401 the
//! key, 404 the route or model, 408/413 the body, 409 a resume the run
//! refutes, 429 the load, 503 loading).
//!
//! [`ApiError`] is the server's one rejection type: the extractors
//! (`extract`), the validation (`api`), the worker's refusals and the
//! routes' fallbacks all answer with it. Its body is the typed
//! [`ErrorBody`]. The router tests (`http::tests`) check status, `type` and
//! `param` for every bad-input case.

#![forbid(unsafe_code)]

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

/// One error answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// HTTP status.
    pub status: StatusCode,
    /// What went wrong, for a person.
    pub message: String,
    /// OpenAI's error type (`invalid_request_error`, …).
    pub kind: &'static str,
    /// The request parameter at fault, if one is.
    pub param: Option<String>,
    /// A machine-readable code, if any.
    pub code: Option<&'static str>,
    /// Seconds a client should wait (429).
    pub retry_after: Option<u64>,
}

impl ApiError {
    fn new(status: StatusCode, kind: &'static str, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            message: message.into(),
            kind,
            param: None,
            code: None,
            retry_after: None,
        }
    }

    /// 400 naming the parameter at fault.
    pub fn invalid(param: &str, message: impl Into<String>) -> ApiError {
        ApiError {
            param: Some(param.to_string()),
            ..ApiError::new(StatusCode::BAD_REQUEST, "invalid_request_error", message)
        }
    }

    /// 400 about the request as a whole (malformed JSON, …).
    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, "invalid_request_error", message)
    }

    /// 401: missing or wrong bearer token.
    pub fn unauthorized() -> ApiError {
        ApiError {
            code: Some("invalid_api_key"),
            ..ApiError::new(
                StatusCode::UNAUTHORIZED,
                "invalid_request_error",
                "missing or invalid API key (Authorization: Bearer KEY)",
            )
        }
    }

    /// 404.
    pub fn not_found(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, "invalid_request_error", message)
    }

    /// 404 for a model name the server does not serve.
    pub fn unknown_model(name: &str, served: &str) -> ApiError {
        ApiError {
            param: Some("model".into()),
            code: Some("model_not_found"),
            ..ApiError::not_found(format!(
                "model \"{name}\" does not exist; this server serves \"{served}\""
            ))
        }
    }

    /// 409 naming the parameter whose claim the server's own run refutes
    /// (`resume_token_ids` that the seeded run would not have produced).
    pub fn conflict(param: &str, message: impl Into<String>) -> ApiError {
        ApiError {
            param: Some(param.to_string()),
            code: Some("resume_mismatch"),
            ..ApiError::new(StatusCode::CONFLICT, "invalid_request_error", message)
        }
    }

    /// 405.
    pub fn method_not_allowed() -> ApiError {
        ApiError::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "invalid_request_error",
            "method not allowed on this route",
        )
    }

    /// 413.
    pub fn too_large(limit: usize) -> ApiError {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "invalid_request_error",
            format!("request body larger than {limit} bytes"),
        )
    }

    /// 429 with `Retry-After`.
    pub fn busy(message: impl Into<String>) -> ApiError {
        ApiError {
            retry_after: Some(1),
            code: Some("rate_limit_exceeded"),
            ..ApiError::new(StatusCode::TOO_MANY_REQUESTS, "rate_limit_error", message)
        }
    }

    /// 503 while the model loads or after the engine stopped.
    pub fn unavailable(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "server_error", message)
    }

    /// 500: the engine failed on a request it had accepted.
    pub fn internal(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "server_error", message)
    }

    /// 408: the body did not arrive within the connection timeout.
    pub fn body_timeout() -> ApiError {
        ApiError {
            status: StatusCode::REQUEST_TIMEOUT,
            ..ApiError::bad_request("request body not received in time")
        }
    }

    /// The JSON body.
    pub fn body(&self) -> ErrorBody<'_> {
        ErrorBody {
            error: ErrorDetail {
                code: self.code,
                message: &self.message,
                param: self.param.as_deref(),
                kind: self.kind,
            },
        }
    }
}

/// `{"error": {...}}`.
#[derive(Debug, Serialize)]
pub struct ErrorBody<'a> {
    pub error: ErrorDetail<'a>,
}

/// The error object (fields in the order the server has always written them).
#[derive(Debug, Serialize)]
pub struct ErrorDetail<'a> {
    /// A machine-readable code, or `null`.
    pub code: Option<&'static str>,
    /// What went wrong, for a person.
    pub message: &'a str,
    /// The request parameter at fault, or `null`.
    pub param: Option<&'a str>,
    /// OpenAI's error type.
    #[serde(rename = "type")]
    pub kind: &'static str,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut r = (self.status, axum::Json(self.body())).into_response();
        if let Some(s) = self.retry_after {
            r.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(s));
        }
        r
    }
}
