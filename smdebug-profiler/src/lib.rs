//! placeholder

pub mod kineto;
pub mod reader;
pub mod spans;
pub mod system;

pub use kineto::{
    KinetoError, RankSummary, TraceReport, render_text, summarize_reader, summarize_trace,
    summarize_traces,
};
pub use system::{ProfilerError, profile_command};
