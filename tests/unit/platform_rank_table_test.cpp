// Every validation rule of platform/rank_table.h has a table here that breaks
// it, and the error is checked to name the file, the key path and the value.
#include <gtest/gtest.h>

#include <cerrno>
#include <string>

#include "platform/rank_table.h"
#include "platform_test_tables.h"

namespace trainit {
namespace {

using test::OJson;
using test::template1;
using test::template2;

const std::string kFile = "/user/config/jobstart_hccl.json";

std::string refusal_text(const std::string& text, RankTableLimits limits = {}) {
  auto r = parse_rank_table(text, kFile, limits);
  if (r.ok())
    return "(accepted)";
  EXPECT_EQ(r.error().message.find('\n'), std::string::npos) << "one line";
  return r.error().message;
}
std::string refusal(const OJson& table, RankTableLimits limits = {}) {
  return refusal_text(table.dump(), limits);
}

RankTable parsed(const OJson& table, RankTableLimits limits = {}) {
  auto r = parse_rank_table(table.dump(), kFile, limits);
  EXPECT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE(r->table.has_value());
  return r->table.value_or(RankTable{});
}

// ------------------------------------------------------------ document level

TEST(RankTableDocument, TopLevelMustBeAnObject) {
  EXPECT_EQ(refusal_text("[1]"), kFile + ": top level = [1]: not an object: a rank table is a JSON object");
}

TEST(RankTableDocument, StatusIsRequiredAndAString) {
  EXPECT_EQ(refusal_text(R"({"version":"1.0"})"), kFile + R"(: top level = {"version":"1.0"}: missing key "status")");
  EXPECT_EQ(refusal_text(R"({"status":1})"), kFile + ": status = 1: not a string");
}

TEST(RankTableDocument, AnIncompleteTableIsPendingNotValidated) {
  auto r = parse_rank_table(R"({"status":"initializing","server_list":"garbage"})", kFile);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->status, "initializing");
  EXPECT_FALSE(r->table.has_value());
}

// The top-level "status" is looked at first; a table that is not complete is
// not read further, so it may be torn (or anything) after its status.
TEST(RankTableDocument, ATableNotCompleteIsPendingWhateverFollowsItsStatus) {
  for (std::string text : {std::string(R"({"status":"initializing","server_list":[{"server_id":"10.0.0.1","dev)"),
                           std::string(R"({"status":"initializing" ,,, not JSON)"), std::string(R"({"status":"")")}) {
    auto r = parse_rank_table(text, kFile);
    ASSERT_TRUE(r.ok()) << text << ": " << r.error().message;
    EXPECT_EQ(r->status, text.find("\"\"") == std::string::npos ? "initializing" : "");
    EXPECT_FALSE(r->table.has_value());
  }
  OJson last = template1({2});
  last.erase("status");
  last["status"] = "initializing";  // after the servers: it is found all the same
  auto r = parse_rank_table(last.dump(), kFile);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->status, "initializing");
  EXPECT_FALSE(r->table.has_value());
}

TEST(RankTableDocument, OnlyTheTopLevelStatusCounts) {
  OJson t = template1({2});
  std::string text = t.dump();
  text.insert(1, R"("x":{"status":"initializing","y":[{"status":"initializing"}]},)");
  auto r = parse_rank_table(text, kFile);
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_TRUE(r->table.has_value()) << "a nested status was taken for the table's";
  EXPECT_EQ(r->table->rank_size, 2u);

  auto torn = parse_rank_table(R"({"x":{"status":"initializing"},"server_list":[)", kFile);
  ASSERT_FALSE(torn.ok());
  EXPECT_EQ(torn.error().errnum, EBADMSG) << torn.error().message;
  EXPECT_TRUE(
      refusal_text(R"([{"status":"initializing"}])").ends_with(": not an object: a rank table is a JSON object"));
  EXPECT_EQ(refusal_text(R"({"x":{"status":"initializing"}})"),
            kFile + R"(: top level = {"x":{"status":"initializing"}}: missing key "status")");
}

TEST(RankTableDocument, SyntaxSizeDepthAndRepeatedKeysAreRefused) {
  EXPECT_TRUE(refusal_text("{\"status\":").starts_with(kFile + ": not valid JSON: parse error at line 1"));
  EXPECT_EQ(refusal(template1({1}), RankTableLimits{16, 20, 64}),
            kFile + ": " + std::to_string(template1({1}).dump().size()) + " bytes, larger than the limit of 20 bytes");
  EXPECT_EQ(refusal_text(R"({"status":"completed","x":[[[[]]]]})", RankTableLimits{16, 1 << 20, 3}),
            kFile + ": x[0][0]: nested deeper than 3 levels");
  EXPECT_EQ(refusal_text(R"({"status":"completed","status":"completed"})"), kFile + ": status: repeated key");
  auto repeated =
      parse_rank_table(R"({"status":"completed","server_list":[{"server_id":"a","server_id":"b"}]})", kFile);
  ASSERT_FALSE(repeated.ok());
  EXPECT_EQ(repeated.error().message, kFile + ": server_list[0].server_id: repeated key");
  EXPECT_NE(repeated.error().errnum, EBADMSG) << "a repeated key is no table caught mid-write";
}

// A repeated key is refused wherever it is, the top-level "status" included:
// the look at the status first does not take the first of two (it would call
// the table pending, and the run would wait out --rank-table-timeout for a
// table the full read refuses). A table torn, or broken, after its status
// shows no second one: it is pending. A repeated key is no table caught
// mid-write (no part of a table has one the whole table lacks): not
// EBADMSG, so the run refuses it at once, as `trainit plan` does.
TEST(RankTableDocument, AStatusGivenTwiceIsRefusedAsAnyRepeatedKeyIs) {
  for (const std::string text : {
           R"({"status":"initializing","status":"completed"})", R"({"status":"completed","status":"initializing"})",
           R"({"status":"initializing","server_list":[{"x":1}],"status":"initializing"})",
           R"({"status":"initializing","status":"completed","server_list":[)",  // torn after the second
       }) {
    auto r = parse_rank_table(text, kFile);
    ASSERT_FALSE(r.ok()) << text << ": taken as " << r->status;
    EXPECT_EQ(r.error().message, kFile + ": status: repeated key") << text;
    EXPECT_NE(r.error().errnum, EBADMSG) << text;
  }
  // The first repeated key in the text is the one named, as the full read names it.
  EXPECT_EQ(refusal_text(R"({"status":"initializing","a":1,"a":2,"status":"completed"})"), kFile + ": a: repeated key");
  for (const std::string text : {
           R"({"status":"initializing","server_list":[{"status":"completed"}],"x":{"status":"a"}})",  // nested
           R"({"status":"initializing","server_list":[)",                                             // torn
           R"({"status":"initializing",,"status":"completed"})",  // broken before the second
       }) {
    auto r = parse_rank_table(text, kFile);
    ASSERT_TRUE(r.ok()) << text << ": " << r.error().message;
    EXPECT_EQ(r->status, "initializing") << text;
    EXPECT_FALSE(r->table.has_value()) << text;
  }
}

// ------------------------------------------------------------------ formats

TEST(RankTableFormat, VersionTwoAndRankListTablesAreRefusedByName) {
  OJson v2 = template1({1});
  v2["version"] = "2.0";
  EXPECT_EQ(refusal(v2), kFile +
                             ": version = \"2.0\": unsupported rank table format version; trainit reads template 1 "
                             "(version 1.x, server_list) and template 2 (group_list with pod_name)");
  OJson rank_list = {{"status", "completed"}, {"rank_list", OJson::array()}};
  EXPECT_EQ(refusal(rank_list), kFile +
                                    ": rank_list = []: unsupported rank table format (rank_list tables); trainit "
                                    "reads template 1 (version 1.x, server_list) and template 2 (group_list with "
                                    "pod_name)");
}

TEST(RankTableFormat, VersionMustBeADottedNumberString) {
  OJson t = template1({1});
  t["version"] = 1.0;
  EXPECT_EQ(refusal(t), kFile + ": version = 1.0: not a string (e.g. \"1.0\")");
  t["version"] = "v1";
  EXPECT_EQ(refusal(t), kFile + ": version = \"v1\": not a version number like \"1.0\"");
}

TEST(RankTableFormat, NeitherOrBothListsAreRefused) {
  EXPECT_EQ(refusal_text(R"({"status":"completed"})"),
            kFile + R"(: top level = {"status":"completed"}: unknown rank table format: neither server_list nor )"
                    "group_list; trainit reads template 1 (version 1.x, server_list) and template 2 (group_list with "
                    "pod_name)");
  EXPECT_EQ(refusal_text(R"({"status":"completed","server_list":[],"group_list":[]})"),
            kFile + R"(: top level = {"group_list":[],"server_list":[],"status":"completed"}: ambiguous rank table )"
                    "format: both server_list (template 1) and group_list (template 2)");
}

TEST(RankTableFormat, OldGroupListTablesWithoutPodNamesAreRefusedByName) {
  OJson old = template2({2});
  old["group_list"][0]["instance_list"][0].erase("pod_name");
  std::string message = refusal(old);
  EXPECT_TRUE(message.starts_with(kFile + ": group_list[0].instance_list[0] = {")) << message;
  EXPECT_NE(message.find("no pod_name: old-style group_list rank tables (instances without pod_name) are not "
                         "supported"),
            std::string::npos)
      << message;
}

TEST(RankTableFormat, NewerTemplateOneFieldsAreKeptNotRefused) {
  OJson t = template1({2, 2});
  t["version"] = "1.2";
  t["super_pod_list"] = OJson::array({{{"super_pod_id", "0"}, {"server_list", {{{"server_id", "10.0.0.1"}}}}}});
  t["server_list"][0]["host_ip"] = "10.0.0.1";
  t["server_list"][0]["device"][0]["device_port"] = "16666";
  t["server_list"][0]["device"][0]["super_device_id"] = "123";
  RankTable table = parsed(t);
  EXPECT_EQ(table.version, "1.2");
  EXPECT_EQ(table.rank_size, 4u);
}

// --------------------------------------------------------------- template 1

TEST(Template1, ReadsStringAndIntegerNumbersAlike) {
  RankTable strings = parsed(template1({2, 2}));
  RankTable integers = parsed(template1({2, 2}, true));
  ASSERT_EQ(strings.servers.size(), 2u);
  EXPECT_EQ(strings.format, RankTableFormat::kTemplate1);
  EXPECT_EQ(to_template1_json(strings), to_template1_json(integers));
  EXPECT_EQ(strings.server_id(1), "10.0.0.2");
  EXPECT_EQ(strings.devices_of(1)[1].rank_id, 3u);
  EXPECT_EQ(strings.device_ip(strings.devices_of(1)[1]), "192.168.1.2");
}

TEST(Template1, NumbersMustBeStrictDecimalsOrNonNegativeIntegers) {
  struct Case {
    OJson value;
    std::string shown;
    std::string problem;
  };
  const std::string not_decimal = "not a decimal number (digits only: no sign, space, hex, fraction or leading zero)";
  const Case cases[] = {
      {"01", "\"01\"", not_decimal},
      {"+1", "\"+1\"", not_decimal},
      {" 1", "\" 1\"", not_decimal},
      {"0x1", "\"0x1\"", not_decimal},
      {"1.0", "\"1.0\"", not_decimal},
      {"", "\"\"", not_decimal},
      {-1, "-1", "negative"},
      {1.5, "1.5", "not an integer"},
      {true, "true", "not a number (a decimal string like \"8\", or a JSON integer)"},
      {nullptr, "null", "not a number (a decimal string like \"8\", or a JSON integer)"},
      {"99999999999999999999", "\"99999999999999999999\"", "out of range"},
  };
  for (const Case& c : cases) {
    OJson t = template1({2});
    t["server_list"][0]["device"][1]["device_id"] = c.value;
    EXPECT_EQ(refusal(t), kFile + ": server_list[0].device[1].device_id = " + c.shown + ": " + c.problem);
  }
}

TEST(Template1, ServerListMustBeANonEmptyArrayOfObjects) {
  OJson t = template1({1});
  t["server_list"] = "10.0.0.1";
  EXPECT_EQ(refusal(t), kFile + ": server_list = \"10.0.0.1\": not an array");
  t["server_list"] = OJson::array();
  EXPECT_EQ(refusal(t), kFile + ": server_list = []: no servers: the table lists no devices");
  t = template1({1});
  t["server_list"].push_back(7);
  t["server_count"] = "2";
  EXPECT_EQ(refusal(t), kFile + ": server_list[1] = 7: not an object");
}

TEST(Template1, DeclaredServerCountMustMatch) {
  OJson t = template1({1, 1});
  t["server_count"] = "3";
  EXPECT_EQ(refusal(t), kFile + ": server_count = \"3\": declares 3 servers but 2 are listed");
  t["server_count"] = "two";
  EXPECT_TRUE(refusal(t).starts_with(kFile + ": server_count = \"two\": not a decimal number"));
}

TEST(Template1, ServerIdsAreRequiredNonEmptyStringsAndUnique) {
  OJson t = template1({1, 1});
  t["server_list"][1].erase("server_id");
  EXPECT_TRUE(refusal(t).starts_with(kFile + ": server_list[1] = {\"device\":"));
  EXPECT_TRUE(refusal(t).ends_with(": missing key \"server_id\""));
  t["server_list"][1]["server_id"] = 10;
  EXPECT_EQ(refusal(t), kFile + ": server_list[1].server_id = 10: not a string");
  t["server_list"][1]["server_id"] = "";
  EXPECT_EQ(refusal(t), kFile + ": server_list[1].server_id = \"\": empty");
  t["server_list"][1]["server_id"] = "10.0.0.1";
  EXPECT_EQ(refusal(t), kFile +
                            ": server_list[1].server_id = \"10.0.0.1\": repeated server_id (also at "
                            "server_list[0].server_id)");
}

TEST(Template1, EveryServerHasDevicesAndNoMoreThanTheLimit) {
  OJson t = template1({1, 1});
  t["server_list"][1]["device"] = OJson::array();
  EXPECT_EQ(refusal(t), kFile + ": server_list[1].device = []: a server without devices");
  t["server_list"][1]["device"] = OJson::object();
  EXPECT_EQ(refusal(t), kFile + ": server_list[1].device = {}: not an array");
  t["server_list"][1].erase("device");
  EXPECT_TRUE(refusal(t).ends_with(": missing key \"device\""));
  std::string message = refusal(template1({17}));
  EXPECT_TRUE(message.starts_with(kFile + ": server_list[0].device = [{")) << message;
  EXPECT_TRUE(message.ends_with(": 17 devices on one host, more than the limit of 16 (--max-local-devices raises it)"))
      << message;
}

TEST(Template1, DeviceIdsAreBelowTheLimitAndUniquePerServer) {
  OJson t = template1({2, 2});
  t["server_list"][1]["device"][1]["device_id"] = "16";
  EXPECT_EQ(refusal(t), kFile +
                            ": server_list[1].device[1].device_id = \"16\": out of range 0..15 "
                            "(--max-local-devices raises the limit)");
  EXPECT_EQ(refusal(t, RankTableLimits{32}), "(accepted)");
  t["server_list"][1]["device"][1]["device_id"] = "0";
  EXPECT_EQ(refusal(t), kFile +
                            ": server_list[1].device[1].device_id = \"0\": repeated device_id on one server "
                            "(also at server_list[1].device[0].device_id)");
  t["server_list"][1]["device"][1].erase("device_id");
  EXPECT_TRUE(refusal(t).ends_with(": missing key \"device_id\""));
  t["server_list"][1]["device"][1] = "d";
  EXPECT_EQ(refusal(t), kFile + ": server_list[1].device[1] = \"d\": not an object");
}

TEST(Template1, RankIdsAreExactlyZeroToNMinusOne) {
  OJson t = template1({2, 2});
  t["server_list"][1]["device"][1]["rank_id"] = "4";
  EXPECT_EQ(refusal(t), kFile +
                            ": server_list[1].device[1].rank_id = \"4\": out of range 0..3 (the table lists 4 "
                            "devices)");
  t["server_list"][1]["device"][1]["rank_id"] = "1";
  EXPECT_EQ(refusal(t), kFile +
                            ": server_list[1].device[1].rank_id = \"1\": repeated rank_id (also at "
                            "server_list[0].device[1].rank_id)");
  t["server_list"][1]["device"][1]["rank_id"] = "-3";
  EXPECT_TRUE(refusal(t).starts_with(kFile + ": server_list[1].device[1].rank_id = \"-3\": not a decimal number"));
  t["server_list"][1]["device"][1].erase("rank_id");
  EXPECT_TRUE(refusal(t).ends_with(": missing key \"rank_id\""));
}

TEST(Template1, RanksMayBeListedInAnyOrder) {
  OJson t = template1({2, 2});
  t["server_list"][0]["device"][0]["rank_id"] = "3";
  t["server_list"][1]["device"][1]["rank_id"] = "0";
  RankTable table = parsed(t);
  EXPECT_EQ(table.devices_of(0)[0].rank_id, 3u);
  EXPECT_EQ(table.devices_of(1)[1].rank_id, 0u);
}

TEST(Template1, DeviceIpIsOptionalButAStringWhenPresent) {
  OJson t = template1({2});
  t["server_list"][0]["device"][0].erase("device_ip");
  RankTable table = parsed(t);
  EXPECT_FALSE(table.device_ip(table.devices_of(0)[0]).has_value());
  EXPECT_EQ(to_template1_json(table),
            R"({"status":"completed","version":"1.0","server_count":"1","server_list":[{"server_id":"10.0.0.1",)"
            R"("device":[{"device_id":"0","rank_id":"0"},{"device_id":"1","device_ip":"192.168.0.2","rank_id":"1"}]}]})"
            "\n");
  t["server_list"][0]["device"][0]["device_ip"] = OJson::array();
  EXPECT_EQ(refusal(t), kFile + ": server_list[0].device[0].device_ip = []: not a string");
}

// --------------------------------------------------------------- template 2

TEST(Template2, ConvertsWithRanksNumberedInPodSuffixOrder) {
  OJson t = template2({2, 2, 2});
  auto& list = t["group_list"][0]["instance_list"];
  std::swap(list[0], list[2]);  // listed as worker-2, worker-1, worker-0
  RankTable table = parsed(t);
  ASSERT_EQ(table.pods.size(), 3u);
  EXPECT_EQ(table.pod_name(0), "ma-job-x-worker-0");
  EXPECT_EQ(table.pod_name(2), "ma-job-x-worker-2");
  EXPECT_EQ(table.server_id(0), "10.0.0.1");
  EXPECT_EQ(table.devices_of(2)[1].rank_id, 5u);
  EXPECT_EQ(table.rank_size, 6u);
}

TEST(Template2, SortsNumericallyNotAsText) {
  OJson t = template2({1, 1});
  auto& list = t["group_list"][0]["instance_list"];
  list[0]["pod_name"] = "job-10";
  list[1]["pod_name"] = "job-9";
  RankTable table = parsed(t);
  EXPECT_EQ(table.pod_name(0), "job-9");
}

TEST(Template2, KeepsListedOrderWhenANameHasNoNumericSuffix) {
  OJson t = template2({1, 1, 1});
  auto& list = t["group_list"][0]["instance_list"];
  list[0]["pod_name"] = "trainer-b";
  list[1]["pod_name"] = "trainer-3";
  list[2]["pod_name"] = "trainer-a";
  RankTable table = parsed(t);
  EXPECT_EQ(table.pod_name(0), "trainer-b");
  EXPECT_EQ(table.pod_name(1), "trainer-3");
  EXPECT_EQ(table.pod_name(2), "trainer-a");
  EXPECT_EQ(table.devices_of(0)[0].rank_id, 0u);
}

TEST(Template2, GroupsAreNumberedInOrderAndZeroDeviceGroupsSkipped) {
  OJson t = template2({2});
  OJson ps = {
      {"group_name", "ps"},
      {"device_count", "0"},
      {"instance_count", "1"},
      {"instance_list", {{{"pod_name", "ma-job-x-ps-0"}, {"server_id", "10.0.0.9"}, {"devices", OJson::array()}}}}};
  OJson second = template2({1})["group_list"][0];
  second["instance_list"][0]["pod_name"] = "ma-job-x-eval-0";
  second["instance_list"][0]["server_id"] = "10.0.0.7";
  t["group_list"] = OJson::array({ps, t["group_list"][0], second});
  t["group_count"] = "3";
  RankTable table = parsed(t);
  ASSERT_EQ(table.servers.size(), 2u) << "the ps group's server is not in the converted table";
  EXPECT_EQ(table.server_id(1), "10.0.0.7");
  EXPECT_EQ(table.devices_of(1)[0].rank_id, 2u);
  ASSERT_EQ(table.pods.size(), 3u);
  EXPECT_EQ(table.pods[0].count, 0u);
  EXPECT_EQ(table.rank_size, 3u);
}

TEST(Template2, TwoPodsOnOneServerShareItsEntry) {
  OJson t = template2({2, 2});
  auto& list = t["group_list"][0]["instance_list"];
  list[1]["server_id"] = "10.0.0.1";
  list[1]["devices"][0]["device_id"] = "2";
  list[1]["devices"][1]["device_id"] = "3";
  RankTable table = parsed(t);
  ASSERT_EQ(table.servers.size(), 1u);
  EXPECT_EQ(table.devices_of(0).size(), 4u);
  EXPECT_EQ(table.pods[1].first, 2u);
  EXPECT_EQ(table.pods[1].count, 2u);
}

TEST(Template2, DeviceIdsAreUniqueAcrossPodsOfOneServer) {
  OJson t = template2({2, 2});
  t["group_list"][0]["instance_list"][1]["server_id"] = "10.0.0.1";
  EXPECT_EQ(refusal(t), kFile +
                            ": group_list[0].instance_list[1].devices[0].device_id = \"0\": repeated device_id on "
                            "server \"10.0.0.1\" (also at group_list[0].instance_list[0].devices[0].device_id)");
}

TEST(Template2, PodsOfOneServerMayNotExceedTheDeviceLimit) {
  OJson t = template2({10, 10});
  t["group_list"][0]["instance_list"][1]["server_id"] = "10.0.0.1";
  EXPECT_EQ(refusal(t), kFile +
                            ": group_list[0].instance_list[1].server_id = \"10.0.0.1\": the pods on this server "
                            "list 20 devices, more than the limit of 16 per host (--max-local-devices raises it)");
}

TEST(Template2, DeclaredCountsMustMatch) {
  OJson t = template2({2, 2});
  t["group_list"][0]["device_count"] = "8";
  EXPECT_EQ(refusal(t), kFile +
                            ": group_list[0].device_count = \"8\": declares 8 but the group's instances list 4 "
                            "devices");
  t = template2({2, 2});
  t["group_list"][0]["instance_count"] = 3;
  EXPECT_EQ(refusal(t), kFile + ": group_list[0].instance_count = 3: declares 3 instances but 2 are listed");
  t = template2({2});
  t["group_count"] = "2";
  EXPECT_EQ(refusal(t), kFile + ": group_count = \"2\": declares 2 groups but 1 are listed");
}

TEST(Template2, PodNamesAreRequiredNonEmptyAndUnique) {
  OJson t = template2({1, 1});
  auto& list = t["group_list"][0]["instance_list"];
  list[1]["pod_name"] = "ma-job-x-worker-0";
  EXPECT_EQ(refusal(t), kFile +
                            ": group_list[0].instance_list[1].pod_name = \"ma-job-x-worker-0\": repeated pod_name "
                            "(also at group_list[0].instance_list[0].pod_name)");
  list[1]["pod_name"] = "";
  EXPECT_EQ(refusal(t), kFile + ": group_list[0].instance_list[1].pod_name = \"\": empty");
  list[1]["pod_name"] = 5;
  EXPECT_EQ(refusal(t), kFile + ": group_list[0].instance_list[1].pod_name = 5: not a string");
}

TEST(Template2, InstancesNeedServerAndDevices) {
  OJson t = template2({1, 1});
  auto& list = t["group_list"][0]["instance_list"];
  list[1]["devices"] = OJson::array();
  t["group_list"][0]["device_count"] = "1";
  EXPECT_EQ(refusal(t), kFile + ": group_list[0].instance_list[1].devices = []: an instance without devices");
  t = template2({1, 1});
  t["group_list"][0]["instance_list"][1].erase("server_id");
  EXPECT_TRUE(refusal(t).ends_with(": missing key \"server_id\""));
  t = template2({1, 1});
  t["group_list"][0]["instance_list"][1]["devices"] = "0";
  EXPECT_EQ(refusal(t), kFile + ": group_list[0].instance_list[1].devices = \"0\": not an array");
  t["group_list"][0]["instance_list"][1] = OJson::array();
  EXPECT_EQ(refusal(t), kFile + ": group_list[0].instance_list[1] = []: not an object");
}

TEST(Template2, ShapeErrorsNameTheirPath) {
  OJson t = template2({1});
  t["group_list"] = OJson::object();
  EXPECT_EQ(refusal(t), kFile + ": group_list = {}: not an array");
  t = template2({1});
  t["group_list"][0]["instance_list"] = 1;
  EXPECT_EQ(refusal(t), kFile + ": group_list[0].instance_list = 1: not an array");
  t["group_list"][0].erase("instance_list");
  EXPECT_TRUE(refusal(t).ends_with(": missing key \"instance_list\""));
  t["group_list"][0] = "worker";
  EXPECT_EQ(refusal(t), kFile + ": group_list[0] = \"worker\": not an object");
  t = template2({1});
  t["group_list"][0]["group_name"] = 1;
  EXPECT_EQ(refusal(t), kFile + ": group_list[0].group_name = 1: not a string");
  t = template2({1});
  t["group_list"][0]["instance_list"][0]["devices"][0]["device_id"] = "x";
  EXPECT_TRUE(refusal(t).starts_with(kFile + ": group_list[0].instance_list[0].devices[0].device_id = \"x\": not a "
                                             "decimal number"));
}

TEST(Template2, ATableWithoutDevicesIsRefused) {
  OJson t = template2({1});
  t["group_list"][0]["device_count"] = "0";
  t["group_list"][0]["instance_list"][0]["devices"] = OJson::array();
  EXPECT_TRUE(refusal(t).ends_with(": the table lists no devices"));
  EXPECT_TRUE(refusal(t).starts_with(kFile + ": group_list = [{"));
}

TEST(Template2, ConvertedTableIsTemplateOneWithStringNumbers) {
  OJson t = template2({2, 1}, true);
  t["group_list"][0]["instance_list"][1]["devices"][0].erase("device_ip");
  RankTable table = parsed(t);
  EXPECT_EQ(to_template1_json(table),
            R"({"status":"completed","version":"1.0","server_count":"2","server_list":[)"
            R"({"server_id":"10.0.0.1","device":[{"device_id":"0","device_ip":"192.168.0.1","rank_id":"0"},)"
            R"({"device_id":"1","device_ip":"192.168.0.2","rank_id":"1"}]},)"
            R"({"server_id":"10.0.0.2","device":[{"device_id":"0","rank_id":"2"}]}]})"
            "\n");
  // The conversion reads back as the same table.
  auto again = parse_rank_table(to_template1_json(table), "/converted.json");
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_EQ(to_template1_json(*again->table), to_template1_json(table));
}

TEST(Template2, ConversionEscapesTableStrings) {
  OJson t = template2({1});
  t["group_list"][0]["instance_list"][0]["server_id"] = "a\"b\\c\n";
  RankTable table = parsed(t);
  EXPECT_NE(to_template1_json(table).find(R"("server_id":"a\"b\\c\n")"), std::string::npos);
}

// ------------------------------------------------------------ this host

TEST(SelectHost, TemplateOneWithOneServerTakesIt) {
  RankTable table = parsed(template1({4}));
  auto host = select_host(table, {"10.9.9.9", ""}, kFile);
  ASSERT_TRUE(host.ok()) << host.error().message;
  EXPECT_EQ(host->server_id, "10.0.0.1");
  EXPECT_EQ(host->count, 4u);
}

TEST(SelectHost, TemplateOneWithSeveralServersNeedsTheHostIp) {
  RankTable table = parsed(template1({2, 2, 2, 2, 2, 2}));
  auto host = select_host(table, {"10.0.0.3", ""}, kFile);
  ASSERT_TRUE(host.ok()) << host.error().message;
  EXPECT_EQ(host->server, 2u);
  auto none = select_host(table, {}, kFile);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().message, kFile +
                                      ": server_list lists 6 servers and MA_CURRENT_HOST_IP is not set: nothing "
                                      "says which one is this host");
  auto unknown = select_host(table, {"10.0.0.99", ""}, kFile);
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.error().message,
            kFile +
                ": server_list[].server_id = \"10.0.0.99\": no such server for this host (MA_CURRENT_HOST_IP); "
                "the table lists \"10.0.0.1\", \"10.0.0.2\", \"10.0.0.3\", \"10.0.0.4\", ... (6 in all)");
}

TEST(SelectHost, TemplateTwoPicksThePodByInstanceName) {
  RankTable table = parsed(template2({2, 2}));
  auto host = select_host(table, {"", "ma-job-x-worker-1"}, kFile);
  ASSERT_TRUE(host.ok()) << host.error().message;
  EXPECT_EQ(host->pod_name, "ma-job-x-worker-1");
  EXPECT_EQ(table.devices_of(host->server)[host->first].rank_id, 2u);
  auto none = select_host(table, {"10.0.0.1", ""}, kFile);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().message, kFile +
                                      ": group_list lists 2 pods and MA_CURRENT_INSTANCE_NAME is not set: nothing "
                                      "says which one is this host");
  auto unknown = select_host(table, {"", "ma-job-x-worker-7"}, kFile);
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.error().message,
            kFile +
                ": group_list[].instance_list[].pod_name = \"ma-job-x-worker-7\": no such pod for this host "
                "(MA_CURRENT_INSTANCE_NAME); the table lists \"ma-job-x-worker-0\", \"ma-job-x-worker-1\"");
}

TEST(SelectHost, TwoPodsOnOneServerEachGetOnlyTheirOwnDevices) {
  OJson t = template2({2, 2});
  auto& list = t["group_list"][0]["instance_list"];
  list[1]["server_id"] = "10.0.0.1";
  list[1]["devices"][0]["device_id"] = "2";
  list[1]["devices"][1]["device_id"] = "3";
  RankTable table = parsed(t);
  auto second = select_host(table, {"", "ma-job-x-worker-1"}, kFile);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->first, 2u);
  EXPECT_EQ(second->count, 2u);
}

TEST(SelectHost, APodOfAZeroDeviceGroupHasNothingToRun) {
  OJson t = template2({1});
  OJson ps = {
      {"group_name", "ps"},
      {"device_count", "0"},
      {"instance_list", {{{"pod_name", "ma-job-x-ps-0"}, {"server_id", "10.0.0.9"}, {"devices", OJson::array()}}}}};
  t["group_list"].push_back(ps);
  t["group_count"] = "2";
  RankTable table = parsed(t);
  auto host = select_host(table, {"", "ma-job-x-ps-0"}, kFile);
  ASSERT_FALSE(host.ok());
  EXPECT_EQ(host.error().message, kFile +
                                      ": group_list[].instance_list[].pod_name = \"ma-job-x-ps-0\": this host's pod "
                                      "has no devices (its group's device_count is 0)");
}

}  // namespace
}  // namespace trainit
