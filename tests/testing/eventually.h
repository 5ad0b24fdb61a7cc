// Waiting in a test for something another thread or process does: polls a
// condition rather than sleeping a fixed time, so that a slow machine only
// takes longer and a fast one does not wait for nothing.
#pragma once

#include <chrono>
#include <thread>

namespace floodgate::testing {

// Polls `condition` every millisecond until it holds or `timeout` passes;
// whether it held. The answer is the last evaluation's, never a fresh one:
// a condition that probes (connects, reads) may not hold twice in a row.
template <typename F>
bool Eventually(F condition, std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    if (condition()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

}  // namespace floodgate::testing
