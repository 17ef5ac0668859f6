//! Deserialising a configuration object into a plugin's own type while remembering which
//! top-level key was being read, so an error can name it (serde_json's own errors from a
//! `Value` carry no path; Go's name the struct field).

use serde::de::{self, DeserializeOwned, DeserializeSeed, MapAccess, Visitor};
use serde_json::{Map, Value};
use std::cell::RefCell;

/// Deserialises `map` as a `T`; on failure, the key being read (if any) and the error.
pub(crate) fn deserialize<T: DeserializeOwned>(map: &Map<String, Value>) -> Result<T, (Option<String>, String)> {
    let current = RefCell::new(None);
    let result = T::deserialize(Object { map, current: &current });
    result.map_err(|e| {
        let text = e.to_string();
        // serde's own messages already name missing and unknown fields.
        let key = if text.starts_with("missing field") || text.starts_with("unknown field") {
            None
        } else {
            current.into_inner()
        };
        (key, text)
    })
}

/// The object, as a deserializer that records each key it hands out.
struct Object<'de> {
    map: &'de Map<String, Value>,
    current: &'de RefCell<Option<String>>,
}

impl<'de> de::Deserializer<'de> for Object<'de> {
    type Error = serde_json::Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        visitor.visit_map(Entries { iter: self.map.iter(), value: None, current: self.current })
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf option unit
        unit_struct newtype_struct seq tuple tuple_struct map struct enum identifier ignored_any
    }
}

struct Entries<'de> {
    iter: serde_json::map::Iter<'de>,
    value: Option<&'de Value>,
    current: &'de RefCell<Option<String>>,
}

impl<'de> MapAccess<'de> for Entries<'de> {
    type Error = serde_json::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, Self::Error> {
        match self.iter.next() {
            Some((k, v)) => {
                self.value = Some(v);
                *self.current.borrow_mut() = Some(k.clone());
                seed.deserialize(de::value::BorrowedStrDeserializer::new(k.as_str())).map(Some)
            }
            None => {
                *self.current.borrow_mut() = None;
                Ok(None)
            }
        }
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Self::Error> {
        match self.value.take() {
            Some(v) => seed.deserialize(v),
            None => Err(de::Error::custom("value requested before its key")),
        }
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.iter.len())
    }
}
