//! GGUF helpers: the committed gguf-py fixtures and manifests of
//! `tests/data`, detllm's reader in the manifest's form, and a byte builder
//! for crafting (possibly invalid) files.

use detllm::F32;
use detllm::quant::GgmlType;

/// A test data file from `tests/data`.
pub fn data(name: &str) -> Vec<u8> {
    let p = super::model::repo_root().join("tests/data").join(name);
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// One line of a gguf-py manifest (`scripts/gguf_fixtures.py manifest`).
#[derive(Debug, PartialEq)]
pub enum Entry {
    Kv {
        key: String,
        ty: u32,
        array: Option<(u32, usize)>,
    },
    Tensor {
        name: String,
        ty: u32,
        ne: Vec<u64>,
        abs_offset: u64,
        n_bytes: u64,
    },
    /// The first values (up to 8) of row 0 of an F32 or F16 tensor, as f32 bits.
    Row0 { name: String, bits: Vec<u32> },
}

pub fn manifest(name: &str) -> Vec<Entry> {
    let text = String::from_utf8(data(name)).unwrap();
    text.lines()
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            match f[0] {
                "kv" => Entry::Kv {
                    key: f[1].to_string(),
                    ty: f[2].parse().unwrap(),
                    array: (f[3] != "-").then(|| (f[3].parse().unwrap(), f[4].parse().unwrap())),
                },
                "tensor" => Entry::Tensor {
                    name: f[1].to_string(),
                    ty: f[2].parse().unwrap(),
                    ne: f[3].split(',').map(|d| d.parse().unwrap()).collect(),
                    abs_offset: f[4].parse().unwrap(),
                    n_bytes: f[5].parse().unwrap(),
                },
                "row0" => Entry::Row0 {
                    name: f[1].to_string(),
                    bits: f[2]
                        .split(',')
                        .map(|b| u32::from_str_radix(b, 16).unwrap())
                        .collect(),
                },
                _ => panic!("bad manifest line {l}"),
            }
        })
        .collect()
}

/// What detllm's reader sees, in the manifest's form.
pub fn entries(f: &detllm::gguf::File<'_>) -> Vec<Entry> {
    let mut out = Vec::new();
    for (k, v) in f.kvs() {
        out.push(Entry::Kv {
            key: String::from_utf8(k.to_vec()).unwrap(),
            ty: v.ty() as u32,
            array: match v {
                detllm::gguf::Value::Array(a) => Some((a.elem_type() as u32, a.len())),
                _ => None,
            },
        });
    }
    let base = f.bytes().as_ptr() as usize;
    for t in f.tensors() {
        let abs = t.data.as_ptr() as usize - base;
        assert_eq!(abs as u64, f.data_offset() + t.offset);
        out.push(Entry::Tensor {
            name: t.name_str().to_string(),
            ty: t.ty as u32,
            ne: t.ne[..t.n_dims as usize].to_vec(),
            abs_offset: abs as u64,
            n_bytes: t.data.len() as u64,
        });
        let n = t.ne[0].min(8) as usize;
        let bits: Option<Vec<u32>> = match t.ty {
            GgmlType::F32 => Some(
                t.data[..4 * n]
                    .chunks_exact(4)
                    .map(|b| u32::from_le_bytes(b.try_into().unwrap()))
                    .collect(),
            ),
            GgmlType::F16 => Some(
                t.data[..2 * n]
                    .chunks_exact(2)
                    .map(|b| F32::from_f16_bits(u16::from_le_bytes([b[0], b[1]])).to_bits())
                    .collect(),
            ),
            _ => None,
        };
        if let Some(bits) = bits {
            out.push(Entry::Row0 {
                name: t.name_str().to_string(),
                bits,
            });
        }
    }
    out
}

/// A little-endian byte builder for crafting (possibly invalid) files.
#[derive(Clone, Default)]
pub struct Raw(pub Vec<u8>);

impl Raw {
    pub fn new() -> Self {
        Raw(Vec::new())
    }
    pub fn header(version: u32, n_tensors: u64, n_kv: u64) -> Self {
        let mut r = Raw::new();
        r.bytes(b"GGUF").u32(version).u64(n_tensors).u64(n_kv);
        r
    }
    pub fn bytes(&mut self, b: &[u8]) -> &mut Self {
        self.0.extend_from_slice(b);
        self
    }
    pub fn u8(&mut self, v: u8) -> &mut Self {
        self.bytes(&[v])
    }
    pub fn u32(&mut self, v: u32) -> &mut Self {
        self.bytes(&v.to_le_bytes())
    }
    pub fn u64(&mut self, v: u64) -> &mut Self {
        self.bytes(&v.to_le_bytes())
    }
    pub fn str(&mut self, s: &[u8]) -> &mut Self {
        self.u64(s.len() as u64).bytes(s)
    }
    /// A key/value pair: key, type id, then `value` bytes.
    pub fn kv(&mut self, key: &[u8], ty: u32, value: &[u8]) -> &mut Self {
        self.str(key).u32(ty).bytes(value)
    }
    pub fn kv_u32(&mut self, key: &[u8], v: u32) -> &mut Self {
        self.kv(key, 4, &v.to_le_bytes())
    }
    /// A tensor info record.
    pub fn info(&mut self, name: &[u8], ne: &[u64], ty: u32, offset: u64) -> &mut Self {
        self.str(name).u32(ne.len() as u32);
        for &d in ne {
            self.u64(d);
        }
        self.u32(ty).u64(offset)
    }
    pub fn pad_to(&mut self, align: usize) -> &mut Self {
        while !self.0.len().is_multiple_of(align) {
            self.0.push(0);
        }
        self
    }
    pub fn zeros(&mut self, n: usize) -> &mut Self {
        self.0.resize(self.0.len() + n, 0);
        self
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    pub fn len(&self) -> usize {
        self.0.len()
    }
}
