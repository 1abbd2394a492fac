/* comm_test_util.h — shared helpers of the comm layer's MPI tests: per-rank test data,
 * an independent serial reference of every reduction, loud element comparisons, and a
 * verdict agreed by all ranks (so that one rank's failed check never leaves the others
 * waiting in the next collective). */
#ifndef DT_COMM_TEST_UTIL_H
#define DT_COMM_TEST_UTIL_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include "dtrain/comm.h"
#include "dtrain/comm_mpi.h"

/* Data of group member `member` (its world rank, so sub-groups get distinct data):
 * EXACT: small integers (|x| <= 8) in every type, so that every summation order gives the
 * same bits; for float16 and bfloat16 times 2^e(i), one power of two per element shared by
 * all members, over the format's whole exponent range (subnormals too), so that sums of up
 * to 5 members stay exact; RANDOM: uniform [-1, 1) floats (16-bit: rounded to nearest) and
 * full-range integers; SPECIAL (floats, for MAX and MIN): RANDOM with about one element in
 * eight a quiet NaN, +inf or -inf, at different places on each member. */
enum { CT_EXACT = 0, CT_RANDOM = 1, CT_SPECIAL = 2 };
void ct_fill(dt_comm_dtype t, void *buf, size_t n, int member, uint64_t seed, int kind);

/* float16 / bfloat16 patterns as values and back, written apart from the library's
 * conversions (frexp, ldexp, nearbyint in double): the value of a pattern (finite or
 * infinite), and x rounded to the type to nearest, ties to even, an infinity past the
 * largest finite value. */
int ct_is_half(dt_comm_dtype t);
double ct_half_value(dt_comm_dtype t, uint16_t h);
uint16_t ct_half_round(dt_comm_dtype t, double x);
/* The unit roundoff: 2^-11 (float16), 2^-8 (bfloat16); half the smallest subnormal. */
double ct_half_unit(dt_comm_dtype t);
double ct_half_tiny(dt_comm_dtype t);

/* out[i] = left fold over the group's members in group-rank order of their data at element
 * offset `first` + i, with AVG dividing once; written independently of the library. 16-bit
 * floats follow comm.h's rule: each step rounded back to 16 bits (ct_half_round). */
void ct_reference(dt_comm *c, dt_comm_dtype t, dt_comm_redop op, void *out, size_t first, size_t n,
                  size_t full, uint64_t seed, int kind);

/* Bytewise element comparison; on a mismatch prints name, rank, first bad index, expected
 * and actual values and the number of bad elements, and returns 0. */
int ct_check(const char *name, dt_comm_dtype t, const void *got, const void *ref, size_t n);

/* 1 when `ok` holds on every rank of MPI_COMM_WORLD (raw MPI, not the layer under test). */
int ct_all(int ok);

/* malloc or abort (tests only). */
void *ct_alloc(size_t nbytes);

#endif
