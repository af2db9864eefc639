//! How shard files are digested and verified. v1 and v2 cores carry one SHA-256 per
//! file, so a file is verified by one sequential stream; v3 cores carry an XXH3-128 per
//! fixed-size chunk, so the chunks of one file are verified apart, on as many threads as
//! read them (XXH3-128 was chosen by measurement on the H200 runner: `docs/driver-facts.md`).
//! A [`Piece`] is what is verified by itself: a whole v1/v2 file or one v3 chunk.

use std::ops::Range;

use sha2::{Digest, Sha256};
use xxhash_rust::xxh3::Xxh3;

use super::{Chunks, Manifest, Shard};

/// Chunk bytes an exporter writes: one upload staging slot.
pub const CHUNK_BYTES: u64 = 8 << 20;
/// The chunk sizes a v3 core may declare: powers of two, from one page (what `O_DIRECT`
/// reads align to) to 1 GiB.
pub const CHUNK_BYTES_RANGE: std::ops::RangeInclusive<u64> = 4096..=(1 << 30);

/// Part of a shard file verified by itself, with the digest it must have.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Piece<'m> {
    pub shard: &'m Shard,
    /// File bytes, from the start of the shard's file.
    pub bytes: Range<u64>,
    /// Which chunk of the file, for v3; `None` for a whole v1/v2 file.
    pub chunk: Option<usize>,
    pub expected: &'m str,
}

impl Piece<'_> {
    /// `shard 3`, or `shard 3 chunk 7` for a v3 chunk.
    pub fn name(&self) -> String {
        match self.chunk {
            Some(chunk) => format!("shard {} chunk {chunk}", self.shard.index),
            None => format!("shard {}", self.shard.index),
        }
    }
}

/// Every piece of every shard, in shard order, then file order; a shard whose digests do
/// not fit its stored length (which validation refuses) gives none.
pub fn pieces(m: &Manifest) -> Vec<Piece<'_>> {
    let mut pieces = Vec::new();
    for shard in &m.shards {
        let len = m.stored_len(shard);
        match (&shard.sha256, &shard.chunks) {
            (Some(sha256), _) => pieces.push(Piece { shard, bytes: 0..len, chunk: None, expected: sha256 }),
            (None, Some(c)) if chunk_count(len, c.bytes) == Some(c.xxh3_128.len()) => {
                pieces.extend(c.xxh3_128.iter().enumerate().map(|(i, expected)| {
                    let start = i as u64 * c.bytes;
                    Piece { shard, bytes: start..len.min(start + c.bytes), chunk: Some(i), expected }
                }))
            }
            (None, _) => {}
        }
    }
    pieces
}

/// How many chunks of `bytes` a file of `len` has; `None` for a zero chunk size.
pub fn chunk_count(len: u64, bytes: u64) -> Option<usize> {
    len.checked_next_multiple_of(bytes).map(|n| n / bytes).and_then(|n| usize::try_from(n).ok())
}

/// Digests a piece as its bytes stream by.
pub enum PieceHasher {
    Sha256(Box<Sha256>),
    Xxh3(Box<Xxh3>),
}

impl PieceHasher {
    pub fn of(piece: &Piece) -> Self {
        match piece.chunk {
            None => Self::Sha256(Box::default()),
            Some(_) => Self::Xxh3(Box::default()),
        }
    }

    pub fn update(&mut self, bytes: &[u8]) {
        match self {
            Self::Sha256(h) => h.update(bytes),
            Self::Xxh3(h) => h.update(bytes),
        }
    }

    pub fn finish(self) -> String {
        match self {
            Self::Sha256(h) => hex::encode(h.finalize()),
            Self::Xxh3(h) => hex128(h.digest128()),
        }
    }

    /// The name the manifest gives this digest.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Sha256(_) => "SHA-256",
            Self::Xxh3(_) => "XXH3-128",
        }
    }
}

/// The XXH3-128 of each `bytes`-long chunk of a stream, however its writes fall.
pub struct ChunkDigester {
    bytes: u64,
    chunk: Xxh3,
    in_chunk: u64,
    chunks: Vec<String>,
}

impl ChunkDigester {
    pub fn new(bytes: u64) -> Self {
        Self { bytes, chunk: Xxh3::new(), in_chunk: 0, chunks: Vec::new() }
    }

    pub fn update(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            let take = ((self.bytes - self.in_chunk) as usize).min(bytes.len());
            self.chunk.update(&bytes[..take]);
            (self.in_chunk, bytes) = (self.in_chunk + take as u64, &bytes[take..]);
            if self.in_chunk == self.bytes {
                self.close_chunk();
            }
        }
    }

    fn close_chunk(&mut self) {
        self.chunks.push(hex128(self.chunk.digest128()));
        (self.chunk, self.in_chunk) = (Xxh3::new(), 0);
    }

    /// The digests, the last (shorter) chunk closed; none for an empty stream.
    pub fn finish(mut self) -> Chunks {
        if self.in_chunk > 0 {
            self.close_chunk();
        }
        Chunks { bytes: self.bytes, xxh3_128: self.chunks }
    }
}

/// The chunk digests of `file` at `bytes` per chunk: what a test or a fixture that
/// rechunks a core computes, as an exporter does while writing.
pub fn chunk_digests(file: &[u8], bytes: u64) -> Chunks {
    let mut digester = ChunkDigester::new(bytes);
    digester.update(file);
    digester.finish()
}

/// A v3 chunk's digest as the manifest writes it: what a writer computes of each chunk
/// it holds whole.
pub fn chunk_digest(bytes: &[u8]) -> String {
    hex128(xxhash_rust::xxh3::xxh3_128(bytes))
}

/// A 128-bit digest as the manifest writes it: 32 lowercase hexadecimal digits.
fn hex128(digest: u128) -> String {
    format!("{digest:032x}")
}

/// Outputs of fewer bytes than this are hashed on the calling thread: starting threads
/// would cost more than they save.
const ALONE_BELOW: usize = 16 << 20;

/// The SHA-256 of each of `outputs`, hex, on as many threads as there are cores (or
/// outputs): what a replay digests after every launch of a template, a large batch's
/// cache being gigabytes, where one thread hashes about 1.6 GB/s.
pub fn sha256_each(outputs: &[&[u8]]) -> Vec<String> {
    let bytes: usize = outputs.iter().map(|o| o.len()).sum();
    let sha256 = |i: usize| hex::encode(Sha256::digest(outputs[i]));
    match bytes < ALONE_BELOW {
        true => (0..outputs.len()).map(sha256).collect(),
        false => crate::on_cores::map(outputs.len(), sha256),
    }
}
