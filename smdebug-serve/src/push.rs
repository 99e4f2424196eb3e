//! Server-sent events: the runs' live state, pushed to every open page when a follower saw
//! new data or a report's stage changed.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures::Stream;

use crate::api;
use crate::state::Shared;

pub(crate) async fn events(
    State(state): State<Shared>,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let rx = state.updates.clone();
    let stream = futures::stream::unfold((rx, true), move |(mut rx, first)| {
        let state = Arc::clone(&state);
        async move {
            if !first && rx.changed().await.is_err() {
                return None;
            }
            rx.borrow_and_update();
            let body = serde_json::to_string(&api::runs(&state.runs)).unwrap_or_default();
            Some((Ok(Event::default().event("runs").data(body)), (rx, false)))
        }
    });
    Sse::new(stream).keep_alive(KeepAlive::new().interval(Duration::from_secs(10)))
}
