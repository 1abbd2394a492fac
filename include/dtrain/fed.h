/* fed.h — the data side of federated averaging: partitioning a training set over
 * simulated clients, and the clients each round samples.
 *
 * FedAvg (McMahan et al., "Communication-efficient learning of deep networks from
 * decentralized data", AISTATS 2017) trains C clients, each on its own partition of the
 * training set; each round K of them are sampled, train locally from the global model and
 * the server averages their updates weighted by their sample counts. Everything here is a
 * pure function of its arguments and a seed: every rank, every run and any resumed run
 * computes the same partition and the same rounds, with nothing to communicate.
 *
 * Random numbers come from Philox (rng.h) under a stream of their own, DT_RNG_STREAM_FED
 * (7): dt_rng_stream in rng.h has 1..5, PowerSGD's projections take 6. src/data/
 * fed_partition.c documents the counters each draw uses.
 *
 * Reproducibility across machines: sqrt is exactly rounded, but the Dirichlet split also
 * uses the C library's log, exp and cos. Two machines whose libm differ in the last bit
 * (glibc picks FMA variants by CPU) could, rarely, put a sample on a different client. A
 * run over several machines should compute the assignment on one rank and broadcast it, or
 * compare a checksum of client_of (dt_crc32) across ranks. iid, shards and dt_fed_sample
 * use integer arithmetic only and agree everywhere. */
#ifndef DTRAIN_FED_H
#define DTRAIN_FED_H

#include <stddef.h>
#include <stdint.h>

#include "dtrain/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The Philox stream tag of federated partitioning and sampling, continuing dt_rng_stream
 * (rng.h): it goes in the top byte of a counter word, as the other streams' tags do. */
#define DT_RNG_STREAM_FED 7

/* How the training set is split over clients.
 *   DT_FED_IID:       a random permutation cut into nearly equal parts.
 *   DT_FED_SHARDS:    the FedAvg paper's pathological non-IID split: samples sorted by
 *                     label, cut into clients * shards_per_client shards, each client
 *                     dealt shards_per_client random shards.
 *   DT_FED_DIRICHLET: label skew (Hsu, Qi and Brown, "Measuring the effects of
 *                     non-identical data distribution for federated visual
 *                     classification", 2019): each class is split over the clients in
 *                     proportions drawn from Dir(alpha, ..., alpha); small alpha gives
 *                     each client few classes, large alpha approaches iid. */
typedef enum dt_fed_partition_kind {
    DT_FED_IID = 0,
    DT_FED_SHARDS,
    DT_FED_DIRICHLET
} dt_fed_partition_kind;

typedef struct dt_fed_partition {
    dt_fed_partition_kind kind;
    int shards_per_client; /* DT_FED_SHARDS: >= 1 */
    double alpha;          /* DT_FED_DIRICHLET: the concentration, in [1e-300, inf) */
} dt_fed_partition;

/* The smallest concentration accepted: the sampler divides log(u) >= -32 ln 2 by alpha,
 * which must stay finite. */
#define DT_FED_ALPHA_MIN 1e-300

/* Bytes dt_fed_partition_format needs for any partition, the NUL included. */
#define DT_FED_PARTITION_TEXT_MAX 48

/* Parses "iid", "shards:N" (an integer N >= 1) or "dirichlet:ALPHA" (a finite number
 * ALPHA >= DT_FED_ALPHA_MIN, in strtod's syntax) into *out, with no spaces and nothing
 * after the number. DT_ERR_INVALID with a message naming `text` and what is allowed;
 * *out is written only on success. `text` is borrowed. */
DT_API dt_status dt_fed_partition_parse(const char *text, dt_fed_partition *out);

/* Writes the text dt_fed_partition_parse reads back to *p: "iid", "shards:2",
 * "dirichlet:0.5" (the shortest decimal that parses to the same alpha). Always
 * NUL-terminates buf (nbytes >= 1); a buffer below DT_FED_PARTITION_TEXT_MAX bytes may
 * truncate the text. */
DT_API void dt_fed_partition_format(const dt_fed_partition *p, char *buf, size_t nbytes);

/* Assigns every sample to a client: client_of (n) gets each sample's client in
 * [0, clients), counts (clients) each client's number of samples (together n), and
 * *moved (when `moved` is not NULL) how many samples were moved to clients the split left
 * empty (dirichlet only; 0 for the other kinds). Every client ends with >= 1 sample.
 *
 * labels (n) holds class labels in [0, num_classes); it is read by shards and dirichlet
 * only and may be NULL for iid (regression data), when num_classes is ignored. The result
 * is a pure function of (*p, labels, n, num_classes, clients, seed).
 *   iid:       a Philox permutation of the samples cut into `clients` contiguous parts,
 *              the first n mod clients one sample larger.
 *   shards:N:  the samples sorted by (label, index), cut into clients*N shards whose sizes
 *              differ by at most 1 (the first ones larger); client c gets the shards
 *              perm[c*N .. c*N + N) of a Philox permutation of the shard indices. Needs
 *              clients*N <= n. A shard straddling a class boundary holds 2 labels, more
 *              only when a whole class fits inside it (a class of at most shard size - 2
 *              samples): with classes no smaller than that a client holds at most 2N
 *              labels, and N when every class is a whole number of shards.
 *   dirichlet: for each class k, proportions q_k ~ Dir(alpha) over the clients; class k's
 *              samples, in a Philox-permuted order, go to client c at positions
 *              [floor(S_c n_k), floor(S_{c+1} n_k)) with S_c = q_k,0 + ... + q_k,c-1 and
 *              S_clients = 1 exactly. Then, while a client has no sample, the lowest-
 *              numbered empty client takes the last sample (highest index) of the largest
 *              client (lowest-numbered among equals); each such move counts in *moved.
 *
 * Errors (DT_ERR_INVALID): clients < 1, clients > n ("N clients for M samples: every
 * client needs a sample"), a bad *p, shards or dirichlet without labels ("needs class
 * labels") or with num_classes < 1, a label outside [0, num_classes), clients*N > n for
 * shards. DT_ERR_NOMEM when the scratch space (at most 16 n + 8 num_classes + 8 clients
 * bytes) cannot be allocated; it is freed before returning. On failure client_of and
 * counts are unspecified. */
DT_API dt_status dt_fed_assign(const dt_fed_partition *p, const int32_t *labels, int64_t n,
                               int64_t num_classes, int clients, uint64_t seed, int64_t *client_of,
                               int64_t *counts, int64_t *moved);

/* hist (clients, num_classes) = the number of samples of class k on client c, at
 * hist[c * num_classes + k], from client_of (n) and labels (n); every entry is written.
 * client_of and labels must be in range (DT_ASSERT): pass what dt_fed_assign accepted. */
DT_API void dt_fed_histogram(const int64_t *client_of, const int32_t *labels, int64_t n,
                             int64_t num_classes, int clients, int64_t *hist);

/* The per_round distinct clients of round `round` (>= 0), ascending, into out
 * (per_round), for 1 <= per_round <= clients (DT_ASSERT). A pure function of (clients,
 * per_round, seed, round); every per_round-subset is equally likely. per_round ==
 * clients gives 0..clients-1. Allocates nothing, so a strategy may call it every round;
 * O(per_round^2) time at worst. */
DT_API void dt_fed_sample(int clients, int per_round, uint64_t seed, int64_t round, int *out);

/* The samples a client of `samples` samples trains on in one round of fedavg's local
 * training with batches of `batch`: local_steps > 0 batches taken in order through its
 * shuffled partition, epoch after epoch (the last batch of an epoch may be short), or else
 * local_epochs whole passes. For a round's samples/s. */
DT_API int64_t dt_fed_local_samples(int64_t samples, int64_t batch, int local_epochs,
                                    int64_t local_steps);

/* A Gamma(alpha, 1) variate (shape alpha > 0, finite; DT_ASSERT), a pure function of
 * (alpha, seed, index): the one dt_fed_assign's Dirichlet draw uses for class k and
 * client c at index k * clients + c. Marsaglia and Tsang's method, with the alpha < 1
 * boost (fed_partition.c). For tiny alpha the value may underflow to 0; the Dirichlet
 * works in logarithms and does not. */
DT_API double dt_fed_gamma(double alpha, uint64_t seed, uint64_t index);

#ifdef __cplusplus
}
#endif
#endif
