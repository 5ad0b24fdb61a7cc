// ControlWorld: the services of a config's rules on the embedded store,
// with a data_dir of its own and a ManualClock, for the control plane's
// tests: its changes answered and waited for, checks made, and the
// services opened again on the same data_dir (a restart).
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <utility>

#include "api/open_services.h"
#include "floodgate/clock.h"
#include "floodgate/config.h"
#include "service/control/control_plane.h"
#include "service/limiter/limiter_core.h"
#include "service/services.h"

namespace floodgate::testing {

class ControlWorld : public ::testing::Test {
 protected:
  // `rules`: the config's rules section, e.g. "rules:\n  api: {...}\n".
  explicit ControlWorld(std::string rules) : rules_(std::move(rules)) {}

  void SetUp() override {
    char tmpl[] = "/tmp/floodgate-control-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    clock_.SetMs(1'800'000'000'000);
    Open();
  }
  void TearDown() override {
    core_.reset();
    std::filesystem::remove_all(dir_);
  }
  // The config's text: data_dir, then the rules.
  std::string ConfigText() const { return "data_dir: " + dir_ + "\n" + rules_; }
  // (Again:) the services on data_dir, the records it keeps read back.
  void Open() {
    core_.reset();
    auto config = ParseConfig(ConfigText(), "test");
    ASSERT_TRUE(config.ok()) << config.status().message();
    auto services = api::OpenServices(*config, clock_);
    ASSERT_TRUE(services.ok()) << services.status().message();
    core_ = std::move(*services);
  }
  service::ControlPlane& cp() { return *core_->control; }
  // Runs a change and waits for its answer: (status, the record's JSON).
  std::pair<Status, std::string> Answer(
      const std::function<void(service::ControlPlane::Done)>& change) {
    std::promise<std::pair<Status, std::string>> done;
    change([&](const Status& s, const std::string& json) { done.set_value({s, json}); });
    return done.get_future().get();
  }
  Decision Check(const std::string& rule, const std::string& key) {
    auto d = core_->core->CheckAndWait(rule, key);
    EXPECT_TRUE(d.ok()) << d.status().message();
    return d.ok() ? *d : Decision{};
  }

  // The subject's state, blocks aside: a check of cost 0 that spends nothing.
  Decision Peek(const std::string& rule, const std::string& key) {
    service::LimiterCore::CheckArgs peek;
    peek.rule = rule;
    peek.key = key;
    peek.cost = 0;
    peek.ignore_blocks = true;
    Decision d;
    EXPECT_TRUE(core_->core->CheckAndWait(peek, &d).ok());
    return d;
  }

  ManualClock clock_;
  std::string dir_;
  std::unique_ptr<service::Services> core_;
  const service::Actor who_{"admin", "test"};

 private:
  std::string rules_;
};

}  // namespace floodgate::testing
