// Throwaway certificates for the TLS tests, made with the openssl CLI in a
// temporary directory: a CA (ca.pem, ca.key); two server certificates for
// localhost and 127.0.0.1 that it signed (server.*, and next.* to rotate
// to), with server.serial and next.serial as `openssl x509 -serial` prints
// them; a client certificate for CN ops.example.com (client.*), one whose
// names are SANs only (san-client.*: DNS ci.example.com, URI
// spiffe://example.com/deploy), and one from another CA (stranger.*); and
// garbage.pem, which is not PEM.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdlib>
#include <fstream>
#include <string>

namespace floodgate::testing {

class TestCerts {
 public:
  // Makes them in a new directory named after `tag`; ok() says whether it
  // worked (the test should ASSERT it).
  explicit TestCerts(const std::string& tag) {
    std::string tmpl = "/tmp/floodgate-" + tag + "-XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) return;
    dir_ = tmpl;
    const std::string ec = " -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
    const std::string sign = " -CA ca.pem -CAkey ca.key -CAcreateserial -days 30";
    const std::string script =
        "cd " + dir_ + " && (printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\\n' > server.ext" +
        " && printf 'subjectAltName=DNS:ci.example.com,URI:spiffe://example.com/deploy\\n'" +
        " > san.ext" + " && openssl req -x509" + ec +
        " -keyout ca.key -out ca.pem -days 30 -subj /CN=test-ca" + " && openssl req -x509" + ec +
        " -keyout other-ca.key -out other-ca.pem -days 30 -subj /CN=other-ca" + " && openssl req" +
        ec + " -keyout server.key -out server.csr -subj /CN=localhost" +
        " && openssl x509 -req -in server.csr" + sign + " -out server.pem -extfile server.ext" +
        " && openssl req" + ec + " -keyout next.key -out next.csr -subj /CN=localhost" +
        " && openssl x509 -req -in next.csr" + sign + " -out next.pem -extfile server.ext" +
        " && openssl req" + ec + " -keyout client.key -out client.csr -subj /CN=ops.example.com" +
        " && openssl x509 -req -in client.csr" + sign + " -out client.pem" + " && openssl req" +
        ec + " -keyout san-client.key -out san-client.csr -subj /O=floodgate" +
        " && openssl x509 -req -in san-client.csr" + sign +
        " -out san-client.pem -extfile san.ext" + " && openssl req" + ec +
        " -keyout stranger.key -out stranger.csr -subj /CN=ops.example.com" +
        " && openssl x509 -req -in stranger.csr -CA other-ca.pem -CAkey other-ca.key" +
        " -CAcreateserial -days 30 -out stranger.pem" +
        " && openssl x509 -serial -noout -in server.pem > server.serial" +
        " && openssl x509 -serial -noout -in next.pem > next.serial" +
        " && echo 'not a certificate' > garbage.pem) > openssl.log 2>&1";
    ok_ = std::system(script.c_str()) == 0;
  }
  ~TestCerts() {
    if (!dir_.empty()) std::system(("rm -rf " + dir_).c_str());
  }
  TestCerts(const TestCerts&) = delete;
  TestCerts& operator=(const TestCerts&) = delete;

  bool ok() const { return ok_; }
  const std::string& dir() const { return dir_; }
  std::string Path(const std::string& name) const { return dir_ + "/" + name; }
  // "ABC123…" of server.serial or next.serial ("serial=" dropped).
  std::string Serial(const std::string& name) const {
    std::ifstream in(Path(name + ".serial"));
    std::string line;
    std::getline(in, line);
    return line.substr(line.find('=') + 1);
  }

 private:
  std::string dir_;
  bool ok_ = false;
};

// A test suite whose tests share one TestCerts, made before its first test
// and removed after its last: certs_->Path("server.pem") and so on.
class CertsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    certs_ = new TestCerts("tls-test");
    ASSERT_TRUE(certs_->ok()) << "the openssl CLI failed in " << certs_->dir();
  }
  static void TearDownTestSuite() {
    delete certs_;
    certs_ = nullptr;
  }
  static std::string Path(const std::string& name) { return certs_->Path(name); }

  inline static TestCerts* certs_ = nullptr;
};

}  // namespace floodgate::testing
