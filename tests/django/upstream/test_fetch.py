"""The fetch of Django's own tests (``fetch.py``) out of PyPI's reach: a typed error the suite
skips on, bounded in time, nothing half-written left in the cache for the next run to trust."""

from __future__ import annotations

from pathlib import Path

import pytest

from . import fetch


def test_a_failed_download_is_unavailable_and_leaves_no_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a real pip against an index nothing listens on (port 9, discard): "offline"
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")
    monkeypatch.setenv("PIP_EXTRA_INDEX_URL", "")
    monkeypatch.setenv("PIP_FIND_LINKS", "")
    monkeypatch.setenv("PIP_NO_INDEX", "0")
    with pytest.raises(fetch.Unavailable, match="could not be fetched"):
        fetch.download(tmp_path / "cache")
    assert not (tmp_path / "cache" / fetch.PACKAGE).exists()
    assert "--retries" in fetch.pip_command(tmp_path)  # offline costs seconds, not pip's minutes
