/* Helpers shared by the pipelined algorithms. */
#include "algo.h"

size_t rcoll_chunk_count(size_t total, size_t chunk) {
  return chunk == 0 ? 0 : (total + chunk - 1) / chunk;
}
