"""Put first on PYTHONPATH, this hides an installed torch: `import torch` fails as if it were not
installed, the Community Cloud set-up (requirements.txt has no torch). bench_memory.py serves
the app this way so its memory figures are those of a deployment without torch."""

raise ImportError("torch is hidden for this measurement (bench/without_torch)")
