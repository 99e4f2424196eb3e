//! Streaming deserialization of a Chrome trace with serde seeds: the top-level object is visited
//! key by key, `traceEvents` element by element, and each event field by field, so no event and
//! no part of the document outlives the visit that reads it.

use std::fmt;

use serde::Deserializer;
use serde::de::{DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};

use super::stats::{Accumulator, Category, EventFields};

/// What the top-level visit learned besides the events themselves.
#[derive(Debug, Default)]
pub(crate) struct TopLevel {
    /// A `traceEvents` array (or a bare top-level event array) was found.
    pub(crate) saw_events: bool,
    /// `distributedInfo.rank`, when present and a non-negative integer.
    pub(crate) rank: Option<u32>,
}

/// Reusable text buffers for one event's string fields, so that visiting an event allocates
/// nothing once the buffers have grown to the longest name.
#[derive(Debug, Default)]
pub(crate) struct Scratch {
    ph: String,
    cat: String,
    name: String,
    other: String,
}

/// Seed for the whole document.
pub(crate) struct TraceSeed<'a> {
    pub(crate) acc: &'a mut Accumulator,
    pub(crate) scratch: &'a mut Scratch,
}

impl<'de> DeserializeSeed<'de> for TraceSeed<'_> {
    type Value = TopLevel;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for TraceSeed<'_> {
    type Value = TopLevel;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a Chrome trace: an object with a \"traceEvents\" array, or an array of events")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut top = TopLevel::default();
        while let Some(key) = map.next_key_seed(KeySeed(TOP_KEYS))? {
            match key {
                TOP_TRACE_EVENTS => {
                    map.next_value_seed(EventsSeed {
                        acc: &mut *self.acc,
                        scratch: &mut *self.scratch,
                    })?;
                    top.saw_events = true;
                }
                TOP_DISTRIBUTED_INFO => {
                    if let Some(rank) = map.next_value_seed(DistributedInfoSeed {
                        scratch: &mut self.scratch.other,
                    })? {
                        top.rank = Some(rank);
                    }
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(top)
    }

    // The Chrome trace format also allows a bare array of events.
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        visit_events(seq, self.acc, self.scratch)?;
        Ok(TopLevel {
            saw_events: true,
            rank: None,
        })
    }
}

/// Index of a key within a key list, or `usize::MAX` for a key that is not listed.
type KeyIndex = usize;

const TOP_KEYS: &[&str] = &["traceEvents", "distributedInfo"];
const TOP_TRACE_EVENTS: KeyIndex = 0;
const TOP_DISTRIBUTED_INFO: KeyIndex = 1;

const EVENT_KEYS: &[&str] = &["ph", "cat", "name", "ts", "dur", "pid", "args"];
const EV_PH: KeyIndex = 0;
const EV_CAT: KeyIndex = 1;
const EV_NAME: KeyIndex = 2;
const EV_TS: KeyIndex = 3;
const EV_DUR: KeyIndex = 4;
const EV_PID: KeyIndex = 5;
const EV_ARGS: KeyIndex = 6;

const ARGS_KEYS: &[&str] = &["device"];
const ARGS_DEVICE: KeyIndex = 0;

const DIST_KEYS: &[&str] = &["rank"];
const DIST_RANK: KeyIndex = 0;

/// Seed that maps an object key to its index in a list without allocating.
struct KeySeed(&'static [&'static str]);

impl<'de> DeserializeSeed<'de> for KeySeed {
    type Value = KeyIndex;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeySeed {
    type Value = KeyIndex;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object key")
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(self.0.iter().position(|k| *k == v).unwrap_or(usize::MAX))
    }
}

/// Seed for the `traceEvents` array.
struct EventsSeed<'a> {
    acc: &'a mut Accumulator,
    scratch: &'a mut Scratch,
}

impl<'de> DeserializeSeed<'de> for EventsSeed<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for EventsSeed<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("\"traceEvents\" to be an array of event objects")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        visit_events(seq, self.acc, self.scratch)
    }
}

fn visit_events<'de, A: SeqAccess<'de>>(
    mut seq: A,
    acc: &mut Accumulator,
    scratch: &mut Scratch,
) -> Result<(), A::Error> {
    while seq
        .next_element_seed(EventSeed {
            acc: &mut *acc,
            scratch: &mut *scratch,
        })?
        .is_some()
    {}
    Ok(())
}

/// Seed for one event object; records the event into the accumulator and returns nothing.
struct EventSeed<'a> {
    acc: &'a mut Accumulator,
    scratch: &'a mut Scratch,
}

impl<'de> DeserializeSeed<'de> for EventSeed<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for EventSeed<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a trace event object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let s = self.scratch;
        s.ph.clear();
        s.cat.clear();
        s.name.clear();
        let mut ts = None;
        let mut dur = None;
        let mut pid = None;
        let mut device = None;
        // Kineto writes "cat" before "name" and "args". Once the category is known, a name
        // no table uses and args without a GPU device need not be decoded, only skipped, which
        // is markedly cheaper; in any other field order everything is decoded.
        let mut category = None;
        while let Some(key) = map.next_key_seed(KeySeed(EVENT_KEYS))? {
            match key {
                EV_PH => {
                    map.next_value_seed(ScalarSeed(&mut s.ph))?;
                }
                EV_CAT => {
                    s.cat.clear();
                    map.next_value_seed(ScalarSeed(&mut s.cat))?;
                    category = Some(Category::from_cat(&s.cat));
                }
                EV_NAME if category == Some(Category::Other) => {
                    map.next_value::<IgnoredAny>()?;
                }
                EV_ARGS if category.is_some_and(|c| !c.is_gpu_activity()) => {
                    map.next_value::<IgnoredAny>()?;
                }
                EV_NAME => {
                    map.next_value_seed(ScalarSeed(&mut s.name))?;
                }
                EV_TS => {
                    ts = map
                        .next_value_seed(ScalarSeed(&mut s.other))?
                        .number(&s.other)
                }
                EV_DUR => {
                    dur = map
                        .next_value_seed(ScalarSeed(&mut s.other))?
                        .number(&s.other)
                }
                EV_PID => pid = map.next_value_seed(ScalarSeed(&mut s.other))?.integer(),
                EV_ARGS => {
                    device = map.next_value_seed(ArgsSeed {
                        scratch: &mut s.other,
                    })?
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        self.acc.record(&EventFields {
            ph: &s.ph,
            cat: &s.cat,
            name: &s.name,
            ts,
            dur,
            pid,
            device,
        });
        Ok(())
    }
}

/// What a scalar-or-anything field held.
#[derive(Debug, Clone, Copy)]
enum Scalar {
    /// A JSON number; integers keep their exact value alongside.
    Number(f64, Option<i64>),
    /// A string, copied into the seed's buffer.
    Text,
    /// null, a boolean, an array or an object (consumed and discarded).
    Other,
}

impl Scalar {
    /// The value as a number; numeric strings are accepted because some trace writers quote
    /// timestamps.
    fn number(self, text: &str) -> Option<f64> {
        match self {
            Self::Number(v, _) => Some(v),
            Self::Text => text.trim().parse().ok(),
            Self::Other => None,
        }
    }

    /// The value as an exact integer (integral floats included).
    fn integer(self) -> Option<i64> {
        match self {
            Self::Number(_, Some(i)) => Some(i),
            Self::Number(v, None) if v.fract() == 0.0 && v.abs() < 9.0e15 => Some(v as i64),
            _ => None,
        }
    }
}

/// Seed that accepts any JSON value: strings are copied into the buffer (replacing its
/// contents), numbers are returned, everything else is skipped. Missing or oddly typed fields
/// are thereby tolerated instead of failing the whole trace.
struct ScalarSeed<'a>(&'a mut String);

impl<'de> DeserializeSeed<'de> for ScalarSeed<'_> {
    type Value = Scalar;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

/// Implements the visitor methods for values a lenient seed does not want: they are consumed
/// (arrays and objects element by element) and answered with `$absent`.
macro_rules! skip_unwanted {
    ($absent:expr; $($method:ident),*) => {
        $(skip_unwanted!(@one $absent; $method);)*
    };
    (@one $absent:expr; visit_bool) => {
        fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<Self::Value, E> { Ok($absent) }
    };
    (@one $absent:expr; visit_unit) => {
        fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> { Ok($absent) }
    };
    (@one $absent:expr; visit_numbers) => {
        fn visit_i64<E: serde::de::Error>(self, _: i64) -> Result<Self::Value, E> { Ok($absent) }
        fn visit_u64<E: serde::de::Error>(self, _: u64) -> Result<Self::Value, E> { Ok($absent) }
        fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<Self::Value, E> { Ok($absent) }
    };
    (@one $absent:expr; visit_str) => {
        fn visit_str<E: serde::de::Error>(self, _: &str) -> Result<Self::Value, E> { Ok($absent) }
    };
    (@one $absent:expr; visit_seq) => {
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            while seq.next_element::<IgnoredAny>()?.is_some() {}
            Ok($absent)
        }
    };
    (@one $absent:expr; visit_map) => {
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
            Ok($absent)
        }
    };
}

impl<'de> Visitor<'de> for ScalarSeed<'_> {
    type Value = Scalar;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Self::Value, E> {
        Ok(Scalar::Number(v as f64, Some(v)))
    }

    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Self::Value, E> {
        Ok(Scalar::Number(v as f64, i64::try_from(v).ok()))
    }

    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Self::Value, E> {
        Ok(Scalar::Number(v, None))
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Self::Value, E> {
        self.0.clear();
        self.0.push_str(v);
        Ok(Scalar::Text)
    }

    skip_unwanted!(Scalar::Other; visit_bool, visit_unit, visit_seq, visit_map);
}

/// Seed for an event's `args`: returns `args.device` when it is an integer.
struct ArgsSeed<'a> {
    scratch: &'a mut String,
}

impl<'de> DeserializeSeed<'de> for ArgsSeed<'_> {
    type Value = Option<i64>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ArgsSeed<'_> {
    type Value = Option<i64>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an args object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut device = None;
        while let Some(key) = map.next_key_seed(KeySeed(ARGS_KEYS))? {
            if key == ARGS_DEVICE {
                device = map
                    .next_value_seed(ScalarSeed(&mut *self.scratch))?
                    .integer();
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(device)
    }

    skip_unwanted!(None; visit_bool, visit_unit, visit_numbers, visit_str, visit_seq);
}

/// Seed for `distributedInfo`: returns `rank` when it is a non-negative integer (or a string
/// holding one).
struct DistributedInfoSeed<'a> {
    scratch: &'a mut String,
}

impl<'de> DeserializeSeed<'de> for DistributedInfoSeed<'_> {
    type Value = Option<u32>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for DistributedInfoSeed<'_> {
    type Value = Option<u32>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a distributedInfo object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut rank = None;
        while let Some(key) = map.next_key_seed(KeySeed(DIST_KEYS))? {
            if key == DIST_RANK {
                let v = map.next_value_seed(ScalarSeed(&mut *self.scratch))?;
                rank = match v {
                    Scalar::Text => self.scratch.trim().parse().ok(),
                    other => other.integer().and_then(|i| u32::try_from(i).ok()),
                };
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(rank)
    }

    skip_unwanted!(None; visit_bool, visit_unit, visit_numbers, visit_str, visit_seq);
}
