//! TFRecord framing: `u64 LE length | u32 LE masked CRC-32C of the length | payload |
//! u32 LE masked CRC-32C of the payload`.
//!
//! The decoder is sans-I/O: it looks at a byte slice that starts at a record and says whether a
//! whole record is there ([`Decoded::Record`]), whether more bytes are needed
//! ([`Decoded::Incomplete`], a file still being written or cut short), or whether the bytes are
//! not a record ([`Corruption`], with the absolute byte offset and the reason).

use crate::error::Error;

/// Bytes of framing around a payload: 8 (length) + 4 (length CRC) + 4 (payload CRC).
pub const FRAMING_BYTES: usize = 16;
/// Bytes before the payload: the length and its CRC.
pub const HEADER_BYTES: usize = 12;
/// Bytes after the payload: its CRC.
pub const FOOTER_BYTES: usize = 4;

/// The bytes Python smdebug checksums instead of the payload unless told otherwise
/// (`CHECKSUM_MAGIC_BYTES` in `smdebug/core/tfrecord/record_writer.py`).
pub const SMDEBUG_CHECKSUM_MAGIC_BYTES: &[u8] = b"0x12345678";

const MASK_DELTA: u32 = 0xA282_EAD8;

/// A masked CRC-32C, as TFRecord stores it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MaskedCrc(pub u32);

impl MaskedCrc {
    /// Masks a raw CRC-32C: `((crc >> 15) | (crc << 17)) + 0xA282EAD8`.
    pub const fn from_crc(crc: u32) -> MaskedCrc {
        MaskedCrc(crc.rotate_right(15).wrapping_add(MASK_DELTA))
    }

    /// The masked CRC-32C of `data`.
    pub fn of(data: &[u8]) -> MaskedCrc {
        MaskedCrc::from_crc(crc32c::crc32c(data))
    }

    /// The masked CRC-32C of the concatenation of `parts` (no copy).
    pub fn of_parts<'a>(parts: impl IntoIterator<Item = &'a [u8]>) -> MaskedCrc {
        let crc = parts.into_iter().fold(0u32, crc32c::crc32c_append);
        MaskedCrc::from_crc(crc)
    }

    /// The constant payload checksum Python smdebug writes by default.
    pub fn smdebug_legacy() -> MaskedCrc {
        MaskedCrc::of(SMDEBUG_CHECKSUM_MAGIC_BYTES)
    }

    /// The checksum as it is stored in a record (little-endian).
    pub const fn to_le_bytes(self) -> [u8; 4] {
        self.0.to_le_bytes()
    }
}

/// What the writer stores as a record's payload checksum.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum PayloadChecksum {
    /// The real masked CRC-32C of the payload: TensorBoard and TFRecord readers accept it.
    /// Python smdebug 1.0.34's `Trial` does not (it expects the legacy constant). The default.
    #[default]
    Crc32c,
    /// Python smdebug's default: the masked CRC-32C of the constant `b"0x12345678"`.
    /// Python smdebug's `Trial` reads it; TensorBoard silently stops reading at the first one.
    SmdebugLegacy,
}

impl PayloadChecksum {
    /// The footer for a payload given as consecutive slices.
    pub fn footer<'a>(self, payload_parts: impl IntoIterator<Item = &'a [u8]>) -> [u8; 4] {
        match self {
            PayloadChecksum::Crc32c => MaskedCrc::of_parts(payload_parts).to_le_bytes(),
            PayloadChecksum::SmdebugLegacy => MaskedCrc::smdebug_legacy().to_le_bytes(),
        }
    }
}

/// Which payload checksums the decoder accepts. The length checksum is always checked.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum PayloadCrcPolicy {
    /// The real CRC or smdebug's legacy constant (the default: reads files from every writer).
    #[default]
    AcceptBoth,
    /// Only the real CRC (what TensorBoard requires).
    RequireCrc32c,
    /// Only smdebug's legacy constant (what Python smdebug's `Trial` requires).
    RequireLegacy,
    /// Do not check the payload checksum.
    Ignore,
}

/// Which checksum a decoded record carried.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ChecksumKind {
    /// The real masked CRC-32C of the payload.
    Crc32c,
    /// smdebug's legacy constant.
    SmdebugLegacy,
    /// Neither (only with [`PayloadCrcPolicy::Ignore`]).
    Unchecked,
}

/// The 12 header bytes of a record with a payload of `len` bytes.
pub fn header(len: u64) -> [u8; HEADER_BYTES] {
    let len_bytes = len.to_le_bytes();
    let mut h = [0u8; HEADER_BYTES];
    h[..8].copy_from_slice(&len_bytes);
    h[8..].copy_from_slice(&MaskedCrc::of(&len_bytes).to_le_bytes());
    h
}

/// Appends one framed record holding `payload` to `out`.
pub fn write_record(out: &mut Vec<u8>, payload: &[u8], checksum: PayloadChecksum) {
    out.reserve(payload.len() + FRAMING_BYTES);
    out.extend_from_slice(&header(payload.len() as u64));
    out.extend_from_slice(payload);
    out.extend_from_slice(&checksum.footer([payload]));
}

/// One framed record holding `payload`.
pub fn encode_record(payload: &[u8], checksum: PayloadChecksum) -> Vec<u8> {
    let mut out = Vec::with_capacity(payload.len() + FRAMING_BYTES);
    write_record(&mut out, payload, checksum);
    out
}

/// A whole record found by [`decode_record`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordRef<'a> {
    /// Absolute offset of the record's first byte.
    pub offset: u64,
    /// The payload (a serialized `Event`).
    pub payload: &'a [u8],
    /// Which checksum the payload carried.
    pub checksum: ChecksumKind,
}

impl RecordRef<'_> {
    /// The record's length with its framing (what smdebug's index calls `length`).
    pub fn framed_len(&self) -> usize {
        self.payload.len() + FRAMING_BYTES
    }

    /// Absolute offset of the byte after the record.
    pub fn end(&self) -> u64 {
        self.offset + self.framed_len() as u64
    }
}

/// What the bytes at a record start hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decoded<'a> {
    /// A whole, checksummed record.
    Record(RecordRef<'a>),
    /// The record is not all there: `needed` bytes from `offset` make it whole, `available`
    /// are present. A file still being written ends like this; so does a truncated one.
    Incomplete {
        /// The record's byte offset in the file.
        offset: u64,
        /// Bytes the record declares.
        needed: u64,
        /// Bytes there are.
        available: u64,
    },
}

/// Bytes that are not a valid record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Corruption {
    /// Absolute offset of the record that is damaged.
    pub offset: u64,
    /// What is wrong.
    pub reason: String,
}

impl Corruption {
    /// The crate error for this corruption in file `path`.
    pub fn in_file(self, path: &str) -> Error {
        Error::CorruptRecord {
            path: path.to_string(),
            offset: self.offset,
            reason: self.reason,
        }
    }
}

impl std::fmt::Display for Corruption {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "corrupt record at byte {}: {}", self.offset, self.reason)
    }
}

impl std::error::Error for Corruption {}

/// Decodes the record at the start of `buf`; `offset` is the absolute offset of `buf[0]` (used
/// in results and errors). An empty `buf` is `Incomplete` with `available == 0`.
pub fn decode_record(
    buf: &[u8],
    offset: u64,
    policy: PayloadCrcPolicy,
) -> Result<Decoded<'_>, Corruption> {
    let available = buf.len() as u64;
    if buf.len() < HEADER_BYTES {
        return Ok(Decoded::Incomplete {
            offset,
            needed: HEADER_BYTES as u64,
            available,
        });
    }
    let len_bytes: [u8; 8] = buf[..8].try_into().expect("8 bytes");
    let stored_len_crc = u32::from_le_bytes(buf[8..12].try_into().expect("4 bytes"));
    let len_crc = MaskedCrc::of(&len_bytes);
    if stored_len_crc != len_crc.0 {
        return Err(Corruption {
            offset,
            reason: format!(
                "length checksum mismatch (stored {stored_len_crc:#010x}, computed {:#010x})",
                len_crc.0
            ),
        });
    }
    let len = u64::from_le_bytes(len_bytes);
    let needed = len
        .checked_add(FRAMING_BYTES as u64)
        .ok_or_else(|| Corruption {
            offset,
            reason: format!("record length {len} overflows"),
        })?;
    if available < needed {
        return Ok(Decoded::Incomplete {
            offset,
            needed,
            available,
        });
    }
    // `needed <= available <= usize::MAX` here.
    let len = len as usize;
    let payload = &buf[HEADER_BYTES..HEADER_BYTES + len];
    let stored = u32::from_le_bytes(
        buf[HEADER_BYTES + len..HEADER_BYTES + len + FOOTER_BYTES]
            .try_into()
            .expect("4 bytes"),
    );
    let checksum = match policy {
        PayloadCrcPolicy::Ignore => ChecksumKind::Unchecked,
        _ => {
            let legacy = MaskedCrc::smdebug_legacy().0;
            let accept_legacy = matches!(
                policy,
                PayloadCrcPolicy::AcceptBoth | PayloadCrcPolicy::RequireLegacy
            );
            let accept_real = matches!(
                policy,
                PayloadCrcPolicy::AcceptBoth | PayloadCrcPolicy::RequireCrc32c
            );
            if accept_legacy && stored == legacy {
                ChecksumKind::SmdebugLegacy
            } else if accept_real && stored == MaskedCrc::of(payload).0 {
                ChecksumKind::Crc32c
            } else {
                let what = match policy {
                    PayloadCrcPolicy::RequireLegacy => "is not smdebug's legacy constant",
                    PayloadCrcPolicy::RequireCrc32c => "does not match the payload",
                    _ => "matches neither the payload nor smdebug's legacy constant",
                };
                return Err(Corruption {
                    offset,
                    reason: format!("payload checksum {stored:#010x} {what} ({len} payload bytes)"),
                });
            }
        }
    };
    Ok(Decoded::Record(RecordRef {
        offset,
        payload,
        checksum,
    }))
}

/// Iterates over the records of a byte buffer (a whole file, or a file read so far).
///
/// Yields records until the buffer ends or a record is damaged; [`RecordIter::tail`] then tells
/// whether the buffer ended cleanly, in the middle of a record, or at a corruption.
#[derive(Clone, Debug)]
pub struct RecordIter<'a> {
    buf: &'a [u8],
    pos: usize,
    base: u64,
    policy: PayloadCrcPolicy,
    tail: Option<Tail>,
}

/// How a buffer ended, after [`RecordIter`] has yielded its last record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Tail {
    /// Right after a whole record (or the buffer was empty).
    Clean,
    /// In the middle of a record starting at `offset`.
    Incomplete {
        /// The record's byte offset in the file.
        offset: u64,
        /// Bytes the record declares.
        needed: u64,
        /// Bytes there are.
        available: u64,
    },
}

impl<'a> RecordIter<'a> {
    /// Records of `buf`, whose first byte is at absolute offset `base`.
    pub fn new(buf: &'a [u8], base: u64, policy: PayloadCrcPolicy) -> Self {
        RecordIter {
            buf,
            pos: 0,
            base,
            policy,
            tail: None,
        }
    }

    /// Absolute offset of the next record (after the records yielded so far). A reader that
    /// follows a growing file resumes here.
    pub fn offset(&self) -> u64 {
        self.base + self.pos as u64
    }

    /// How the buffer ended; `None` until the iterator has returned `None` or an error.
    pub fn tail(&self) -> Option<&Tail> {
        self.tail.as_ref()
    }
}

impl<'a> Iterator for RecordIter<'a> {
    type Item = Result<RecordRef<'a>, Corruption>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.tail.is_some() {
            return None;
        }
        let rest = &self.buf[self.pos..];
        if rest.is_empty() {
            self.tail = Some(Tail::Clean);
            return None;
        }
        match decode_record(rest, self.offset(), self.policy) {
            Ok(Decoded::Record(r)) => {
                self.pos += r.framed_len();
                Some(Ok(r))
            }
            Ok(Decoded::Incomplete {
                offset,
                needed,
                available,
            }) => {
                self.tail = Some(Tail::Incomplete {
                    offset,
                    needed,
                    available,
                });
                None
            }
            Err(c) => {
                // Nothing after a damaged length can be trusted: stop here.
                self.tail = Some(Tail::Clean);
                Some(Err(c))
            }
        }
    }
}

/// Checks that `bytes` is exactly one whole record (as an index entry points at) and returns it.
/// `path` and `offset` name it in errors.
pub fn decode_exact_record<'a>(
    bytes: &'a [u8],
    path: &str,
    offset: u64,
    policy: PayloadCrcPolicy,
) -> crate::error::Result<RecordRef<'a>> {
    match decode_record(bytes, offset, policy).map_err(|c| c.in_file(path))? {
        Decoded::Record(r) if r.framed_len() == bytes.len() => Ok(r),
        Decoded::Record(r) => Err(Error::CorruptRecord {
            path: path.to_string(),
            offset,
            reason: format!(
                "the record is {} bytes long but the index says {}",
                r.framed_len(),
                bytes.len()
            ),
        }),
        Decoded::Incomplete {
            offset,
            needed,
            available,
        } => Err(Error::IncompleteRecord {
            path: path.to_string(),
            offset,
            needed,
            available,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masked_crc_matches_tensorflow_for_known_input() {
        // TensorFlow's crc32c_test: Mask(Value("foo")) round-trips, and the CRC-32C of
        // "123456789" is 0xE3069283 (the Castagnoli check value).
        assert_eq!(crc32c::crc32c(b"123456789"), 0xE306_9283);
        let crc = 0xE306_9283u32;
        let masked = MaskedCrc::from_crc(crc).0;
        let rot = masked.wrapping_sub(MASK_DELTA);
        assert_eq!(rot.rotate_left(15), crc, "unmask inverts mask");
        // Values computed by Python smdebug's masked_crc32c.
        assert_eq!(MaskedCrc::smdebug_legacy(), MaskedCrc(0x062D_C0B3));
        assert_eq!(MaskedCrc::of(b"hello"), MaskedCrc(0x191C_1FBB));
        assert_eq!(header(5)[8..], 0x3E04_B2EAu32.to_le_bytes());
    }

    #[test]
    fn crc_over_parts_equals_crc_over_whole() {
        let whole = b"hello, tensor world";
        assert_eq!(
            MaskedCrc::of_parts([&whole[..5], &whole[5..9], &whole[9..]]),
            MaskedCrc::of(whole)
        );
    }

    #[test]
    fn empty_buffer_is_incomplete_not_corrupt() {
        assert_eq!(
            decode_record(&[], 7, PayloadCrcPolicy::AcceptBoth),
            Ok(Decoded::Incomplete {
                offset: 7,
                needed: 12,
                available: 0
            })
        );
    }
}
