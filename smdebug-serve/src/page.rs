//! Pages of series: the views that could list thousands of series (`/system`, `/scalars`)
//! send one page at a time, so that every response is bounded.

/// Series sent per request by default; the rest are asked for by page.
pub const PAGE: usize = 64;

/// Series sent per request at most.
pub const PAGE_MAX: usize = 256;

/// A page of series: `offset` and `limit` (at most [`PAGE_MAX`]), from the query string.
#[derive(Clone, Copy, Debug, Default, serde::Deserialize)]
#[serde(default)]
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

    /// This page of `items`, each made by `make` (only those on the page are made), and how
    /// many items there were in all.
    pub fn select<T, R>(
        &self,
        items: impl Iterator<Item = T>,
        mut make: impl FnMut(T) -> R,
    ) -> (Vec<R>, usize) {
        let limit = self.limit();
        let mut page = Vec::new();
        let mut total = 0usize;
        for item in items {
            if total >= self.offset && page.len() < limit {
                page.push(make(item));
            }
            total += 1;
        }
        (page, total)
    }

    /// Where the next page starts when this one shows `shown` of `total` items; `None` after
    /// the last.
    pub fn next_offset(&self, shown: usize, total: usize) -> Option<usize> {
        let end = self.offset.saturating_add(shown);
        (end < total).then_some(end)
    }
}
