"""Prints the expected numbers of tests/unit/test_text.c, computed from the definitions in
include/dtrain/text.h with nothing of dtrain's: the split floor((1 - val_fraction) * n) and
the training windows' offsets o(s, j) = (w0 * 2^32 + w1) mod (n_train - block_size), w the
Philox4x32-10 of (key seed, counter (s mod 2^32, s div 2^32, j mod 2^32, 9 << 24 | j div
2^32)). Philox is written out here from its definition (Salmon et al., SC 2011, as Random123
implements it) and checked against Random123's known-answer vectors, the same three that
test_text checks dt_philox against.
Run by hand when the test's cases change (plain python3, no packages):
    python3 tests/data/gen_text_windows.py
and paste its output into the test.
"""
import math

M0, M1 = 0xD2511F53, 0xCD9E8D57  # the round multipliers
W0, W1 = 0x9E3779B9, 0xBB67AE85  # the key schedule's increments
MASK = 0xFFFFFFFF


def philox4x32_10(key, ctr):
    k0, k1 = key
    c = list(ctr)
    for r in range(10):
        if r:
            k0, k1 = (k0 + W0) & MASK, (k1 + W1) & MASK
        p0, p1 = M0 * c[0], M1 * c[2]
        c = [(p1 >> 32) ^ c[1] ^ k0, p1 & MASK, (p0 >> 32) ^ c[3] ^ k1, p0 & MASK]
    return c


# Random123's kat_vectors for philox4x32 10: counter, key, result.
KAT = [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((MASK,) * 4, (MASK,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
]
for ctr, key, want in KAT:
    assert tuple(philox4x32_10(key, ctr)) == want, (ctr, key)


def offset(seed, s, j, n_train, block):
    key = (seed & MASK, seed >> 32)
    ctr = (s & MASK, s >> 32, j & MASK, 9 << 24 | j >> 32)
    w = philox4x32_10(key, ctr)
    return (w[0] << 32 | w[1]) % (n_train - block)


def n_train(n, v):
    return math.floor((1 - v) * n)


# The split: (bytes, val_fraction).
print("/* split: {n, val_fraction, n_train} */")
for n, v in [(30, 0.15), (23, 0.1), (20, 0.25), (10, 0.5), (7, 0.0), (1000, 0.999), (99, 0.3)]:
    print("{%d, %r, %d}," % (n, v, n_train(n, v)))

# The small corpus: 30 bytes, val_fraction 0.15, block_size 4.
nt, block = n_train(30, 0.15), 4
print("/* windows: n_train %d, block_size %d: {seed, step, j, offset} */" % (nt, block))
cases = [(1337, s, j) for s in range(3) for j in range(4)]
cases += [(1337, 2**32 + 5, 2**32 + 7), (1337, 3, 2**40 + 1),
          (0x9E3779B97F4A7C15, 0, 0), (0x9E3779B97F4A7C15, 17, 5)]
for seed, s, j in cases:
    print("{0x%xull, %dll, %dll, %d}," % (seed, s, j, offset(seed, s, j, nt, block)))
