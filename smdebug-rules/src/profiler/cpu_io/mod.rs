//! CPUBottleneck, IOBottleneck and Dataloader: is the GPU waiting for the host? One file per
//! family: `bottleneck.rs` (the two bottleneck rules share their snapshot judging) and
//! `dataloader.rs`.

mod bottleneck;
mod dataloader;

pub use bottleneck::{
    BottleneckRule, CPUBottleneck, CPUBottleneckParams, IOBottleneck, IOBottleneckParams,
};
pub use dataloader::{Dataloader, DataloaderParams};
