//! placeholder

pub mod kineto;

pub use kineto::{
    KinetoError, RankSummary, TraceReport, render_text, summarize_reader, summarize_trace,
    summarize_traces,
};
