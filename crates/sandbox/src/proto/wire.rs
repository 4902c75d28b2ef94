//! The protobuf wire format at its lowest level: varints, tags and the
//! length-delimited records they frame. Pure, no schema.
//!
//! The reader must never panic or loop on hostile bytes: every read is
//! bounds-checked and every record consumes at least one byte.

use std::fmt;

/// Why bytes are not valid protobuf.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct WireError(pub(crate) String);

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

pub(crate) type WireResult<T> = Result<T, WireError>;

fn unexpected_eof() -> WireError {
    WireError("unexpected EOF".into())
}

/// The payload of one record.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Payload<'a> {
    Varint(u64),
    Fixed64(u64),
    Bytes(&'a [u8]),
    Fixed32(u32),
}

impl Payload<'_> {
    /// Wire type numbers as protobuf names them in errors.
    pub(crate) fn wire_type(&self) -> u8 {
        match self {
            Payload::Varint(_) => 0,
            Payload::Fixed64(_) => 1,
            Payload::Bytes(_) => 2,
            Payload::Fixed32(_) => 5,
        }
    }
}

/// Reads the records of one message in order.
pub(crate) struct Reader<'a> {
    data: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(data: &'a [u8]) -> Self {
        Self { data, at: 0 }
    }

    pub(crate) fn varint(&mut self) -> WireResult<u64> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = *self.data.get(self.at).ok_or_else(unexpected_eof)?;
            self.at += 1;
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(WireError("integer overflow".into()))
    }

    pub(crate) fn at_end(&self) -> bool {
        self.at >= self.data.len()
    }

    pub(crate) fn fixed64(&mut self) -> WireResult<u64> {
        let b = self.take(8)?;
        Ok(u64::from_le_bytes(
            b.try_into().map_err(|_| unexpected_eof())?,
        ))
    }

    pub(crate) fn fixed32(&mut self) -> WireResult<u32> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes(
            b.try_into().map_err(|_| unexpected_eof())?,
        ))
    }

    fn take(&mut self, n: usize) -> WireResult<&'a [u8]> {
        let end = self.at.checked_add(n).ok_or_else(unexpected_eof)?;
        let bytes = self.data.get(self.at..end).ok_or_else(unexpected_eof)?;
        self.at = end;
        Ok(bytes)
    }

    /// The next record as (field number, payload), or `None` at the end.
    pub(crate) fn next_record(&mut self) -> WireResult<Option<(u32, Payload<'a>)>> {
        if self.at_end() {
            return Ok(None);
        }
        let key = self.varint()?;
        let number = u32::try_from(key >> 3)
            .ok()
            .filter(|n| *n > 0 && *n < (1 << 29))
            .ok_or_else(|| WireError(format!("illegal field number {}", key >> 3)))?;
        let payload = match key & 7 {
            0 => Payload::Varint(self.varint()?),
            1 => Payload::Fixed64(self.fixed64()?),
            2 => {
                let len = usize::try_from(self.varint()?)
                    .map_err(|_| WireError("negative length found during unmarshaling".into()))?;
                Payload::Bytes(self.take(len)?)
            }
            5 => Payload::Fixed32(self.fixed32()?),
            other => {
                return Err(WireError(format!(
                    "illegal wireType {other} for field {number}"
                )));
            }
        };
        Ok(Some((number, payload)))
    }
}

pub(crate) fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

pub(crate) fn put_key(out: &mut Vec<u8>, number: u32, wire_type: u8) {
    put_varint(out, (u64::from(number) << 3) | u64::from(wire_type));
}

pub(crate) fn put_bytes(out: &mut Vec<u8>, number: u32, bytes: &[u8]) {
    put_key(out, number, 2);
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip_including_negative_numbers() {
        for value in [0u64, 1, 127, 128, 300, u64::MAX, (-1i64) as u64] {
            let mut out = Vec::new();
            put_varint(&mut out, value);
            assert_eq!(Reader::new(&out).varint(), Ok(value));
        }
        // -1 as a 64-bit two's complement takes ten bytes, as protobuf says.
        let mut out = Vec::new();
        put_varint(&mut out, (-1i64) as u64);
        assert_eq!(out.len(), 10);
    }

    #[test]
    fn truncated_records_are_errors_not_panics() {
        let mut out = Vec::new();
        put_bytes(&mut out, 1, b"hello");
        for cut in 0..out.len() {
            let mut reader = Reader::new(&out[..cut]);
            let result = reader.next_record();
            assert!(cut == 0 || result.is_err(), "cut at {cut}: {result:?}");
        }
        assert!(Reader::new(&[0x80; 11]).varint().is_err());
        assert!(Reader::new(&[0x0b]).next_record().is_err(), "wire type 3");
        assert!(Reader::new(&[0x00, 0x00]).next_record().is_err(), "field 0");
    }
}
