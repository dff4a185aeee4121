"""Warning categories of the package's caches.

The package keeps two caches that only save time: the costs measured on this machine
(:mod:`sksubsample.algorithms._calibration`) and numba's compiled machine code. Neither may stop
a fit: when one cannot be read or written as it should, the package says what it did instead
(measured again, planned with the rough model, cached elsewhere, compiled in memory) with a
warning of one of these categories, and goes on. Filter them with the usual ``warnings``
machinery, e.g. ``warnings.simplefilter("ignore", CacheWarning)``.
"""

from __future__ import annotations

__all__ = ["CacheWarning", "CompiledCacheWarning", "CostCacheWarning"]


class CacheWarning(UserWarning):
    """A cache of the package could not be used as it should; the warning says what was done
    instead."""


class CostCacheWarning(CacheWarning):
    """The store of measured costs was corrupt, locked too long or not writable: the costs
    were measured again, or kept for this process only."""


class CompiledCacheWarning(CacheWarning):
    """numba's cache of compiled code was unreadable (removed, then compiled again) or could
    not be written where it usually is (cached in another folder, or compiled in memory)."""
