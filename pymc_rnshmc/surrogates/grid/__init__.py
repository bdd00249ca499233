"""Grid surrogates over a box around the posterior's bulk: Smolyak sparse grids, force maps."""
