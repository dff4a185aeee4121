"""The seeds of a chain's row stream (:mod:`._row_stream`): a child of the chain's seed sequence.

A stream's seed is spawned from the seed sequence of the chain's generator, not drawn from the
generator: the chain's draws do not depend on it, and it is known before the chain runs
(:func:`next_stream_seed`), so that the stream's first rows can be gathered ahead
(:func:`~._row_stream.start_ahead`). A generator keeps its seed sequence when it is copied or
pickled (NumPy 2.1 and later), as a chain's is on every run.
"""

from __future__ import annotations

import numpy as np

__all__ = ["next_stream_seed", "stream_generators", "stream_seed"]


def stream_seed(rng):
    """The seed of the row stream of a chain run by ``rng``: the next child of the generator's
    seed sequence, spawned (the chain's generator draws nothing for it, and
    :func:`next_stream_seed` knows it before the chain runs); two draws of a generator without
    a seed sequence.

    Parameters
    ----------
    rng : numpy.random.Generator

    Returns
    -------
    numpy.random.SeedSequence
    """
    sequence = rng.bit_generator.seed_seq
    if isinstance(sequence, np.random.SeedSequence):
        return sequence.spawn(1)[0]
    return np.random.SeedSequence(rng.integers(0, 2**63, size=2))


def next_stream_seed(rng):
    """What :func:`stream_seed` will give for ``rng``, without spawning it (None for a
    generator without a seed sequence)."""
    sequence = rng.bit_generator.seed_seq
    if not isinstance(sequence, np.random.SeedSequence):
        return None
    return _child(sequence, sequence.n_children_spawned)


def _child(sequence, i):
    """Child ``i`` of a seed sequence, as ``SeedSequence.spawn`` makes it (and without
    spawning: the sequence is not changed)."""
    return np.random.SeedSequence(sequence.entropy, spawn_key=(*sequence.spawn_key, i),
                                  pool_size=sequence.pool_size)


def stream_generators(seed):
    """The stream's generator and the one of selection sampling, from its seed (a
    ``SeedSequence``, or array_like of int): the seed's children 0 and 1."""
    if not isinstance(seed, np.random.SeedSequence):
        seed = np.random.SeedSequence(np.asarray(seed, dtype=np.uint64))
    return tuple(np.random.Generator(np.random.PCG64(_child(seed, i))) for i in (0, 1))
