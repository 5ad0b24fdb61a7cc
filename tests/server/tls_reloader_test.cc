// TlsReloader (server/net/tls_reloader.h): files replaced on disk are
// loaded without a signal once they stay the same for one more look; bad
// ones are refused, counted and not tried again until they change; a
// SIGHUP reload moves the watch to the files it names.
#include "server/net/tls_reloader.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <string>
#include <thread>

#include "testing/eventually.h"
#include "testing/test_certs.h"

namespace floodgate::server {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

class TlsReloaderTest : public testing::CertsTest {
 protected:
  void SetUp() override {
    // The files the server serves, replaced as a renewal would: a new
    // file renamed over the old one.
    Install("server.pem", "live.pem");
    Install("server.key", "live.key");
    auto context = TlsContext::Load(Live(), std::time(nullptr));
    ASSERT_TRUE(context.ok()) << context.status().ToString();
    holder_ = std::make_unique<TlsContextHolder>(*context);
  }
  void TearDown() override {
    fs::remove(certs_->Path("live.pem"));
    fs::remove(certs_->Path("live.key"));
  }

  static TlsFiles Live() {
    return TlsFiles{certs_->Path("live.pem"), certs_->Path("live.key"), "", false};
  }
  static void Install(const std::string& from, const std::string& to) {
    fs::copy_file(certs_->Path(from), certs_->Path(to + ".new"),
                  fs::copy_options::overwrite_existing);
    fs::rename(certs_->Path(to + ".new"), certs_->Path(to));
  }
  std::string Serial() const { return holder_->Current()->serial(); }

  std::unique_ptr<TlsContextHolder> holder_;
};

TEST_F(TlsReloaderTest, ReplacedFilesAreLoadedWithoutASignal) {
  TlsReloader reloader(holder_.get(), 20);
  EXPECT_EQ(Serial(), certs_->Serial("server"));
  Install("next.key", "live.key");
  Install("next.pem", "live.pem");
  EXPECT_TRUE(
      testing::Eventually([&] { return Serial() == certs_->Serial("next"); }, milliseconds(5000)));
  EXPECT_EQ(reloader.reloads(), 1);
  EXPECT_EQ(reloader.refusals(), 0);
  EXPECT_EQ(reloader.not_after_s(), holder_->Current()->not_after_s());
  // Nothing changes: nothing is loaded again.
  std::this_thread::sleep_for(milliseconds(100));
  EXPECT_EQ(reloader.reloads(), 1);
}

TEST_F(TlsReloaderTest, ABadFileKeepsTheOldCertificateAndIsTriedOnlyOnce) {
  TlsReloader reloader(holder_.get(), 20);
  Install("next.key", "live.key");  // the key alone: it does not match
  EXPECT_TRUE(testing::Eventually([&] { return reloader.refusals() == 1; }, milliseconds(5000)));
  std::this_thread::sleep_for(milliseconds(100));
  EXPECT_EQ(reloader.refusals(), 1) << "the same bad files are not tried again";
  EXPECT_EQ(Serial(), certs_->Serial("server"));
  // Its certificate arrives: the pair loads.
  Install("next.pem", "live.pem");
  EXPECT_TRUE(
      testing::Eventually([&] { return Serial() == certs_->Serial("next"); }, milliseconds(5000)));
  EXPECT_EQ(reloader.reloads(), 1);
}

TEST_F(TlsReloaderTest, ASighupReloadNamesItsFilesAndIsWatchedFromThen) {
  TlsReloader reloader(holder_.get(), 0);  // on demand only
  TlsFiles missing = Live();
  missing.key_file = certs_->Path("missing.key");
  EXPECT_FALSE(reloader.Reload(missing).ok());
  EXPECT_EQ(reloader.refusals(), 1);
  EXPECT_EQ(Serial(), certs_->Serial("server"));
  EXPECT_TRUE(
      reloader.Reload(TlsFiles{certs_->Path("next.pem"), certs_->Path("next.key"), "", false})
          .ok());
  EXPECT_EQ(Serial(), certs_->Serial("next"));
  EXPECT_EQ(reloader.reloads(), 1);
  // Not watched: a change on disk waits for the next SIGHUP.
  Install("next.key", "live.key");
  Install("next.pem", "live.pem");
  EXPECT_TRUE(reloader.Reload(Live()).ok());
  EXPECT_EQ(reloader.reloads(), 2);
}

}  // namespace
}  // namespace floodgate::server
