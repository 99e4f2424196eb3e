//! Arbitrary text as SageMaker's hook-config file (`debughookconfig.json`): never a panic; an
//! error names the file; a file that reads has a schedule that smdebug's JSON form writes and
//! reads back unchanged, deciding every step as before. (Laying the file over a configuration
//! from code, `HookConfigFile::over`, runs the same parser over another base: left out, as it
//! halves the executions a second.)
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use smdebug_core::{Mode, SaveConfig};
use smdebug_io::sagemaker::HookConfigFile;

const PATH: &str = "/opt/ml/input/config/debughookconfig.json";

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match HookConfigFile::parse(Path::new(PATH), text.to_string()) {
        Ok(file) => {
            let schedule = &file.config().save_config;
            let back: SaveConfig = serde_json::from_value(schedule.to_smdebug_json())
                .expect("a schedule reads back from its own JSON");
            assert_eq!(&back, schedule);
            for mode in Mode::ALL {
                for step in [0, 1, 2, 499, 500, 1 << 40, u64::MAX] {
                    assert_eq!(
                        back.should_save(mode, step),
                        schedule.should_save(mode, step)
                    );
                }
            }
        }
        Err(e) => assert!(e.to_string().contains(PATH), "{e}"),
    }
});
