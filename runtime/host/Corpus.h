// Text corpora for training (docs/training.md, "Data"): the lines of plain or
// gzip files, and the batches of an epoch, formed by token count with length
// bucketing (the paper's section 5.1) and shuffled by the seed.
#ifndef TRANSFUSE_RUNTIME_HOST_CORPUS_H
#define TRANSFUSE_RUNTIME_HOST_CORPUS_H

#include "runtime/Status.h"

#include <cstdint>
#include <string>
#include <vector>

namespace transfuse::rt {

// The lines of `path`, plain or gzip (told by its first bytes, not its name),
// without their "\n" or "\r\n"; a last line without a newline counts. Errors
// name the file and, where there is one, the line: unreadable, a corrupt or
// truncated gzip stream, a NUL byte, bytes that are not UTF-8, no lines.
StatusOr<std::vector<std::string>> readTextLines(const std::string& path);

// The sizes an example occupies in a batch: its source and decoder-input
// lengths (specials included).
struct ExampleLength {
  int32_t src = 0, tgt = 0;
};

// The batches of epoch `epoch` (from 0) as example indices. The examples are
// ordered by their longer side, then the shorter, ties in an order drawn from
// (seed, epoch); consecutive examples form a batch while rows × the longest
// side in it stays within `batchTokens` and the rows within `maxRows` (0: no
// limit); an example over `batchTokens` alone is a batch. The batches' order
// is then drawn from (seed, epoch). A pure function of its arguments: resume
// recomputes an epoch's plan from them. With `bucket` false the examples
// keep their file order and the batches theirs (every epoch alike: for
// comparisons with an outside reference).
std::vector<std::vector<int32_t>> epochBatches(const std::vector<ExampleLength>& lengths,
                                               int64_t batchTokens, int64_t maxRows, uint64_t seed,
                                               int64_t epoch, bool bucket = true);

// The most rows any epoch's batches can have (the compiled model's maximum
// batch): what the shortest examples fill.
int64_t maxBatchRows(const std::vector<ExampleLength>& lengths, int64_t batchTokens,
                     int64_t maxRows);

}  // namespace transfuse::rt

#endif  // TRANSFUSE_RUNTIME_HOST_CORPUS_H
