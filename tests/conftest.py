import os

# One BLAS thread per process: the suite runs on two cores, often with two sampling workers.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
