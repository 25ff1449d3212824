# Sourced by scripts/test.sh and scripts/test_quick.sh: how the tests' processes (pytest's workers, the notebooks'
# kernels, the servers) use this machine's CPU. Each is measured in README.md's "Where the time goes".
# One thread each: at the tiny checkpoint's sizes a second thread buys a test almost nothing, and two workers run two
# tests side by side instead.
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
# glibc returns a large freed block to the kernel at once, and the next tensor of that size faults its pages in
# again, zeroed: a fifth of an action notebook's time on a CPU went to that. These keep freed memory for reuse.
export GLIBC_TUNABLES=${GLIBC_TUNABLES:-glibc.malloc.mmap_threshold=4294967296:glibc.malloc.trim_threshold=4294967296}
