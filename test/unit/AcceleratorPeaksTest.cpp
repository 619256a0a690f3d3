//===- AcceleratorPeaksTest.cpp - GPU peaks from the shipped presets ------===//

#include "common/cluster/AcceleratorPeaks.h"

#include <gtest/gtest.h>

using namespace tessel;

TEST(AcceleratorPeaks, EveryShippedPresetParses) {
  std::string error;
  auto presets = cluster::shippedPresets(&error);
  EXPECT_EQ(error, "");
  ASSERT_GE(presets.size(), 3u);
  for (const auto &[file, c] : presets)
    EXPECT_FALSE(c.device.empty()) << file << ": a GPU preset names its device";
}

TEST(AcceleratorPeaks, DeviceNamesFindTheirPreset) {
  // Names as cudaGetDeviceProperties gives them.
  auto h100 = cluster::presetForDevice("NVIDIA H100 80GB HBM3");
  ASSERT_TRUE(h100);
  EXPECT_DOUBLE_EQ(h100->peak16, 989e12);
  auto h200 = cluster::presetForDevice("NVIDIA H200");
  ASSERT_TRUE(h200);
  EXPECT_DOUBLE_EQ(h200->peak16, 989e12);
  EXPECT_EQ(h200->name, "H200");
  auto a100 = cluster::presetForDevice("NVIDIA A100-SXM4-80GB");
  ASSERT_TRUE(a100);
  EXPECT_DOUBLE_EQ(a100->peak16, 312e12);
  EXPECT_FALSE(cluster::presetForDevice("Tesla T4"));
  EXPECT_FALSE(cluster::presetForDevice("cpu"));
}

TEST(AcceleratorPeaks, DeviceKeyRoundTrips) {
  cluster::Cluster c;
  std::string error;
  const std::string text = "name = \"X\"\naccelerator.device = \"X1\"\n"
                           "accelerator.bf16 = 1 TFLOP/s\naccelerator.fp32 = 1 TFLOP/s\n"
                           "accelerator.memory = 1 GB\naccelerator.bandwidth = 1 GB/s\n"
                           "node.accelerators = 1\nintra.bandwidth = 1 GB/s\nintra.latency = 1 us\n"
                           "inter.bandwidth = 1 GB/s\ninter.latency = 1 us\n"
                           "efficiency.gemm = 1:1\nefficiency.attention = 1:1\n"
                           "efficiency.memory = 1\n";
  ASSERT_TRUE(cluster::parseCluster(text, "x.cluster", c, error)) << error;
  EXPECT_EQ(c.device, "X1");
  cluster::Cluster back;
  ASSERT_TRUE(cluster::parseCluster(cluster::formatCluster(c, ""), "y.cluster", back, error))
      << error;
  EXPECT_EQ(back.device, "X1");
  EXPECT_FALSE(cluster::parseCluster("accelerator.device = X1\n", "z.cluster", c, error));
  EXPECT_NE(error.find("accelerator.device needs a quoted string"), std::string::npos) << error;
}
