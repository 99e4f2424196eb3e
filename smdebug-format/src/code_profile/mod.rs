//! Code profiles: where a window's files are (`framework/code/...`) and the summary JSON that
//! readers list and show beside the pprof profile and the flame graph.

mod layout;
mod summary;

pub use layout::{
    CODE_PREFIX, CodeProfileFile, FLAMEGRAPH_EXTENSION, PPROF_EXTENSION, SUMMARY_EXTENSION,
    code_profile_base_key, parse_code_profile_key,
};
pub use summary::{
    CodeProfileFiles, CodeProfileSummary, FunctionSamples, SUMMARY_VERSION, ThreadSamples,
    WindowStep,
};
