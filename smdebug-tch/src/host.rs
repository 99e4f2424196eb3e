//! Copies to the host: libtorch element types to smdebug dtypes, and one device-to-host copy per
//! element type and step for a batch of tensors.

use smdebug_core::DType;
use tch::{Device, Kind, Tensor};

use crate::error::{Error, Result, TorchContext};

/// The smdebug dtype a libtorch element type is recorded as: the same type for every type
/// smdebug has; 8-bit floats are widened to `f32` (smdebug has no 8-bit float); complex and
/// quantized tensors cannot be recorded.
pub fn recorded_dtype(kind: Kind) -> Option<(DType, Kind)> {
    Some(match kind {
        Kind::Uint8 => (DType::U8, kind),
        Kind::Int8 => (DType::I8, kind),
        Kind::Int16 => (DType::I16, kind),
        Kind::Int => (DType::I32, kind),
        Kind::Int64 => (DType::I64, kind),
        Kind::Half => (DType::F16, kind),
        Kind::BFloat16 => (DType::BF16, kind),
        Kind::Float => (DType::F32, kind),
        Kind::Double => (DType::F64, kind),
        Kind::Bool => (DType::Bool, kind),
        Kind::Float8e5m2 | Kind::Float8e4m3fn | Kind::Float8e5m2fnuz | Kind::Float8e4m3fnuz => {
            (DType::F32, Kind::Float)
        }
        _ => return None,
    })
}

/// A tensor copied to host memory, ready to become a `TensorView`.
#[derive(Debug)]
pub(crate) struct HostTensor {
    pub dtype: DType,
    pub shape: Vec<usize>,
    pub bytes: Vec<u8>,
}

/// Copies `tensors` (name, tensor) to the host. Tensors on an accelerator are flattened,
/// concatenated per element type on the device and copied with one transfer per type; tensors
/// already on the CPU are read directly. Results come back in the input order.
pub(crate) fn to_host(tensors: &[(String, Tensor)]) -> Vec<Result<HostTensor>> {
    let mut out: Vec<Option<Result<HostTensor>>> = tensors.iter().map(|_| None).collect();
    // Group accelerator tensors by (device, recorded kind).
    let mut groups: Vec<((Device, Kind), Vec<usize>)> = Vec::new();
    for (i, (name, t)) in tensors.iter().enumerate() {
        let Some((dtype, kind)) = recorded_dtype(t.kind()) else {
            out[i] = Some(Err(Error::UnsupportedKind {
                tensor: name.clone(),
                kind: t.kind(),
            }));
            continue;
        };
        if t.device() == Device::Cpu {
            out[i] = Some(cpu_copy(name, t, dtype, kind));
            continue;
        }
        match groups.iter_mut().find(|(k, _)| *k == (t.device(), kind)) {
            Some((_, members)) => members.push(i),
            None => groups.push(((t.device(), kind), vec![i])),
        }
    }
    for ((_, kind), members) in groups {
        let dtype = recorded_dtype(kind).map(|d| d.0).unwrap_or(DType::F32);
        let first = &tensors[members[0]].0;
        let flat: std::result::Result<Vec<Tensor>, tch::TchError> = members
            .iter()
            .map(|&i| tensors[i].1.detach().f_to_kind(kind)?.f_reshape([-1]))
            .collect();
        let joined = flat
            .and_then(|f| Tensor::f_cat(&f, 0))
            .and_then(|t| t.f_to_device(Device::Cpu))
            .context(first);
        match joined {
            Ok(host) => {
                let mut all = vec![0u8; host.numel() * dtype.size()];
                if let Err(e) = host.f_copy_data_u8(&mut all, host.numel()).context(first) {
                    for &i in &members {
                        out[i] = Some(Err(Error::Torch {
                            tensor: tensors[i].0.clone(),
                            source: tch::TchError::Torch(e.to_string()),
                        }));
                    }
                    continue;
                }
                let mut at = 0;
                for &i in &members {
                    let t = &tensors[i].1;
                    let len = t.numel() * dtype.size();
                    out[i] = Some(Ok(HostTensor {
                        dtype,
                        shape: shape_of(t),
                        bytes: all[at..at + len].to_vec(),
                    }));
                    at += len;
                }
            }
            Err(e) => {
                let message = e.to_string();
                for &i in &members {
                    out[i] = Some(Err(Error::Torch {
                        tensor: tensors[i].0.clone(),
                        source: tch::TchError::Torch(message.clone()),
                    }));
                }
            }
        }
    }
    out.into_iter()
        .map(|r| r.expect("every tensor was handled"))
        .collect()
}

fn cpu_copy(name: &str, t: &Tensor, dtype: DType, kind: Kind) -> Result<HostTensor> {
    let t = if t.kind() == kind {
        t.detach()
    } else {
        t.detach().f_to_kind(kind).context(name)?
    };
    let t = t.f_contiguous().context(name)?;
    let mut bytes = vec![0u8; t.numel() * dtype.size()];
    t.f_copy_data_u8(&mut bytes, t.numel()).context(name)?;
    Ok(HostTensor {
        dtype,
        shape: shape_of(&t),
        bytes,
    })
}

fn shape_of(t: &Tensor) -> Vec<usize> {
    t.size().into_iter().map(|d| d.max(0) as usize).collect()
}
