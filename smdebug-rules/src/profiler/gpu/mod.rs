//! LowGPUUtilization, BatchSize, GPUMemoryIncrease and LoadBalancing: how the GPUs are used.
//! One file per rule; `common.rs` holds what they share.

mod batch_size;
mod common;
mod load_balancing;
mod low_utilization;
mod memory_increase;

pub use batch_size::{BatchSize, BatchSizeParams};
pub use load_balancing::{LoadBalancing, LoadBalancingParams};
pub use low_utilization::{LowGPUUtilization, LowGPUUtilizationParams};
pub use memory_increase::{GPUMemoryIncrease, GPUMemoryIncreaseParams};
