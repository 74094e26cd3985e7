//! The request extractors: typed bodies and path segments, rejected with
//! the server's one error type, [`ApiError`].
//!
//! [`ApiJson`] reads the body within `--max-body` bytes and `--timeout`
//! seconds (413 / 408 otherwise) and deserializes it through
//! `serde_path_to_error`, so a field of the wrong type is named in the
//! error's `param` (`"param": "temperature"`); JSON that does not parse at
//! all, or is not an object, is a 400 without `param`. No `Content-Type` is
//! required (clients such as curl send none). [`PathId`] is the `{id}`
//! segment of a route. The router tests (`http::tests`) drive every case.

#![forbid(unsafe_code)]

use super::error::ApiError;
use axum::body::{Body, Bytes};
use axum::extract::{FromRef, FromRequest, FromRequestParts, Path, Request};
use axum::http::request::Parts;
use serde::de::DeserializeOwned;

/// What [`ApiJson`] takes from the router's state: the body's limits.
#[derive(Clone, Copy, Debug)]
pub struct BodyLimits {
    /// Largest body in bytes (`--max-body`).
    pub max_bytes: usize,
    /// Time to read the whole body (`--timeout`).
    pub timeout: std::time::Duration,
}

/// A JSON body deserialized into `T`.
pub struct ApiJson<T>(pub T);

impl<S, T> FromRequest<S> for ApiJson<T>
where
    T: DeserializeOwned,
    BodyLimits: FromRef<S>,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let limits = BodyLimits::from_ref(state);
        let bytes = read_body(limits.max_bytes, limits.timeout, req.into_body()).await?;
        parse_json(&bytes).map(ApiJson)
    }
}

/// The body, at most `limit` bytes, read within `timeout`.
async fn read_body(
    limit: usize,
    timeout: std::time::Duration,
    body: Body,
) -> Result<Bytes, ApiError> {
    match tokio::time::timeout(timeout, axum::body::to_bytes(body, limit)).await {
        Err(_) => Err(ApiError::body_timeout()),
        Ok(Err(e)) => {
            let too_large = std::error::Error::source(&e)
                .is_some_and(|s| s.is::<http_body_util::LengthLimitError>());
            Err(if too_large {
                ApiError::too_large(limit)
            } else {
                ApiError::bad_request(format!("could not read the request body: {e}"))
            })
        }
        Ok(Ok(b)) => Ok(b),
    }
}

/// `bytes` as JSON deserialized into `T`; the error names the field where
/// deserialization stopped.
pub fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let de = &mut serde_json::Deserializer::from_slice(bytes);
    serde_path_to_error::deserialize(de).map_err(rejected_field)
}

/// A JSON body that did not parse: 400 naming the field where serde stopped.
fn rejected_field(e: serde_path_to_error::Error<serde_json::Error>) -> ApiError {
    let path = e.path().to_string();
    let inner = e.into_inner();
    if path.is_empty() || path == "." || path == "?" {
        ApiError::bad_request(format!("malformed JSON body: {inner}"))
    } else {
        ApiError::invalid(&path, format!("{path}: {inner}"))
    }
}

/// The `{id}` segment of a route.
pub struct PathId(pub String);

impl<S: Send + Sync> FromRequestParts<S> for PathId {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        match Path::<String>::from_request_parts(parts, state).await {
            Ok(Path(id)) => Ok(PathId(id)),
            Err(e) => Err(ApiError::bad_request(e.body_text())),
        }
    }
}
