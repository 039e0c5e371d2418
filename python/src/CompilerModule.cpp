//===- CompilerModule.cpp - transfuse._compiler, the compiler's extension --===//
//
// The compiler library's bindings (Compiler.cpp), in a module of their own:
// it links Debian's shared libprotobuf (the ONNX frontend) and no
// SentencePiece, whose library exports a protobuf of another version. Its
// errors are transfuse._transfuse's exceptions.
//
//===----------------------------------------------------------------------===//

#include "python/src/Bindings.h"

using namespace transfuse::python;

NB_MODULE(_compiler, m) {
  m.doc() = "The compiler half of the transfuse package's native code.";
  nb::module_ runtime = nb::module_::import_("transfuse._transfuse");
  static nb::object compileError = runtime.attr("CompileError");
  static nb::object error = runtime.attr("Error");
  static nb::object inputError = runtime.attr("InputError");
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const CompileError& e) {
      PyErr_SetString(compileError.ptr(), e.what());
    } catch (const InputError& e) {
      PyErr_SetString(inputError.ptr(), e.what());
    } catch (const Error& e) {
      PyErr_SetString(error.ptr(), e.what());
    }
  });
  bindCompiler(m);
}
