//===- Bindings.h - what the Python extension's files share ---------------===//
//
// The extension `transfuse._transfuse` (nanobind): Runtime.cpp binds the
// runtime's host side (models, decoding, parameters, the Trainer, the
// tokenizers), Compiler.cpp the compiler library. Errors become the
// exceptions declared here: transfuse.Error and its subclasses, with the
// message the CLI prints.
//
//===----------------------------------------------------------------------===//
#ifndef TRANSFUSE_PYTHON_BINDINGS_H
#define TRANSFUSE_PYTHON_BINDINGS_H

#include "runtime/Status.h"

#include <nanobind/nanobind.h>

#include <stdexcept>
#include <string>

namespace transfuse::python {

namespace nb = nanobind;

// transfuse.Error (a RuntimeError), transfuse.InputError (also a
// ValueError: a wrong name, dtype or shape, raised before anything runs)
// and transfuse.CompileError.
struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};
struct InputError : Error {
  using Error::Error;
};
struct CompileError : Error {
  using Error::Error;
};

// Throws `E` with the status's message unless it is ok.
template <class E = Error>
void check(const rt::Status& status) {
  if (!status.isOk()) throw E(status.message());
}
template <class E = Error, class T>
T check(rt::StatusOr<T> value) {
  if (!value.isOk()) throw E(value.status().message());
  return std::move(*value);
}

// Raises what Python's signal handlers raise (KeyboardInterrupt on Ctrl-C)
// when a signal arrived; the GIL must be held.
inline void raisePendingSignals() {
  if (PyErr_CheckSignals() != 0) throw nb::python_error();
}

void bindRuntime(nb::module_& m);
void bindCompiler(nb::module_& m);

}  // namespace transfuse::python

#endif  // TRANSFUSE_PYTHON_BINDINGS_H
