"""Start-up and platform machinery, in one place (docs/performance.md, "Tricks"). Private.

- ``jit`` -- numba imported on first use of a compiled kernel, and its on-disk cache
- ``simd`` -- full-width vectors (AVX-512) where the CPU has them
- ``blas`` -- one BLAS thread where the bits would otherwise depend on the thread count
- ``sparse`` -- ``scipy.sparse`` imported on first use
- ``twins`` -- the sizes below which the NumPy twins of the compiled kernels run (no numba start-up)
- ``memory`` -- available memory and byte counts for messages
- ``progress`` -- progress on stderr (rich), quiet when not a terminal
"""
