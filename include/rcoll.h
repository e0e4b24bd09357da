/* rcoll — collective communication for host and CUDA buffers.
 *
 * The API mirrors NCCL's names and argument order with the `rcoll` prefix, so
 * that a trainer ports by renaming. Every call returns rcollResult_t; no call
 * aborts the process. */
#ifndef RCOLL_H
#define RCOLL_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(RCOLL_BUILDING_LIBRARY)
#define RCOLL_API __attribute__((visibility("default")))
#else
#define RCOLL_API
#endif

#define RCOLL_MAJOR 0
#define RCOLL_MINOR 1
#define RCOLL_PATCH 0
#define RCOLL_VERSION_CODE (RCOLL_MAJOR * 10000 + RCOLL_MINOR * 100 + RCOLL_PATCH)

/* One X-macro gives the enum, the names and the messages (see lib/error.c). */
#define RCOLL_RESULT_MAP(X)                                                              \
  X(rcollSuccess, 0, "no error")                                                         \
  X(rcollUnhandledCudaError, 1, "unhandled CUDA error")                                  \
  X(rcollSystemError, 2, "system call failed (see last error text)")                     \
  X(rcollInternalError, 3, "internal error (a bug in rcoll)")                            \
  X(rcollInvalidArgument, 4, "invalid argument")                                         \
  X(rcollInvalidUsage, 5, "invalid usage")                                               \
  X(rcollRemoteError, 6, "remote peer failed or disconnected")                           \
  X(rcollInProgress, 7, "operation in progress")                                         \
  X(rcollTimeout, 8, "timed out waiting for a peer")

typedef enum {
#define RCOLL_RESULT_ENUM(name, value, msg) name = value,
  RCOLL_RESULT_MAP(RCOLL_RESULT_ENUM)
#undef RCOLL_RESULT_ENUM
  rcollNumResults = 9
} rcollResult_t;

typedef enum {
  rcollInt8 = 0, rcollChar = 0,
  rcollUint8 = 1,
  rcollInt32 = 2, rcollInt = 2,
  rcollUint32 = 3,
  rcollInt64 = 4,
  rcollUint64 = 5,
  rcollFloat16 = 6, rcollHalf = 6,
  rcollFloat32 = 7, rcollFloat = 7,
  rcollFloat64 = 8, rcollDouble = 8,
  rcollBfloat16 = 9,
  rcollFloat8e4m3 = 10, /* 8-bit floats as NVIDIA's __nv_fp8_e4m3 and __nv_fp8_e5m2 */
  rcollFloat8e5m2 = 11,
  rcollNumTypes = 12
} rcollDataType_t;

typedef enum {
  rcollSum = 0,
  rcollProd = 1,
  rcollMax = 2,
  rcollMin = 3,
  rcollAvg = 4,
  rcollNumOps = 5,
  /* Ops made by rcollRedOpCreatePreMulSum are values from rcollNumOps on;
   * this makes the enum wide enough for them, as NCCL's ncclMaxRedOp. */
  rcollMaxRedOp = 0x7fffffff
} rcollRedOp_t;

/* Where the scalar of rcollRedOpCreatePreMulSum lives and when it is read. */
typedef enum {
  rcollScalarDevice = 0,       /* read when each collective runs (rcoll: host memory only, for now) */
  rcollScalarHostImmediate = 1 /* read before rcollRedOpCreatePreMulSum returns */
} rcollScalarResidence_t;

#define RCOLL_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[RCOLL_UNIQUE_ID_BYTES];
} rcollUniqueId;

typedef struct rcollComm *rcollComm_t;

/* A stream is a cudaStream_t for device buffers and NULL for host buffers.
 * Declared opaque here so that users without CUDA can include this header.
 * A call on device buffers returns at once: it starts after the work queued
 * on its stream (NULL: the default stream) and work queued after it waits
 * for it, as with NCCL; its errors show in rcollCommGetAsyncError. */
typedef void *rcollStream_t;

/* Communicator options; initialise with RCOLL_CONFIG_INITIALIZER, which
 * sets every option undefined (RCOLL_CONFIG_UNDEF_INT / _PTR, NCCL's
 * convention): an option left so takes its default. New fields are only ever
 * appended, and `size` says how much of the struct the caller's header had:
 * the library reads a config only up to its size. */
typedef struct {
  size_t size;     /* sizeof(rcollConfig_t) of the caller's header */
  unsigned magic;  /* RCOLL_CONFIG_MAGIC */
  unsigned version;
  int blocking;    /* 1 (the default): calls complete before returning; 0 is not supported yet */
  int timeoutMs;   /* 0 or undefined: use RCOLL_TIMEOUT */
  const char *netName; /* undefined: use RCOLL_NET or the best transport */
  int splitShare;  /* 0 or 1 (NCCL's); rcoll's split communicators always make their own connections */
  const char *commName; /* shown in the communicator's log lines; copied at init */
} rcollConfig_t;

#define RCOLL_CONFIG_UNDEF_INT INT_MIN
#define RCOLL_CONFIG_UNDEF_PTR NULL
#define RCOLL_CONFIG_MAGIC 0x72636f6cu
#define RCOLL_CONFIG_INITIALIZER                                                        \
  { sizeof(rcollConfig_t), RCOLL_CONFIG_MAGIC, RCOLL_VERSION_CODE,                      \
    RCOLL_CONFIG_UNDEF_INT, /* blocking */  RCOLL_CONFIG_UNDEF_INT, /* timeoutMs */    \
    RCOLL_CONFIG_UNDEF_PTR, /* netName */   RCOLL_CONFIG_UNDEF_INT, /* splitShare */   \
    RCOLL_CONFIG_UNDEF_PTR  /* commName */ }

RCOLL_API rcollResult_t rcollGetVersion(int *version);
RCOLL_API const char *rcollGetErrorString(rcollResult_t result);
/* Text of the last error seen by the calling thread (or by comm, when not NULL). */
RCOLL_API const char *rcollGetLastError(rcollComm_t comm);

RCOLL_API rcollResult_t rcollGetUniqueId(rcollUniqueId *uniqueId);
RCOLL_API rcollResult_t rcollCommInitRank(rcollComm_t *comm, int nranks, rcollUniqueId commId, int rank);
RCOLL_API rcollResult_t rcollCommInitRankConfig(rcollComm_t *comm, int nranks, rcollUniqueId commId,
                                                int rank, rcollConfig_t *config);
/* As rcollCommInitRankConfig, meeting through nId unique ids (1..nranks, the
 * same ids in the same order on every rank) so that no one root serves every
 * rank: as NCCL, the ranks are cut in order into nId blocks (the first
 * nranks % nId one rank larger) and block k meets at commIds[k]. */
RCOLL_API rcollResult_t rcollCommInitRankScalable(rcollComm_t *newcomm, int nranks, int myrank, int nId,
                                                  rcollUniqueId *commIds, rcollConfig_t *config);
/* Creates ndev communicators inside this process (one internal thread per rank
 * during init). Collectives on them from one thread must sit in a group. */
RCOLL_API rcollResult_t rcollCommInitAll(rcollComm_t *comms, int ndev, const int *devlist);
/* rcoll extension: rank, size and rendezvous from the environment
 * (RCOLL_COMM_ID or torchrun's MASTER_ADDR/MASTER_PORT, with RANK/WORLD_SIZE,
 * PMI_RANK/PMI_SIZE, OMPI_COMM_WORLD_RANK/SIZE or SLURM_PROCID/SLURM_NTASKS). */
RCOLL_API rcollResult_t rcollCommInitFromEnv(rcollComm_t *comm, rcollConfig_t *config);
/* Ranks with the same color form a new communicator, ordered by key (ties by
 * rank). RCOLL_SPLIT_NOCOLOR gives *newcomm = NULL. Collective over comm. */
#define RCOLL_SPLIT_NOCOLOR -1
RCOLL_API rcollResult_t rcollCommSplit(rcollComm_t comm, int color, int key, rcollComm_t *newcomm,
                                       rcollConfig_t *config);
/* After a rank dies (NCCL 2.28's ncclCommShrink): every rank NOT in
 * excludeRanksList calls it with the same list (any order), and gets a new
 * communicator of the remaining ranks, numbered in the parent's order. The
 * excluded ranks are never contacted (a listed rank that calls anyway gets
 * *newcomm = NULL). config NULL: the parent's timeout and transport.
 * RCOLL_SHRINK_ABORT first stops the parent's calls in other threads and
 * closes its connections (then only destroy/abort may follow on it);
 * RCOLL_SHRINK_DEFAULT leaves the parent as it is. docs/faults.md. */
#define RCOLL_SHRINK_DEFAULT 0x00
#define RCOLL_SHRINK_ABORT 0x01
RCOLL_API rcollResult_t rcollCommShrink(rcollComm_t comm, int *excludeRanksList, int excludeRanksCount,
                                        rcollComm_t *newcomm, rcollConfig_t *config, int shrinkFlags);
/* Stops the calls running on comm in other threads and refuses later ones
 * (rcollInvalidUsage, "revoked"); only rcollCommShrink, rcollCommDestroy and
 * rcollCommAbort may follow. Local: each rank that is to stop calls it.
 * revokeFlags must be RCOLL_REVOKE_DEFAULT. */
#define RCOLL_REVOKE_DEFAULT 0x00
RCOLL_API rcollResult_t rcollCommRevoke(rcollComm_t comm, int revokeFlags);
RCOLL_API rcollResult_t rcollCommFinalize(rcollComm_t comm);
RCOLL_API rcollResult_t rcollCommDestroy(rcollComm_t comm);
RCOLL_API rcollResult_t rcollCommAbort(rcollComm_t comm);
RCOLL_API rcollResult_t rcollCommGetAsyncError(rcollComm_t comm, rcollResult_t *asyncError);
RCOLL_API rcollResult_t rcollCommCount(const rcollComm_t comm, int *count);
RCOLL_API rcollResult_t rcollCommUserRank(const rcollComm_t comm, int *rank);
RCOLL_API rcollResult_t rcollCommCuDevice(const rcollComm_t comm, int *device);

RCOLL_API rcollResult_t rcollAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                                       rcollDataType_t datatype, rcollRedOp_t op, rcollComm_t comm,
                                       rcollStream_t stream);
RCOLL_API rcollResult_t rcollBroadcast(const void *sendbuff, void *recvbuff, size_t count,
                                       rcollDataType_t datatype, int root, rcollComm_t comm,
                                       rcollStream_t stream);
/* Legacy in-place broadcast, as rcollBroadcast(buff, buff, ...). */
RCOLL_API rcollResult_t rcollBcast(void *buff, size_t count, rcollDataType_t datatype, int root,
                                   rcollComm_t comm, rcollStream_t stream);
RCOLL_API rcollResult_t rcollReduce(const void *sendbuff, void *recvbuff, size_t count,
                                    rcollDataType_t datatype, rcollRedOp_t op, int root,
                                    rcollComm_t comm, rcollStream_t stream);
/* sendcount elements from each rank; recvbuff holds nranks*sendcount. */
RCOLL_API rcollResult_t rcollAllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
                                       rcollDataType_t datatype, rcollComm_t comm,
                                       rcollStream_t stream);
/* sendbuff holds nranks*recvcount; each rank receives its recvcount block. */
RCOLL_API rcollResult_t rcollReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount,
                                           rcollDataType_t datatype, rcollRedOp_t op,
                                           rcollComm_t comm, rcollStream_t stream);
/* Each rank sends count elements to every rank: the block for rank j is
 * sendbuff + j*count, and the block from rank i lands at recvbuff + i*count.
 * sendbuff == recvbuff is in place (NCCL leaves it undefined; rcoll does it
 * through scratch); other overlaps are refused. */
RCOLL_API rcollResult_t rcollAlltoAll(const void *sendbuff, void *recvbuff, size_t count,
                                      rcollDataType_t datatype, rcollComm_t comm,
                                      rcollStream_t stream);
/* Each rank sends count elements to root, which places rank i's at
 * recvbuff + i*count; recvbuff is not used on other ranks. In place when
 * sendbuff == recvbuff + root*count on the root. */
RCOLL_API rcollResult_t rcollGather(const void *sendbuff, void *recvbuff, size_t count,
                                    rcollDataType_t datatype, int root, rcollComm_t comm,
                                    rcollStream_t stream);
/* Root sends sendbuff + i*count (count elements) to rank i, which receives
 * them into recvbuff; sendbuff is not used on other ranks. In place when
 * recvbuff == sendbuff + root*count on the root. */
RCOLL_API rcollResult_t rcollScatter(const void *sendbuff, void *recvbuff, size_t count,
                                     rcollDataType_t datatype, int root, rcollComm_t comm,
                                     rcollStream_t stream);
RCOLL_API rcollResult_t rcollSend(const void *sendbuff, size_t count, rcollDataType_t datatype,
                                  int peer, rcollComm_t comm, rcollStream_t stream);
RCOLL_API rcollResult_t rcollRecv(void *recvbuff, size_t count, rcollDataType_t datatype, int peer,
                                  rcollComm_t comm, rcollStream_t stream);

/* A reduction op for collectives on comm and datatype only: each rank's
 * input is multiplied by its own *scalar (of datatype), then summed.
 * rcoll supports it on host buffers; a device buffer or scalar is refused
 * (rcollInvalidUsage). */
RCOLL_API rcollResult_t rcollRedOpCreatePreMulSum(rcollRedOp_t *op, void *scalar, rcollDataType_t datatype,
                                                  rcollScalarResidence_t residence, rcollComm_t comm);
/* Destroys an op made by rcollRedOpCreatePreMulSum on comm, once the last
 * call given it has returned. */
RCOLL_API rcollResult_t rcollRedOpDestroy(rcollRedOp_t op, rcollComm_t comm);

/* Registers [buff, buff + size) (host or device memory) with comm, for
 * transports that can then move it without copies or per-call registration;
 * *handle names the registration for rcollCommDeregister. Calls work on
 * unregistered buffers too. Registrations end with the communicator. */
RCOLL_API rcollResult_t rcollCommRegister(const rcollComm_t comm, void *buff, size_t size,
                                          void **handle);
RCOLL_API rcollResult_t rcollCommDeregister(const rcollComm_t comm, void *handle);

/* Memory for buffers: with a CUDA device, device memory on the calling
 * thread's current device (as NCCL's ncclMemAlloc); without one, host memory
 * from rcoll's pool, page-aligned and on pages of its own (good to register);
 * from 64 KiB it is shared memory that the node's other ranks map to read
 * from it directly, and a forked child does not inherit it.
 * size 0 gives *ptr = NULL. rcollMemFree(NULL) does nothing; a pointer
 * rcollMemAlloc did not return is refused (rcollInvalidArgument). */
RCOLL_API rcollResult_t rcollMemAlloc(void **ptr, size_t size);
RCOLL_API rcollResult_t rcollMemFree(void *ptr);

/* What a communicator runs on (not in NCCL), for tools and benchmarks:
 * the transport this rank uses to `peer` and its device ("shm",
 * "socket eth0 10000 Mb/s"), and whether the library counts the peer on this
 * rank's node (RCOLL_HOSTID can say otherwise); and the algorithm and pipeline chunk in bytes a
 * call of `coll` ("allreduce", "broadcast", "reduce", "allgather",
 * "reduce_scatter", "alltoall", "gather", "scatter") would use for `bytes`
 * (count x type size, times the ranks for the calls whose count is per
 * rank: allgather, reduce_scatter, alltoall, gather, scatter). */
RCOLL_API rcollResult_t rcollCommPeerTransport(rcollComm_t comm, int peer, int *sameNode, char *buf,
                                               size_t len);
RCOLL_API rcollResult_t rcollCommAlgorithm(rcollComm_t comm, const char *coll, size_t bytes,
                                           char *algo, size_t len, size_t *chunk);

RCOLL_API rcollResult_t rcollGroupStart(void);
RCOLL_API rcollResult_t rcollGroupEnd(void);

/* What rcollGroupSimulateEnd reports; initialise with
 * RCOLL_SIM_INFO_INITIALIZER (size, magic and version are checked). */
typedef struct {
  size_t size;
  unsigned magic;
  unsigned version;
  float estimatedTime; /* microseconds, the tuner's prediction (bench/rcoll_tune's) */
} rcollSimInfo_t;
#define RCOLL_UNDEF_FLOAT -1.0f
#define RCOLL_SIM_INFO_MAGIC 0x7273696du
#define RCOLL_SIM_INFO_INITIALIZER \
  { sizeof(rcollSimInfo_t), RCOLL_SIM_INFO_MAGIC, RCOLL_VERSION_CODE, RCOLL_UNDEF_FLOAT }
/* Ends the group without running it: every call in it is dropped, and
 * simInfo->estimatedTime gets the tuner's predicted time of its calls (the
 * sum of each communicator's calls, the slowest communicator's sum for a
 * group of several). A send or a receive counts as one message over the
 * slower class of link the peer may be on. Host calls only. */
RCOLL_API rcollResult_t rcollGroupSimulateEnd(rcollSimInfo_t *simInfo);

#ifdef __cplusplus
}
#endif
#endif /* RCOLL_H */
