//! One-number tensor records read in one pass: the layout every writer of scalars uses
//! (smdebug's hooks, ours and Python's), recognised exactly, and anything else left to the
//! general decoder.
//!
//! A run of scalars is millions of records of ~80 bytes. The general decoder
//! ([`decode_tensor_event_ref`](super::tensor::decode_tensor_event_ref)) walks the event, then
//! the summary's values, then the chosen value's metadata, then the tensor, checking every
//! field's text on the way, and costs ~0.6 µs a record; this path reads each field once and
//! compares the tag's bytes. It answers only when the record is an `Event` of a wall time, a
//! step and one summary holding one value, tagged `tag`, whose tensor is one element of a
//! numeric dtype in `tensor_content`, with nothing else in any of them but the value's
//! metadata plugins. Whatever else it meets (another field, a field twice, a typed value list,
//! a string tensor, a plugin the general decoder would refuse, a malformed field) it gives
//! `None`, and the caller asks the general decoder, which then decides, and reports, exactly as
//! before. A test holds the two to the same answers over real and damaged records.

use smdebug_core::{DType, Mode, TensorView};

use super::wire::{Fields, Wire};

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

/// The fields of `message`, each handed to `each`; `None` at the first malformed field or
/// when `each` refuses one.
fn each_field<'a>(
    message: &'a [u8],
    mut each: impl FnMut(u32, Wire<'a>) -> Option<()>,
) -> Option<()> {
    for field in Fields::new(message) {
        let (number, value) = field.ok()?;
        each(number, value)?;
    }
    Some(())
}

/// Sets `slot` once: a second value (protobuf would take the last, or merge) is left to the
/// general decoder.
fn once<T>(slot: &mut Option<T>, value: T) -> Option<()> {
    match slot {
        Some(_) => None,
        None => {
            *slot = Some(value);
            Some(())
        }
    }
}

/// The value metadata last found valid: the records of one event file carry the same mode and
/// mode step, so their metadata's bytes are checked once and compared after that.
#[derive(Debug, Default)]
pub struct SeenMetadata(Vec<u8>);

/// The record payload's one number tagged `tag`, when the record has the common layout (see
/// the module docs); `None` leaves the record to the general decoder.
#[cfg(test)]
pub fn read(payload: &[u8], tag: &str) -> Option<Number> {
    read_seen(payload, tag, &mut SeenMetadata::default())
}

/// `read`, the value's metadata checked only when its bytes are not those `seen` last
/// found valid.
pub fn read_seen(payload: &[u8], tag: &str, seen: &mut SeenMetadata) -> Option<Number> {
    let (mut wall_time, mut step, mut summary) = (None, None, None);
    each_field(payload, |number, v| match (number, v) {
        (1, Wire::Fixed64(b)) => once(&mut wall_time, f64::from_le_bytes(b)),
        (2, Wire::Varint(s)) => once(&mut step, s),
        (5, Wire::Bytes(b)) => once(&mut summary, b),
        _ => None,
    })?;
    // The step is an int64: a negative one is the general decoder's error.
    let step = step.unwrap_or(0);
    if i64::try_from(step).is_err() {
        return None;
    }
    let mut value = None;
    each_field(summary?, |number, v| match (number, v) {
        (1, Wire::Bytes(b)) => once(&mut value, b),
        _ => None,
    })?;
    let (mut name, mut metadata, mut tensor) = (None, None, None);
    each_field(value?, |number, v| match (number, v) {
        (1, Wire::Bytes(b)) => once(&mut name, b),
        (9, Wire::Bytes(b)) => once(&mut metadata, b),
        (8, Wire::Bytes(b)) => once(&mut tensor, b),
        _ => None,
    })?;
    if name? != tag.as_bytes() {
        return None;
    }
    if let Some(metadata) = metadata
        && seen.0 != metadata
    {
        plugins_valid(metadata)?;
        seen.0.clear();
        seen.0.extend_from_slice(metadata);
    }
    let (value, dims) = one_element(tensor?)?;
    Some(Number {
        step,
        wall_time: wall_time.unwrap_or(0.0),
        value,
        dims,
    })
}

/// Checks the value's metadata the way the general decoder does: every plugin named in UTF-8,
/// and smdebug's mode and mode-step plugins readable. Only plugin entries are accepted.
fn plugins_valid(metadata: &[u8]) -> Option<()> {
    let (mut mode, mut mode_step) = (Mode::Global, 0);
    each_field(metadata, |number, v| {
        let Wire::Bytes(plugin) = v else { return None };
        if number != 1 {
            return None;
        }
        let (mut name, mut content) = (None, None);
        each_field(plugin, |number, v| match (number, v) {
            (1, Wire::Bytes(b)) => once(&mut name, b),
            (2, Wire::Bytes(b)) => once(&mut content, b),
            _ => None,
        })?;
        let name = std::str::from_utf8(name.unwrap_or_default()).ok()?;
        super::tensor::decode::apply_plugin(
            name,
            content.unwrap_or_default(),
            &mut mode,
            &mut mode_step,
        )
        .ok()
    })
}

/// The value of a `TensorProto` holding one element of a numeric dtype as raw content, with a
/// shape of no dimension or of dimensions of size 1 (named or not), and how many dimensions.
fn one_element(tensor: &[u8]) -> Option<(f64, usize)> {
    let (mut dtype, mut shape, mut content) = (None, None, None);
    each_field(tensor, |number, v| match (number, v) {
        (1, Wire::Varint(d)) => once(&mut dtype, d),
        (2, Wire::Bytes(b)) => once(&mut shape, b),
        (4, Wire::Bytes(b)) => once(&mut content, b),
        _ => None,
    })?;
    let mut dims = 0;
    each_field(shape.unwrap_or_default(), |number, v| {
        let Wire::Bytes(dim) = v else { return None };
        dims += 1;
        if number != 2 {
            return None;
        }
        let (mut size, mut name) = (None, None);
        each_field(dim, |number, v| match (number, v) {
            (1, Wire::Varint(s)) => once(&mut size, s),
            // smdebug names each dimension `<tag>_<size>`; the general decoder checks the text.
            (2, Wire::Bytes(b)) => once(&mut name, std::str::from_utf8(b).ok()?),
            _ => None,
        })?;
        (size? == 1).then_some(())
    })?;
    let dtype = DType::from_tf_datatype(i32::try_from(dtype?).ok()?)?;
    let content = content?;
    if content.len() != dtype.size() {
        return None;
    }
    let value = TensorView::from_bytes(dtype, &[], content).ok()?.get_f64(0);
    Some((value, dims))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::budget::{Budget, Conversion};
    use crate::record::{PayloadCrcPolicy, RecordIter};
    use crate::tensor::{EventStamp, decode_tensor_event_ref, encode_tensor_event};

    fn payload(name: &str, dtype: DType, shape: &[usize], data: &[u8], mode: Mode) -> Vec<u8> {
        let stamp = EventStamp {
            wall_time: 1_795_760_000.25,
            step: 1234,
            mode,
            mode_step: 34,
        };
        encode_tensor_event(name, dtype, shape, data, stamp).to_vec()
    }

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
        check(payload);
        let mut p = payload.to_vec();
        for i in 0..p.len() {
            let was = p[i];
            for b in [was ^ 0x01, was ^ 0x80, 0x00, 0xff, 0x08, 0x12] {
                p[i] = b;
                check(&p);
            }
            p[i] = was;
            check(&payload[..i]);
        }
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
