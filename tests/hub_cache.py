"""A huggingface_hub cache laid out as huggingface_hub lays it out, without the network.

``hub/models--{owner}--{name}/refs/main`` names a revision, and
``snapshots/{revision}/{file}`` holds each file (symlinks here, as in a real cache, whose
snapshot files link into ``blobs/``). ``try_to_load_from_cache`` and
``hf_hub_download(local_files_only=True)`` then find the files as if downloaded.
"""

from __future__ import annotations

from pathlib import Path


def lay_out_hub_cache(cache: Path, repo_id: str, files_from: Path, names: tuple[str, ...]) -> None:
    repo = cache / f"models--{repo_id.replace('/', '--')}"
    revision = "0" * 40
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(revision)
    snapshot = repo / "snapshots" / revision
    snapshot.mkdir(parents=True)
    for name in names:
        (snapshot / name).symlink_to(files_from / name)
