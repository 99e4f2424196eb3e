//! One-number tensor records read in one pass: the layout every writer of scalars uses
//! (smdebug's hooks, ours and Python's), recognised exactly, and anything else left to the
//! general decoder.
//!
//! A run of scalars is millions of records of ~80 bytes, and a reader of one number needs no
//! shape or tensor made for it. This is the one-pass reader of the common tensor layout
//! (`tensor::one_pass`, which [`decode_tensor_event_ref`](super::tensor::decode_tensor_event_ref)
//! asks first), taken one step further: it answers only when the record's tensor is one element
//! of a numeric dtype in `tensor_content`, every dimension of size 1, and makes nothing but the
//! number. Whatever else it meets gives `None`, and the caller asks the general decoder, which
//! then decides, and reports, exactly as before. A test holds the two to the same answers over
//! real and damaged records.

use smdebug_core::{DType, TensorView};

use crate::tensor::one_pass;
pub use crate::tensor::one_pass::SeenMetadata;

/// What a one-number record holds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Number {
    /// The global step of the event.
    pub step: u64,
    /// The event's wall time, seconds since the epoch.
    pub wall_time: f64,
    /// The one number.
    pub value: f64,
    /// How many dimensions its shape has, each of size 1 (0 for a scalar): the shape the
    /// general decoder gives is this many 1s.
    pub dims: usize,
}

/// The record payload's one number tagged `tag`, when the record has the common layout (see
/// the module docs); `None` leaves the record to the general decoder.
#[cfg(test)]
pub fn read(payload: &[u8], tag: &str) -> Option<Number> {
    read_seen(payload, tag, &mut SeenMetadata::default())
}

/// `read`, the value's metadata read only when its bytes are not those `seen` last found
/// valid.
pub fn read_seen(payload: &[u8], tag: &str, seen: &mut SeenMetadata) -> Option<Number> {
    let p = one_pass::parts(payload, tag, seen)?;
    // One element: every dimension of size 1, its content one element of a numeric dtype.
    if p.dims.iter().any(|&d| d != 1) {
        return None;
    }
    let dtype = DType::from_tf_datatype(p.dtype)?;
    if p.content.len() != dtype.size() {
        return None;
    }
    let value = TensorView::from_bytes(dtype, &[], p.content)
        .ok()?
        .get_f64(0);
    Some(Number {
        step: p.step,
        wall_time: p.wall_time,
        value,
        dims: p.dims.len(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::budget::{Budget, Conversion};
    use crate::record::{PayloadCrcPolicy, RecordIter};
    use crate::tensor::decode_tensor_event_ref;
    use crate::tensor::one_pass::tests::{each_damaged, payload};
    use smdebug_core::Mode;

    /// What the general decoder makes of the record, as this path's answer would be.
    fn general(payload: &[u8], tag: &str) -> Option<Number> {
        let budget = Budget {
            limit: 16,
            conversion: Conversion::F64,
        };
        let event = decode_tensor_event_ref(payload, Some(tag), budget).ok()?;
        let view = TensorView::from_bytes(event.dtype, &event.shape, &event.data).ok()?;
        (view.len() == 1).then(|| Number {
            step: event.step,
            wall_time: event.wall_time,
            value: view.get_f64(0),
            dims: event.shape.len(),
        })
    }

    fn same(a: &Number, b: &Number) -> bool {
        a.step == b.step
            && a.wall_time.to_bits() == b.wall_time.to_bits()
            && a.value.to_bits() == b.value.to_bits()
            && a.dims == b.dims
    }

    /// Whenever this path answers, the general decoder gives the same step, wall time, value
    /// (to the bit) and number of dimensions: on the record as it is, on every one-byte change
    /// of it (six values a byte) and on every truncation; read with the metadata the intact
    /// record left valid, as the records of one file are read.
    fn agrees_under_damage(payload: &[u8], tag: &str) -> usize {
        let mut answered = 0;
        let mut seen = SeenMetadata::default();
        let mut check = |p: &[u8]| {
            if let Some(fast) = read_seen(p, tag, &mut seen) {
                answered += 1;
                let slow = general(p, tag);
                assert!(
                    slow.as_ref().is_some_and(|s| same(s, &fast)),
                    "{tag}: this path read {fast:?}, the general decoder {slow:?}, from {p:02x?}"
                );
            }
        };
        each_damaged(payload, &mut check);
        answered
    }

    #[test]
    fn our_writers_scalars_are_read_in_one_pass() {
        let f64_bytes = 0.125f64.to_le_bytes();
        let f32_bytes = 2.5f32.to_le_bytes();
        let i64_bytes = (-7i64).to_le_bytes();
        let nan_bytes = f32::NAN.to_le_bytes();
        for (dtype, shape, data, want) in [
            (DType::F64, &[][..], &f64_bytes[..], 0.125),
            (DType::F32, &[1, 1][..], &f32_bytes[..], 2.5),
            (DType::I64, &[][..], &i64_bytes[..], -7.0),
            (DType::F32, &[1][..], &nan_bytes[..], f64::NAN),
        ] {
            let p = payload("loss", dtype, shape, data, Mode::Train);
            let n = read(&p, "loss").expect("the common layout");
            assert_eq!((n.step, n.wall_time), (1234, 1_795_760_000.25));
            assert_eq!(n.dims, shape.len());
            assert!(
                n.value == want || (n.value.is_nan() && want.is_nan()),
                "{n:?}"
            );
            assert!(same(&n, &general(&p, "loss").unwrap()));
            assert_eq!(
                read(&p, "los"),
                None,
                "another tag is the general decoder's error"
            );
            assert!(agrees_under_damage(&p, "loss") > 1);
        }
        let two = [1.0f32, 2.0].map(f32::to_le_bytes).concat();
        assert_eq!(
            read(&payload("w", DType::F32, &[2], &two, Mode::Eval), "w"),
            None
        );
    }

    /// Python smdebug's records (the golden runs): every one-number record is read by this
    /// path, alike with the general decoder, and so is every damaged copy this path accepts.
    #[test]
    fn python_smdebugs_records_agree_with_the_general_decoder() {
        let (mut numbers, mut files) = (0, 0);
        for path in crate::test_data::files("golden", "tfevents") {
            files += 1;
            let bytes = std::fs::read(&path).unwrap();
            for record in RecordIter::new(&bytes, 0, PayloadCrcPolicy::AcceptBoth) {
                let Ok(record) = record else { break };
                let Ok(event) = decode_tensor_event_ref(record.payload, None, 1 << 20) else {
                    continue;
                };
                let tag = event.name;
                if general(record.payload, tag).is_some() {
                    numbers += 1;
                    assert!(
                        read(record.payload, tag).is_some(),
                        "{}: {tag}",
                        path.display()
                    );
                    assert!(agrees_under_damage(record.payload, tag) > 0);
                } else {
                    assert_eq!(read(record.payload, tag), None, "{}: {tag}", path.display());
                }
            }
        }
        assert!(
            files > 20 && numbers > 20,
            "{files} files, {numbers} one-number records"
        );
    }
}
