//! The state every launch starts from: the writable buffers as the core was loaded, kept
//! on the device. Replay keeps it after the upload; the port kit keeps it in the capturing
//! process, so the expectations it computes and the outputs replay compares come from one
//! implementation of "put the core back as loaded".

use std::collections::HashMap;

use super::checksum::{Checksummer, RangeCheck};
use crate::{
    cuda::{ArenaMapping, Context, DeviceBuffer, GraphExec, Stream},
    errors::CudaError,
    errors::ReplayError,
};
use gnomon_format::{digest::sha256_each, Buffer, BufferContents, BufferRef, BufferRole, Manifest};

/// Which writable buffers a reset puts back: all of them, or those a template was seen to
/// change (positions in the order of [`LoadedState::writable_check`]'s sums). A template
/// of a serving catalogue writes its own batch's cache, a few percent of the catalogue's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Scope {
    All,
    Only(Vec<usize>),
}

impl Scope {
    /// The buffers whose sums differ between `loaded` and `now`, two runs of one writable
    /// check.
    pub fn changed(loaded: &[u64], now: &[u64]) -> Self {
        Self::Only((0..loaded.len().min(now.len())).filter(|&i| loaded[i] != now[i]).collect())
    }

    /// Whether `now` differs from `loaded` anywhere outside this scope.
    pub fn strayed(&self, loaded: &[u64], now: &[u64]) -> bool {
        let Scope::Only(which) = self else { return false };
        (0..loaded.len().min(now.len())).any(|i| loaded[i] != now[i] && !which.contains(&i))
    }
}

/// Which writable buffers a template's launches change, found as the exporter finds them:
/// every writable buffer's sum as loaded, against its sum after one launch from the loaded
/// state. The kit scopes the resets of its expectations and timed launches this way, and a
/// restore the resets of its timed launches, so both time a template after the same copies
/// (what the copies evict from L2 is what the launch then reads slower).
pub struct Scoping {
    loaded: Vec<u64>,
}

impl Scoping {
    /// The sums of `state`'s writable buffers as loaded (put back first).
    pub fn new(state: &LoadedState, checksummer: &Checksummer, stream: &Stream) -> Result<Self, ReplayError> {
        state.reset(stream)?;
        Ok(Self { loaded: state.writable_check(checksummer)?.run(stream)? })
    }

    /// The writable buffers one launch of `exec` from the loaded state changed: all that
    /// its later launches need put back, unless one writes elsewhere ([`Self::strayed`]).
    pub fn scope_of(
        &self,
        state: &LoadedState,
        checksummer: &Checksummer,
        exec: &GraphExec,
        stream: &Stream,
    ) -> Result<Scope, ReplayError> {
        state.reset(stream)?;
        exec.launch(stream)?;
        Ok(Scope::changed(&self.loaded, &state.writable_check(checksummer)?.run(stream)?))
    }

    /// Whether a writable buffer outside `scope` no longer holds what it was loaded with.
    pub fn strayed(
        &self,
        state: &LoadedState,
        checksummer: &Checksummer,
        scope: &Scope,
        stream: &Stream,
    ) -> Result<bool, ReplayError> {
        Ok(scope.strayed(&self.loaded, &state.writable_check(checksummer)?.run(stream)?))
    }
}

/// The mapped arena and a device copy of each writable (non-weight) buffer as loaded, so
/// a reset costs what templates can write, not the arena.
pub struct LoadedState {
    /// Held for replay, which maps the arena itself; the kit's arena is mapped by the kit.
    _mapping: Option<ArenaMapping>,
    ctx: Context,
    base: u64,
    buffers: HashMap<String, Buffer>,
    writable: Vec<(Buffer, DeviceBuffer)>,
}

impl LoadedState {
    /// Keeps every writable buffer of `m` as the arena holds it now.
    pub fn keep(ctx: &Context, m: &Manifest, mapping: Option<ArenaMapping>) -> Result<Self, ReplayError> {
        let stream = ctx.stream()?;
        let mut writable = Vec::new();
        for b in m.buffers.iter().filter(|b| b.role != BufferRole::Weight && b.size > 0) {
            let copy = ctx.alloc(b.size)?;
            // SAFETY: a buffer of the manifest lies in the arena, which the caller keeps
            // mapped (or hands over in `mapping`); `copy` was allocated with its size.
            unsafe { stream.copy(copy.ptr(), m.arena.base + b.offset, b.size) }?;
            writable.push((b.clone(), copy));
        }
        stream.synchronize()?;
        let buffers = m.buffers.iter().map(|b| (b.name.clone(), b.clone())).collect();
        Ok(Self { _mapping: mapping, ctx: ctx.clone(), base: m.arena.base, buffers, writable })
    }

    /// Fills every buffer the core does not store, and its copy that resets restore: the
    /// `zero` ones with zero, the `undefined` ones with `byte` (a poison pattern).
    pub fn fill_unstored(&self, byte: u8) -> Result<(), ReplayError> {
        let stream = self.ctx.stream()?;
        for (b, copy) in &self.writable {
            let fill = match b.contents {
                BufferContents::Zero => 0,
                BufferContents::Undefined => byte,
                BufferContents::Stored => continue,
            };
            // SAFETY: as in `keep`.
            unsafe {
                stream.memset_u8(self.base + b.offset, fill, b.size)?;
                stream.memset_u8(copy.ptr(), fill, b.size)?;
            }
        }
        Ok(stream.synchronize()?)
    }

    /// Enqueues the copies that put every writable buffer back as loaded.
    pub fn reset(&self, stream: &Stream) -> Result<(), ReplayError> {
        self.reset_within(stream, &Scope::All)
    }

    /// Enqueues the copies that put the writable buffers of `scope` back as loaded.
    pub fn reset_within(&self, stream: &Stream, scope: &Scope) -> Result<(), ReplayError> {
        let put_back = |(b, copy): &(Buffer, DeviceBuffer)| {
            // SAFETY: as in `keep`, in the other direction.
            unsafe { stream.copy(self.base + b.offset, copy.ptr(), b.size) }
        };
        match scope {
            Scope::All => self.writable.iter().try_for_each(put_back)?,
            Scope::Only(which) => which.iter().filter_map(|&i| self.writable.get(i)).try_for_each(put_back)?,
        }
        Ok(())
    }

    /// One launch of `exec` from the loaded state with the 64-bit word at `at` (a
    /// generator's offset) holding `value` first, and the digest of each of `outputs`
    /// after it: what a template that draws random numbers draws at that offset. The kit
    /// records these digests and a restore's `random-draws` compares them, made alike.
    pub fn draw(
        &self,
        exec: &GraphExec,
        stream: &Stream,
        at: &BufferRef,
        value: u64,
        outputs: &[&str],
    ) -> Result<Vec<String>, ReplayError> {
        let word = self.word_address(at)?;
        self.reset(stream)?;
        let bytes = value.to_le_bytes();
        // SAFETY: a whole word inside a buffer of the manifest (`word_address`), in the
        // arena mapped while this lives; `bytes` outlives the copy, which the sync below
        // ends (from pageable memory the driver stages the 8 bytes before it returns).
        unsafe { stream.upload_async(word, &bytes) }?;
        exec.launch(stream)?;
        stream.synchronize()?;
        let read = outputs.iter().map(|name| self.read(name)).collect::<Result<Vec<_>, _>>()?;
        Ok(sha256_each(&read.iter().map(Vec::as_slice).collect::<Vec<_>>()))
    }

    /// The 64-bit word at `at` as the arena holds it now.
    pub fn read_word(&self, at: &BufferRef) -> Result<u64, ReplayError> {
        let (word, mut bytes) = (self.word_address(at)?, [0u8; 8]);
        // SAFETY: as in `draw`.
        unsafe { self.ctx.read_into(word, &mut bytes) }?;
        Ok(u64::from_le_bytes(bytes))
    }

    /// The device address of the whole 64-bit word `at` names, or why there is none.
    fn word_address(&self, at: &BufferRef) -> Result<u64, ReplayError> {
        let b = self.buffer(&at.buffer)?;
        match at.offset.checked_add(8).is_some_and(|end| end <= b.size) {
            true => Ok(self.base + b.offset + at.offset),
            false => {
                Err(CudaError::Unsupported(format!("no 64-bit word at {} of buffer `{}`", at.offset, b.name)).into())
            }
        }
    }

    /// What `name` holds in the arena now.
    pub fn read(&self, name: &str) -> Result<Vec<u8>, ReplayError> {
        let b = self.buffer(name)?;
        // SAFETY: a buffer of the manifest, inside the arena kept mapped while this lives.
        Ok(unsafe { self.ctx.read(self.base + b.offset, b.size) }?)
    }

    /// Copies what `name` holds now into `dst`, which must be as long as the buffer.
    pub(super) fn read_into(&self, name: &str, dst: &mut [u8]) -> Result<(), ReplayError> {
        let b = self.buffer(name)?;
        if b.size != dst.len() as u64 {
            let why = format!("buffer `{name}` holds {} bytes, not the {} read", b.size, dst.len());
            return Err(CudaError::Unsupported(why).into());
        }
        // SAFETY: a buffer of the manifest, inside the arena kept mapped while this lives,
        // and `dst` holds exactly its bytes.
        Ok(unsafe { self.ctx.read_into(self.base + b.offset, dst) }?)
    }

    pub(super) fn context(&self) -> &Context {
        &self.ctx
    }

    /// What `name` held when the core was loaded: a writable buffer from its device copy,
    /// a weight from the arena (which no template may change).
    pub fn initial_contents(&self, name: &str) -> Result<Vec<u8>, ReplayError> {
        match self.writable.iter().find(|(b, _)| b.name == name) {
            Some((_, copy)) => Ok(copy.download()?),
            None => self.read(name),
        }
    }

    /// Where the state as loaded lies while launches change the arena ([`HeldAt`]).
    pub fn held_at(&self) -> HeldAt<'_> {
        HeldAt::with_copies(self.base, self.writable.iter().map(|(b, copy)| (b.offset, b.size, copy.ptr())).collect())
    }

    /// A check that sums a checksum of every writable buffer on the device: whether two
    /// launches left the same state, without reading it back. Its sums come in the order
    /// [`Scope::Only`] counts the writable buffers in.
    pub fn writable_check<'c>(&self, checksummer: &'c Checksummer) -> Result<RangeCheck<'c>, ReplayError> {
        let ranges: Vec<(u64, u64)> = self.writable.iter().map(|(b, _)| (self.base + b.offset, b.size)).collect();
        // SAFETY: buffers of the arena, mapped while this state lives.
        unsafe { checksummer.checksums(&ranges) }
    }

    /// A check that sums a checksum of each buffer `names` names on the device: whether
    /// two launches gave the same outputs, without reading them back.
    pub fn check_of<'c>(&self, names: &[&str], checksummer: &'c Checksummer) -> Result<RangeCheck<'c>, ReplayError> {
        let ranges = names
            .iter()
            .map(|name| self.buffer(name).map(|b| (self.base + b.offset, b.size)))
            .collect::<Result<Vec<_>, _>>()?;
        // SAFETY: buffers of the arena, mapped while this state lives.
        unsafe { checksummer.checksums(&ranges) }
    }

    /// The bytes of the buffers `names` names, together.
    pub(super) fn bytes_of(&self, names: &[&str]) -> Result<u64, ReplayError> {
        names.iter().try_fold(0u64, |sum, name| Ok(sum.saturating_add(self.buffer(name)?.size)))
    }

    pub(super) fn address(&self, b: &Buffer) -> u64 {
        self.base + b.offset
    }

    fn buffer(&self, name: &str) -> Result<&Buffer, ReplayError> {
        Ok(self.buffers.get(name).ok_or_else(|| CudaError::Unsupported(format!("the core has no buffer `{name}`")))?)
    }
}

/// Where each byte of the arena as loaded lies on the device, as plain addresses: a
/// writable buffer's in its copy, every other byte in the arena. The kit's snapshot reads
/// the loaded state through this on a thread of its own while the templates' launches
/// change the arena's writable buffers; weights no launch may change.
#[derive(Clone, Debug)]
pub struct HeldAt<'s> {
    base: u64,
    /// Each writable buffer's offset in the arena, size and copy's address, by offset.
    copies: Vec<(u64, u64, u64)>,
    /// Borrows the state whose copies it names (a plain borrow, so a thread may hold it).
    _state: std::marker::PhantomData<&'s ()>,
}

impl HeldAt<'static> {
    /// The arena at `base` holding everything itself: nothing launched since it was loaded.
    pub fn arena(base: u64) -> Self {
        Self::with_copies(base, Vec::new())
    }
}

impl HeldAt<'_> {
    /// The arena at `base` with `copies` as (offset, size, copy's address); tests give
    /// made-up addresses, since nothing here reads the device.
    pub(crate) fn with_copies(base: u64, mut copies: Vec<(u64, u64, u64)>) -> Self {
        copies.sort_unstable_by_key(|&(offset, ..)| offset);
        Self { base, copies, _state: Default::default() }
    }

    /// The device ranges, as (address, length), that hold the arena's `offset..offset +
    /// len` as loaded, in order.
    pub fn ranges(&self, offset: u64, len: u64) -> Vec<(u64, u64)> {
        let (mut at, end) = (offset, offset.saturating_add(len));
        let mut out = Vec::new();
        let first = self.copies.partition_point(|&(o, size, _)| o.saturating_add(size) <= at);
        for &(o, size, copy) in self.copies[first..].iter().take_while(|&&(o, ..)| o < end) {
            if at < o {
                out.push((self.base + at, o - at));
                at = o;
            }
            let to = o.saturating_add(size).min(end);
            if to <= at {
                continue; // inside a copy already taken: buffers do not overlap in a valid core
            }
            out.push((copy + (at - o), to - at));
            at = to;
        }
        if at < end {
            out.push((self.base + at, end - at));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::{HeldAt, Scope};

    /// A range over writable buffers is read from their copies, whole or in part, and
    /// from the arena between and around them; an arena alone holds every range itself.
    #[test]
    fn the_loaded_state_is_read_from_the_copies_where_buffers_are_writable() {
        let base = 0x7000_0000;
        let held = HeldAt::with_copies(base, vec![(300, 50, 0x2000), (100, 100, 0x1000)]);
        let arena = |o: u64, len: u64| (base + o, len);
        assert_eq!(
            held.ranges(50, 300),
            [arena(50, 50), (0x1000, 100), arena(200, 100), (0x2000, 50)],
            "before, through and between the copies"
        );
        assert_eq!(held.ranges(150, 20), [(0x1000 + 50, 20)], "inside one copy");
        assert_eq!(held.ranges(200, 100), [arena(200, 100)], "between them, touching both");
        assert_eq!(held.ranges(340, 20), [(0x2000 + 40, 10), arena(350, 10)], "out of the last");
        assert_eq!(held.ranges(0, 0), []);
        let nested = HeldAt::with_copies(base, vec![(0, 100, 0x1000), (10, 20, 0x2000)]);
        assert_eq!(nested.ranges(0, 50), [(0x1000, 50)], "a copy inside one taken adds nothing");
        assert_eq!(HeldAt::arena(base).ranges(150, 20), [arena(150, 20)]);
    }

    /// A template's resets put back what its first launch changed; a later launch that
    /// changed anything else strays, one that changed less does not.
    #[test]
    fn a_scope_is_what_changed_and_a_change_elsewhere_strays() {
        let loaded = [10, 20, 30, 40];
        let scope = Scope::changed(&loaded, &[10, 21, 30, 41]);
        assert_eq!(scope, Scope::Only(vec![1, 3]));
        assert!(!scope.strayed(&loaded, &[10, 22, 30, 40]), "less than the first launch changed");
        assert!(scope.strayed(&loaded, &[11, 21, 30, 41]), "buffer 0 changed");
        assert!(!Scope::All.strayed(&loaded, &[0, 0, 0, 0]), "everything is put back");
        assert_eq!(Scope::changed(&loaded, &loaded), Scope::Only(vec![]));
    }
}
