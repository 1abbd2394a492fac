/* crc.c — zlib's CRC-32 over any length (core.h). */
#include <zlib.h>

#include "dtrain/core.h"

uint32_t dt_crc32(uint32_t crc, const void *data, size_t n)
{
    const unsigned char *p = data;
    uLong c = crc;
    /* zlib takes a uInt length: feed large buffers in pieces. */
    while (n > 0) {
        const uInt piece = n > (1u << 30) ? (1u << 30) : (uInt)n;
        c = crc32(c, p, piece);
        p += piece;
        n -= piece;
    }
    return (uint32_t)c;
}

uint32_t dt_crc32_combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b)
{
    /* z_off_t is 64 bits wide on the LP64 targets dtrain builds for (a long). */
    _Static_assert(sizeof(z_off_t) >= sizeof(int64_t), "zlib's z_off_t is narrower than 64 bits");
    return (uint32_t)crc32_combine(crc_a, crc_b, (z_off_t)len_b);
}
