// A position-dependent checksum of 32-bit words, combined by addition so the order in
// which blocks finish does not matter. Replay compares it before and after each template
// to find a template that writes a weight buffer.
extern "C" __global__ void checksum_words(const unsigned int* words, unsigned long long count,
                                          unsigned long long* out) {
    unsigned long long acc = 0;
    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += stride) {
        unsigned long long v = ((unsigned long long)words[i] << 32 | (i & 0xffffffffull)) ^ (i * 0x9e3779b97f4a7c15ull);
        v ^= v >> 31;
        v *= 0xbf58476d1ce4e5b9ull;
        v ^= v >> 29;
        acc += v;
    }
    atomicAdd(out, acc);
}

// How many 32-bit words differ from `pattern`: replay's check that zero buffers read back
// as zero and undefined ones as poison after the upload.
extern "C" __global__ void count_words_unlike(const unsigned int* words, unsigned long long count,
                                              unsigned int pattern, unsigned long long* out) {
    unsigned long long differ = 0;
    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += stride) {
        differ += words[i] != pattern;
    }
    if (differ) atomicAdd(out, differ);
}
