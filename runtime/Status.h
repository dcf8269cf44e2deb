// A small error type for the runtime: ok, or a message naming what failed and why.
#pragma once
#include <string>
#include <utility>

namespace tandem {

/// The runtime's error value (DESIGN §7: no exceptions across the public API). A non-ok Status
/// carries one human-readable message; callers prefix context ("node 'conv1' (Conv): ...").
class Status {
 public:
  Status() = default;
  static Status ok() { return Status(); }
  static Status error(std::string msg) {
    Status s;
    s.ok_ = false;
    s.msg_ = std::move(msg);
    return s;
  }
  bool isOk() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const std::string& message() const { return msg_; }
  /// Returns a copy whose message is "prefix: message".
  Status withContext(const std::string& prefix) const {
    return ok_ ? *this : error(prefix + ": " + msg_);
  }

 private:
  bool ok_ = true;
  std::string msg_;
};

#define TANDEM_RETURN_IF_ERROR(expr)          \
  do {                                        \
    ::tandem::Status _st = (expr);            \
    if (!_st.isOk()) return _st;              \
  } while (0)

}  // namespace tandem
