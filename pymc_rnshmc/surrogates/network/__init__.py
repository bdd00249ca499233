"""The random network surrogate: hidden layers, held-out least squares, online learning."""
