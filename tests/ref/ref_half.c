/* Decoding f16 / bf16 bit patterns from their definitions. */
#include <math.h>
#include <string.h>

#include "ref.h"

double ref_f16_to_double(uint16_t h)
{
    int sign = (h >> 15) & 1, exp = (h >> 10) & 31, mant = h & 1023;
    double v;
    if (exp == 0)
        v = ldexp((double)mant, -24);
    else if (exp == 31)
        v = mant ? NAN : INFINITY;
    else
        v = ldexp((double)(1024 + mant), exp - 25);
    return sign ? -v : v;
}

double ref_bf16_to_double(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return (double)f;
}
