//! A record read and decoded: a tensor's value (decoded, converted within a [`Budget`]), its
//! record's bytes, or one number read cheaply (`number_at`); byte ranges of event files. Where
//! the records are comes from [`source`](super::source).

use bytes::Bytes;

use smdebug_core::{StringTensor, Tensor};

pub(crate) use super::value::{TensorBytes, TensorValue};

use super::source::{Files, FirstFetch, Location, Slot, TakenValue, TensorTable, WHOLE_FILE_MAX};
use crate::error::{Error, Result};
use smdebug_format::budget::{Budget, Conversion};
use smdebug_format::record::{Decoded, PayloadCrcPolicy};
use smdebug_storage::Storage;

/// Reads tensor `name`'s record where the index says it is, checking its framing and checksums,
/// that the record's tag is `name` and its step the index's step, and that nothing larger than
/// `budget` is read or decoded.
pub(crate) fn read_tensor(
    storage: &dyn Storage,
    files: &Files,
    loc: &Location,
    name: &str,
    budget: Budget,
) -> Result<Tensor> {
    read_with(storage, files, loc, name, budget, |_, event| {
        Tensor::from_bytes(event.dtype, event.shape, event.data.into_owned())
            .expect("dtype, shape and length were checked when the record was decoded")
    })
}

/// Tensor `name`'s value at `loc` as `f64`s in its shape: what [`read_tensor`] and
/// `Tensor::to_array_f64` give, the same value or the same error. A record of one number in
/// the layout every writer of scalars uses is read in one pass (smdebug-format's
/// `number::read_seen`, `seen` the value metadata last found valid in this file), as
/// [`number_at`] reads it; any other record, and every record that path does not answer for
/// (a damaged one among them), goes to the general decoder, which decides and reports as it
/// does for [`read_tensor`].
pub(crate) fn read_f64(
    storage: &dyn Storage,
    files: &Files,
    loc: &Location,
    name: &str,
    budget: Budget,
    seen: &mut smdebug_format::number::SeenMetadata,
) -> Result<ndarray::ArrayD<f64>> {
    let bytes = record_bytes(storage, files, loc, name, budget, FirstFetch::Provisional)?;
    // One element converted to `f64` costs at most 16 bytes: within a budget of
    // `MAX_NUMBER_RECORD`, the general decoder never refuses what this path answers for.
    if budget.limit >= MAX_NUMBER_RECORD
        && loc.length <= MAX_NUMBER_RECORD
        && let Ok(Decoded::Record(rec)) =
            smdebug_format::record::decode_record(&bytes, loc.start, PayloadCrcPolicy::AcceptBoth)
        && rec.framed_len() == bytes.len()
        && let Some(n) = smdebug_format::number::read_seen(rec.payload, name, seen)
        && n.step == loc.step
    {
        return Ok(ndarray::ArrayD::from_elem(
            ndarray::IxDyn(&vec![1; n.dims]),
            n.value,
        ));
    }
    decode_with(&bytes, loc, name, budget, |_, event| {
        Tensor::from_bytes(event.dtype, event.shape, event.data.into_owned())
            .expect("dtype, shape and length were checked when the record was decoded")
            .to_array_f64()
    })
}

/// Tensor `name`'s record at `loc`, numbers or strings, checked as [`read_tensor`] checks it
/// (a string tensor's strings and their per-element overhead count against
/// `budget`). `first`: how its event file is kept when this read fetches it whole for the
/// first time.
pub(crate) fn read_value(
    storage: &dyn Storage,
    files: &Files,
    loc: &Location,
    name: &str,
    budget: Budget,
    first: FirstFetch,
) -> Result<TensorValue> {
    read_value_made(storage, files, loc, name, budget, first, in_place)
}

/// [`read_value`], its numbers made by `numbers` (from the record's bytes, unless a value taken
/// out of the file is at hand).
fn read_value_made(
    storage: &dyn Storage,
    files: &Files,
    loc: &Location,
    name: &str,
    budget: Budget,
    first: FirstFetch,
    numbers: impl FnOnce(&Bytes, smdebug_format::TensorEventRef<'_>) -> TensorBytes,
) -> Result<TensorValue> {
    if let Some(value) = loc.file.take_value(loc, name, budget, files) {
        return Ok(value);
    }
    let bytes = record_bytes(storage, files, loc, name, budget, first)?;
    decode_value(&bytes, loc, name, budget, numbers)
}

/// The value in record `bytes` (exactly the record at `loc`), numbers made by `numbers`.
fn decode_value<B: AsRef<[u8]> + ?Sized>(
    bytes: &B,
    loc: &Location,
    name: &str,
    budget: Budget,
    numbers: impl FnOnce(&B, smdebug_format::TensorEventRef<'_>) -> TensorBytes,
) -> Result<TensorValue> {
    match decode_with(bytes, loc, name, budget, numbers) {
        Ok(numbers) => Ok(TensorValue::Numbers(numbers)),
        Err(Error::Format(smdebug_format::Error::StringTensor { .. })) => {
            decode_strings(bytes.as_ref(), loc, name, budget).map(TensorValue::Strings)
        }
        Err(e) => Err(e),
    }
}

/// A decoded value as a [`TensorBytes`] of its own: its numbers copied out of the record.
fn copied<B: ?Sized>(_: &B, event: smdebug_format::TensorEventRef<'_>) -> TensorBytes {
    TensorBytes {
        dtype: event.dtype,
        shape: event.shape,
        data: match event.data {
            std::borrow::Cow::Borrowed(d) => Bytes::copy_from_slice(d),
            std::borrow::Cow::Owned(v) => Bytes::from(v),
        },
    }
}

/// Event files a value-by-value reader reads whole into a buffer of its thread, to take every
/// value out of, at most this long.
const TAKEN_OUT_FILE_MAX: u64 = WHOLE_FILE_MAX;

thread_local! {
    /// The buffer an event file is read into to take its values out (grown to the largest
    /// file read on the thread, at most [`TAKEN_OUT_FILE_MAX`]).
    static FILE_BUFFER: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Tensor `name`'s value at `loc` for a reader going value by value, tensor after tensor (the
/// values decoded ahead of one, [`decoded`](super::decoded)): the event file, unless a value of
/// it is at hand already, is read into a buffer of this thread and every record `table` (the
/// file's index entries) lists is decoded, each value copied into memory of its own; the one
/// asked for is returned, and the others stay with the file ([`EventFile::keep_values`](super::source::EventFile::keep_values),
/// within the heap budget) for the reads of the other tensors. So the file is read once and
/// never kept, and each value is copied once, into memory that is the value's alone (the
/// Python binding hands it to numpy without another copy). Every value is decoded with the
/// checks of [`read_value`] (its tag, its step, the budget); a record that does not decode is
/// left in the file, and its own read reads the file again and reports what is wrong. A file
/// that is kept or mapped, comes through a shared source or is larger than
/// [`TAKEN_OUT_FILE_MAX`], and one that cannot be read whole, is read as [`read_value`] reads it
/// (for good: [`FirstFetch::ForGood`]).
pub(crate) fn read_taking_values_out(
    storage: &dyn Storage,
    files: &Files,
    loc: &Location,
    name: &str,
    budget: Budget,
    table: &TensorTable,
) -> Result<TensorValue> {
    if let Some(value) = loc.file.take_value(loc, name, budget, files) {
        return Ok(value);
    }
    let len = loc.file.len;
    if len == 0
        || len > TAKEN_OUT_FILE_MAX
        || loc.file.kept().is_some()
        || !files.may_take_values_out()
    {
        return read_value(storage, files, loc, name, budget, FirstFetch::ForGood);
    }
    let taken = FILE_BUFFER.with(|buffer| {
        let mut buffer = buffer.borrow_mut();
        let len = len as usize;
        if buffer.len() < len {
            buffer.resize(len, 0);
        }
        let file = &mut buffer[..len];
        match storage.get_range_into(&loc.file.path(), 0, file) {
            Ok(n) if n == len => Some(take_values_out(file, loc, name, budget, table)),
            // Missing, cut short or unreadable: read as any read does, which reports it.
            _ => None,
        }
    });
    match taken {
        Some((value, others)) => {
            loc.file.keep_values(others, files);
            value
        }
        None => read_value(storage, files, loc, name, budget, FirstFetch::ForGood),
    }
}

/// Every value `table` lists in `file` (the whole event file of `loc`), decoded and copied: the
/// one at `loc` (tensor `name`'s), and the others that decode.
fn take_values_out(
    file: &[u8],
    loc: &Location,
    name: &str,
    budget: Budget,
    table: &TensorTable,
) -> (Result<TensorValue>, Vec<TakenValue>) {
    let decode = |at: &Location, tag: &str| {
        let end = record_end(at, tag, budget)?;
        decode_value(record_in(file, at, end)?, at, tag, budget, copied)
    };
    let mut asked = None;
    let mut others = Vec::new();
    for (other, slot) in table.entries() {
        let Slot::Record(start, length) = slot else {
            continue;
        };
        if start == loc.start && length == loc.length && &**other == name {
            asked = Some(decode(loc, name));
            continue;
        }
        let at = Location {
            start,
            length,
            ..loc.clone()
        };
        if let Ok(value) = decode(&at, other) {
            others.push(TakenValue {
                name: other.clone(),
                start,
                length,
                budget,
                value,
            });
        }
    }
    (asked.unwrap_or_else(|| decode(loc, name)), others)
}

/// The string tensor in record `bytes` (exactly the record at `loc`): its tag must be `name` and
/// its step the index's step.
fn decode_strings(
    bytes: &[u8],
    loc: &Location,
    name: &str,
    budget: Budget,
) -> Result<StringTensor> {
    let event = smdebug_format::read_tagged_string_record_ref(
        bytes,
        &loc.file.path(),
        loc.start,
        name,
        PayloadCrcPolicy::AcceptBoth,
        budget.limit,
    )?;
    check_step(loc, name, event.step)?;
    Ok(event.to_tensor())
}

/// [`read_tensor`] without copying the values.
pub(crate) fn read_tensor_bytes(
    storage: &dyn Storage,
    files: &Files,
    loc: &Location,
    name: &str,
    budget: Budget,
) -> Result<TensorBytes> {
    read_with(storage, files, loc, name, budget, in_place)
}

/// Tensor `name`'s value at `loc` within `file`, the whole event file as read (or as much of it
/// as there was), its bytes not copied; checked as [`read_tensor`] checks it.
pub(crate) fn tensor_bytes_in(
    file: &Bytes,
    loc: &Location,
    name: &str,
    budget: Budget,
) -> Result<TensorBytes> {
    let end = record_end(loc, name, budget)?;
    let record = slice_record(file, loc, end)?;
    decode_with(&record, loc, name, budget, in_place)
}

/// Records longer than this cannot hold one number (a scalar's record is about 100 bytes:
/// framing, tag, step, mode metadata, dtype, shape and at most 8 bytes of value).
pub(crate) const MAX_NUMBER_RECORD: u64 = 4096;

/// The budget of reading one number: one element of any dtype (at most 8 bytes) and its `f64`
/// (8 more). A record whose header claims a second element, of any dtype, costs more and is
/// refused from the header, before anything is decoded.
const ONE_NUMBER: Budget = Budget {
    limit: 16,
    conversion: Conversion::F64,
};

/// The one number tensor `name`'s record at `loc` holds, with the record's wall time (seconds
/// since the epoch), its framing, checksums, tag and step
/// checked as [`read_tensor`] checks them. `file`: the whole event file when it was read (else
/// the record is read by range). `seen`: the value metadata last found valid in the file
/// ([`SeenMetadata`](smdebug_format::number::SeenMetadata)). `Ok(None)` when the record is not one number (its header
/// claims another number of elements, or strings; or it is longer than [`MAX_NUMBER_RECORD`],
/// then it is not read at all): nothing of its values is decoded then.
pub(crate) fn number_at(
    storage: &dyn Storage,
    file: Option<&[u8]>,
    loc: &Location,
    name: &str,
    seen: &mut smdebug_format::number::SeenMetadata,
) -> Result<Option<(f64, f64)>> {
    if loc.length > MAX_NUMBER_RECORD {
        return Ok(None);
    }
    let end = record_end(loc, name, Budget::from(MAX_NUMBER_RECORD))?;
    let fetched;
    let record: &[u8] = match file {
        Some(file) => record_in(file, loc, end)?,
        None => {
            fetched = get_range(storage, loc, loc.start..end)?;
            if (fetched.len() as u64) < loc.length {
                return Err(short_file(loc, fetched.len() as u64));
            }
            &fetched
        }
    };
    // The common layout in one pass; anything else (and every error, which names the file) from
    // the general decoder. The file's path is not made here: this runs once per value of a run.
    if let Ok(Decoded::Record(rec)) =
        smdebug_format::record::decode_record(record, loc.start, PayloadCrcPolicy::AcceptBoth)
        && rec.framed_len() == record.len()
        && let Some(n) = smdebug_format::number::read_seen(rec.payload, name, seen)
        && n.step == loc.step
    {
        return Ok(Some((n.value, n.wall_time)));
    }
    // Rare (another layout, or a bad record): the general decoder over a copy of the record.
    let record = Bytes::copy_from_slice(record);
    let number = decode_with(&record, loc, name, ONE_NUMBER, |_, event| {
        smdebug_core::TensorView::from_bytes(event.dtype, &event.shape, &event.data)
            .ok()
            .filter(|v| v.len() == 1)
            .map(|v| (v.get_f64(0), event.wall_time))
    });
    match number {
        Ok(n) => Ok(n),
        Err(
            Error::Format(smdebug_format::Error::TensorTooLarge { .. })
            | Error::Format(smdebug_format::Error::StringTensor { .. }),
        ) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Values up to this many bytes are copied out of their event file rather than sliced from it:
/// a slice keeps the whole file (a step's every record) alive as long as the value is kept, and
/// a caller keeping one scalar a step over a long run (`read_values`) kept every step's file.
const COPIED_VALUE_MAX: usize = 256;

/// A decoded value as a [`TensorBytes`] over the record's own bytes (copied when the record
/// held its values in typed fields rather than raw, or when they are small: see
/// [`COPIED_VALUE_MAX`]).
fn in_place(record: &Bytes, event: smdebug_format::TensorEventRef<'_>) -> TensorBytes {
    let data = match event.data {
        std::borrow::Cow::Borrowed(d) if d.len() <= COPIED_VALUE_MAX => Bytes::copy_from_slice(d),
        std::borrow::Cow::Borrowed(d) => record.slice_ref(d),
        std::borrow::Cow::Owned(v) => Bytes::from(v),
    };
    TensorBytes {
        dtype: event.dtype,
        shape: event.shape,
        data,
    }
}

fn read_with<T>(
    storage: &dyn Storage,
    files: &Files,
    loc: &Location,
    name: &str,
    budget: Budget,
    finish: impl FnOnce(&Bytes, smdebug_format::TensorEventRef<'_>) -> T,
) -> Result<T> {
    let bytes = record_bytes(storage, files, loc, name, budget, FirstFetch::Provisional)?;
    decode_with(&bytes, loc, name, budget, finish)
}

/// Decodes the record `bytes` (exactly the record at `loc`): its tag must be `name` and its
/// step the index's step.
fn decode_with<B: AsRef<[u8]> + ?Sized, T>(
    bytes: &B,
    loc: &Location,
    name: &str,
    budget: Budget,
    finish: impl FnOnce(&B, smdebug_format::TensorEventRef<'_>) -> T,
) -> Result<T> {
    let decode = |path: &str| {
        smdebug_format::read_tagged_tensor_record_ref(
            bytes.as_ref(),
            path,
            loc.start,
            name,
            PayloadCrcPolicy::AcceptBoth,
            budget,
        )
    };
    // The file's path is made only for an error (decoding again gives the same one, naming
    // it): a value-by-value reader decodes a record per value.
    let event = match decode("") {
        Ok(event) => event,
        Err(_) => decode(&loc.file.path())?,
    };
    check_step(loc, name, event.step)?;
    Ok(finish(bytes, event))
}

/// Refuses a record of tensor `name` whose step, `step`, is not the one the index gave for it
/// at `loc`.
fn check_step(loc: &Location, name: &str, step: u64) -> Result<()> {
    if step != loc.step {
        return Err(Error::Format(smdebug_format::Error::WrongTensor {
            path: loc.file.path().to_string(),
            offset: loc.start,
            expected: format!("`{name}` at step {}", loc.step),
            found: format!("`{name}` at step {step}"),
        }));
    }
    Ok(())
}

/// Where the record at `loc` ends; refuses an index entry whose end overflows or whose record
/// is longer than the budget's limit before anything is read.
fn record_end(loc: &Location, name: &str, budget: Budget) -> Result<u64> {
    let end = loc.start.checked_add(loc.length).ok_or_else(|| {
        Error::Format(smdebug_format::Error::CorruptRecord {
            path: loc.file.path().to_string(),
            offset: loc.start,
            reason: format!(
                "the index's offset {} + length {} overflows",
                loc.start, loc.length
            ),
        })
    })?;
    if loc.length > budget.limit {
        return Err(Error::Format(smdebug_format::Error::TensorTooLarge {
            path: loc.file.path().to_string(),
            offset: loc.start,
            tensor: name.to_string(),
            detail: "the length of its record in the index".to_string(),
            claimed: loc.length.into(),
            limit: budget.limit,
        }));
    }
    Ok(end)
}

/// The bytes of the record at `loc` (exactly `loc.length` of them), from the kept file, a new
/// map of it, the whole file fetched and kept (as `first` says), or a range read.
fn record_bytes(
    storage: &dyn Storage,
    files: &Files,
    loc: &Location,
    name: &str,
    budget: Budget,
    first: FirstFetch,
) -> Result<Bytes> {
    let end = record_end(loc, name, budget)?;
    if let Some(file) = loc.file.kept() {
        if loc.file.take_ahead() {
            // Read ahead of this caller: kept now as if the caller had fetched it.
            files.fetched(&loc.file, first);
        }
        return slice_record(&file, loc, end);
    }
    if let Some(map) = files.map(&loc.file) {
        // Another reader may have kept the file first; both hold the same bytes.
        return slice_record(&loc.file.keep(map, false, files), loc, end);
    }
    if first == FirstFetch::ForGood
        && let Some(read) = files.read_into_block(storage, &loc.file, false)
    {
        let whole = read.map_err(|e| range_error(storage, loc, 0, e))?;
        let kept = loc.file.keep(whole, false, files);
        files.fetched(&loc.file, first);
        return slice_record(&kept, loc, end);
    }
    if loc.file.len <= WHOLE_FILE_MAX && files.reserve(loc.file.len) {
        // Only as much as the index says the file holds: a file larger than its index (or
        // one that is not an event file at all) is never read whole.
        let whole = files
            .whole(&loc.file, || get_range(storage, loc, 0..loc.file.len))
            .inspect_err(|_| {
                files.release(loc.file.len);
            })?;
        let kept = loc.file.keep(whole, true, files);
        files.fetched(&loc.file, first);
        return slice_record(&kept, loc, end);
    }
    let bytes = get_range(storage, loc, loc.start..end)?;
    if (bytes.len() as u64) < loc.length {
        return Err(short_file(loc, bytes.len() as u64));
    }
    Ok(bytes)
}

/// Bytes `range` of the location's event file. Storage refuses a range that starts past the
/// file's end; that is a file shorter than its index says, reported as such.
pub(crate) fn get_range(
    storage: &dyn Storage,
    loc: &Location,
    range: std::ops::Range<u64>,
) -> Result<bytes::Bytes> {
    let start = range.start;
    storage
        .get_range(&loc.file.path(), range)
        .map_err(|e| range_error(storage, loc, start, e))
}

/// What a failed read of the location's event file from `start` on is: a file shorter than
/// its index says when it ends before `start`, else the storage's error.
fn range_error(
    storage: &dyn Storage,
    loc: &Location,
    start: u64,
    e: smdebug_storage::Error,
) -> Error {
    match storage.size(&loc.file.path()) {
        Ok(Some(size)) if size <= start => short_file(loc, 0),
        _ => e.into(),
    }
}

/// The record's bytes within a whole event file, checked against the file's real length first.
fn slice_record(file: &Bytes, loc: &Location, end: u64) -> Result<Bytes> {
    record_in(file, loc, end).map(|record| file.slice_ref(record))
}

/// [`slice_record`] over borrowed bytes.
fn record_in<'f>(file: &'f [u8], loc: &Location, end: u64) -> Result<&'f [u8]> {
    if (file.len() as u64) < end {
        return Err(short_file(
            loc,
            (file.len() as u64).saturating_sub(loc.start),
        ));
    }
    Ok(&file[loc.start as usize..end as usize])
}

/// A file shorter than its index says, reported like a truncated record.
fn short_file(loc: &Location, available: u64) -> Error {
    Error::Format(smdebug_format::Error::IncompleteRecord {
        path: loc.file.path().to_string(),
        offset: loc.start,
        needed: loc.length,
        available,
    })
}
