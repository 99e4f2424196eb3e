#![allow(dead_code)] // each test binary uses its own share of the helpers
pub mod heatmap;
pub mod model;
pub mod transformer;
