//! Headless Chromium for the browser tests: where the binary is, one page attached over the
//! DevTools protocol (`Cdp`, with the `devtools` feature) at the size a test looks at it, or one
//! run of the browser on its command line (`--dump-dom`, `--screenshot`) for a page that needs
//! no driving.

#[cfg(feature = "devtools")]
mod cdp;
mod headless;
#[cfg(feature = "devtools")]
mod page;

use std::path::PathBuf;

#[cfg(feature = "devtools")]
pub use cdp::{Browser, Cdp};
pub use headless::run_headless;
#[cfg(feature = "devtools")]
pub use page::{SCREEN, open, open_page};

/// `/usr/bin/chromium`; `None` (the test skips) when it is missing and `SMDEBUG_SKIP_BROWSER=1`,
/// a panic saying how to install it when it is missing otherwise.
pub fn binary() -> Option<PathBuf> {
    let path = PathBuf::from("/usr/bin/chromium");
    if path.exists() {
        return Some(path);
    }
    if std::env::var("SMDEBUG_SKIP_BROWSER").as_deref() == Ok("1") {
        eprintln!("SMDEBUG_SKIP_BROWSER=1: skipping the browser checks");
        return None;
    }
    panic!(
        "/usr/bin/chromium is missing: run `bash .ci/setup-browser` (apt-get install chromium), \
         or set SMDEBUG_SKIP_BROWSER=1 to skip the browser checks"
    );
}
