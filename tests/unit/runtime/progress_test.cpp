// Progress lines (runtime/training/Progress.h): exact strings of the pure renderers, and the
// printer's terminal/log behaviour and redraw throttling with an injected clock.
#include "runtime/training/Progress.h"

#include <gtest/gtest.h>

namespace tandem {
namespace {

const std::vector<ProgressMetric> kMetrics = {{"loss", 0.5123}, {"accuracy", 0.8123}};

// Step 123 of 468 after 15.375 s (0.125 s/step: ETA 345 * 0.125 = 43.1 s), 128 samples a step.
ProgressState midEpoch() {
  ProgressState s;
  s.step = 123;
  s.total = 468;
  s.elapsedSeconds = 15.375;
  s.samples = 123 * 128;  // 1024 img/s
  s.metrics = kMetrics;
  return s;
}

TEST(Progress, FormatsEtaLikeKeras) {
  EXPECT_EQ(formatEta(0), "0s");
  EXPECT_EQ(formatEta(-3), "0s");
  EXPECT_EQ(formatEta(35.2), "35s");
  EXPECT_EQ(formatEta(59.4), "59s");
  EXPECT_EQ(formatEta(59.6), "1:00");
  EXPECT_EQ(formatEta(65), "1:05");
  EXPECT_EQ(formatEta(3599.4), "59:59");
  EXPECT_EQ(formatEta(3600), "1:00:00");
  EXPECT_EQ(formatEta(3723), "1:02:03");
  EXPECT_EQ(formatEta(36000 + 59 * 60 + 7), "10:59:07");
}

TEST(Progress, FormatsMetricsLikeKeras) {
  EXPECT_EQ(formatMetric(0.5123), "0.5123");
  EXPECT_EQ(formatMetric(0), "0.0000");
  EXPECT_EQ(formatMetric(12.5), "12.5000");
  EXPECT_EQ(formatMetric(0.000125), "1.2500e-04");
  EXPECT_EQ(formatMetric(-0.0002), "-2.0000e-04");
  EXPECT_EQ(formatMetric(0.001), "0.0010");
}

TEST(Progress, RendersTheRunningLine) {
  EXPECT_EQ(renderProgressLine(midEpoch()),
            "123/468 [======>.......................] - ETA: 43s - loss: 0.5123 - accuracy: "
            "0.8123 - 1024 img/s");
  ProgressState s = midEpoch();
  s.step = 0;
  s.samples = 0;
  s.metrics.clear();
  EXPECT_EQ(renderProgressLine(s), "  0/468 [..............................]");
  s.step = 467;                   // one short: the head is still '>'
  s.elapsedSeconds = 467 * 20.0;  // 20 s/step: ETA 20 s
  EXPECT_EQ(renderProgressLine(s), "467/468 [============================>.] - ETA: 20s");
  s.step = 1;
  s.elapsedSeconds = 10;  // ETA 4670 s
  EXPECT_EQ(renderProgressLine(s), "  1/468 [..............................] - ETA: 1:17:50");
  s.step = 999;  // clamped to total
  EXPECT_EQ(renderProgressLine(s), "468/468 [==============================] - ETA: 0s");
}

TEST(Progress, RendersTheEpochEndLine) {
  ProgressState s = midEpoch();
  s.step = 468;
  s.elapsedSeconds = 12;  // 25.6 ms/step
  s.samples = 468 * 128;  // 4992 img/s
  EXPECT_EQ(renderEpochEndLine(s),
            "468/468 [==============================] - 12s 26ms/step - loss: 0.5123 - accuracy: "
            "0.8123 - 4992 img/s");
  EXPECT_EQ(renderEpochEndLine(s, 0, false),
            "468/468 - 12s 26ms/step - loss: 0.5123 - accuracy: 0.8123 - 4992 img/s");
  s.elapsedSeconds = 468 * 2.4;
  s.samples = 0;
  s.metrics.clear();
  EXPECT_EQ(renderEpochEndLine(s, 0, false), "468/468 - 1123s 2s/step");
  s.elapsedSeconds = 468 * 42e-6;
  EXPECT_EQ(renderEpochEndLine(s, 0, false), "468/468 - 0s 42us/step");
}

TEST(Progress, ZeroStepEpoch) {
  ProgressState s;
  EXPECT_EQ(renderProgressLine(s), "0/0 [==============================]");
  EXPECT_EQ(renderEpochEndLine(s), "0/0 [==============================] - 0s");
  EXPECT_EQ(renderEpochEndLine(s, 0, false), "0/0 - 0s");
}

TEST(Progress, ClampsToTheTerminalWidth) {
  const ProgressState s = midEpoch();
  ASSERT_EQ(renderProgressLine(s).size(), 98u);
  EXPECT_EQ(renderProgressLine(s, 100), renderProgressLine(s));  // fits in 99 (98 long)
  // 89 columns: 10 over, the bar loses 10 cells.
  EXPECT_EQ(renderProgressLine(s, 89),
            "123/468 [====>...............] - ETA: 43s - loss: 0.5123 - accuracy: 0.8123 - 1024 "
            "img/s");
  EXPECT_EQ(renderProgressLine(s, 89).size(), 88u);
  // 40 columns: the bar stops at 10 cells, then the line is cut.
  EXPECT_EQ(renderProgressLine(s, 40), "123/468 [=>........] - ETA: 43s - loss:");
  EXPECT_EQ(renderProgressLine(s, 1), "");
}

struct Captured {
  std::vector<std::string> writes;
  double t = 0;
  ProgressOptions options(bool tty) {
    ProgressOptions o;
    o.write = [this](const std::string& s) { writes.push_back(s); };
    o.now = [this] { return t; };
    o.tty = tty;
    o.columns = 200;
    return o;
  }
};

TEST(ProgressBar, TerminalRedrawsInPlaceThrottled) {
  Captured c;
  ProgressBar bar(c.options(true));
  c.t = 100;
  bar.beginEpoch(0, 2, 4);
  ASSERT_EQ(c.writes, std::vector<std::string>{"Epoch 1/2\n"});
  const std::vector<ProgressMetric> both = {{"loss", 1.0}, {"a_long_metric_name", 2.0}};
  c.t = 100.05;
  bar.update(1, 32, both);  // the first update draws
  c.t = 100.10;
  bar.update(2, 64, both);  // 50 ms after the last draw: skipped
  c.t = 100.20;
  bar.update(3, 96, {{"loss", 0.5}});  // drawn, shorter: padded over the previous line
  c.t = 100.21;
  bar.update(4, 128, {{"loss", 0.25}});  // the last step always draws
  c.t = 100.26;
  bar.endEpoch({{"loss", 0.25}});
  ASSERT_EQ(c.writes.size(), 5u);
  ProgressState s;
  s.total = 4;
  s.step = 1;
  s.samples = 32;
  s.elapsedSeconds = 0.05;
  s.metrics = both;
  const std::string first = renderProgressLine(s);
  EXPECT_EQ(c.writes[1], "\r" + first);
  EXPECT_EQ(first,
            "1/4 [======>.......................] - ETA: 0s - loss: 1.0000 - a_long_metric_name: "
            "2.0000 - 640 img/s");
  const std::string third =
      "3/4 [=====================>........] - ETA: 0s - loss: 0.5000 - 480 img/s";
  EXPECT_EQ(c.writes[2], "\r" + third + std::string(first.size() - third.size(), ' '));
  EXPECT_EQ(c.writes[3].substr(0, 8), "\r4/4 [==");
  EXPECT_EQ(c.writes[4],
            "\r4/4 [==============================] - 0s 65ms/step - loss: 0.2500 - 492 img/s\n");
}

TEST(ProgressBar, LogGetsOnePlainLinePerEpoch) {
  Captured c;
  ProgressBar bar(c.options(false));
  for (int64_t e = 0; e < 2; ++e) {
    c.t = 10 * e;
    bar.beginEpoch(e, 2, 4);
    for (int64_t k = 1; k <= 4; ++k) {
      c.t += 0.065;
      bar.update(k, 32 * k, {{"loss", 1.0 / k}});
    }
    bar.endEpoch({{"loss", 0.25}, {"accuracy", 0.9}});
  }
  EXPECT_EQ(c.writes,
            (std::vector<std::string>{
                "Epoch 1/2 - 4/4 - 0s 65ms/step - loss: 0.2500 - accuracy: 0.9000 - 492 img/s\n",
                "Epoch 2/2 - 4/4 - 0s 65ms/step - loss: 0.2500 - accuracy: 0.9000 - 492 img/s\n"}));
  // Token ids and features: the rate in samples (tandem train sets it from the model's input).
  Captured t;
  ProgressOptions o = t.options(false);
  o.rateUnit = "samples/s";
  ProgressBar tokens(o);
  tokens.beginEpoch(0, 1, 1);
  t.t = 0.5;
  tokens.update(1, 32, {{"loss", 2.0}});
  tokens.endEpoch({{"loss", 2.0}});
  EXPECT_EQ(t.writes, (std::vector<std::string>{"Epoch 1/1 - 1/1 - 0s 500ms/step - loss: 2.0000 - 64 samples/s\n"}));
}

}  // namespace
}  // namespace tandem
