"""One BLAS thread around fits, so that draws depend on the seed and nothing else."""

from __future__ import annotations

from threadpoolctl import threadpool_limits

__all__ = ["single_blas_thread"]


def single_blas_thread() -> threadpool_limits:
    """Context manager limiting BLAS to one thread.

    A multithreaded BLAS rounds differently from one run to the next, which would make a fit,
    and so the draws, depend on more than the random seed.
    """
    return threadpool_limits(limits=1, user_api="blas")
