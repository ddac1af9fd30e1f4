// check_batch: token ids, the previous_token()s of a batch that decodes ahead, and KV cache blocks.
#include "model/batch.h"

#include <gtest/gtest.h>

#include "util/error.h"

namespace rf {
namespace {

Batch two_sequences(std::int32_t first, std::int32_t second) {
  Batch batch;
  batch.block_tables = {{0}, {1}};
  batch.add_sequence(0, &first, 1, 3, true);
  batch.add_sequence(1, &second, 1, 15, true);
  return batch;
}

std::string failure(const Batch& batch, int previous_rows) {
  try {
    check_batch(batch, 100, 16, 2, previous_rows);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(CheckBatch, TakesThePreviousStepsRowsOnlyWhereThereAreSome) {
  EXPECT_EQ(failure(two_sequences(5, 99), 0), "");
  EXPECT_EQ(failure(two_sequences(previous_token(0), previous_token(1)), 2), "");
  EXPECT_EQ(failure(two_sequences(previous_token(1), 7), 1), "token -2 stands for row 1 of the step before, which sampled 1 rows");
  EXPECT_EQ(failure(two_sequences(previous_token(0), 7), 0), "token id -1 is outside the vocabulary (0..99)");
  EXPECT_EQ(failure(two_sequences(3, 100), 2), "token id 100 is outside the vocabulary (0..99)");
}

TEST(CheckBatch, WantsABlockForEveryPosition) {
  Batch batch = two_sequences(previous_token(0), 1);
  batch.positions[1] = 16;  // the second sequence's table has one block of 16 positions
  EXPECT_EQ(failure(batch, 1), "position 16 has no KV cache block");
}

}  // namespace
}  // namespace rf
