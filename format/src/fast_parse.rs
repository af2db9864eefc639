//! Parsing a manifest of many nodes fast: a restore opens the core before anything else.
//!
//! - Templates are parsed on several threads: the array is first split into each
//!   template's text, which costs a fraction of parsing it.
//! - A node's `op` is tagged by its `kind` field. serde's derive for an internally tagged
//!   enum buffers every object before it reads the tag, which made parsing a 100 000-node
//!   manifest spend most of its time copying. Exporters write `kind` first (serde's derive
//!   does), so the rest of the object is read straight into its variant; an object with
//!   `kind` elsewhere is buffered, as before, and reads the same.

use std::fmt;

use serde_json::value::RawValue;

use serde::{
    de::{self, value::MapAccessDeserializer, IntoDeserializer, MapAccess, Visitor},
    Deserialize, Deserializer,
};

use super::manifest::{KernelNode, MemcpyNode, MemsetNode, NodeOp, Template};

/// Template text below which one thread parses all: threads cost more than they save.
const PARALLEL_FROM_BYTES: usize = 1 << 20;

/// `templates`: each template's text split off, then parsed on up to 16 threads. An error
/// names the template by position, with the position inside it.
pub(super) fn templates<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<Template>, D::Error> {
    let texts: Vec<&'de RawValue> = Vec::deserialize(deserializer)?;
    let bytes: usize = texts.iter().map(|t| t.get().len()).sum();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let threads = parsing_threads(bytes, texts.len(), cores);
    let parse = |text: &RawValue| serde_json::from_str::<Template>(text.get());
    let parsed: Vec<Result<Template, serde_json::Error>> = if threads <= 1 {
        texts.iter().map(|t| parse(t)).collect()
    } else {
        let texts = &texts;
        std::thread::scope(|scope| {
            // Thread k parses templates k, k + threads, …
            let shares: Vec<_> = (0..threads)
                .map(|k| {
                    scope.spawn(move || texts.iter().skip(k).step_by(threads).map(|t| parse(t)).collect::<Vec<_>>())
                })
                .collect();
            let mut shares: Vec<_> =
                shares.into_iter().map(|s| s.join().expect("parsing does not panic").into_iter()).collect();
            (0..texts.len()).map(|i| shares[i % threads].next().expect("every template parsed")).collect()
        })
    };
    let named = |(i, parsed): (usize, Result<Template, _>)| {
        parsed.map_err(|e| de::Error::custom(format!("template {i}: {e} (within the template)")))
    };
    parsed.into_iter().enumerate().map(named).collect()
}

/// How many threads parse `templates` templates of `bytes` of text on `cores` cores: one
/// below [`PARALLEL_FROM_BYTES`], else a thread a template up to the cores, at most 16.
fn parsing_threads(bytes: usize, templates: usize, cores: usize) -> usize {
    match bytes < PARALLEL_FROM_BYTES {
        true => 1,
        false => cores.min(16).min(templates),
    }
}

const TAG: &str = "kind";

#[derive(Clone, Copy, Deserialize)]
#[serde(rename_all = "kebab-case")]
enum Kind {
    Kernel,
    Memset,
    Memcpy,
    Empty,
    EventRecord,
    EventWait,
}

/// The fields of `empty`: none.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NoFields {}

/// The field of `event-record` and `event-wait`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EventField {
    event: String,
}

impl Kind {
    /// The variant of this kind, from the object's fields other than the tag.
    fn read<'de, D: Deserializer<'de>>(self, fields: D) -> Result<NodeOp, D::Error> {
        Ok(match self {
            Kind::Kernel => NodeOp::Kernel(KernelNode::deserialize(fields)?),
            Kind::Memset => NodeOp::Memset(MemsetNode::deserialize(fields)?),
            Kind::Memcpy => NodeOp::Memcpy(MemcpyNode::deserialize(fields)?),
            Kind::Empty => NoFields::deserialize(fields).map(|_| NodeOp::Empty)?,
            Kind::EventRecord => NodeOp::EventRecord { event: EventField::deserialize(fields)?.event },
            Kind::EventWait => NodeOp::EventWait { event: EventField::deserialize(fields)?.event },
        })
    }
}

impl<'de> Deserialize<'de> for NodeOp {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(OpVisitor)
    }
}

struct OpVisitor;

impl<'de> Visitor<'de> for OpVisitor {
    type Value = NodeOp;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a node op: an object with a `kind`")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<NodeOp, A::Error> {
        let Some(first) = map.next_key::<String>()? else {
            return Err(de::Error::missing_field(TAG));
        };
        if first == TAG {
            let kind: Kind = map.next_value()?;
            return kind.read(MapAccessDeserializer::new(map));
        }
        let mut fields = serde_json::Map::new();
        fields.insert(first, map.next_value::<Strict>()?.0);
        // A key twice, here or in an object within, is refused as the derive refuses it
        // when `kind` comes first: one grammar, whatever the order.
        while let Some((key, Strict(value))) = map.next_entry::<String, Strict>()? {
            if fields.contains_key(&key) {
                return Err(de::Error::custom(format_args!("duplicate field `{key}`")));
            }
            fields.insert(key, value);
        }
        let kind = fields.remove(TAG).ok_or_else(|| de::Error::missing_field(TAG))?;
        let kind = Kind::deserialize(kind).map_err(de::Error::custom)?;
        kind.read(serde_json::Value::Object(fields).into_deserializer()).map_err(de::Error::custom)
    }
}

/// A JSON value that refuses an object giving a key twice (`serde_json::Value` keeps the
/// last): what a node op whose `kind` is not first is buffered as.
struct Strict(serde_json::Value);

impl<'de> Deserialize<'de> for Strict {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(StrictVisitor).map(Strict)
    }
}

struct StrictVisitor;

impl<'de> Visitor<'de> for StrictVisitor {
    type Value = serde_json::Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
        Ok(v.into())
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
        Ok(v.into())
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        Ok(v.into())
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
        Ok(v.into())
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(v.into())
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(serde_json::Value::Null)
    }
    fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut items = Vec::new();
        while let Some(Strict(item)) = seq.next_element()? {
            items.push(item);
        }
        Ok(items.into())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut fields = serde_json::Map::new();
        while let Some((key, Strict(value))) = map.next_entry::<String, Strict>()? {
            if fields.contains_key(&key) {
                return Err(de::Error::custom(format_args!("duplicate field `{key}`")));
            }
            fields.insert(key, value);
        }
        Ok(fields.into())
    }
}

#[cfg(test)]
mod tests {
    use super::{parsing_threads, NodeOp, PARALLEL_FROM_BYTES};

    #[test]
    fn a_thread_a_template_up_to_the_cores_from_one_mib() {
        let mib = PARALLEL_FROM_BYTES;
        assert_eq!(mib, 1 << 20);
        assert_eq!(parsing_threads(mib - 1, 100, 8), 1, "below a MiB, one thread");
        assert_eq!(parsing_threads(mib, 100, 8), 8, "from a MiB, every core");
        assert_eq!(parsing_threads(mib, 3, 8), 3, "no more threads than templates");
        assert_eq!(parsing_threads(64 * mib, 1000, 64), 16, "at most 16");
    }

    fn read(json: &str) -> Result<NodeOp, String> {
        serde_json::from_str(json).map_err(|e| e.to_string())
    }

    const KERNEL_FIELDS: &str =
        r#""module":"m0","function":"f","grid":[1,1,1],"block":[32,1,1],"shared-mem-bytes":0,"params":"00ff""#;

    #[test]
    fn kind_anywhere_reads_the_same_op() {
        let ops = [
            (format!(r#"{{"kind":"kernel",{KERNEL_FIELDS}}}"#), format!(r#"{{{KERNEL_FIELDS},"kind":"kernel"}}"#)),
            (r#"{"kind":"empty"}"#.into(), r#"{"kind":"empty"}"#.into()),
            (r#"{"kind":"event-wait","event":"e0"}"#.into(), r#"{"event":"e0","kind":"event-wait"}"#.into()),
        ];
        for (first, last) in ops {
            let op = read(&first).unwrap();
            assert_eq!(read(&last).unwrap(), op);
            assert_eq!(serde_json::to_string(&op).unwrap().find(r#""kind""#), Some(1), "written with `kind` first");
        }
    }

    #[test]
    fn a_node_op_without_a_known_kind_or_with_a_stray_field_is_refused() {
        for (json, says) in [
            ("5", "expected a node op: an object with a `kind`"),
            (r#"{"event":"e0"}"#, "missing field `kind`"),
            ("{}", "missing field `kind`"),
            (r#"{"kind":"launch"}"#, "unknown variant `launch`"),
            (r#"{"x":1,"kind":"launch"}"#, "unknown variant `launch`"),
            (r#"{"kind":"empty","event":"e0"}"#, "unknown field `event`"),
            (r#"{"event":"e0","kind":"empty"}"#, "unknown field `event`"),
            (r#"{"kind":"kernel","kind":"kernel"}"#, "unknown field `kind`"),
            (r#"{"event":"e0","kind":"event-wait","kind":"empty"}"#, "duplicate field `kind`"),
            (r#"{"event":"e0","event":"e1","kind":"event-wait"}"#, "duplicate field `event`"),
            (r#"{"kind":"event-wait","event":"e0","event":"e1"}"#, "duplicate field `event`"),
            (r#"{"pointers":[{"param":1,"param":2}],"kind":"kernel"}"#, "duplicate field `param`"),
        ] {
            let error = read(json).unwrap_err();
            assert!(error.contains(says), "{json}: {error}");
        }
    }
}
