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
