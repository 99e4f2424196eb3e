//! Tensor records in the layout every writer uses, read in one pass: an `Event` of a wall time,
//! a step and one summary holding one value, tagged as asked, whose metadata holds only plugin
//! entries and whose tensor is a numeric dtype, a shape of sized (and perhaps named) dimensions
//! and its values as raw `tensor_content`. That is what smdebug's hooks (PyTorch, TensorFlow,
//! MXNet, XGBoost), ours and Python's write for every numeric tensor.
//!
//! The general decoder ([`select_value`](super::select_value) and `tensor_ref`) walks the event,
//! then the summary's values, then the chosen value again for its metadata, then the tensor,
//! collecting every tag on the way, and costs about 1 µs a record; this path reads each field
//! once and compares the tag's bytes. It answers only for that layout, with each field given
//! once; whatever else it meets (another field, a field twice, typed values, a string tensor, a
//! plugin the general decoder refuses, a malformed field, a layout over the budget) gives
//! `None`, and the caller asks the general decoder, which then decides, and reports, as it
//! always has. When it answers, the answer is the general decoder's to the bit; tests hold the
//! two to that over real and damaged records.

use smdebug_core::Mode;

use super::event::{TensorEventRef, apply_plugin};
use super::from_proto::{check_content_len, checked_layout};
use crate::budget::Budget;
use crate::wire::{Fields, Wire};

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

/// The value metadata last found valid, with the mode and mode step it gives: the records of
/// one event file carry the same mode and mode step, so their metadata's bytes are read once and
/// compared after that.
#[derive(Debug)]
pub struct SeenMetadata {
    bytes: Vec<u8>,
    mode: Mode,
    /// `None` when the metadata names no mode step (the event's step is the mode step then).
    mode_step: Option<u64>,
}

/// A record in the common layout, its fields read but its tensor's header not checked: what
/// [`read`] and the one-number reader (`number::read_seen`) check, each as it needs.
pub(crate) struct Parts<'a> {
    pub name: &'a str,
    pub step: u64,
    pub wall_time: f64,
    pub mode: Mode,
    pub mode_step: u64,
    /// The `DataType` number.
    pub dtype: i32,
    /// The dimensions as the shape gives them (a size not given is 0, as protobuf reads it).
    pub dims: smallvec::SmallVec<[i64; 8]>,
    /// The raw `tensor_content` (empty when not given).
    pub content: &'a [u8],
}

impl Default for SeenMetadata {
    /// No metadata: GLOBAL, the mode step the event's step.
    fn default() -> Self {
        SeenMetadata {
            bytes: Vec::new(),
            mode: Mode::Global,
            mode_step: None,
        }
    }
}

/// The tensor tagged `tag` in record payload `payload`, when the record has the common layout
/// (see the module docs) and its value costs no more than `budget`; `None` leaves the record to
/// the general decoder. `seen`: the metadata last found valid (in this file, or anywhere: it is
/// compared byte for byte).
pub fn read<'a>(
    payload: &'a [u8],
    tag: &str,
    budget: Budget,
    seen: &mut SeenMetadata,
) -> Option<TensorEventRef<'a>> {
    let p = parts(payload, tag, seen)?;
    let (dtype, shape, n) = checked_layout(p.dtype, false, false, &p.dims, tag, budget).ok()?;
    // No content for a shape of elements: typed values, the general decoder's.
    if p.content.is_empty() && n != 0 {
        return None;
    }
    check_content_len(tag, p.content.len(), n, dtype, &shape).ok()?;
    Some(TensorEventRef {
        name: p.name,
        step: p.step,
        wall_time: p.wall_time,
        mode: p.mode,
        mode_step: p.mode_step,
        dtype,
        shape,
        data: std::borrow::Cow::Borrowed(p.content),
    })
}

/// The fields of a record in the common layout tagged `tag`, the value's metadata read (unless
/// `seen` holds its bytes) and its mode and mode step taken; `None` for any other record.
pub(crate) fn parts<'a>(
    payload: &'a [u8],
    tag: &str,
    seen: &mut SeenMetadata,
) -> Option<Parts<'a>> {
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
    let name = name?;
    if name != tag.as_bytes() {
        return None;
    }
    // The tag's bytes are `tag`'s: UTF-8.
    let name = std::str::from_utf8(name).ok()?;
    let metadata = metadata.unwrap_or_default();
    if seen.bytes != metadata {
        let (mode, mode_step) = plugins(metadata)?;
        seen.bytes.clear();
        seen.bytes.extend_from_slice(metadata);
        (seen.mode, seen.mode_step) = (mode, mode_step);
    }
    let (mut dtype, mut shape, mut content) = (None, None, None);
    each_field(tensor?, |number, v| match (number, v) {
        (1, Wire::Varint(d)) => once(&mut dtype, d),
        (2, Wire::Bytes(b)) => once(&mut shape, b),
        (4, Wire::Bytes(b)) => once(&mut content, b),
        _ => None,
    })?;
    let mut dims = smallvec::SmallVec::new();
    each_field(shape.unwrap_or_default(), |number, v| {
        let Wire::Bytes(dim) = v else { return None };
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
        dims.push(size.unwrap_or(0) as i64);
        Some(())
    })?;
    Some(Parts {
        name,
        step,
        wall_time: wall_time.unwrap_or(0.0),
        mode: seen.mode,
        mode_step: seen.mode_step.unwrap_or(step),
        dtype: i32::try_from(dtype?).ok()?,
        dims,
        content: content.unwrap_or_default(),
    })
}

/// The mode and mode step (when one is named) a value's metadata gives, read the way the
/// general decoder reads it: every plugin named in UTF-8, and smdebug's mode and mode-step
/// plugins readable. Only plugin entries, each of a name and a content given once, are
/// accepted.
fn plugins(metadata: &[u8]) -> Option<(Mode, Option<u64>)> {
    let (mut mode, mut mode_step, mut named_step) = (Mode::Global, 0, false);
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
        named_step |= name == super::MODE_STEP_PLUGIN;
        apply_plugin(name, content.unwrap_or_default(), &mut mode, &mut mode_step).ok()
    })?;
    Some((mode, named_step.then_some(mode_step)))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::budget::Conversion;
    use crate::record::{PayloadCrcPolicy, RecordIter};
    use crate::tensor::decode::general_ref;
    use crate::tensor::{EventStamp, encode_tensor_event};
    use smdebug_core::DType;

    const BUDGET: Budget = Budget {
        limit: 1 << 20,
        conversion: Conversion::Array,
    };

    /// Whenever this path answers for `payload` (as it is, after every one-byte change of it,
    /// six values a byte, and cut short at every length), the general decoder gives the same
    /// event, field for field; read with the metadata the intact record left valid, as the
    /// records of one file are read. How many answers there were.
    fn agrees_under_damage(payload: &[u8], tag: &str, budget: Budget) -> usize {
        let mut answered = 0;
        let mut seen = SeenMetadata::default();
        let mut check = |p: &[u8]| {
            if let Some(fast) = read(p, tag, budget, &mut seen) {
                answered += 1;
                let general = general_ref(p, Some(tag), budget);
                assert_eq!(
                    general.as_ref().ok(),
                    Some(&fast),
                    "{tag}: this path and the general decoder differ on {p:02x?}"
                );
                assert_eq!(
                    fast.wall_time.to_bits(),
                    general.unwrap().wall_time.to_bits()
                );
            }
        };
        each_damaged(payload, &mut check);
        answered
    }

    /// Hands `check` the payload as it is, after every one-byte change of it (six values a
    /// byte) and cut short at every length.
    pub(crate) fn each_damaged(payload: &[u8], check: &mut impl FnMut(&[u8])) {
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
    }

    /// A tensor event as our writer writes it, at step 1234 (mode step 34).
    pub(crate) fn payload(
        name: &str,
        dtype: DType,
        shape: &[usize],
        data: &[u8],
        mode: Mode,
    ) -> Vec<u8> {
        let stamp = EventStamp {
            wall_time: 1_795_760_000.25,
            step: 1234,
            mode,
            mode_step: 34,
        };
        encode_tensor_event(name, dtype, shape, data, stamp).to_vec()
    }

    #[test]
    fn our_writers_tensors_are_read_in_one_pass_as_the_general_decoder_reads_them() {
        let floats: Vec<u8> = (0..6)
            .flat_map(|i| (i as f32 * 0.5).to_le_bytes())
            .collect();
        let ints: Vec<u8> = (0..4i64).flat_map(|i| (-i).to_le_bytes()).collect();
        for (dtype, shape, data, mode) in [
            (DType::F32, &[2, 3][..], &floats[..], Mode::Train),
            (DType::I64, &[4][..], &ints[..], Mode::Eval),
            (DType::F32, &[0, 3][..], &[][..], Mode::Global),
            (
                DType::F64,
                &[][..],
                &0.125f64.to_le_bytes()[..],
                Mode::Predict,
            ),
        ] {
            let p = payload("layer/w", dtype, shape, data, mode);
            let event = read(&p, "layer/w", BUDGET, &mut SeenMetadata::default())
                .expect("the common layout");
            assert_eq!((event.step, event.mode, event.mode_step), (1234, mode, 34));
            assert_eq!(
                (event.dtype, &event.shape[..], &*event.data),
                (dtype, shape, data)
            );
            assert_eq!(
                read(&p, "layer/", BUDGET, &mut SeenMetadata::default()),
                None,
                "another tag is the general decoder's error"
            );
            assert!(agrees_under_damage(&p, "layer/w", BUDGET) > 1);
        }
    }

    /// A value over the budget is the general decoder's to refuse (and to name).
    #[test]
    fn a_value_over_the_budget_is_left_to_the_general_decoder() {
        let floats: Vec<u8> = (0..6).flat_map(|i| (i as f32).to_le_bytes()).collect();
        let p = payload("w", DType::F32, &[6], &floats, Mode::Train);
        let small = Budget {
            limit: 23,
            conversion: Conversion::Stored,
        };
        assert_eq!(read(&p, "w", small, &mut SeenMetadata::default()), None);
        assert!(general_ref(&p, Some("w"), small).is_err());
        let enough = Budget {
            limit: 24,
            conversion: Conversion::Stored,
        };
        assert!(read(&p, "w", enough, &mut SeenMetadata::default()).is_some());
    }

    /// Python smdebug's records (the golden runs): every tensor record holding its values as
    /// raw content is read by this path, alike with the general decoder, and so is every damaged
    /// copy this path accepts; string tensors are left to the general decoder.
    #[test]
    fn python_smdebugs_records_agree_with_the_general_decoder() {
        let (mut read_here, mut files, mut damaged) = (0, 0, 0);
        for path in crate::test_data::files("golden", "tfevents") {
            files += 1;
            let bytes = std::fs::read(&path).unwrap();
            for record in RecordIter::new(&bytes, 0, PayloadCrcPolicy::AcceptBoth) {
                let Ok(record) = record else { break };
                let Ok(event) = general_ref(record.payload, None, BUDGET) else {
                    continue;
                };
                let tag = event.name;
                let fast = read(record.payload, tag, BUDGET, &mut SeenMetadata::default());
                assert_eq!(fast.as_ref(), Some(&event), "{}: {tag}", path.display());
                read_here += 1;
                // The damage sweep costs a decode per byte: the small records of each file.
                if record.payload.len() < 400 {
                    damaged += 1;
                    assert!(agrees_under_damage(record.payload, tag, BUDGET) > 0);
                }
            }
        }
        assert!(
            files > 20 && read_here > 100 && damaged > 20,
            "{files} files, {read_here} records read in one pass, {damaged} damaged"
        );
    }
}
