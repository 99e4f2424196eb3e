//! Pages of series: the views that could list thousands of series (`/system`, `/scalars`)
//! send one page at a time, so that every response is bounded.

/// Series sent per request by default; the rest are asked for by page.
pub const PAGE: usize = 64;

/// Series sent per request at most.
pub const PAGE_MAX: usize = 256;

/// A page of series: `offset` and `limit` (at most [`PAGE_MAX`]).
#[derive(Clone, Copy, Debug, Default)]
pub struct Page {
    /// The first series sent.
    pub offset: usize,
    /// How many (default [`PAGE`]).
    pub limit: Option<usize>,
}

impl Page {
    /// How many series this page holds at most.
    pub fn limit(&self) -> usize {
        self.limit.unwrap_or(PAGE).clamp(1, PAGE_MAX)
    }
}
