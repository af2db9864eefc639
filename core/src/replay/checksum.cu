// Checks of device memory computed on the device, over a table of ranges at once: one
// launch, one synchronisation and one read-back per check, whatever the number of
// buffers. `table` holds (address, bytes, pattern) triples; block row y takes range y,
// the blocks of the row stride through it. Ranges need no alignment: bytes before the
// first whole word and after the last are taken one by one by block 0's thread 0.

// A word mixed with its position by splitmix64's whole finalizer: a bijection of the
// 64-bit input, so one changed word always changes the sum. With one multiply instead of
// two, the same bit flipped at two positions cancelled in the sum far too often (a +0.0 ->
// -0.0 flip: one pair of positions in about 2^23; 3 110 cancelling pairs among 2^18
// positions, none with the whole finalizer), and a qualification compares later launches
// by these sums.
__device__ unsigned long long mix(unsigned long long value, unsigned long long position) {
    unsigned long long v = (value << 32 | (position & 0xffffffffull)) ^ (position * 0x9e3779b97f4a7c15ull);
    v ^= v >> 30;
    v *= 0xbf58476d1ce4e5b9ull;
    v ^= v >> 27;
    v *= 0x94d049bb133111ebull;
    v ^= v >> 31;
    return v;
}

// The sum over a warp, in lane 0: one atomic per warp instead of one per thread. Every
// range's threads add into one word, and a thread's atomic on a shared word made the
// check cost the number of buffers times the grid (0.057 s for GPT-2's 150 weights).
__device__ unsigned long long warp_sum(unsigned long long value) {
    for (int offset = 16; offset > 0; offset >>= 1) value += __shfl_down_sync(0xffffffffu, value, offset);
    return value;
}

struct Span {
    const unsigned char* bytes;
    unsigned long long len, head, words;
    unsigned int pattern;
};

__device__ Span span_of(const unsigned long long* table) {
    const unsigned long long* t = table + 3 * blockIdx.y;
    Span s;
    s.bytes = (const unsigned char*)t[0];
    s.len = t[1];
    s.head = (4 - t[0] % 4) % 4;
    if (s.head > s.len) s.head = s.len;
    s.words = (s.len - s.head) / 4;
    s.pattern = (unsigned int)t[2];
    return s;
}

// A position-dependent checksum per range, combined by addition so the order in which
// blocks finish does not matter: compared before and after each template, it finds a
// template that writes a weight buffer.
extern "C" __global__ void checksum_ranges(const unsigned long long* table, unsigned long long* out) {
    Span s = span_of(table);
    const unsigned int* words = (const unsigned int*)(s.bytes + s.head);
    unsigned long long acc = 0, stride = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < s.words; i += stride) {
        acc += mix(words[i], i);
    }
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        for (unsigned long long k = 0; k < s.head; ++k) acc += mix(s.bytes[k], (1ull << 40) + k);
        for (unsigned long long k = s.head + 4 * s.words; k < s.len; ++k) acc += mix(s.bytes[k], (1ull << 40) + k);
    }
    acc = warp_sum(acc);
    if (threadIdx.x % 32 == 0 && acc) atomicAdd(&out[blockIdx.y], acc);
}

// How many bytes of each range differ from the range's pattern byte (repeated in
// `pattern`'s four bytes): replay's check that zero buffers read back as zero and
// undefined ones as poison after the upload.
extern "C" __global__ void count_unlike_ranges(const unsigned long long* table, unsigned long long* out) {
    Span s = span_of(table);
    const unsigned int* words = (const unsigned int*)(s.bytes + s.head);
    unsigned char byte = (unsigned char)s.pattern;
    unsigned long long differ = 0, stride = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < s.words; i += stride) {
        unsigned int w = words[i] ^ s.pattern;
        differ += ((w & 0xff) != 0) + ((w >> 8 & 0xff) != 0) + ((w >> 16 & 0xff) != 0) + ((w >> 24) != 0);
    }
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        for (unsigned long long k = 0; k < s.head; ++k) differ += s.bytes[k] != byte;
        for (unsigned long long k = s.head + 4 * s.words; k < s.len; ++k) differ += s.bytes[k] != byte;
    }
    differ = warp_sum(differ);
    if (threadIdx.x % 32 == 0 && differ) atomicAdd(&out[blockIdx.y], differ);
}
