//! The embedded page (HTML, script, styles, uPlot) and the security headers of every response.

use axum::Router;
use axum::extract::Request;
use axum::http::{HeaderValue, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;

/// The page's Content-Security-Policy: nothing but this server's own scripts, styles and API.
pub(crate) const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; \
frame-ancestors 'none'";

const INDEX_HTML: &str = include_str!("../assets/index.html");
const APP_JS: &str = include_str!("../assets/app.js");
const LIB_JS: &str = include_str!("../assets/lib.js");
const SCALARS_JS: &str = include_str!("../assets/scalars.js");
const EXTRAS_JS: &str = include_str!("../assets/extras.js");
const LIVE_JS: &str = include_str!("../assets/live.js");
const COMPARE_JS: &str = include_str!("../assets/compare.js");
const TILES_JS: &str = include_str!("../assets/tiles.js");
const APP_CSS: &str = include_str!("../assets/app.css");
const UPLOT_JS: &str = include_str!("../assets/vendor/uPlot.iife.min.js");
const UPLOT_CSS: &str = include_str!("../assets/vendor/uPlot.min.css");
const ICON_SVG: &str = include_str!("../assets/icon.svg");
const UPLOT_LICENSE: &str = include_str!("../assets/vendor/uPlot.LICENSE");

/// The page and its assets, at `/` and `/assets/…`.
pub(crate) fn routes<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route(
            "/",
            get(|| async { asset("text/html; charset=utf-8", INDEX_HTML) }),
        )
        .route(
            "/assets/app.js",
            get(|| async { asset("text/javascript", APP_JS) }),
        )
        .route(
            "/assets/lib.js",
            get(|| async { asset("text/javascript", LIB_JS) }),
        )
        .route(
            "/assets/scalars.js",
            get(|| async { asset("text/javascript", SCALARS_JS) }),
        )
        .route(
            "/assets/extras.js",
            get(|| async { asset("text/javascript", EXTRAS_JS) }),
        )
        .route(
            "/assets/live.js",
            get(|| async { asset("text/javascript", LIVE_JS) }),
        )
        .route(
            "/assets/compare.js",
            get(|| async { asset("text/javascript", COMPARE_JS) }),
        )
        .route(
            "/assets/tiles.js",
            get(|| async { asset("text/javascript", TILES_JS) }),
        )
        .route(
            "/assets/app.css",
            get(|| async { asset("text/css", APP_CSS) }),
        )
        .route(
            "/assets/icon.svg",
            get(|| async { asset("image/svg+xml", ICON_SVG) }),
        )
        .route(
            "/assets/uPlot.iife.min.js",
            get(|| async { asset("text/javascript", UPLOT_JS) }),
        )
        .route(
            "/assets/uPlot.min.css",
            get(|| async { asset("text/css", UPLOT_CSS) }),
        )
        .route(
            "/assets/uPlot.LICENSE",
            get(|| async { asset("text/plain; charset=utf-8", UPLOT_LICENSE) }),
        )
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    ([(header::CONTENT_TYPE, content_type)], body).into_response()
}

pub(crate) async fn security_headers(request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    // A response with a policy of its own (a flame graph's, stricter) keeps it.
    headers
        .entry(header::CONTENT_SECURITY_POLICY)
        .or_insert(HeaderValue::from_static(CSP));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers
        .entry(header::CACHE_CONTROL)
        .or_insert(HeaderValue::from_static("no-store"));
    response
}
