"""The numerical core of surrogate HMC: leapfrog, metrics, acceptance, trajectory tuning.

numpy and scipy only: nothing here imports PyMC or pytensor (``tests/test_layers.py`` checks it).
"""
