//! String tensors (TensorFlow's `DT_STRING`): a shape and one byte string per element.
//!
//! Python smdebug's XGBoost hook saves the text columns of its trees (`trees/Feature`,
//! `trees/Yes`, ...) so, and any hook saves a numpy array of `str` so. The elements are bytes
//! (TensorFlow strings are); smdebug writes and reads them as UTF-8.

use crate::error::{Error, Result};

/// Bytes one element costs beyond its own bytes when held as a [`StringTensor`] (a `Vec<u8>`'s
/// pointer, length and capacity): what a reader counts, with the bytes, against its budget.
pub const STRING_ELEMENT_OVERHEAD: u64 = std::mem::size_of::<Vec<u8>>() as u64;

/// A tensor of byte strings, row-major.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StringTensor {
    shape: Vec<usize>,
    values: Vec<Vec<u8>>,
}

impl StringTensor {
    /// A tensor of `shape` holding `values` (as many as the shape has elements).
    pub fn new(shape: Vec<usize>, values: Vec<Vec<u8>>) -> Result<StringTensor> {
        let elements = shape
            .iter()
            .try_fold(1usize, |n, d| n.checked_mul(*d))
            .ok_or_else(|| Error::InvalidTensor(format!("shape {shape:?} overflows")))?;
        if elements != values.len() {
            return Err(Error::InvalidTensor(format!(
                "{} strings for shape {shape:?} ({elements} elements)",
                values.len()
            )));
        }
        Ok(StringTensor { shape, values })
    }

    /// A 1-D tensor of UTF-8 strings (what smdebug's writers save a numpy `str` array as).
    pub fn from_strs<S: AsRef<str>>(values: &[S]) -> StringTensor {
        StringTensor {
            shape: vec![values.len()],
            values: values
                .iter()
                .map(|s| s.as_ref().as_bytes().to_vec())
                .collect(),
        }
    }

    /// The dimensions, outermost first (empty for a scalar).
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// The elements, row-major.
    pub fn values(&self) -> &[Vec<u8>] {
        &self.values
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// Whether the tensor has no element.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// The elements as UTF-8 text; the first element that is not UTF-8 is the error.
    pub fn to_strings(&self) -> Result<Vec<String>> {
        self.values
            .iter()
            .enumerate()
            .map(|(i, v)| {
                String::from_utf8(v.clone()).map_err(|e| {
                    Error::InvalidTensor(format!("string element {i} is not UTF-8: {e}"))
                })
            })
            .collect()
    }

    /// Bytes the tensor holds in memory: its strings and their per-element overhead.
    pub fn held_bytes(&self) -> u64 {
        self.values
            .iter()
            .map(|v| v.len() as u64 + STRING_ELEMENT_OVERHEAD)
            .sum()
    }

    /// Bytes numpy needs for this tensor as a fixed-width unicode array (what Python smdebug
    /// returns, `<U{longest}`: four bytes per character of the longest element, at least one),
    /// or `None` when an element is not UTF-8. A reader checks it against its budget before
    /// making that array.
    pub fn unicode_array_bytes(&self) -> Option<u64> {
        let mut longest = 1u64;
        for v in &self.values {
            longest = longest.max(std::str::from_utf8(v).ok()?.chars().count() as u64);
        }
        Some(
            longest
                .saturating_mul(4)
                .saturating_mul(self.values.len() as u64),
        )
    }

    /// Gives up the elements without copying.
    pub fn into_values(self) -> Vec<Vec<u8>> {
        self.values
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_string_tensor_holds_as_many_strings_as_its_shape() {
        let t = StringTensor::new(vec![2, 2], vec![b"a".to_vec(); 4]).unwrap();
        assert_eq!((t.shape(), t.len()), (&[2, 2][..], 4));
        assert!(StringTensor::new(vec![3], vec![b"a".to_vec(); 2]).is_err());
        assert!(StringTensor::new(vec![usize::MAX, 2], Vec::new()).is_err());
        let scalar = StringTensor::new(Vec::new(), vec![b"x".to_vec()]).unwrap();
        assert_eq!(scalar.len(), 1);
    }

    #[test]
    fn text_and_sizes() {
        let t = StringTensor::from_strs(&["", "é", "∑∑∑"]);
        assert_eq!(t.shape(), [3]);
        assert_eq!(t.to_strings().unwrap(), ["", "é", "∑∑∑"]);
        // numpy's <U3: three 4-byte characters per element.
        assert_eq!(t.unicode_array_bytes(), Some(3 * 4 * 3));
        // "" + "é" (2 bytes) + "∑∑∑" (9 bytes), and each element's overhead.
        assert_eq!(t.held_bytes(), 2 + 9 + 3 * STRING_ELEMENT_OVERHEAD);
        // An empty or all-empty array is still `<U1` in numpy.
        assert_eq!(
            StringTensor::from_strs(&[""]).unicode_array_bytes(),
            Some(4)
        );
        let bad = StringTensor::new(vec![1], vec![vec![0xff]]).unwrap();
        assert!(bad.to_strings().is_err());
        assert_eq!(bad.unicode_array_bytes(), None);
    }
}
