//! Server-sent events: the runs' live state pushed to every open page when a follower saw new
//! data or a report's stage changed, with per run what is new since the previous push to that
//! page ([`crate::delta`]: new step spans, system samples and changed verdicts). Each page's
//! stream keeps its own cursor; the stream is only polled when the page's
//! connection can take more, so a slow page gets one merged delta instead of a backlog. The
//! stream is gzip-compressed for a page that accepts it.

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, header};
use axum::response::Response;
use bytes::Bytes;
use flate2::Compression;
use flate2::write::GzEncoder;
use futures::StreamExt;

use crate::conn::Conn;
use crate::delta::{Seen, delta};
use crate::push_views::Push;
use crate::state::Shared;
use crate::{api, compress};

/// The shortest time between two pushes to one page: the follower passes a live run every
/// 200 ms, and each push repeats every run's state, so a page gets what is new every half
/// second, merged.
const PUSH_GAP: Duration = Duration::from_millis(500);

/// A push is sent after this long without one, whether or not anything changed: the page's
/// "updated N s ago" is at most this old while its stream is up, a run's phase that changes
/// with time alone (stalled, crashed) reaches it within this, and a page that hears nothing
/// for three of these knows its stream is down. Two seconds: a push that repeats the runs'
/// state compresses to tens of bytes on the stream's shared window.
pub(crate) const HEARTBEAT: Duration = Duration::from_secs(2);

/// The next push for a page that has seen `seen` (one cursor per run), moving it on.
pub(crate) fn next_push(state: &Shared, seen: &mut Vec<Seen>) -> Push {
    seen.resize(state.runs.len(), Seen::default());
    let list = api::runs(&state.runs);
    let deltas = state
        .runs
        .iter()
        .zip(seen.iter_mut())
        .map(|(run, seen)| {
            let d = run.data.read().expect("run data lock");
            delta(run.id, &d, seen)
        })
        .collect();
    Push {
        runs: list.runs,
        deltas,
        server_time: list.server_time,
        heartbeat_s: HEARTBEAT.as_secs_f64(),
    }
}

/// A page's stream of pushes as text/event-stream, gzip-compressed as one deflate stream
/// flushed after every event when the page accepts it (each push repeats much of the previous
/// one, which the shared window turns into a few bytes).
pub(crate) async fn events(State(state): State<Shared>, request: Request) -> Response {
    let headers = request.headers();
    // The stream counts against the connection's stream budget while it is open
    // ([`crate::conn`]): the guard goes with the stream.
    let hold = request
        .extensions()
        .get::<Arc<Conn>>()
        .map(|conn| conn.open_stream());
    let rx = state.updates.clone();
    let start = (rx, None, Vec::new());
    let texts = futures::stream::unfold(start, move |(mut rx, last, mut seen)| {
        let _hold = &hold;
        let state = Arc::clone(&state);
        async move {
            if let Some(last) = last {
                // What arrives meanwhile goes into the next push, merged.
                tokio::time::sleep_until(last + PUSH_GAP).await;
                // Nothing new for a heartbeat (the timeout): the state is pushed all the same
                // (the runs' phases and idle times move with the clock).
                if let Ok(Err(_)) = tokio::time::timeout_at(last + HEARTBEAT, rx.changed()).await {
                    return None;
                }
            }
            rx.borrow_and_update();
            let sent = tokio::time::Instant::now();
            let body = serde_json::to_string(&next_push(&state, &mut seen)).unwrap_or_default();
            Some((
                format!("event: runs\ndata: {body}\n\n"),
                (rx, Some(sent), seen),
            ))
        }
    });
    let gzip = compress::accepts_gzip(headers);
    let mut encoder = gzip.then(|| GzEncoder::new(Vec::new(), Compression::fast()));
    let chunks = texts.map(move |text| -> Result<Bytes, std::io::Error> {
        match encoder.as_mut() {
            None => Ok(Bytes::from(text)),
            Some(e) => {
                e.write_all(text.as_bytes())?;
                // A sync flush: the event is complete on the wire now.
                e.flush()?;
                Ok(Bytes::from(std::mem::take(e.get_mut())))
            }
        }
    });
    let mut response = Response::new(Body::from_stream(chunks));
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert(header::VARY, HeaderValue::from_static("accept-encoding"));
    if gzip {
        h.insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
    }
    response
}
