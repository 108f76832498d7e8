// fusejit/error.h — errors as values (LLVM `Expected` style).
//
// Every fallible fusejit call returns `Expected<T>` (or `Status` when there is
// no value). Nothing in the library throws across its public API or aborts the
// host process on bad input.
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace fusejit {

// A place in a spec file (1-based line and column); line 0 means "unknown".
struct SourceLoc {
  std::string file;
  int line = 0;
  int col = 0;
  bool known() const { return line > 0; }
  std::string str() const;  // "file:line:col", or "" when unknown
};

struct Error {
  std::string message;
  SourceLoc loc;
  Error() = default;
  explicit Error(std::string msg, SourceLoc where = {})
      : message(std::move(msg)), loc(std::move(where)) {}
  // "file:line:col: error: message" (the prefix only when the place is known).
  std::string str() const;
};

template <class T>
class [[nodiscard]] Expected {
 public:
  Expected(T value) : v_(std::move(value)) {}
  Expected(Error err) : v_(std::move(err)) {}

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& operator*() & { return std::get<0>(v_); }
  const T& operator*() const& { return std::get<0>(v_); }
  T* operator->() { return &std::get<0>(v_); }
  const T* operator->() const { return &std::get<0>(v_); }
  T take() { return std::move(std::get<0>(v_)); }

  const Error& error() const { return std::get<1>(v_); }

 private:
  std::variant<T, Error> v_;
};

// Success or an Error, for calls that return nothing.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Error err) : err_(std::move(err)), failed_(true) {}
  static Status success() { return {}; }
  bool ok() const { return !failed_; }
  explicit operator bool() const { return ok(); }
  const Error& error() const { return err_; }

 private:
  Error err_;
  bool failed_ = false;
};

}  // namespace fusejit
