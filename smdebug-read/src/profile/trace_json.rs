//! A trace file's JSON read event by event, without a document tree: each event's fields go
//! straight into a borrowed [`Event`], handed to a sink as soon as it is read.
//!
//! Every value is read through `deserialize_any`, as a `serde_json::Value` is, so the same
//! texts are refused with the same messages and positions (nesting depth, numbers out of
//! range, bad escapes and UTF-8 included) — only nothing is allocated for what is read past.
//! Values a field does not use (nested arrays and objects where a number or string was
//! expected, unknown keys holding containers) are read as a `Value` and dropped: rare, and
//! exactly as strict.
//!
//! One difference, on no real input: with serde_json's `raw_value` feature on (the workspace
//! turns it on through a dependency), a `Value` read takes an object whose first key is
//! serde_json's private raw-value token for an embedded JSON text; this reader does so only in
//! `args` (read as a `Value`), and takes such an event or root as the object it is.

use std::borrow::Cow;
use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

/// A scalar field as read: what `Value::as_i64`, `as_u64`, `as_f64` and `as_str` can see.
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) enum Scalar<'a> {
    /// Not a field of the event, or a `null`, a boolean, an array or an object.
    #[default]
    Other,
    /// A negative integer (serde_json's `i64` numbers).
    I64(i64),
    /// A non-negative integer.
    U64(u64),
    /// A number with a fraction or exponent.
    F64(f64),
    /// A string, borrowed from the file unless it had escapes.
    Str(Cow<'a, str>),
}

impl<'a> Scalar<'a> {
    /// A field already read as a `serde_json::Value` (an `args` entry), as a scalar.
    pub(super) fn of(value: Option<&'a Value>) -> Scalar<'a> {
        match value {
            Some(Value::Number(n)) => match (n.as_u64(), n.as_i64(), n.as_f64()) {
                (Some(u), _, _) => Scalar::U64(u),
                (None, Some(i), _) => Scalar::I64(i),
                (None, None, Some(f)) => Scalar::F64(f),
                (None, None, None) => Scalar::Other,
            },
            Some(Value::String(s)) => Scalar::Str(Cow::Borrowed(s)),
            _ => Scalar::Other,
        }
    }

    /// `Value::as_i64`.
    pub(super) fn as_i64(&self) -> Option<i64> {
        match *self {
            Scalar::I64(v) => Some(v),
            Scalar::U64(v) => i64::try_from(v).ok(),
            _ => None,
        }
    }

    /// `Value::as_u64`.
    pub(super) fn as_u64(&self) -> Option<u64> {
        match *self {
            Scalar::U64(v) => Some(v),
            Scalar::I64(v) => u64::try_from(v).ok(),
            _ => None,
        }
    }

    /// `Value::as_str`.
    pub(super) fn as_str(&self) -> Option<&str> {
        match self {
            Scalar::Str(s) => Some(s),
            _ => None,
        }
    }

    /// An integer, or a finite number rounded (as an `i128`, so every `i64` and `u64` fits).
    pub(super) fn number_i128(&self) -> Option<i128> {
        match *self {
            Scalar::I64(v) => Some(i128::from(v)),
            Scalar::U64(v) => Some(i128::from(v)),
            Scalar::F64(f) if f.is_finite() => Some(f.round() as i128),
            _ => None,
        }
    }

    /// The string, owned.
    pub(super) fn into_string(self) -> Option<String> {
        match self {
            Scalar::Str(s) => Some(s.into_owned()),
            _ => None,
        }
    }
}

/// One trace event: the fields the reader uses, in the file's last spelling of each key (a
/// repeated key's last value wins, as in a JSON object read into a map).
#[derive(Debug, Default)]
pub(super) struct Event<'a> {
    pub(super) pid: Scalar<'a>,
    pub(super) tid: Scalar<'a>,
    pub(super) name: Scalar<'a>,
    pub(super) ph: Scalar<'a>,
    pub(super) ts: Scalar<'a>,
    pub(super) dur: Scalar<'a>,
    /// `args` when it is an object and the sink keeps them ([`EventSink::keeps_args`]).
    pub(super) args: Option<Map<String, Value>>,
    /// The entries of `args` the span reader uses, when it is an object and the sink does not
    /// keep them whole: nothing else of it is held.
    pub(super) lean: Option<LeanArgs<'a>>,
}

/// The `args` entries a trace's spans are read from, each as read (`None` when the key is
/// absent; a repeated key's last value).
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct LeanArgs<'a> {
    /// A `process_name` event's row name.
    pub(super) name: Option<Scalar<'a>>,
    /// The `process_name` event's time base.
    pub(super) start_time_since_epoch_in_micros: Option<Scalar<'a>>,
    pub(super) step_num: Option<Scalar<'a>>,
    pub(super) mode: Option<Scalar<'a>>,
    pub(super) worker: Option<Scalar<'a>>,
}

impl<'a> LeanArgs<'a> {
    /// The field for key `key`, when it is one of them.
    fn field(&mut self, key: &str) -> Option<&mut Option<Scalar<'a>>> {
        Some(match key {
            "name" => &mut self.name,
            "start_time_since_epoch_in_micros" => &mut self.start_time_since_epoch_in_micros,
            "step_num" => &mut self.step_num,
            "mode" => &mut self.mode,
            "worker" => &mut self.worker,
            _ => return None,
        })
    }

    /// The entries of an `args` object read whole.
    pub(super) fn of(args: &'a Map<String, Value>) -> LeanArgs<'a> {
        let mut lean = LeanArgs::default();
        for (key, value) in args {
            if let Some(field) = lean.field(key) {
                *field = Some(Scalar::of(Some(value)));
            }
        }
        lean
    }
}

/// Where the events go, in file order.
pub(super) trait EventSink<'a> {
    /// A `traceEvents` key of a root object starts (again: a repeated key's last value wins,
    /// so what came before is forgotten).
    fn restart(&mut self);
    /// An event, in order.
    fn event(&mut self, event: Event<'a>);
    /// Whether events carry their `args` whole ([`Event::args`]) or only the entries spans are
    /// read from ([`Event::lean`]).
    fn keeps_args(&self) -> bool;
}

/// What the root of the file was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Root {
    /// An array of events.
    Array,
    /// An object whose last `traceEvents` key holds an array.
    ObjectWithEvents,
    /// An object without a `traceEvents` array.
    ObjectWithoutEvents,
    /// Anything else.
    Other,
}

/// Reads `bytes` as a trace file, handing its events to `sink`.
pub(super) fn read_events<'a>(
    bytes: &'a [u8],
    sink: &mut impl EventSink<'a>,
) -> serde_json::Result<Root> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let root = RootSeed(sink).deserialize(&mut de)?;
    de.end()?;
    Ok(root)
}

/// Reads past any value, checking it as a `Value` read would (not `serde::de::IgnoredAny`,
/// which lets through deeper nesting, numbers out of range and bad UTF-8 that a `Value`
/// read refuses).
struct Skip;

impl<'de> serde::Deserialize<'de> for Skip {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Skip, D::Error> {
        deserializer.deserialize_any(ScalarVisitor).map(|_| Skip)
    }
}

/// Reads any value; keeps it when it is a number or a string.
struct ScalarVisitor;

impl<'de> Visitor<'de> for ScalarVisitor {
    type Value = Scalar<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<Scalar<'de>, E> {
        Ok(Scalar::Other)
    }

    fn visit_i64<E>(self, v: i64) -> Result<Scalar<'de>, E> {
        Ok(Scalar::I64(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Scalar<'de>, E> {
        Ok(Scalar::U64(v))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Scalar<'de>, E> {
        Ok(Scalar::F64(v))
    }

    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Scalar<'de>, E> {
        Ok(Scalar::Str(Cow::Borrowed(v)))
    }

    fn visit_str<E>(self, v: &str) -> Result<Scalar<'de>, E> {
        Ok(Scalar::Str(Cow::Owned(v.to_owned())))
    }

    fn visit_string<E>(self, v: String) -> Result<Scalar<'de>, E> {
        Ok(Scalar::Str(Cow::Owned(v)))
    }

    fn visit_unit<E>(self) -> Result<Scalar<'de>, E> {
        Ok(Scalar::Other)
    }

    fn visit_none<E>(self) -> Result<Scalar<'de>, E> {
        Ok(Scalar::Other)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Scalar<'de>, A::Error> {
        while seq.next_element::<Value>()?.is_some() {}
        Ok(Scalar::Other)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Scalar<'de>, A::Error> {
        skip_object(map)?;
        Ok(Scalar::Other)
    }
}

/// Reads the rest of an object as a `Value` read would, and drops it.
fn skip_object<'de, A: MapAccess<'de>>(mut map: A) -> Result<(), A::Error> {
    while map.next_entry::<String, Value>()?.is_some() {}
    Ok(())
}

/// The root: an array of events, an object with `traceEvents`, or anything else.
struct RootSeed<'s, S>(&'s mut S);

impl<'de, S: EventSink<'de>> DeserializeSeed<'de> for RootSeed<'_, S> {
    type Value = Root;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Root, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de, S: EventSink<'de>> Visitor<'de> for RootSeed<'_, S> {
    type Value = Root;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a trace")
    }

    fn visit_bool<E>(self, _: bool) -> Result<Root, E> {
        Ok(Root::Other)
    }

    fn visit_i64<E>(self, _: i64) -> Result<Root, E> {
        Ok(Root::Other)
    }

    fn visit_u64<E>(self, _: u64) -> Result<Root, E> {
        Ok(Root::Other)
    }

    fn visit_f64<E>(self, _: f64) -> Result<Root, E> {
        Ok(Root::Other)
    }

    fn visit_str<E>(self, _: &str) -> Result<Root, E> {
        Ok(Root::Other)
    }

    fn visit_unit<E>(self) -> Result<Root, E> {
        Ok(Root::Other)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Root, A::Error> {
        EventsSeed(self.0).visit_seq(seq)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Root, A::Error> {
        let mut root = Root::ObjectWithoutEvents;
        while let Some(key) = map.next_key::<Scalar<'de>>()? {
            if key.as_str() == Some("traceEvents") {
                self.0.restart();
                root = match map.next_value_seed(EventsSeed(&mut *self.0))? {
                    Root::Array => Root::ObjectWithEvents,
                    other => other,
                };
            } else {
                map.next_value::<Skip>()?;
            }
        }
        Ok(root)
    }
}

impl<'de> serde::Deserialize<'de> for Scalar<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Scalar<'de>, D::Error> {
        deserializer.deserialize_any(ScalarVisitor)
    }
}

/// The events array (its elements that are not objects are read past).
struct EventsSeed<'s, S>(&'s mut S);

impl<'de, S: EventSink<'de>> DeserializeSeed<'de> for EventsSeed<'_, S> {
    type Value = Root;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Root, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de, S: EventSink<'de>> Visitor<'de> for EventsSeed<'_, S> {
    type Value = Root;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array of events")
    }

    fn visit_bool<E>(self, _: bool) -> Result<Root, E> {
        Ok(Root::ObjectWithoutEvents)
    }

    fn visit_i64<E>(self, _: i64) -> Result<Root, E> {
        Ok(Root::ObjectWithoutEvents)
    }

    fn visit_u64<E>(self, _: u64) -> Result<Root, E> {
        Ok(Root::ObjectWithoutEvents)
    }

    fn visit_f64<E>(self, _: f64) -> Result<Root, E> {
        Ok(Root::ObjectWithoutEvents)
    }

    fn visit_str<E>(self, _: &str) -> Result<Root, E> {
        Ok(Root::ObjectWithoutEvents)
    }

    fn visit_unit<E>(self) -> Result<Root, E> {
        Ok(Root::ObjectWithoutEvents)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Root, A::Error> {
        skip_object(map)?;
        Ok(Root::ObjectWithoutEvents)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Root, A::Error> {
        let seed = EventVisitor {
            keeps_args: self.0.keeps_args(),
        };
        while let Some(event) = seq.next_element_seed(seed)? {
            if let Some(event) = event {
                self.0.event(event);
            }
        }
        Ok(Root::Array)
    }
}

/// Reads an element of the events array: an event when it is an object (its `args` whole or
/// lean), else `None`.
#[derive(Clone, Copy)]
struct EventVisitor {
    keeps_args: bool,
}

impl<'de> DeserializeSeed<'de> for EventVisitor {
    type Value = Option<Event<'de>>;

    fn deserialize<D: Deserializer<'de>>(
        self,
        deserializer: D,
    ) -> Result<Option<Event<'de>>, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for EventVisitor {
    type Value = Option<Event<'de>>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an event")
    }

    fn visit_bool<E>(self, _: bool) -> Result<Option<Event<'de>>, E> {
        Ok(None)
    }

    fn visit_i64<E>(self, _: i64) -> Result<Option<Event<'de>>, E> {
        Ok(None)
    }

    fn visit_u64<E>(self, _: u64) -> Result<Option<Event<'de>>, E> {
        Ok(None)
    }

    fn visit_f64<E>(self, _: f64) -> Result<Option<Event<'de>>, E> {
        Ok(None)
    }

    fn visit_str<E>(self, _: &str) -> Result<Option<Event<'de>>, E> {
        Ok(None)
    }

    fn visit_unit<E>(self) -> Result<Option<Event<'de>>, E> {
        Ok(None)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Option<Event<'de>>, A::Error> {
        while seq.next_element::<Value>()?.is_some() {}
        Ok(None)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Option<Event<'de>>, A::Error> {
        let mut event = Event::default();
        while let Some(key) = map.next_key::<Scalar<'de>>()? {
            let field = match key.as_str() {
                Some("pid") => &mut event.pid,
                Some("tid") => &mut event.tid,
                Some("name") => &mut event.name,
                Some("ph") => &mut event.ph,
                Some("ts") => &mut event.ts,
                Some("dur") => &mut event.dur,
                Some("args") if self.keeps_args => {
                    event.args = match map.next_value::<Value>()? {
                        Value::Object(args) => Some(args),
                        _ => None,
                    };
                    continue;
                }
                Some("args") => {
                    event.lean = map.next_value::<LeanSeen<'de>>()?.0;
                    continue;
                }
                _ => {
                    map.next_value::<Skip>()?;
                    continue;
                }
            };
            *field = map.next_value::<Scalar<'de>>()?;
        }
        Ok(Some(event))
    }
}

/// `args` read for its [`LeanArgs`] (`None` when it is not an object), every other entry
/// checked as a `Value` read would check it and dropped.
struct LeanSeen<'a>(Option<LeanArgs<'a>>);

impl<'de> serde::Deserialize<'de> for LeanSeen<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<LeanSeen<'de>, D::Error> {
        deserializer.deserialize_any(LeanVisitor)
    }
}

struct LeanVisitor;

impl<'de> Visitor<'de> for LeanVisitor {
    type Value = LeanSeen<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<LeanSeen<'de>, E> {
        Ok(LeanSeen(None))
    }

    fn visit_i64<E>(self, _: i64) -> Result<LeanSeen<'de>, E> {
        Ok(LeanSeen(None))
    }

    fn visit_u64<E>(self, _: u64) -> Result<LeanSeen<'de>, E> {
        Ok(LeanSeen(None))
    }

    fn visit_f64<E>(self, _: f64) -> Result<LeanSeen<'de>, E> {
        Ok(LeanSeen(None))
    }

    fn visit_str<E>(self, _: &str) -> Result<LeanSeen<'de>, E> {
        Ok(LeanSeen(None))
    }

    fn visit_unit<E>(self) -> Result<LeanSeen<'de>, E> {
        Ok(LeanSeen(None))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<LeanSeen<'de>, A::Error> {
        while seq.next_element::<Value>()?.is_some() {}
        Ok(LeanSeen(None))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<LeanSeen<'de>, A::Error> {
        let mut lean = LeanArgs::default();
        while let Some(key) = map.next_key::<Scalar<'de>>()? {
            match key.as_str().and_then(|key| lean.field(key)) {
                Some(field) => *field = Some(map.next_value::<Scalar<'de>>()?),
                None => {
                    map.next_value::<Skip>()?;
                }
            }
        }
        Ok(LeanSeen(Some(lean)))
    }
}
