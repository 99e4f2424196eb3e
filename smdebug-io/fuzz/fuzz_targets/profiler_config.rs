//! Arbitrary text as SageMaker's profiler-config file (`profilerconfig.json`): never a panic;
//! an error names the file; a file that reads gives windows, a span writer's and a sampler's
//! settings over the code's without a panic.
#![no_main]

use std::path::Path;
use std::time::{Duration, UNIX_EPOCH};

use libfuzzer_sys::fuzz_target;
use smdebug_core::timeline::{Profiling, TimelineConfig};
use smdebug_core::window::WindowState;
use smdebug_profiler::config::ProfilerConfig;
use smdebug_profiler::spans::SpanConfig;
use smdebug_profiler::system::SamplerConfig;

const PATH: &str = "/opt/ml/input/config/profilerconfig.json";

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match ProfilerConfig::from_json_in(text, Path::new(PATH)) {
        Ok(config) => {
            let windows = config.windows_over(&TimelineConfig::default());
            for p in Profiling::ALL {
                let mut state = WindowState::new(windows.window(p).clone());
                for step in [0, 1, 5, 1 << 40, u64::MAX] {
                    let now = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
                    let _ = state.contains(step, now);
                    let _ = state.is_over(step, now);
                }
            }
            if let Err(e) = config.span_config(SpanConfig::default()) {
                assert!(!e.to_string().is_empty());
            }
            if let Err(e) = config.sampler_config(SamplerConfig::default()) {
                assert!(!e.to_string().is_empty());
            }
            let _ = config.dataloader_metrics();
            let _ = config.system_profiling_off();
        }
        Err(e) => assert!(e.to_string().contains(PATH), "{e}"),
    }
});
