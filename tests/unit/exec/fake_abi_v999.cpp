// A shared library that exports tf_abi_version alone. Built as versions 999
// and 1 (CompiledModel must refuse them before looking for any other symbol)
// and 3, and as the current version (then the first missing tf_* symbol must
// be named).
#include <cstdint>

#ifdef FAKE_ABI_CURRENT
#include "runtime/exec/model.h"
#define FAKE_ABI_VERSION TF_ABI_VERSION
#endif
#ifndef FAKE_ABI_VERSION
#define FAKE_ABI_VERSION 999
#endif

extern "C" uint32_t tf_abi_version(void) { return FAKE_ABI_VERSION; }
