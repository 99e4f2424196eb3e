//! What the workspace's tests share, written once: the memory tests' counting allocator
//! ([`alloc`]), builders of the runs tests read back ([`runs`]), a folder's contents to compare
//! before and after and folders copied whole ([`files`]), storage that counts or holds the
//! calls a reader or writer makes ([`storage`]), headless Chromium driven over the DevTools
//! protocol for the browser tests ([`chromium`]), and parts of the report's page ([`pages`]).
//!
//! Not published, and a dev-dependency only: no library crate of the workspace depends on it.

pub mod alloc;
pub mod chromium;
pub mod files;
pub mod pages;
pub mod runs;
pub mod storage;
