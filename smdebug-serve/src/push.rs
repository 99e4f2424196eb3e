//! Server-sent events: the runs' live state pushed to every open page when a follower saw new
//! data or a report's stage changed, with per run what is new since the previous push to that
//! page ([`crate::delta`]: new step spans, system samples, headline scalar points and changed
//! verdicts). Each page's stream keeps its own cursor; the stream is only polled when the page's
//! connection can take more, so a slow page gets one merged delta instead of a backlog.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures::Stream;

use crate::api;
use crate::delta::{Seen, delta};
use crate::push_views::Push;
use crate::state::Shared;

/// The shortest time between two pushes to one page: the follower passes a live run every
/// 200 ms, and each push repeats every run's state, so a page gets what is new every half
/// second, merged.
const PUSH_GAP: Duration = Duration::from_millis(500);

/// The next push for a page that has seen `seen` (one cursor per run), moving it on.
pub(crate) fn next_push(state: &Shared, seen: &mut Vec<Seen>) -> Push {
    seen.resize(state.runs.len(), Seen::default());
    let runs = api::runs(&state.runs).runs;
    let deltas = state
        .runs
        .iter()
        .zip(seen.iter_mut())
        .map(|(run, seen)| {
            let d = run.data.read().expect("run data lock");
            delta(run.id, &d, seen)
        })
        .collect();
    Push { runs, deltas }
}

pub(crate) async fn events(
    State(state): State<Shared>,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let rx = state.updates.clone();
    let start = (rx, None, Vec::new());
    let stream = futures::stream::unfold(start, move |(mut rx, last, mut seen)| {
        let state = Arc::clone(&state);
        async move {
            if let Some(last) = last {
                // What arrives meanwhile goes into the next push, merged.
                tokio::time::sleep_until(last + PUSH_GAP).await;
                if rx.changed().await.is_err() {
                    return None;
                }
            }
            rx.borrow_and_update();
            let sent = tokio::time::Instant::now();
            let body = serde_json::to_string(&next_push(&state, &mut seen)).unwrap_or_default();
            let event = Event::default().event("runs").data(body);
            Some((Ok(event), (rx, Some(sent), seen)))
        }
    });
    Sse::new(stream).keep_alive(KeepAlive::new().interval(Duration::from_secs(10)))
}
