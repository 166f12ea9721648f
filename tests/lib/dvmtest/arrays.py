"""Inputs tests draw from their own generator (numpy.random.Generator), so
that each file's values stay its own and reproducible."""
import numpy as np


def normal_f32(rng):
    """The function of *shape that gives standard normal float32 values
    drawn from rng: `f32 = normal_f32(rng)`, then `f32(3, 4)`."""
    return lambda *shape: rng.standard_normal(shape).astype(np.float32)
