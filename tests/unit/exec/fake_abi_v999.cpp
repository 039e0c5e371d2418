// A shared library that exports tf_abi_version alone. Built as versions 999
// and 1 (CompiledModel must refuse them before looking for any other symbol)
// and as version 2 (then the first missing tf_* symbol must be named).
#include <cstdint>

#ifndef FAKE_ABI_VERSION
#define FAKE_ABI_VERSION 999
#endif

extern "C" uint32_t tf_abi_version(void) { return FAKE_ABI_VERSION; }
