// Keras-style progress lines and the throttled terminal/log printer.
#include "runtime/training/Progress.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace tandem {
namespace {

constexpr int kBarWidth = 30, kMinBarWidth = 10;

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

// "[=====>.....]" of `width` cells for step of total (a full bar for an empty epoch).
std::string bar(int64_t step, int64_t total, int width) {
  const double ratio = total > 0 ? (double)step / (double)total : 1.0;
  const int filled = std::min(width, (int)(width * ratio));
  std::string b = "[";
  if (filled > 0) {
    b.append(filled - 1, '=');
    b += step < total ? '>' : '=';
  }
  b.append(width - filled, '.');
  return b + "]";
}

std::string counter(int64_t step, int64_t total) {
  const std::string t = std::to_string(total), s = std::to_string(step);
  return std::string(t.size() > s.size() ? t.size() - s.size() : 0, ' ') + s + "/" + t;
}

std::string metricsAndRate(const ProgressState& s) {
  std::string out;
  for (const auto& m : s.metrics) out += " - " + m.name + ": " + formatMetric(m.value);
  if (s.samples > 0 && s.elapsedSeconds > 0)
    out += " - " + fmt("%.0f", s.samples / s.elapsedSeconds) + " " + s.rateUnit;
  return out;
}

// counter + " " + bar(width) + tail, the bar shrunk and then the line cut to fit columns - 1.
std::string fit(const std::string& head, int64_t step, int64_t total, const std::string& tail,
                int columns, bool withBar) {
  auto build = [&](int w) { return head + (withBar ? " " + bar(step, total, w) : "") + tail; };
  std::string line = build(kBarWidth);
  if (columns <= 0 || (int)line.size() <= columns - 1) return line;
  if (withBar) {
    const int over = (int)line.size() - (columns - 1);
    line = build(std::max(kMinBarWidth, kBarWidth - over));
  }
  if ((int)line.size() > columns - 1) line.resize((size_t)std::max(0, columns - 1));
  return line;
}

int terminalColumns() {
  struct winsize ws;
  if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
  if (const char* c = std::getenv("COLUMNS")) {
    int v = std::atoi(c);
    if (v > 0) return v;
  }
  return 80;
}

}  // namespace

std::string formatEta(double seconds) {
  const long long t = seconds > 0 ? std::llround(seconds) : 0;
  char buf[48];
  if (t >= 3600)
    std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", t / 3600, t % 3600 / 60, t % 60);
  else if (t >= 60)
    std::snprintf(buf, sizeof buf, "%lld:%02lld", t / 60, t % 60);
  else
    std::snprintf(buf, sizeof buf, "%llds", t);
  return buf;
}

std::string formatMetric(double v) {
  return fmt(v != 0 && std::fabs(v) < 1e-3 ? "%.4e" : "%.4f", v);
}

std::string renderProgressLine(const ProgressState& in, int columns) {
  ProgressState s = in;
  s.step = std::clamp<int64_t>(s.step, 0, std::max<int64_t>(s.total, 0));
  std::string tail;
  if (s.step > 0 && s.elapsedSeconds > 0)
    tail = " - ETA: " + formatEta(s.elapsedSeconds / s.step * (s.total - s.step));
  tail += metricsAndRate(s);
  return fit(counter(s.step, s.total), s.step, s.total, tail, columns, true);
}

std::string renderEpochEndLine(const ProgressState& in, int columns, bool withBar) {
  ProgressState s = in;
  s.step = std::clamp<int64_t>(s.step, 0, std::max<int64_t>(s.total, 0));
  std::string tail = " - " + fmt("%.0f", std::max(0.0, s.elapsedSeconds)) + "s";
  if (s.step > 0) {
    const double per = s.elapsedSeconds / s.step;
    tail += per >= 1      ? " " + fmt("%.0f", per) + "s/step"
            : per >= 1e-3 ? " " + fmt("%.0f", per * 1e3) + "ms/step"
                          : " " + fmt("%.0f", per * 1e6) + "us/step";
  }
  tail += metricsAndRate(s);
  return fit(counter(s.step, s.total), s.step, s.total, tail, columns, withBar);
}

ProgressBar::ProgressBar(ProgressOptions o) : o_(std::move(o)) {
  if (!o_.write)
    o_.write = [](const std::string& s) {
      std::fputs(s.c_str(), stdout);
      std::fflush(stdout);
    };
  if (!o_.now)
    o_.now = [] {
      return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
          .count();
    };
  tty_ = o_.tty ? *o_.tty : isatty(STDOUT_FILENO) != 0;
  if (tty_ && o_.columns <= 0) o_.columns = terminalColumns();
}

void ProgressBar::beginEpoch(int64_t epoch, int64_t numEpochs, int64_t totalSteps) {
  epochLabel_ = "Epoch " + std::to_string(epoch + 1) + "/" + std::to_string(numEpochs);
  state_ = ProgressState{};
  state_.rateUnit = o_.rateUnit;
  state_.total = std::max<int64_t>(totalSteps, 0);
  start_ = o_.now();
  lastDraw_ = -1e300;
  lastLen_ = 0;
  if (tty_) o_.write(epochLabel_ + "\n");
}

void ProgressBar::update(int64_t step, int64_t samples, const std::vector<ProgressMetric>& m) {
  state_.step = step;
  state_.samples = samples;
  state_.metrics = m;
  if (!tty_) return;
  const double now = o_.now();
  if (now - lastDraw_ < o_.minRedrawSeconds && step < state_.total) return;
  lastDraw_ = now;
  state_.elapsedSeconds = now - start_;
  draw(renderProgressLine(state_, o_.columns), false);
}

void ProgressBar::endEpoch(const std::vector<ProgressMetric>& m) {
  state_.metrics = m;
  state_.elapsedSeconds = o_.now() - start_;
  if (tty_)
    draw(renderEpochEndLine(state_, o_.columns, true), true);
  else
    o_.write(epochLabel_ + " - " + renderEpochEndLine(state_, 0, false) + "\n");
}

void ProgressBar::draw(const std::string& line, bool newline) {
  std::string out = "\r" + line;
  if (lastLen_ > line.size()) out.append(lastLen_ - line.size(), ' ');  // erase the longer one
  lastLen_ = line.size();
  o_.write(newline ? out + "\n" : out);
}

}  // namespace tandem
