//===- Module.cpp - transfuse._transfuse, the Python extension -------------===//
//
// The exceptions and the runtime's bindings (Runtime.cpp); the compiler's
// are transfuse._compiler (CompilerModule.cpp). The Python package
// (python/transfuse) is the API users call.
//
//===----------------------------------------------------------------------===//

#include "python/src/Bindings.h"

using namespace transfuse::python;

NB_MODULE(_transfuse, m) {
  m.doc() = "The native half of the transfuse package (see transfuse/__init__.py).";
  static nb::exception<Error> error(m, "Error", PyExc_RuntimeError);
  static nb::exception<CompileError> compileError(m, "CompileError", error.ptr());
  // InputError is also a ValueError: a wrong name, dtype or shape.
  nb::object bases = nb::make_tuple(nb::handle(error.ptr()), nb::handle(PyExc_ValueError));
  static nb::object inputError = nb::steal(
      PyErr_NewException("transfuse._transfuse.InputError", bases.ptr(), nullptr));
  m.attr("InputError") = inputError;
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const InputError& e) {
      PyErr_SetString(inputError.ptr(), e.what());
    }
  });
  bindRuntime(m);
}
