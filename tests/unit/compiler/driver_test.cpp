// Driver tests: output comparison (the PASS/FAIL of `tandem run --expect`), atomic writes,
// test-data directories.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <fstream>

#include "tools/driver/Driver.h"

using namespace tandem;

TEST(Compare, ToleranceIsAtolPlusRtolTimesExpected) {
  Tensor want = Tensor::fromVector<float>({3}, {1.f, 100.f, 0.f});
  Comparison c = compareTensors(Tensor::fromVector<float>({3}, {1.00005f, 100.09f, 0.00009f}), want, 1e-4, 1e-3);
  EXPECT_TRUE(c.pass) << c.reason;
  EXPECT_NEAR(c.maxAbsError, 0.09, 1e-4);
  c = compareTensors(Tensor::fromVector<float>({3}, {1.f, 100.2f, 0.f}), want, 1e-4, 1e-3);
  EXPECT_FALSE(c.pass);
  EXPECT_NE(c.reason.find("max abs error"), std::string::npos);
}

TEST(Compare, ShapeDtypeAndNaN) {
  Tensor a = Tensor::fromVector<float>({2}, {NAN, 1.f});
  EXPECT_TRUE(compareTensors(a, Tensor::fromVector<float>({2}, {NAN, 1.f}), 0, 0).pass);
  EXPECT_FALSE(compareTensors(a, Tensor::fromVector<float>({2}, {0.f, 1.f}), 1, 1).pass);
  Comparison c = compareTensors(a, Tensor::fromVector<float>({1, 2}, {NAN, 1.f}), 1, 1);
  EXPECT_EQ(c.reason, "shape [2] != expected [1,2]");
  c = compareTensors(Tensor::fromVector<int64_t>({1}, {1}), Tensor::fromVector<float>({1}, {1}), 1, 1);
  EXPECT_EQ(c.reason, "dtype i64 != expected f32");
}

TEST(Checksum, SumsEveryDtype) {
  EXPECT_DOUBLE_EQ(checksum(Tensor::fromVector<int64_t>({3}, {1, 2, 3})), 6.0);
  EXPECT_DOUBLE_EQ(checksum(Tensor::fromVector<bool>({3}, {true, false, true})), 2.0);
}

TEST(WriteFileAtomic, WritesOrLeavesNothing) {
  std::string dir = testing::TempDir() + "/tandem_driver_test_" + std::to_string(getpid());
  ASSERT_EQ(system(("mkdir -p " + dir).c_str()), 0);
  ASSERT_TRUE(writeFileAtomic(dir + "/a.bin", "hello").isOk());
  std::ifstream in(dir + "/a.bin");
  std::string s;
  in >> s;
  EXPECT_EQ(s, "hello");
  Status st = writeFileAtomic(dir + "/missing/b.bin", "x");
  EXPECT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("missing/b.bin: cannot write"), std::string::npos) << st.message();
  EXPECT_NE(system(("ls " + dir + "/missing 2>/dev/null").c_str()), 0);
}

TEST(ReadTensorDir, ErrorsNameTheDirectory) {
  std::vector<Tensor> t;
  Status st = readTensorDir("/no/such/dir", "input", &t, nullptr);
  EXPECT_EQ(st.message(), "/no/such/dir: no such directory");
  st = readTensorDir("/", "input", &t, nullptr);
  EXPECT_EQ(st.message(), "/: no input_0.pb in this directory");
}
