//! Tensor views: a dtype, a shape and little-endian bytes, borrowed from the training loop or owned.
//!
//! A [`TensorView`] borrows when it can (a contiguous slice or ndarray) and copies only when it must
//! (a non-contiguous array). The hook turns a due view into an owned [`Tensor`] that is handed to
//! the writer thread; nothing is copied for tensors that are not due.

use std::borrow::Cow;

use half::{bf16, f16};
use ndarray::{ArrayBase, ArrayD, Data, Dimension, IxDyn};

use crate::dtype::DType;
use crate::error::{Error, Result};

/// The accessors [`TensorView`] and [`Tensor`] share (both hold `dtype`, `shape` and `data`).
macro_rules! accessors {
    () => {
        /// The element type.
        pub fn dtype(&self) -> DType {
            self.dtype
        }

        /// The dimensions (empty for a scalar).
        pub fn shape(&self) -> &[usize] {
            &self.shape
        }

        /// Little-endian row-major bytes.
        pub fn bytes(&self) -> &[u8] {
            &self.data
        }

        /// Number of elements.
        pub fn len(&self) -> usize {
            self.data.len() / self.dtype.size()
        }

        /// Whether it has no elements.
        pub fn is_empty(&self) -> bool {
            self.data.is_empty()
        }
    };
}

/// A Rust element type that maps to one [`DType`].
///
/// Implemented for `f32`, `f64`, `half::f16`, `half::bf16`, all fixed-size integers and `bool`.
pub trait Element: bytemuck::NoUninit + Copy + Send + Sync + 'static {
    /// The dtype this element type is stored as.
    const DTYPE: DType;
    /// Reads one element from little-endian bytes (`bytes.len() == DTYPE.size()`).
    fn read_le(bytes: &[u8]) -> Self;
    /// The value as `f64` (exact for every type but the 64-bit integers beyond 2^53).
    fn to_f64(self) -> f64;
}

macro_rules! impl_element_num {
    ($($t:ty => $d:expr),* $(,)?) => {$(
        impl Element for $t {
            const DTYPE: DType = $d;
            fn read_le(bytes: &[u8]) -> Self {
                <$t>::from_le_bytes(bytes.try_into().expect("element width"))
            }
            fn to_f64(self) -> f64 {
                self as f64
            }
        }
    )*};
}

impl_element_num!(
    f32 => DType::F32, f64 => DType::F64,
    i8 => DType::I8, i16 => DType::I16, i32 => DType::I32, i64 => DType::I64,
    u8 => DType::U8, u16 => DType::U16, u32 => DType::U32, u64 => DType::U64,
);

/// The two 16-bit float types, read from their bit patterns.
macro_rules! impl_element_half {
    ($($t:ty => $d:expr),* $(,)?) => {$(
        impl Element for $t {
            const DTYPE: DType = $d;
            fn read_le(bytes: &[u8]) -> Self {
                <$t>::from_bits(u16::from_le_bytes(bytes.try_into().expect("element width")))
            }
            fn to_f64(self) -> f64 {
                f64::from(self)
            }
        }
    )*};
}

impl_element_half!(f16 => DType::F16, bf16 => DType::BF16);

impl Element for bool {
    const DTYPE: DType = DType::Bool;
    fn read_le(bytes: &[u8]) -> Self {
        bytes[0] != 0
    }
    fn to_f64(self) -> f64 {
        if self { 1.0 } else { 0.0 }
    }
}

/// Reads element `i` of little-endian `bytes` of dtype `dtype` as `f64`.
#[inline]
fn element_f64(dtype: DType, bytes: &[u8], i: usize) -> f64 {
    let w = dtype.size();
    let b = &bytes[i * w..(i + 1) * w];
    match dtype {
        DType::F16 => f16::read_le(b).to_f64(),
        DType::BF16 => bf16::read_le(b).to_f64(),
        DType::F32 => f32::read_le(b).to_f64(),
        DType::F64 => f64::read_le(b),
        DType::I8 => i8::read_le(b).to_f64(),
        DType::I16 => i16::read_le(b).to_f64(),
        DType::I32 => i32::read_le(b).to_f64(),
        DType::I64 => i64::read_le(b).to_f64(),
        DType::U8 => u8::read_le(b).to_f64(),
        DType::U16 => u16::read_le(b).to_f64(),
        DType::U32 => u32::read_le(b).to_f64(),
        DType::U64 => u64::read_le(b).to_f64(),
        DType::Bool => bool::read_le(b).to_f64(),
    }
}

/// Converts little-endian `bytes` of `dtype` to `f64`, one loop per dtype: the dtype is matched
/// once, not per element, so each loop is a plain conversion the compiler vectorizes (reading a
/// run converts tens of millions of elements).
fn bytes_to_f64(dtype: DType, bytes: &[u8]) -> Vec<f64> {
    fn convert<T: Element>(bytes: &[u8]) -> Vec<f64> {
        bytes
            .chunks_exact(std::mem::size_of::<T>())
            .map(|b| T::read_le(b).to_f64())
            .collect()
    }
    match dtype {
        DType::F16 => convert::<f16>(bytes),
        DType::BF16 => convert::<bf16>(bytes),
        DType::F32 => convert::<f32>(bytes),
        DType::F64 => convert::<f64>(bytes),
        DType::I8 => convert::<i8>(bytes),
        DType::I16 => convert::<i16>(bytes),
        DType::I32 => convert::<i32>(bytes),
        DType::I64 => convert::<i64>(bytes),
        DType::U8 => convert::<u8>(bytes),
        DType::U16 => convert::<u16>(bytes),
        DType::U32 => convert::<u32>(bytes),
        DType::U64 => convert::<u64>(bytes),
        DType::Bool => convert::<bool>(bytes),
    }
}

fn checked_len(dtype: DType, shape: &[usize], bytes: usize) -> Result<()> {
    let elements = shape
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| Error::InvalidTensor(format!("shape {shape:?} overflows")))?;
    let expected = elements
        .checked_mul(dtype.size())
        .ok_or_else(|| Error::InvalidTensor(format!("shape {shape:?} overflows")))?;
    if expected != bytes {
        return Err(Error::InvalidTensor(format!(
            "{elements} elements of {dtype} need {expected} bytes, got {bytes}"
        )));
    }
    Ok(())
}

/// A tensor the training loop lends to the hook: dtype, shape and little-endian row-major bytes.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorView<'a> {
    dtype: DType,
    shape: Cow<'a, [usize]>,
    data: Cow<'a, [u8]>,
}

impl<'a> TensorView<'a> {
    /// A view over raw little-endian bytes; fails when the byte count does not match the shape.
    pub fn from_bytes(dtype: DType, shape: &'a [usize], data: &'a [u8]) -> Result<Self> {
        checked_len(dtype, shape, data.len())?;
        Ok(TensorView {
            dtype,
            shape: Cow::Borrowed(shape),
            data: Cow::Borrowed(data),
        })
    }

    /// A view over a slice of elements in row-major order.
    pub fn from_slice<T: Element>(data: &'a [T], shape: &[usize]) -> Result<Self> {
        let bytes: &[u8] = bytemuck::cast_slice(data);
        checked_len(T::DTYPE, shape, bytes.len())?;
        Ok(TensorView {
            dtype: T::DTYPE,
            shape: Cow::Owned(shape.to_vec()),
            data: Cow::Borrowed(bytes),
        })
    }

    /// A one-element view of a scalar (shape `[]`), e.g. a loss.
    pub fn scalar<T: Element>(value: T) -> TensorView<'static> {
        TensorView {
            dtype: T::DTYPE,
            shape: Cow::Owned(Vec::new()),
            data: Cow::Owned(bytemuck::bytes_of(&value).to_vec()),
        }
    }

    /// A view of an ndarray: borrowed when the array is in standard (row-major, contiguous)
    /// layout, copied into row-major order otherwise.
    pub fn from_ndarray<T, S, D>(array: &'a ArrayBase<S, D>) -> Self
    where
        T: Element,
        S: Data<Elem = T>,
        D: Dimension,
    {
        let shape = Cow::Owned(array.shape().to_vec());
        let data = match array.as_slice() {
            Some(slice) => Cow::Borrowed(bytemuck::cast_slice(slice)),
            None => {
                let copied: Vec<T> = array.iter().copied().collect();
                Cow::Owned(bytemuck::cast_slice(&copied).to_vec())
            }
        };
        TensorView {
            dtype: T::DTYPE,
            shape,
            data,
        }
    }

    accessors!();

    /// Element `i` (row-major) as `f64`.
    pub fn get_f64(&self, i: usize) -> f64 {
        element_f64(self.dtype, &self.data, i)
    }

    /// Iterates the elements as `f64`.
    pub fn iter_f64(&self) -> impl ExactSizeIterator<Item = f64> + '_ {
        (0..self.len()).map(move |i| element_f64(self.dtype, &self.data, i))
    }

    /// Copies the view into an owned tensor that can cross threads.
    pub fn to_owned(&self) -> Tensor {
        Tensor {
            dtype: self.dtype,
            shape: self.shape.to_vec(),
            data: self.data.to_vec(),
        }
    }
}

/// An owned tensor: what the hook hands to the writer and what readers return.
#[derive(Clone, Debug, PartialEq)]
pub struct Tensor {
    dtype: DType,
    shape: Vec<usize>,
    data: Vec<u8>,
}

impl Tensor {
    /// An owned tensor from little-endian bytes; fails when the byte count does not match.
    pub fn from_bytes(dtype: DType, shape: Vec<usize>, data: Vec<u8>) -> Result<Self> {
        checked_len(dtype, &shape, data.len())?;
        Ok(Tensor { dtype, shape, data })
    }

    /// An owned tensor from elements in row-major order.
    pub fn from_vec<T: Element>(values: &[T], shape: Vec<usize>) -> Result<Self> {
        Tensor::from_bytes(T::DTYPE, shape, bytemuck::cast_slice(values).to_vec())
    }

    /// A scalar `f64` tensor (shape `[]`), the form reductions are stored in.
    pub fn scalar_f64(value: f64) -> Self {
        Tensor {
            dtype: DType::F64,
            shape: Vec::new(),
            data: value.to_le_bytes().to_vec(),
        }
    }

    accessors!();

    /// Gives up the bytes without copying.
    pub fn into_bytes(self) -> Vec<u8> {
        self.data
    }

    /// A borrowed view of this tensor.
    pub fn view(&self) -> TensorView<'_> {
        TensorView {
            dtype: self.dtype,
            shape: Cow::Borrowed(&self.shape),
            data: Cow::Borrowed(&self.data),
        }
    }

    /// The values as `f64`, row-major.
    pub fn to_f64_vec(&self) -> Vec<f64> {
        bytes_to_f64(self.dtype, &self.data)
    }

    /// The tensor as an `f64` ndarray (every dtype converts; 64-bit integers beyond 2^53 round).
    pub fn to_array_f64(&self) -> ArrayD<f64> {
        ArrayD::from_shape_vec(IxDyn(&self.shape), self.to_f64_vec())
            .expect("shape was checked at construction")
    }

    /// The tensor as an ndarray of its own element type; fails when `T` is not its dtype.
    pub fn to_array<T: Element>(&self) -> Result<ArrayD<T>> {
        if T::DTYPE != self.dtype {
            return Err(Error::InvalidTensor(format!(
                "tensor holds {}, asked for {}",
                self.dtype,
                T::DTYPE
            )));
        }
        let w = self.dtype.size();
        let values: Vec<T> = self.data.chunks_exact(w).map(T::read_le).collect();
        Ok(ArrayD::from_shape_vec(IxDyn(&self.shape), values).expect("shape was checked"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::{Array2, array};

    #[test]
    fn contiguous_ndarray_is_borrowed_not_copied() {
        let a = Array2::<f32>::from_shape_fn((3, 4), |(i, j)| (i * 4 + j) as f32);
        let v = TensorView::from_ndarray(&a);
        assert!(matches!(v.data, Cow::Borrowed(_)));
        assert_eq!(v.shape(), &[3, 4]);
        assert_eq!(v.get_f64(5), 5.0);
    }

    #[test]
    fn transposed_ndarray_is_copied_in_row_major_order() {
        let a = array![[1i32, 2], [3, 4]];
        let t = a.t();
        let v = TensorView::from_ndarray(&t);
        assert_eq!(v.iter_f64().collect::<Vec<_>>(), vec![1.0, 3.0, 2.0, 4.0]);
    }

    #[test]
    fn byte_count_must_match_shape() {
        let err = TensorView::from_bytes(DType::F32, &[2, 2], &[0u8; 12]).unwrap_err();
        assert!(err.to_string().contains("need 16 bytes, got 12"), "{err}");
        assert!(TensorView::from_slice(&[1.0f64, 2.0], &[3]).is_err());
    }

    #[test]
    fn half_and_bool_round_trip_through_owned_arrays() {
        let h = [f16::from_f32(1.5), f16::from_f32(-2.0)];
        let t = TensorView::from_slice(&h, &[2]).unwrap().to_owned();
        assert_eq!(t.to_array::<f16>().unwrap().as_slice().unwrap(), &h);
        assert_eq!(t.to_f64_vec(), vec![1.5, -2.0]);
        let b = TensorView::from_slice(&[true, false, true], &[3])
            .unwrap()
            .to_owned();
        assert_eq!(b.to_f64_vec(), vec![1.0, 0.0, 1.0]);
        assert!(b.to_array::<u8>().is_err());
    }

    #[test]
    fn every_dtype_converts_to_f64_as_each_element_does() {
        fn check<T: Element>(values: &[T]) {
            let t = TensorView::from_slice(values, &[values.len()])
                .unwrap()
                .to_owned();
            let expected: Vec<f64> = values.iter().map(|v| v.to_f64()).collect();
            assert_eq!(t.to_f64_vec(), expected, "{}", T::DTYPE);
            let view = TensorView::from_slice(values, &[values.len()]).unwrap();
            assert_eq!(
                view.iter_f64().collect::<Vec<_>>(),
                expected,
                "{}",
                T::DTYPE
            );
        }
        check(&[1.5f32, -0.25, f32::MAX, f32::MIN_POSITIVE]);
        check(&[1e300f64, -2.5, 0.0]);
        check(&[f16::from_f32(0.5), f16::MAX]);
        check(&[bf16::from_f32(-3.0), bf16::from_f32(1e30)]);
        check(&[i8::MIN, 0, i8::MAX]);
        check(&[i16::MIN, i16::MAX]);
        check(&[i32::MIN, 7, i32::MAX]);
        check(&[i64::MIN, -1, i64::MAX]);
        check(&[u8::MAX, 1]);
        check(&[u16::MAX, 2]);
        check(&[u32::MAX, 3]);
        check(&[u64::MAX, 4]);
        check(&[true, false]);
        assert!(
            Tensor::from_vec::<f32>(&[], vec![0])
                .unwrap()
                .to_f64_vec()
                .is_empty()
        );
    }
}
