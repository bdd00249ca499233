"""Gradient-free exploration (numpy): a model without gradients gets its first points here."""
