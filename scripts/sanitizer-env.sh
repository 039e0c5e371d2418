# Sourced by test.sh and fuzz.sh: how sanitized programs report. Every
# report is fatal (exit non-zero), with a symbolized stack.
symbolizer=/usr/lib/llvm-22/bin/llvm-symbolizer
export ASAN_SYMBOLIZER_PATH=$symbolizer
# allow_user_poisoning=0: LLVM's BumpPtrAllocator poisons the slabs it
# allocates when compiled with ASan, and unpoisons what it hands out. Our
# sanitized code instantiates it (attribute storage of the dialect's enum
# attributes goes into MLIRContext's shared allocator), while Debian's
# libMLIR is not instrumented: its allocations from a slab our code poisoned
# stay poisoned, and ASan then reports a use-after-poison that is not one.
export ASAN_OPTIONS="allow_user_poisoning=0:detect_leaks=1:abort_on_error=0:halt_on_error=1:strict_string_checks=1:check_initialization_order=1:detect_stack_use_after_return=1:suppressions=$PWD/tests/sanitizers/asan.supp"
export LSAN_OPTIONS="suppressions=$PWD/tests/sanitizers/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:suppressions=$PWD/tests/sanitizers/ubsan.supp"
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:external_symbolizer_path=$symbolizer:suppressions=$PWD/tests/sanitizers/tsan.supp"
