//! `GET /verify`: the browser verifier page (`web/`, docs/BROWSER.md), so a
//! user of this server checks an answer with nothing but a browser.
//!
//! The page's three source files are compiled in (`include_str!`); the
//! WebAssembly module is a build product (`scripts/build-web.sh` writes
//! `web/wasm.js`), read once at start from `--verify-wasm`, so a plain
//! `cargo build` needs no wasm toolchain. Without the module the page is
//! still served and `/verify/wasm.js` answers 404 saying how to build it.
//! No route here is behind `--api-key`: the page is public, the transcript
//! it fetches (`/v1/transcripts/{id}`) is not.

#![forbid(unsafe_code)]

use axum::Router;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use std::path::Path;
use std::sync::Arc;

const INDEX_HTML: &str = include_str!("../../../web/index.html");
const JOB_JS: &str = include_str!("../../../web/job.js");
const VERIFIER_JS: &str = include_str!("../../../web/verifier.js");

/// The module script at `path`, or `None` (with a line on stderr).
pub fn load(path: &Path) -> Option<Arc<str>> {
    match std::fs::read_to_string(path) {
        Ok(text) => Some(text.into()),
        Err(e) => {
            eprintln!(
                "detllm serve: /verify has no verifier module ({}: {e}); build it with scripts/build-web.sh",
                path.display()
            );
            None
        }
    }
}

fn text(content_type: &'static str, body: impl Into<String>) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body.into(),
    )
        .into_response()
}

/// The page's routes; `wasm` is the module script ([`load`]).
pub fn routes<S: Clone + Send + Sync + 'static>(wasm: Option<Arc<str>>) -> Router<S> {
    let js = "text/javascript; charset=utf-8";
    Router::new()
        // The page's relative links need the trailing slash.
        .route("/verify", get(|| async { Redirect::permanent("/verify/") }))
        .route(
            "/verify/",
            get(|| async { text("text/html; charset=utf-8", INDEX_HTML) }),
        )
        .route("/verify/job.js", get(move || async move { text(js, JOB_JS) }))
        .route("/verify/verifier.js", get(move || async move { text(js, VERIFIER_JS) }))
        .route(
            "/verify/wasm.js",
            get(move || async move {
                match wasm {
                    Some(w) => text(js, w.as_ref()),
                    None => (
                        StatusCode::NOT_FOUND,
                        "the verifier module was not built: run scripts/build-web.sh (or pass --verify-wasm)",
                    )
                        .into_response(),
                }
            }),
        )
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::{Body, to_bytes};
    use axum::http::Request;
    use tower::ServiceExt;

    async fn get_path(app: Router, path: &str) -> (StatusCode, String) {
        let req = Request::get(path).body(Body::empty()).expect("request");
        let resp = app.oneshot(req).await.expect("response");
        let status = resp.status();
        let body = to_bytes(resp.into_body(), 1 << 20).await.expect("body");
        (status, String::from_utf8_lossy(&body).into_owned())
    }

    #[tokio::test]
    async fn the_page_and_its_scripts_are_served() {
        let app = || routes::<()>(Some("self.DETLLM_WASM_BASE64 = \"\";".into()));
        let (status, _) = get_path(app(), "/verify").await;
        assert_eq!(status, StatusCode::PERMANENT_REDIRECT);
        let (status, page) = get_path(app(), "/verify/").await;
        assert_eq!(status, StatusCode::OK);
        assert!(page.contains("<script src=\"verifier.js\">"));
        for (path, want) in [
            ("/verify/job.js", JOB_JS),
            ("/verify/verifier.js", VERIFIER_JS),
        ] {
            let (status, js) = get_path(app(), path).await;
            assert_eq!((status, js.as_str()), (StatusCode::OK, want));
        }
        let (status, w) = get_path(app(), "/verify/wasm.js").await;
        assert_eq!(status, StatusCode::OK);
        assert!(w.starts_with("self.DETLLM_WASM_BASE64"));
    }

    #[tokio::test]
    async fn a_missing_module_is_a_404_that_says_how_to_build_it() {
        let (status, body) = get_path(routes::<()>(None), "/verify/wasm.js").await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        assert!(body.contains("scripts/build-web.sh"));
    }
}
