//! Just enough protobuf wire format to write request bodies and read
//! answers, by upstream's `generated.proto` field numbers. It shares
//! nothing with the sandbox's converter, so a bug there cannot hide here.
//! Test code: it panics on bytes it does not expect.

pub fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// A length-delimited field.
pub fn bytes(number: u32, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    varint(&mut out, u64::from(number) << 3 | 2);
    varint(&mut out, payload.len() as u64);
    out.extend_from_slice(payload);
    out
}

pub fn s(number: u32, text: &str) -> Vec<u8> {
    bytes(number, text.as_bytes())
}

/// A varint (int32/int64) field.
pub fn int(number: u32, v: i64) -> Vec<u8> {
    let mut out = Vec::new();
    varint(&mut out, u64::from(number) << 3);
    varint(&mut out, v as u64);
    out
}

/// A message field made of other fields.
pub fn m(number: u32, fields: &[Vec<u8>]) -> Vec<u8> {
    bytes(number, &fields.concat())
}

/// One entry of a map<string, string>.
pub fn entry(number: u32, key: &str, value: &str) -> Vec<u8> {
    m(number, &[s(1, key), s(2, value)])
}

/// `k8s\0` and a runtime.Unknown{typeMeta{apiVersion, kind}, raw}.
pub fn envelope(api_version: &str, kind: &str, raw: &[Vec<u8>]) -> Vec<u8> {
    let mut out = b"k8s\0".to_vec();
    out.extend(m(1, &[s(1, api_version), s(2, kind)]));
    out.extend(bytes(2, &raw.concat()));
    out
}

fn read(data: &mut &[u8]) -> u64 {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = data[0];
        *data = &data[1..];
        v |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            break;
        }
    }
    v
}

/// The top-level fields of a message: (number, varint, bytes).
pub fn fields(mut data: &[u8]) -> Vec<(u32, u64, Vec<u8>)> {
    let mut out = Vec::new();
    while !data.is_empty() {
        let key = read(&mut data);
        match key & 7 {
            0 => out.push(((key >> 3) as u32, read(&mut data), Vec::new())),
            2 => {
                let len = read(&mut data) as usize;
                out.push(((key >> 3) as u32, 0, data[..len].to_vec()));
                data = &data[len..];
            }
            other => panic!("wire type {other} not expected in these tests"),
        }
    }
    out
}

/// The bytes of field `number` (empty when absent).
pub fn field(data: &[u8], number: u32) -> Vec<u8> {
    fields(data)
        .into_iter()
        .find(|f| f.0 == number)
        .map(|f| f.2)
        .unwrap_or_default()
}

/// A string field.
pub fn text(data: &[u8], number: u32) -> String {
    String::from_utf8(field(data, number)).expect("UTF-8")
}

/// A varint field (0 when absent, as proto2 reads it).
pub fn number(data: &[u8], number: u32) -> u64 {
    fields(data)
        .into_iter()
        .find(|f| f.0 == number)
        .map_or(0, |f| f.1)
}

/// (apiVersion, kind, raw) of an enveloped answer.
pub fn open(body: &[u8]) -> (String, String, Vec<u8>) {
    assert!(body.starts_with(b"k8s\0"), "no protobuf magic: {body:?}");
    let unknown = &body[4..];
    let type_meta = field(unknown, 1);
    (text(&type_meta, 1), text(&type_meta, 2), field(unknown, 2))
}

/// The entries of a map<string, string> field.
pub fn map(data: &[u8], number: u32) -> Vec<(String, String)> {
    fields(data)
        .into_iter()
        .filter(|f| f.0 == number)
        .map(|f| (text(&f.2, 1), text(&f.2, 2)))
        .collect()
}
