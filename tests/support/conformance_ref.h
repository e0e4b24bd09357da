/* Reference arithmetic for the conformance sweep (tests/conformance.c),
 * computed independently of the library (conformance_ref.c says how). Every
 * element is handled as its raw bit pattern in a uint64_t. No Criterion:
 * stand-alone programs link it. */
#ifndef RCOLL_TESTS_SUPPORT_CONFORMANCE_REF_H
#define RCOLL_TESTS_SUPPORT_CONFORMANCE_REF_H

#include <stddef.h>
#include <stdint.h>

#include "rcoll.h"

extern const char *const ref_type_names[rcollNumTypes];
extern const char *const ref_op_names[rcollNumOps];

size_t ref_type_size(rcollDataType_t t);

/* splitmix64's finalizer: case seeds and inputs derive from it. */
uint64_t ref_hash(uint64_t x);

/* Raw input element i of `rank` for a case of type t and op (seeded). */
uint64_t ref_input(rcollDataType_t t, rcollRedOp_t op, uint64_t seed, int rank, size_t i);

/* The expected reduction over ranks 0..n-1 of their input element `pos`. */
uint64_t ref_reduce(rcollDataType_t t, rcollRedOp_t op, int n, uint64_t seed, size_t pos);

/* Whether got is a right result for the element whose ref_reduce is want:
 * the same bits, or for fp8 sum and avg within the rounding any order of
 * additions may give (conformance_ref.c derives the bound). */
int ref_accepts(rcollDataType_t t, rcollRedOp_t op, int n, uint64_t seed, size_t pos, uint64_t got,
                uint64_t want);

/* Element i of buf as raw bits, and back (little-endian hosts only). */
uint64_t ref_load(const void *buf, rcollDataType_t t, size_t i);
void ref_store(void *buf, rcollDataType_t t, size_t i, uint64_t raw);

#endif
