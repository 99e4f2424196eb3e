//! Property tests: arbitrary tensors of every dtype survive encode -> frame -> decode, with
//! either payload checksum, alone and concatenated in one file.

use proptest::prelude::*;
use prost::Message;
use smdebug_core::{DType, Mode, Tensor};
use smdebug_format::proto::{Event, event, summary};
use smdebug_format::record::{self, ChecksumKind, PayloadChecksum, PayloadCrcPolicy};
use smdebug_format::tensor::{EventStamp, encode_tensor};
use smdebug_format::{self as format, RecordIter};

fn arb_dtype() -> impl Strategy<Value = DType> {
    proptest::sample::select(DType::ALL.to_vec())
}

fn arb_mode() -> impl Strategy<Value = Mode> {
    proptest::sample::select(Mode::ALL.to_vec())
}

/// A tensor of any dtype and rank 0..=4 with arbitrary bytes (every bit pattern: NaNs, denormals,
/// extreme integers), bools restricted to 0/1 as a bool tensor holds.
fn arb_tensor() -> impl Strategy<Value = Tensor> {
    (arb_dtype(), proptest::collection::vec(0usize..5, 0..=4)).prop_flat_map(|(dtype, shape)| {
        let n: usize = shape.iter().product();
        proptest::collection::vec(any::<u8>(), n * dtype.size()).prop_map(move |mut bytes| {
            if dtype == DType::Bool {
                bytes.iter_mut().for_each(|b| *b &= 1);
            }
            Tensor::from_bytes(dtype, shape.clone(), bytes).expect("sized to the shape")
        })
    })
}

fn arb_stamp() -> impl Strategy<Value = EventStamp> {
    (0u64..(1 << 40), arb_mode(), 0u64..(1 << 40), 0.0f64..2.0e9).prop_map(
        |(step, mode, mode_step, wall_time)| EventStamp {
            wall_time,
            step,
            mode,
            mode_step,
        },
    )
}

fn arb_checksum() -> impl Strategy<Value = PayloadChecksum> {
    prop_oneof![
        Just(PayloadChecksum::Crc32c),
        Just(PayloadChecksum::SmdebugLegacy)
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn any_tensor_round_trips_through_a_record(
        tensor in arb_tensor(),
        name in "[a-zA-Z0-9_./:-]{1,40}",
        stamp in arb_stamp(),
        checksum in arb_checksum(),
    ) {
        let framed = format::frame_tensor(&name, &tensor, stamp, checksum);
        let ev = format::read_tensor_record(&framed, "f.tfevents", 0, PayloadCrcPolicy::AcceptBoth)
            .unwrap();
        prop_assert_eq!(&ev.name, &name);
        prop_assert_eq!(ev.step, stamp.step);
        prop_assert_eq!(ev.mode, stamp.mode);
        prop_assert_eq!(ev.mode_step, stamp.mode_step);
        prop_assert_eq!(ev.wall_time.to_bits(), stamp.wall_time.to_bits());
        prop_assert_eq!(ev.tensor.dtype(), tensor.dtype());
        prop_assert_eq!(ev.tensor.shape(), tensor.shape());
        prop_assert_eq!(ev.tensor.bytes(), tensor.bytes());

        // The policy that matches the checksum accepts it; the other one refuses it.
        let (accept, refuse, kind) = match checksum {
            PayloadChecksum::Crc32c =>
                (PayloadCrcPolicy::RequireCrc32c, PayloadCrcPolicy::RequireLegacy, ChecksumKind::Crc32c),
            PayloadChecksum::SmdebugLegacy =>
                (PayloadCrcPolicy::RequireLegacy, PayloadCrcPolicy::RequireCrc32c, ChecksumKind::SmdebugLegacy),
        };
        match record::decode_record(&framed, 0, accept).unwrap() {
            record::Decoded::Record(r) => prop_assert_eq!(r.checksum, kind),
            other => prop_assert!(false, "not a record: {:?}", other),
        }
        prop_assert!(record::decode_record(&framed, 0, refuse).is_err());
    }

    #[test]
    fn the_payload_is_a_plain_event_protobuf(tensor in arb_tensor(), stamp in arb_stamp()) {
        let enc = encode_tensor("t", &tensor, stamp);
        let payload = enc.to_vec();
        let ev = Event::decode(payload.as_slice()).unwrap();
        prop_assert_eq!(ev.step as u64, stamp.step);
        // Re-encoding with prost (canonical field order) gives a payload of the same length
        // that decodes to the same message.
        let again = ev.encode_to_vec();
        prop_assert_eq!(again.len(), payload.len());
        prop_assert_eq!(Event::decode(again.as_slice()).unwrap(), ev.clone());
        let Some(event::What::Summary(s)) = ev.what else { panic!("no summary") };
        let Some(summary::value::Value::Tensor(tp)) = &s.value[0].value else { panic!("no tensor") };
        prop_assert_eq!(tp.dtype, tensor.dtype().tf_datatype());
        prop_assert_eq!(tp.tensor_content.as_slice(), tensor.bytes());
    }

    #[test]
    fn a_file_of_records_iterates_back_in_order(
        tensors in proptest::collection::vec(arb_tensor(), 0..8),
        stamp in arb_stamp(),
        checksum in arb_checksum(),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut file = Vec::new();
        let mut offsets = Vec::new();
        for (i, t) in tensors.iter().enumerate() {
            offsets.push(file.len() as u64);
            file.extend(format::frame_tensor(&format!("t{i}"), t, stamp, checksum));
        }
        let events = format::read_tensor_file(&file, "f", PayloadCrcPolicy::AcceptBoth).unwrap();
        prop_assert_eq!(events.len(), tensors.len());
        for (ev, t) in events.iter().zip(&tensors) {
            prop_assert_eq!(&ev.tensor, t);
        }

        // A file cut anywhere yields the whole records before the cut, then "incomplete" --
        // never an error and never a wrong record.
        if !file.is_empty() {
            let at = cut.index(file.len());
            let mut it = RecordIter::new(&file[..at], 0, PayloadCrcPolicy::AcceptBoth);
            let whole: Vec<_> = it.by_ref().collect::<Result<_, _>>().unwrap();
            let expected_whole = offsets.iter().zip(offsets.iter().skip(1).chain([&(file.len() as u64)]))
                .filter(|(_, end)| **end <= at as u64).count();
            prop_assert_eq!(whole.len(), expected_whole);
            match it.tail().unwrap() {
                record::Tail::Clean => prop_assert!(offsets.contains(&(at as u64))),
                record::Tail::Incomplete { offset, available, needed } => {
                    prop_assert_eq!(*offset, it.offset());
                    prop_assert!(available < needed);
                }
            }
        }
    }
}
