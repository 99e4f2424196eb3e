//! Who may ask what: the Host check (no DNS rebinding on loopback), the Origin check (no
//! other site's page may make the server work, GET included), and the token.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::conn::Conn;

/// The checks' settings.
pub(crate) struct Guard {
    /// The token the API requires, if any.
    pub token: Option<String>,
    /// `Host` values served on loopback without a token (`None`: any, the token guards).
    hosts: Option<Vec<String>>,
}

impl Guard {
    /// Without a token on a loopback address, only its loopback names are served: the usual
    /// ones and the address it is bound to (`127.0.0.2:port`, the URL it prints).
    pub(crate) fn new(token: Option<String>, addr: SocketAddr) -> Guard {
        let port = addr.port();
        let hosts = (addr.ip().is_loopback() && token.is_none()).then(|| {
            let bound = match addr.ip() {
                IpAddr::V6(ip) => format!("[{ip}]:{port}"),
                IpAddr::V4(ip) => format!("{ip}:{port}"),
            };
            let mut hosts = vec![
                format!("127.0.0.1:{port}"),
                format!("localhost:{port}"),
                format!("[::1]:{port}"),
            ];
            if !hosts.contains(&bound) {
                hosts.push(bound);
            }
            hosts
        });
        Guard { token, hosts }
    }

    fn token_given(&self, request: &Request) -> Option<bool> {
        let token = self.token.as_ref()?;
        let from_header = request
            .headers()
            .get("x-smdebug-token")
            .and_then(|h| h.to_str().ok());
        let from_query = request
            .uri()
            .query()
            .and_then(|q| q.split('&').find_map(|kv| kv.strip_prefix("token=")));
        Some(
            from_header
                .or(from_query)
                .is_some_and(|g| same_token(g, token)),
        )
    }
}

fn refuse(status: StatusCode, message: &str) -> Response {
    let body = crate::series::ApiError {
        error: message.to_owned(),
    };
    (status, axum::Json(body)).into_response()
}

/// Whether the request comes from a page of another origin: an `Origin` header that is not
/// this server's (`http://` and the `Host` it was asked by), or, for the API, a browser's
/// `Sec-Fetch-Site` saying another site started it (a link or form elsewhere).
fn foreign(headers: &HeaderMap, api: bool) -> bool {
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("");
    if let Some(origin) = headers.get(header::ORIGIN) {
        let own = origin
            .to_str()
            .ok()
            .and_then(|o| o.strip_prefix("http://"))
            .is_some_and(|o| !host.is_empty() && o.eq_ignore_ascii_case(host));
        if !own {
            return true;
        }
    }
    api && headers
        .get("sec-fetch-site")
        .and_then(|h| h.to_str().ok())
        .is_some_and(|site| !matches!(site, "same-origin" | "none"))
}

/// The checks every request goes through: Host (on loopback without a token), Origin, and
/// whether the connection is the token holder's (see [`crate::conn`]).
pub(crate) async fn check(
    State(guard): State<Arc<Guard>>,
    request: Request,
    next: Next,
) -> Response {
    if let Some(hosts) = &guard.hosts {
        let host = request
            .headers()
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .unwrap_or("");
        if !hosts.iter().any(|a| a == host) {
            return (StatusCode::FORBIDDEN, "unexpected Host header").into_response();
        }
    }
    let api = request.uri().path().starts_with("/api/");
    if foreign(request.headers(), api) {
        return refuse(
            StatusCode::FORBIDDEN,
            "a request from another site's page is refused (its Origin is not this server)",
        );
    }
    if guard.token_given(&request).unwrap_or(true)
        && let Some(conn) = request.extensions().get::<Arc<Conn>>()
    {
        conn.trust();
    }
    next.run(request).await
}

/// Constant-time comparison of two tokens.
fn same_token(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

/// The API's token check.
pub(crate) async fn require_token(
    State(guard): State<Arc<Guard>>,
    request: Request,
    next: Next,
) -> Response {
    if guard.token_given(&request) == Some(false) {
        return refuse(
            StatusCode::UNAUTHORIZED,
            "this server needs the token it printed at start",
        );
    }
    next.run(request).await
}
