//! Gzip for the responses that are whole in memory (the API's JSON, the page's assets, the
//! report) when the client accepts it. Already-compressed files and small bodies go as they
//! are; the event stream compresses itself, event by event ([`crate::push`]).
//!
//! Why not tower-http's `CompressionLayer`: tower-http is in the tree (through reqwest), but its
//! compression feature needs async-compression, which is not; flate2, which the workspace
//! already builds, does the compressing here.

use std::io::Write;

use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderMap, HeaderValue, header};
use axum::middleware::Next;
use axum::response::Response;
use flate2::Compression;
use flate2::write::GzEncoder;

/// Bodies shorter than this are sent as they are (gzip's header would eat the gain).
const MIN_BYTES: usize = 1024;

/// The largest body compressed (a larger one, which none of the views is, goes as it is).
const MAX_BYTES: usize = 64 * 1024 * 1024;

/// Whether a request with `headers` accepts gzip.
pub(crate) fn accepts_gzip(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT_ENCODING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|coding| {
            let mut parts = coding.trim().split(';');
            let name = parts.next().unwrap_or("").trim();
            // `gzip;q=0` refuses it.
            let refused = parts.any(|p| p.trim().replace(' ', "") == "q=0");
            (name.eq_ignore_ascii_case("gzip") || name == "*") && !refused
        })
}

fn compressible(response: &Response) -> bool {
    let headers = response.headers();
    if headers.contains_key(header::CONTENT_ENCODING) {
        return false;
    }
    let kind = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    // Not the event stream (it is never whole) and not the pprof download (already gzip).
    kind.starts_with("application/json")
        || kind.starts_with("text/html")
        || kind.starts_with("text/javascript")
        || kind.starts_with("text/css")
        || kind.starts_with("text/plain")
        || kind.starts_with("image/svg+xml")
}

/// The middleware: gzips a whole response the client accepts gzip for.
pub(crate) async fn gzip(request: Request, next: Next) -> Response {
    let wanted = accepts_gzip(request.headers());
    let response = next.run(request).await;
    if !wanted || !compressible(&response) {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let bytes = match axum::body::to_bytes(body, MAX_BYTES).await {
        Ok(b) => b,
        Err(e) => {
            log::warn!("smdebug serve: a response could not be read to compress it: {e}");
            return Response::from_parts(parts, Body::empty());
        }
    };
    parts
        .headers
        .append(header::VARY, HeaderValue::from_static("accept-encoding"));
    if bytes.len() < MIN_BYTES {
        return Response::from_parts(parts, Body::from(bytes));
    }
    let mut encoder = GzEncoder::new(Vec::with_capacity(bytes.len() / 4), Compression::fast());
    let packed = encoder.write_all(&bytes).and_then(|()| encoder.finish());
    match packed {
        Ok(packed) => {
            parts.headers.remove(header::CONTENT_LENGTH);
            parts
                .headers
                .insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
            Response::from_parts(parts, Body::from(packed))
        }
        Err(_) => Response::from_parts(parts, Body::from(bytes)),
    }
}
