//! Compute kernels: matmul, rmsnorm, softmax, rope, swiglu, attention.
