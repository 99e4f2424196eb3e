//! What a code profiler did ([`CodeProfileReport`]) and how many windows may wait for its
//! writer.

/// What a [`CodeProfiler`](crate::code::CodeProfiler) did, from [`CodeProfiler::report`](crate::code::CodeProfiler::report) or [`CodeProfiler::finish`](crate::code::CodeProfiler::finish).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CodeProfileReport {
    /// Windows opened by [`CodeProfiler::begin`](crate::code::CodeProfiler::begin).
    pub windows: u64,
    /// Windows whose files were all written.
    pub written: u64,
    /// Windows that could not be sampled (another sampler held the process's timer) or whose
    /// files could not all be written.
    pub failed: u64,
    /// Samples in the written windows.
    pub samples: u64,
    /// Files written.
    pub files: u64,
    /// The last failure, if any.
    pub last_error: Option<String>,
}

/// Windows that may wait for the writer; a `begin` beyond them is refused
/// ([`ProfilerError::CodeProfileBacklog`](crate::system::ProfilerError::CodeProfileBacklog)).
pub const MAX_PENDING_WINDOWS: u64 = 2;
