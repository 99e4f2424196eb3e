//! CPUBottleneck, IOBottleneck and Dataloader: is the GPU waiting for the host?
//!
//! `bottleneck.rs` holds CPUBottleneck and IOBottleneck (one engine), `dataloader.rs`
//! Dataloader.

mod bottleneck;
mod dataloader;

pub use bottleneck::{CPUBottleneck, CPUBottleneckParams, IOBottleneck, IOBottleneckParams};
pub use dataloader::{Dataloader, DataloaderParams};
