"""Regenerate the generator fits shipped in moesim/data/synth/ (read-only cache entries).

    python traces/make_synth_fits.py

One fit per catalog model without a real trace (those fall back to synthetic routing), for
the default statistics and seed 0, so that their first prefill, decode or specdecode skips
the fit. Each is made by ``synthesize`` itself into an empty cache folder and copied, so its
name (the cache key, moesim/traces/synth_cache.py) and content are exactly what a run
computes. A changed model or generator version gives new keys, and
``tests/unit/test_synth_cache.py`` then asks for this script to be rerun.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from moesim.traces.sources import synthetic_catalog_models

SEED = 0


def main() -> None:
    from moesim.traces import synth_cache, synthesize

    bundled = synth_cache.BUNDLED_FITS
    bundled.mkdir(parents=True, exist_ok=True)
    keep = set()
    with tempfile.TemporaryDirectory() as folder:
        os.environ[synth_cache.CACHE_ENV] = folder
        hidden = bundled.with_name(".synth-rebuild")
        bundled.rename(hidden)                      # fit afresh: do not read the shipped fits
        try:
            for name in synthetic_catalog_models():
                synthesize(name, 1, seed=SEED)
                (made,) = Path(folder, "synth").glob("fit-*.npz")
                keep.add(made.name)
                shutil.move(made, hidden / made.name)
                for rest in Path(folder, "synth").iterdir():
                    rest.unlink()
                print(name, made.name)
        finally:
            hidden.rename(bundled)
    for stale in bundled.glob("fit-*.npz"):
        if stale.name not in keep:
            stale.unlink()
            print("removed", stale.name)


if __name__ == "__main__":
    main()
