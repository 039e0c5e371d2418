// Status and StatusOr<T>: the runtime's error type. Runtime functions never throw
// or print; they return a Status (ok, or an error with a message the user can act
// on) or a StatusOr<T> holding either a value or an error. Header-only.
#ifndef TRANSFUSE_RUNTIME_STATUS_H
#define TRANSFUSE_RUNTIME_STATUS_H

#include <cassert>
#include <optional>
#include <string>
#include <utility>

namespace transfuse::rt {

class Status {
public:
  Status() = default;  // ok
  static Status ok() { return Status(); }
  static Status error(std::string msg) {
    Status s;
    s.ok_ = false;
    s.msg_ = std::move(msg);
    return s;
  }
  bool isOk() const { return ok_; }
  const std::string& message() const { return msg_; }
  explicit operator bool() const { return ok_; }

private:
  bool ok_ = true;
  std::string msg_;
};

template <class T>
class StatusOr {
public:
  StatusOr(T value) : value_(std::move(value)) {}
  // `status` must be an error; an ok Status without a value is a programming error
  // and is turned into an error so that value() is never reached silently.
  StatusOr(Status status) : status_(std::move(status)) {
    assert(!status_.isOk() && "StatusOr constructed from an ok Status");
    if (status_.isOk())
      status_ = Status::error("internal error: StatusOr built from ok Status");
  }
  bool isOk() const { return value_.has_value(); }
  explicit operator bool() const { return isOk(); }
  const Status& status() const { return status_; }
  T& value() {
    assert(isOk());
    return *value_;
  }
  const T& value() const {
    assert(isOk());
    return *value_;
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() { return value(); }
  const T& operator*() const { return value(); }

private:
  std::optional<T> value_;
  Status status_;
};

}  // namespace transfuse::rt

#endif  // TRANSFUSE_RUNTIME_STATUS_H
