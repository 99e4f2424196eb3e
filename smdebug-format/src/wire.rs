//! Protobuf's wire format, read in place: the fields of a serialized message as slices of it.
//!
//! Readers decode tensor events with this rather than with the prost messages of
//! [`proto`](super::proto): a value's bytes stay where they are in the record (a reader copies
//! them once, into the array it returns), and no string or vector is allocated per event.

/// One field's value as the wire carries it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wire<'a> {
    Varint(u64),
    Fixed64([u8; 8]),
    Fixed32([u8; 4]),
    Bytes(&'a [u8]),
}

impl<'a> Wire<'a> {
    /// The field's bytes, or an error naming the field when it has another wire type.
    pub fn bytes(self, field: &str) -> Result<&'a [u8], String> {
        match self {
            Wire::Bytes(b) => Ok(b),
            other => Err(wrong_type(field, other)),
        }
    }

    /// The field as text (protobuf `string`: UTF-8).
    pub fn text(self, field: &str) -> Result<&'a str, String> {
        std::str::from_utf8(self.bytes(field)?)
            .map_err(|_| format!("field `{field}` is not UTF-8 text"))
    }

    pub fn varint(self, field: &str) -> Result<u64, String> {
        match self {
            Wire::Varint(v) => Ok(v),
            other => Err(wrong_type(field, other)),
        }
    }

    pub fn fixed64(self, field: &str) -> Result<[u8; 8], String> {
        match self {
            Wire::Fixed64(v) => Ok(v),
            other => Err(wrong_type(field, other)),
        }
    }

    pub fn fixed32(self, field: &str) -> Result<[u8; 4], String> {
        match self {
            Wire::Fixed32(v) => Ok(v),
            other => Err(wrong_type(field, other)),
        }
    }
}

fn wrong_type(field: &str, found: Wire<'_>) -> String {
    let kind = match found {
        Wire::Varint(_) => "a varint",
        Wire::Fixed64(_) => "a 64-bit value",
        Wire::Fixed32(_) => "a 32-bit value",
        Wire::Bytes(_) => "a length-delimited value",
    };
    format!("field `{field}` is {kind}, which is not its wire type")
}

/// The fields of one serialized message, in order: `(field number, value)`. A malformed field
/// (a varint longer than 10 bytes, a length past the end, field number 0, a group or an unknown
/// wire type) is an error, after which the iterator ends.
#[derive(Clone, Debug)]
pub struct Fields<'a> {
    buf: &'a [u8],
}

impl<'a> Fields<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Fields { buf }
    }

    /// Bytes not read yet.
    pub fn rest(&self) -> usize {
        self.buf.len()
    }

    #[inline]
    fn varint(&mut self) -> Result<u64, String> {
        // Most varints (keys, small lengths, dtypes, dimensions) are one byte.
        if let Some((&b, rest)) = self.buf.split_first()
            && b < 0x80
        {
            self.buf = rest;
            return Ok(u64::from(b));
        }
        self.varint_long()
    }

    fn varint_long(&mut self) -> Result<u64, String> {
        let mut value = 0u64;
        for (i, &b) in self.buf.iter().take(10).enumerate() {
            // The tenth byte may only carry the top bit of a u64.
            if i == 9 && b > 1 {
                return Err("a varint overflows 64 bits".to_string());
            }
            value |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                self.buf = &self.buf[i + 1..];
                return Ok(value);
            }
        }
        Err("a varint runs past the end of its message".to_string())
    }

    #[inline]
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if self.buf.len() < n {
            return Err(format!(
                "a field of {n} bytes runs past the end of its message ({} left)",
                self.buf.len()
            ));
        }
        let (head, rest) = self.buf.split_at(n);
        self.buf = rest;
        Ok(head)
    }

    #[inline]
    fn field(&mut self) -> Result<(u32, Wire<'a>), String> {
        let key = self.varint()?;
        let number = key >> 3;
        if number == 0 || number > u64::from(u32::MAX >> 3) {
            return Err(format!("bad field number {number}"));
        }
        let value = match key & 7 {
            0 => Wire::Varint(self.varint()?),
            1 => Wire::Fixed64(self.take(8)?.try_into().expect("8 bytes")),
            2 => {
                let len = self.varint()?;
                let len = usize::try_from(len).map_err(|_| format!("field length {len}"))?;
                Wire::Bytes(self.take(len)?)
            }
            5 => Wire::Fixed32(self.take(4)?.try_into().expect("4 bytes")),
            3 | 4 => return Err(format!("field {number} is a group, which is not supported")),
            w => return Err(format!("field {number} has unknown wire type {w}")),
        };
        Ok((number as u32, value))
    }
}

impl<'a> Iterator for Fields<'a> {
    type Item = Result<(u32, Wire<'a>), String>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        if self.buf.is_empty() {
            return None;
        }
        let field = self.field();
        if field.is_err() {
            self.buf = &[];
        }
        Some(field)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    #[test]
    fn reads_the_fields_prost_writes() {
        let msg = crate::proto::PluginData {
            plugin_name: "mode".to_string(),
            content: b"1".to_vec(),
        };
        let bytes = msg.encode_to_vec();
        let fields: Vec<_> = Fields::new(&bytes).collect::<Result<_, _>>().unwrap();
        assert_eq!(
            fields,
            vec![(1, Wire::Bytes(b"mode")), (2, Wire::Bytes(b"1"))]
        );
        let ev = crate::proto::Event {
            wall_time: 1.5,
            step: -3,
            what: None,
        };
        let bytes = ev.encode_to_vec();
        let fields: Vec<_> = Fields::new(&bytes).collect::<Result<_, _>>().unwrap();
        assert_eq!(fields[0], (1, Wire::Fixed64(1.5f64.to_le_bytes())));
        assert_eq!(fields[1], (2, Wire::Varint(-3i64 as u64)));
    }

    #[test]
    fn malformed_fields_are_errors_and_end_the_message() {
        // Length 5 with 2 bytes left.
        let mut it = Fields::new(&[0x0a, 0x05, 0x01, 0x02]);
        assert!(it.next().unwrap().is_err());
        assert!(it.next().is_none());
        // An 11-byte varint.
        assert!(
            Fields::new(&[
                0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f
            ])
            .next()
            .unwrap()
            .is_err()
        );
        // Field number 0, and a group.
        assert!(Fields::new(&[0x00, 0x01]).next().unwrap().is_err());
        assert!(Fields::new(&[0x0b]).next().unwrap().is_err());
        // u64::MAX in ten bytes is fine.
        let mut max = vec![0x08];
        prost::encoding::encode_varint(u64::MAX, &mut max);
        assert_eq!(
            Fields::new(&max).next().unwrap(),
            Ok((1, Wire::Varint(u64::MAX)))
        );
    }
}
