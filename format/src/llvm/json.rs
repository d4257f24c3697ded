//! Exact-integer parsing of LLVM's JSON launch descriptors.
//!
//! LLVM writes every value but `Name` as a 64-bit integer (argument values
//! are device pointers, often above 2^53, and -1 for "no launch
//! environment"). serde_json keeps integers as `u64`/`i64` and only falls
//! back to `f64` for numbers with a fraction, an exponent or more than 64
//! bits, so reading through [`serde_json::Number`] is exact; anything that
//! did not parse as an integer is rejected with the key that held it.

use serde_json::{Map, Value};

/// Largest descriptor accepted (a real one is a few hundred bytes; even a
/// kernel with 100k arguments stays far below this).
pub const MAX_DESCRIPTOR_BYTES: u64 = 16 * 1024 * 1024;

/// Why a descriptor did not parse or a key did not hold what was expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JsonError {
    #[error("not valid JSON at line {line}, column {column}: {message}")]
    Syntax {
        line: usize,
        column: usize,
        message: String,
    },
    #[error("the descriptor is not a JSON object")]
    NotObject,
    #[error("key `{key}` is missing; expected {expected}")]
    Missing { key: String, expected: &'static str },
    #[error("key `{key}`: expected {expected}, found {found}")]
    Type {
        key: String,
        expected: &'static str,
        found: String,
    },
}

impl JsonError {
    /// The key the error concerns, if any.
    pub fn key(&self) -> Option<&str> {
        match self {
            JsonError::Missing { key, .. } | JsonError::Type { key, .. } => Some(key),
            _ => None,
        }
    }
}

/// A parsed descriptor: the top-level JSON object, read with typed getters.
#[derive(Debug, Clone)]
pub struct Descriptor {
    map: Map<String, Value>,
}

/// Parse descriptor bytes into a [`Descriptor`] (no key is checked yet).
pub fn parse_descriptor(bytes: &[u8]) -> Result<Descriptor, JsonError> {
    let value: Value = serde_json::from_slice(bytes).map_err(|e| JsonError::Syntax {
        line: e.line(),
        column: e.column(),
        message: e.to_string(),
    })?;
    match value {
        Value::Object(map) => Ok(Descriptor { map }),
        _ => Err(JsonError::NotObject),
    }
}

const U64: &str = "a non-negative 64-bit integer";
const BITS64: &str = "a 64-bit integer (signed or unsigned)";
const I64: &str = "a signed 64-bit integer";

/// Short description of a JSON value for error messages.
fn describe(v: &Value) -> String {
    let s = match v {
        Value::Null => return "null".into(),
        Value::Bool(b) => return format!("the boolean {b}"),
        Value::Number(n) if n.is_f64() => {
            return format!("the non-integer number {n} (floats are not allowed here)")
        }
        Value::Number(n) => return format!("the integer {n}"),
        Value::String(s) => format!("the string {s:?}"),
        Value::Array(a) => return format!("an array of {} elements", a.len()),
        Value::Object(_) => return "an object".into(),
    };
    if s.len() > 80 {
        let mut cut = 80;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        format!("{}...", &s[..cut])
    } else {
        s
    }
}

fn type_err(key: &str, expected: &'static str, v: &Value) -> JsonError {
    JsonError::Type {
        key: key.to_string(),
        expected,
        found: describe(v),
    }
}

fn as_u64(key: &str, v: &Value) -> Result<u64, JsonError> {
    match v {
        Value::Number(n) => n.as_u64().ok_or_else(|| type_err(key, U64, v)),
        _ => Err(type_err(key, U64, v)),
    }
}

fn as_i64(key: &str, v: &Value) -> Result<i64, JsonError> {
    match v {
        Value::Number(n) => n.as_i64().ok_or_else(|| type_err(key, I64, v)),
        _ => Err(type_err(key, I64, v)),
    }
}

/// A 64-bit pattern: negative values are reinterpreted (-1 -> u64::MAX).
fn as_bits(key: &str, v: &Value) -> Result<u64, JsonError> {
    match v {
        Value::Number(n) => n
            .as_u64()
            .or_else(|| n.as_i64().map(|i| i as u64))
            .ok_or_else(|| type_err(key, BITS64, v)),
        _ => Err(type_err(key, BITS64, v)),
    }
}

impl Descriptor {
    /// Whether the key is present (any type).
    pub fn has(&self, key: &str) -> bool {
        self.map.contains_key(key)
    }

    /// The keys, in the order serde_json iterates them.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.map.keys().map(String::as_str)
    }

    fn get(&self, key: &str, expected: &'static str) -> Result<&Value, JsonError> {
        self.map.get(key).ok_or_else(|| JsonError::Missing {
            key: key.to_string(),
            expected,
        })
    }

    pub fn string(&self, key: &str) -> Result<String, JsonError> {
        const E: &str = "a string";
        match self.get(key, E)? {
            Value::String(s) => Ok(s.clone()),
            v => Err(type_err(key, E, v)),
        }
    }

    pub fn u64(&self, key: &str) -> Result<u64, JsonError> {
        as_u64(key, self.get(key, U64)?)
    }

    pub fn i64(&self, key: &str) -> Result<i64, JsonError> {
        as_i64(key, self.get(key, I64)?)
    }

    /// Integer as a bit pattern (negative values wrap, -1 -> `u64::MAX`).
    pub fn bits(&self, key: &str) -> Result<u64, JsonError> {
        as_bits(key, self.get(key, BITS64)?)
    }

    fn array(&self, key: &str, expected: &'static str) -> Result<&Vec<Value>, JsonError> {
        match self.get(key, expected)? {
            Value::Array(a) => Ok(a),
            v => Err(type_err(key, expected, v)),
        }
    }

    /// Array of bit patterns (`ArgPtrs`).
    pub fn bits_array(&self, key: &str) -> Result<Vec<u64>, JsonError> {
        let a = self.array(key, "an array of 64-bit integers")?;
        a.iter()
            .enumerate()
            .map(|(i, v)| as_bits(&format!("{key}[{i}]"), v))
            .collect()
    }

    /// Array of signed integers (`ArgOffsets`).
    pub fn i64_array(&self, key: &str) -> Result<Vec<i64>, JsonError> {
        let a = self.array(key, "an array of signed 64-bit integers")?;
        a.iter()
            .enumerate()
            .map(|(i, v)| as_i64(&format!("{key}[{i}]"), v))
            .collect()
    }

    /// A `[min, max]` pair of non-negative integers (`TeamsLimits`).
    pub fn u64_pair(&self, key: &str) -> Result<[u64; 2], JsonError> {
        const E: &str = "an array of two non-negative integers";
        let a = self.array(key, E)?;
        if a.len() != 2 {
            return Err(JsonError::Type {
                key: key.to_string(),
                expected: E,
                found: format!("an array of {} elements", a.len()),
            });
        }
        Ok([
            as_u64(&format!("{key}[0]"), &a[0])?,
            as_u64(&format!("{key}[1]"), &a[1])?,
        ])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_are_exact_and_minus_one_is_all_ones() {
        let d = parse_descriptor(
            br#"{"A":[-1,9007199254740993,18446744073709551615],"B":-9223372036854775808}"#,
        )
        .unwrap();
        assert_eq!(
            d.bits_array("A").unwrap(),
            vec![u64::MAX, 9007199254740993, u64::MAX]
        );
        assert_eq!(d.i64("B").unwrap(), i64::MIN);
        assert_eq!(d.bits("B").unwrap(), 1u64 << 63);
    }

    #[test]
    fn floats_strings_negatives_and_overflow_name_the_key() {
        let d = parse_descriptor(
            br#"{"F":1.0,"E":1e3,"S":"7","N":-3,"H":18446744073709551616,"P":[1,2.5]}"#,
        )
        .unwrap();
        for key in ["F", "E", "S", "N", "H"] {
            let e = d.u64(key).unwrap_err();
            assert_eq!(e.key(), Some(key), "{e}");
        }
        assert!(d.u64("F").unwrap_err().to_string().contains("floats"));
        assert_eq!(d.bits_array("P").unwrap_err().key(), Some("P[1]"));
        assert!(matches!(d.u64("X"), Err(JsonError::Missing { .. })));
        assert!(matches!(
            parse_descriptor(b"[1]"),
            Err(JsonError::NotObject)
        ));
        assert!(matches!(
            parse_descriptor(b"{"),
            Err(JsonError::Syntax { .. })
        ));
    }
}
