//! Buffers from allocations: every allocation a core can reach becomes one buffer, its role
//! from the tensors the caller named, so each parameter word that points into an allocation
//! is declared, and no other. Live allocations nobody named (a model's constant buffers)
//! are stored as inputs; retired ones (a capture's intermediates) are undefined scratch.

use gnomon_format::{spread::Element, Buffer, BufferContents, BufferRole};

use crate::{
    allocations::{Allocations, Block, Standing},
    errors::KitError,
};

/// What the caller says a tensor is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Read by every template, never written: stored, and checked unchanged after each launch.
    Weight,
    /// Stored, and reset before each launch.
    Input,
    /// Stored, reset, and compared after each launch of the templates it belongs to.
    Output,
    /// State a step reads and writes (a KV cache): stored, reset, and compared like an output.
    KvCache,
}

impl Role {
    pub fn name(self) -> &'static str {
        match self {
            Role::Weight => "weight",
            Role::Input => "input",
            Role::Output => "output",
            Role::KvCache => "kv-cache",
        }
    }

    pub fn parse(name: &str) -> Result<Self, KitError> {
        [Role::Weight, Role::Input, Role::Output, Role::KvCache]
            .into_iter()
            .find(|r| r.name() == name)
            .ok_or_else(|| KitError::Role(format!("unknown role `{name}`: weight, input, output or kv-cache")))
    }

    fn buffer_role(self) -> BufferRole {
        match self {
            Role::Weight => BufferRole::Weight,
            Role::Input | Role::KvCache => BufferRole::Input,
            Role::Output => BufferRole::Output,
        }
    }

    fn compared(self) -> bool {
        matches!(self, Role::Output | Role::KvCache)
    }
}

/// A tensor the caller named: its address, role, element type, and for compared roles
/// the templates that write it (empty: every template) and, for logits, their shape.
#[derive(Clone, Debug)]
pub struct Tensor {
    pub name: String,
    pub address: u64,
    pub role: Role,
    pub element: Element,
    pub templates: Vec<String>,
    pub logits: Option<Logits>,
}

/// Logits: `rows` rows of `vocabulary` elements, from the start of a tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Logits {
    pub vocabulary: u32,
    pub rows: u32,
}

/// A buffer compared after the templates that write it (none named: every template).
#[derive(Debug, PartialEq)]
pub struct Compared {
    pub buffer: String,
    pub element: Element,
    pub templates: Vec<String>,
    /// Where the buffer begins with logits, their shape.
    pub logits: Option<Logits>,
}

/// The buffers of a core, and those compared after templates.
#[derive(Debug, PartialEq)]
pub struct Declared {
    pub buffers: Vec<Buffer>,
    pub compared: Vec<Compared>,
}

impl Declared {
    /// The buffers compared after `template` ran: each compared buffer declared for no
    /// template in particular (every template writes it), or for this one.
    pub fn compared_after<'d>(&'d self, template: &'d str) -> impl Iterator<Item = &'d Compared> + 'd {
        self.compared.iter().filter(move |c| c.templates.is_empty() || c.templates.iter().any(|t| t == template))
    }
}

/// Declares every allocation as one buffer.
pub fn declare(allocations: &Allocations, tensors: &[Tensor]) -> Result<Declared, KitError> {
    let mut named: Vec<(Block, &Tensor)> = Vec::new();
    for t in tensors {
        let (block, standing) = allocations
            .holding(t.address)
            .ok_or_else(|| KitError::OutsideArena { name: t.name.clone(), address: t.address })?;
        if standing == Standing::Retired {
            return Err(KitError::Freed { name: t.name.clone() });
        }
        match named.iter().find(|(b, _)| *b == block) {
            Some((_, first)) if first.role != t.role => {
                return Err(KitError::TwoRoles {
                    first: first.name.clone(),
                    first_role: first.role.name(),
                    second: t.name.clone(),
                    second_role: t.role.name(),
                })
            }
            Some(_) => {}
            None => named.push((block, t)),
        }
    }
    let mut declared = Declared { buffers: Vec::new(), compared: Vec::new() };
    let mut names = std::collections::HashSet::new();
    for (block, standing) in allocations.blocks() {
        let tensor = named.iter().find(|(b, _)| *b == block).map(|(_, t)| *t);
        let (name, role, contents) = match (tensor, standing) {
            (Some(t), _) => (format!("{}/{}", t.role.name(), t.name), t.role.buffer_role(), BufferContents::Stored),
            (None, Standing::Live) => (format!("state/{:x}", block.offset), BufferRole::Input, BufferContents::Stored),
            (None, Standing::Retired) => {
                (format!("scratch/{:x}", block.offset), BufferRole::Scratch, BufferContents::Undefined)
            }
        };
        if !names.insert(name.clone()) {
            return Err(KitError::SameName(name));
        }
        if let Some(t) = tensor.filter(|t| t.role.compared()) {
            let (buffer, templates) = (name.clone(), t.templates.clone());
            // Logits are judged from the buffer's first byte: a view inside a block is not.
            let logits = t.logits.filter(|_| t.address == allocations.base() + block.offset);
            declared.compared.push(Compared { buffer, element: t.element, templates, logits });
        }
        declared.buffers.push(Buffer { name, offset: block.offset, size: block.size.max(1), role, contents });
    }
    Ok(declared)
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: u64 = 0x2000_0000_0000;

    fn tensor(name: &str, address: u64, role: Role) -> Tensor {
        Tensor { name: name.into(), address, role, element: Element::Bfloat16, templates: Vec::new(), logits: None }
    }

    /// A model's allocations as a capture leaves them: weights and a cache named, a
    /// constant nobody named, an intermediate the capture freed, and a tied weight named twice.
    #[test]
    fn every_allocation_is_one_buffer_with_the_callers_role() {
        let mut a = Allocations::new(BASE, 1 << 20);
        let weight = a.allocate(4096, false).unwrap();
        let constant = a.allocate(100, false).unwrap();
        let cache = a.allocate(2048, false).unwrap();
        let intermediate = a.allocate(600, true).unwrap();
        let logits = a.allocate(800, true).unwrap();
        a.free(intermediate, false).unwrap();
        let freed_eagerly = a.allocate(64, false).unwrap();
        a.free(freed_eagerly, false).unwrap();
        let tensors = [
            tensor("wte", weight, Role::Weight),
            tensor("lm_head", weight + 1024, Role::Weight),
            tensor("k", cache, Role::KvCache),
            Tensor { templates: vec!["b1".into()], ..tensor("logits", logits, Role::Output) },
        ];
        let declared = declare(&a, &tensors).unwrap();
        let summary: Vec<_> =
            declared.buffers.iter().map(|b| (b.name.as_str(), b.offset, b.size, b.role, b.contents)).collect();
        use {BufferContents::*, BufferRole::*};
        assert_eq!(
            summary,
            [
                ("weight/wte", 0, 4096, Weight, Stored),
                ("state/1000", constant - BASE, 100, Input, Stored),
                ("kv-cache/k", cache - BASE, 2048, Input, Stored),
                ("scratch/1a00", intermediate - BASE, 600, Scratch, Undefined),
                ("output/logits", logits - BASE, 800, Output, Stored),
            ]
        );
        let compared = |c: &Compared| (c.buffer.clone(), c.templates.clone(), c.element);
        assert_eq!(
            declared.compared.iter().map(compared).collect::<Vec<_>>(),
            [
                ("kv-cache/k".to_string(), vec![], Element::Bfloat16),
                ("output/logits".to_string(), vec!["b1".to_string()], Element::Bfloat16)
            ]
        );
        // The cache every template writes is compared after each; the logits after b1 only.
        let after = |t| declared.compared_after(t).map(|c| c.buffer.as_str()).collect::<Vec<_>>();
        assert_eq!(after("b1"), ["kv-cache/k", "output/logits"]);
        assert_eq!(after("b2"), ["kv-cache/k"]);
    }

    #[test]
    fn tensors_outside_the_arena_freed_or_of_two_roles_are_refused() {
        let mut a = Allocations::new(BASE, 1 << 20);
        let x = a.allocate(4096, false).unwrap();
        let y = a.allocate(64, false).unwrap();
        let gone = a.allocate(16, true).unwrap();
        a.free(gone, false).unwrap();
        let refused = |t: &[Tensor]| declare(&a, t).unwrap_err().to_string();
        insta::assert_snapshot!(refused(&[tensor("w", 0x1000, Role::Weight)]), @"tensor `w` (0x1000) is not in the gnomon arena: it was allocated before use_arena, under gnomon.torch.outside_arena(), or by another allocator");
        insta::assert_snapshot!(refused(&[tensor("t", gone, Role::Input)]), @"tensor `t` lies in memory that was freed");
        insta::assert_snapshot!(refused(&[tensor("w", x, Role::Weight), tensor("o", x + 8, Role::Output)]), @"one allocation holds `w` (weight) and `o` (output): a buffer has one role");
        insta::assert_snapshot!(refused(&[tensor("k", x, Role::KvCache), tensor("k", y, Role::KvCache)]), @"two allocations are named `kv-cache/k`: name each tensor once (a template's own mapping names its tensors after it)");
        insta::assert_snapshot!(Role::parse("weights").unwrap_err().to_string(), @"unknown role `weights`: weight, input, output or kv-cache");
    }
}
