// ReplyQueue: replies leave in request order however their completions
// interleave; synchronous replies pass straight through when nothing waits.
#include "server/net/reply_queue.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace floodgate::server {
namespace {

Completion Write(std::string text) {
  return [text = std::move(text)](std::string* out) { out->append(text); };
}

TEST(ReplyQueueTest, SynchronousRepliesGoStraightToOutput) {
  ReplyQueue q;
  std::string output;
  EXPECT_EQ(q.Target(&output), &output);
  q.Target(&output)->append("a");
  EXPECT_EQ(output, "a");
  EXPECT_EQ(q.in_flight(), 0u);
}

TEST(ReplyQueueTest, LaterRepliesWaitForEarlierPendingOnes) {
  ReplyQueue q;
  std::string output;
  q.Target(&output)->append("1");
  const uint64_t a = q.Reserve();
  q.Target(&output)->append("3");
  const uint64_t b = q.Reserve();
  q.Target(&output)->append("5");
  q.Target(&output)->append("6");
  EXPECT_EQ(output, "1");
  EXPECT_EQ(q.in_flight(), 2u);

  q.Complete(b, Write("4"), &output);  // out of order: held back
  EXPECT_EQ(output, "1");
  EXPECT_EQ(q.in_flight(), 1u);

  q.Complete(a, Write("2"), &output);
  EXPECT_EQ(output, "123456");
  EXPECT_EQ(q.in_flight(), 0u);
  EXPECT_EQ(q.Target(&output), &output);  // drained: straight through again
}

TEST(ReplyQueueTest, UnknownAndRepeatedTagsChangeNothing) {
  ReplyQueue q;
  std::string output;
  const uint64_t a = q.Reserve();
  q.Complete(a + 100, Write("x"), &output);
  q.Complete(0, Write("x"), &output);
  EXPECT_EQ(output, "");
  EXPECT_EQ(q.in_flight(), 1u);
  q.Complete(a, Write("ok"), &output);
  q.Complete(a, Write("again"), &output);  // already delivered
  EXPECT_EQ(output, "ok");
  EXPECT_EQ(q.in_flight(), 0u);
}

TEST(ReplyQueueTest, ManyInterleavedCompletionsKeepOrder) {
  ReplyQueue q;
  std::string output, expected;
  std::vector<std::pair<uint64_t, int>> tags;  // (tag, request index)
  for (int i = 0; i < 100; ++i) {
    expected += std::to_string(i) + ",";
    if (i % 3 == 0) {
      q.Target(&output)->append(std::to_string(i) + ",");
    } else {
      tags.emplace_back(q.Reserve(), i);
    }
  }
  // Complete in reverse: nothing may leave before the first pending reply.
  for (size_t j = tags.size(); j-- > 0;) {
    const auto [tag, index] = tags[j];
    q.Complete(tag, Write(std::to_string(index) + ","), &output);
    if (j > 0) {
      EXPECT_EQ(output, "0,");
    }
  }
  EXPECT_EQ(output, expected);
}

}  // namespace
}  // namespace floodgate::server
