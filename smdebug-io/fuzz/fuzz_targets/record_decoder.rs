//! Arbitrary bytes through the record iterator and the tensor-event decoder: never a panic, an
//! endless loop or an allocation sized by an untrusted length; every record yielded lies inside
//! the input.
#![no_main]

use libfuzzer_sys::fuzz_target;
use smdebug_format::record::{PayloadCrcPolicy, RecordIter, Tail};
use smdebug_format::{read_tensor_record, tensor};

fuzz_target!(|data: &[u8]| {
    for policy in [PayloadCrcPolicy::AcceptBoth, PayloadCrcPolicy::Ignore] {
        let mut it = RecordIter::new(data, 0, policy);
        let mut end = 0u64;
        for rec in it.by_ref() {
            let Ok(rec) = rec else { break };
            assert_eq!(rec.offset, end);
            end = rec.end();
            assert!(end <= data.len() as u64);
            // The payload as an event and as a tensor: errors are fine, panics are not.
            let _ = tensor::decode_tensor_event(rec.payload, 1 << 20);
            let _ = tensor::decode_tagged_tensor_event(rec.payload, "loss", 1 << 20);
            let framed = &data[rec.offset as usize..end as usize];
            let _ = read_tensor_record(framed, "fuzz.tfevents", rec.offset, policy);
        }
        if let Some(Tail::Incomplete {
            offset,
            needed,
            available,
        }) = it.tail()
        {
            assert!(available < needed);
            assert_eq!(*offset + *available, data.len() as u64);
        }
    }
    // The payload decoder alone, on raw protobuf bytes.
    let _ = tensor::decode_tensor_event(data, 1 << 20);
});
