//! Per-GPU metrics through NVIDIA's management library (NVML).
//!
//! The library is loaded when a sampler starts, not when the program starts: a machine without
//! `libnvidia-ml.so`, without a driver or without GPUs gets host metrics only, and the reason is
//! logged once per process at `info` level ("no GPU"). Without the `nvml` feature the same
//! happens without trying to load anything.

use std::sync::Once;

use smdebug_format::system::SystemSample;

static NO_GPU_LOGGED: Once = Once::new();

fn log_no_gpu(reason: &str) {
    NO_GPU_LOGGED.call_once(|| {
        log::info!("smdebug-profiler: no GPU ({reason}); sampling host metrics only")
    });
}

/// The GPUs of this host, or none.
pub(crate) struct GpuProbe {
    #[cfg(feature = "nvml")]
    nvml: Option<nvml_wrapper::Nvml>,
    count: u32,
}

impl GpuProbe {
    /// A probe without GPUs (GPU sampling switched off).
    pub(crate) fn disabled() -> Self {
        Self {
            #[cfg(feature = "nvml")]
            nvml: None,
            count: 0,
        }
    }

    /// Loads NVML and counts devices; any failure leaves a probe without GPUs.
    #[cfg(feature = "nvml")]
    pub(crate) fn load() -> Self {
        let nvml = match nvml_wrapper::Nvml::init() {
            Ok(nvml) => nvml,
            Err(e) => {
                log_no_gpu(&format!("NVML not available: {e}"));
                return Self::disabled();
            }
        };
        match nvml.device_count() {
            Ok(0) => {
                log_no_gpu("NVML reports no devices");
                Self::disabled()
            }
            Ok(count) => Self {
                nvml: Some(nvml),
                count,
            },
            Err(e) => {
                log_no_gpu(&format!("NVML cannot count devices: {e}"));
                Self::disabled()
            }
        }
    }

    /// Without the `nvml` feature there is nothing to load. A host that has NVIDIA GPUs is told
    /// so as a warning: its GPU metrics are being left out by the build, not by the machine.
    #[cfg(not(feature = "nvml"))]
    pub(crate) fn load() -> Self {
        if has_nvidia_devices() {
            NO_GPU_LOGGED.call_once(|| {
                log::warn!(
                    "smdebug-profiler: this host has NVIDIA GPUs, but this build samples no GPU \
                     metrics: enable smdebug's `gpu` feature (smdebug-profiler's `nvml`)"
                )
            });
        } else {
            log_no_gpu("built without the `nvml` feature");
        }
        Self::disabled()
    }

    /// How many GPUs are sampled.
    pub(crate) fn device_count(&self) -> u32 {
        self.count
    }

    /// Appends one record per available metric of every GPU. A metric a device does not
    /// support (power on some boards, say) is left out rather than reported as zero.
    #[cfg(feature = "nvml")]
    pub(crate) fn sample(&self, node: &str, timestamp: f64, out: &mut Vec<SystemSample>) {
        use nvml_wrapper::enum_wrappers::device::TemperatureSensor;
        use smdebug_format::system::vocab;
        let Some(nvml) = &self.nvml else { return };
        for index in 0..self.count {
            let Ok(device) = nvml.device_by_index(index) else {
                continue;
            };
            let name = format!("gpu{index}");
            let mut push = |dimension: &str, value: f64| {
                out.push(SystemSample {
                    metric_type: smdebug_format::system::vocab::TYPE_GPU.to_owned(),
                    name: name.clone(),
                    dimension: dimension.to_owned(),
                    value,
                    node_id: node.to_owned(),
                    timestamp,
                });
            };
            if let Ok(rates) = device.utilization_rates() {
                push(vocab::GPU_UTILIZATION, f64::from(rates.gpu));
            }
            if let Ok(memory) = device.memory_info() {
                if memory.total > 0 {
                    let percent = memory.used as f64 * 100.0 / memory.total as f64;
                    push(
                        vocab::GPU_MEMORY_UTILIZATION,
                        smdebug_format::system::round2(percent),
                    );
                }
                push(vocab::GPU_MEMORY_USED_BYTES, memory.used as f64);
                push(vocab::GPU_MEMORY_TOTAL_BYTES, memory.total as f64);
            }
            if let Ok(milliwatts) = device.power_usage() {
                push(vocab::GPU_POWER_WATTS, f64::from(milliwatts) / 1000.0);
            }
            if let Ok(celsius) = device.temperature(TemperatureSensor::Gpu) {
                push(vocab::GPU_TEMPERATURE_CELSIUS, f64::from(celsius));
            }
        }
    }

    /// Without the `nvml` feature there are no GPUs to sample.
    #[cfg(not(feature = "nvml"))]
    pub(crate) fn sample(&self, _node: &str, _timestamp: f64, _out: &mut Vec<SystemSample>) {}
}

/// Whether the NVIDIA driver shows any GPU on this host (`/proc/driver/nvidia/gpus/*`, or a
/// `/dev/nvidia0` device node in a container that does not mount the driver's proc files).
#[cfg(not(feature = "nvml"))]
fn has_nvidia_devices() -> bool {
    let listed = std::fs::read_dir("/proc/driver/nvidia/gpus")
        .map(|mut entries| entries.next().is_some())
        .unwrap_or(false);
    listed || std::path::Path::new("/dev/nvidia0").exists()
}
