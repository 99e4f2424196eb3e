//! What every route handler shares: the served runs, the guard, the Kineto summaries and the
//! channels that wake the event streams. Built by [`crate::server`], read by
//! [`crate::routes`] and [`crate::push`].

use std::sync::Arc;

use smdebug_read::RankSummary;
use tokio::sync::watch;

use crate::guard::Guard;
use crate::run::Run;

pub(crate) struct AppState {
    pub(crate) runs: Vec<Arc<Run>>,
    pub(crate) guard: Arc<Guard>,
    pub(crate) traces: Vec<RankSummary>,
    pub(crate) updates: watch::Receiver<u64>,
    /// Wakes the event streams up (a report's stage changed).
    pub(crate) notify: Arc<watch::Sender<u64>>,
    /// Report builds allowed at once.
    pub(crate) report_slots: tokio::sync::Semaphore,
    /// The most values one answer of `/scalars/values` holds.
    pub(crate) max_download_values: usize,
}

pub(crate) type Shared = Arc<AppState>;
