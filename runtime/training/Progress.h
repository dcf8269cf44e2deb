// Keras-style training progress: a bar redrawn in place on a terminal, one line per epoch in a
// log. The line formats are pure functions; ProgressBar decides when and how to print them.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace tandem {

struct ProgressMetric {
  std::string name;  // "loss", "accuracy"
  double value = 0;
};

/// Where an epoch stands.
struct ProgressState {
  int64_t step = 0;           // steps done in this epoch
  int64_t total = 0;          // steps in the epoch (0: an empty epoch)
  double elapsedSeconds = 0;  // since the epoch began
  int64_t samples = 0;        // samples processed this epoch (for the rate; 0: no rate shown)
  std::vector<ProgressMetric> metrics;
  std::string rateUnit = "img/s";
};

/// Seconds as Keras writes an ETA, rounded to the second: "35s" below a minute, "1:05" below
/// an hour, "1:01:05" from an hour on; negative is "0s".
std::string formatEta(double seconds);
/// A metric value: "%.4f" ("0.5123"), or "%.4e" ("1.2340e-04") when 0 < |v| < 1e-3 (Keras).
std::string formatMetric(double v);

/// The line while an epoch runs (no \r, no newline), e.g.
///   "123/468 [======>.......................] - ETA: 43s - loss: 0.5123 - 1024 img/s"
/// (metrics in the caller's order; Keras's layout, so no leading space): step right-aligned to total's digits; a 30-character bar of int(30 * step / total) cells,
/// the last one '>' until the epoch is done; ETA = elapsed / step * (total - step); rate =
/// samples / elapsed, rounded. Before the first step (or without elapsed time) ETA and rate are
/// left out. step is clamped to [0, total]. When columns > 0 the line fits in columns - 1
/// characters (the last column would wrap on some terminals): the bar shrinks down to 10
/// characters, then the end of the line is cut.
std::string renderProgressLine(const ProgressState& s, int columns = 0);

/// The line that ends an epoch, e.g.
///   "468/468 [==============================] - 12s 26ms/step - loss: 0.5123 - 4992 img/s"
/// total time rounded to seconds; time per step in s, ms or us ("%.0f"), left out for 0 steps;
/// without the bar (withBar false) for logs: "468/468 - 12s 25ms/step - ...". Fitted to columns
/// as renderProgressLine.
std::string renderEpochEndLine(const ProgressState& s, int columns = 0, bool withBar = true);

struct ProgressOptions {
  /// Receives every piece of output; default: written to stdout and flushed.
  std::function<void(const std::string&)> write;
  /// Whether output is a terminal; default isatty(stdout).
  std::optional<bool> tty;
  /// Monotonic seconds; default std::chrono::steady_clock.
  std::function<double()> now;
  /// A terminal line is redrawn at most this often (the last step of an epoch always is).
  double minRedrawSeconds = 0.1;
  /// Terminal width; 0: the terminal's (TIOCGWINSZ), else $COLUMNS, else 80.
  int columns = 0;
  /// The rate's unit (ProgressState::rateUnit): "img/s" for images, "samples/s" for others.
  std::string rateUnit = "img/s";
};

/// Prints an epoch's progress. On a terminal: "Epoch 2/10\n", then the line of
/// renderProgressLine redrawn with "\r" (padded with spaces over a longer previous line), then
/// the end line and "\n". Otherwise one line per epoch at its end, no "\r":
/// "Epoch 2/10 - " + renderEpochEndLine(without the bar) + "\n".
class ProgressBar {
 public:
  explicit ProgressBar(ProgressOptions o = {});
  /// epoch is 0-based (printed 1-based); totalSteps >= 0 steps will follow.
  void beginEpoch(int64_t epoch, int64_t numEpochs, int64_t totalSteps);
  /// `step` steps are done, `samples` samples seen, with these running metrics.
  void update(int64_t step, int64_t samples, const std::vector<ProgressMetric>& metrics);
  /// The epoch is over: its final line with these (final) metrics.
  void endEpoch(const std::vector<ProgressMetric>& metrics);

 private:
  void draw(const std::string& line, bool newline);

  ProgressOptions o_;
  bool tty_ = false;
  std::string epochLabel_;
  ProgressState state_;
  double start_ = 0, lastDraw_ = -1e300;
  size_t lastLen_ = 0;
};

}  // namespace tandem
