// The handshake's proofs (net/auth.h): each covers both of its connection's
// nonces, its side's role and the job's identity, so that none serves on
// another connection, for the other side, or for another host or job.
#include <gtest/gtest.h>

#include <string_view>

#include "net/auth.h"

namespace trainit::net {
namespace {

std::string_view bytes(const Tag& tag) {
  return {reinterpret_cast<const char*>(tag.data()), tag.size()};
}

class NetAuth : public ::testing::Test {
 protected:
  void SetUp() override {
    auto auth = Auth::from_secret("s3cret");
    ASSERT_TRUE(auth.ok());
    auth_ = *auth;
    handshake_ = Handshake{Auth::nonce(), Auth::nonce(), 1, 2, 0x1111, 0x2222, "job-7"};
  }
  Auth auth_;
  Handshake handshake_;
};

TEST_F(NetAuth, EachSidesProofPassesForTheSameHandshake) {
  EXPECT_TRUE(auth_.client_tag_ok(bytes(auth_.client_tag(handshake_)), handshake_));
  EXPECT_TRUE(auth_.server_tag_ok(bytes(auth_.server_tag(handshake_)), handshake_));
}

TEST_F(NetAuth, OneSidesProofNeverPassesAsTheOthers) {
  EXPECT_FALSE(auth_.server_tag_ok(bytes(auth_.client_tag(handshake_)), handshake_));
  EXPECT_FALSE(auth_.client_tag_ok(bytes(auth_.server_tag(handshake_)), handshake_));
}

TEST_F(NetAuth, AProofIsForItsConnectionsTwoNoncesOnly) {
  const Tag client = auth_.client_tag(handshake_);
  const Tag server = auth_.server_tag(handshake_);
  for (int which = 0; which < 2; ++which) {
    Handshake other = handshake_;
    (which == 0 ? other.server_nonce : other.client_nonce) = Auth::nonce();
    EXPECT_FALSE(auth_.client_tag_ok(bytes(client), other)) << which;
    EXPECT_FALSE(auth_.server_tag_ok(bytes(server), other)) << which;
  }
}

TEST_F(NetAuth, AProofIsForItsHostAndJobOnly) {
  const Tag client = auth_.client_tag(handshake_);
  const Tag server = auth_.server_tag(handshake_);
  Handshake index = handshake_, count = handshake_, job = handshake_;
  index.host_index = 2;
  count.host_count = 3;
  job.job_id = "job-8";
  for (const Handshake& other : {index, count, job}) {
    EXPECT_FALSE(auth_.client_tag_ok(bytes(client), other));
    EXPECT_FALSE(auth_.server_tag_ok(bytes(server), other));
  }
}

// A trainit that came back after dying is another instance: neither side
// can pass off the one before's proof as its own.
TEST_F(NetAuth, AProofIsForBothSidesInstancesOnly) {
  const Tag client = auth_.client_tag(handshake_);
  const Tag server = auth_.server_tag(handshake_);
  Handshake host0 = handshake_, host1 = handshake_;
  host0.server_instance = 0x3333;
  host1.client_instance = 0x4444;
  for (const Handshake& other : {host0, host1}) {
    EXPECT_FALSE(auth_.client_tag_ok(bytes(client), other));
    EXPECT_FALSE(auth_.server_tag_ok(bytes(server), other));
  }
}

TEST_F(NetAuth, AnotherSecretsProofFailsAndATagOfTheWrongSizeToo) {
  auto other = Auth::from_secret("guess");
  ASSERT_TRUE(other.ok());
  EXPECT_FALSE(auth_.server_tag_ok(bytes(other->server_tag(handshake_)), handshake_));
  EXPECT_FALSE(auth_.client_tag_ok(bytes(auth_.client_tag(handshake_)).substr(0, 31), handshake_));
  EXPECT_FALSE(auth_.client_tag_ok({}, handshake_));
}

TEST_F(NetAuth, NoncesAreFreshEachTime) {
  EXPECT_NE(Auth::nonce(), Auth::nonce());
}

}  // namespace
}  // namespace trainit::net
