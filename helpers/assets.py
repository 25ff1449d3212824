"""Where the cookbook's bundled prompts, images and videos live, resolved without depending on the cwd."""

from __future__ import annotations

from pathlib import Path

from helpers.errors import MediaError

NOTEBOOK_DIR = Path("cookbooks") / "cosmos3" / "generator" / "audiovisual"


def repo_root() -> Path:
    return Path(__file__).resolve().parent.parent


def assets_dir() -> Path:
    path = repo_root() / NOTEBOOK_DIR / "assets"
    if not path.is_dir():
        raise MediaError(
            f"The cookbook assets are not at {path}. `helpers` must be installed from a clone of the "
            "repository in editable mode: `pip install -e .` in the repository root."
        )
    return path


def asset_path(relative: str) -> Path:
    """Absolute path of a bundled asset such as `images/harbor_crane.png`."""
    path = assets_dir() / relative
    if not path.is_file():
        available = sorted(str(p.relative_to(assets_dir())) for p in assets_dir().rglob("*") if p.is_file())
        raise MediaError(f"No bundled asset {relative!r}. Available: {', '.join(available)}.")
    return path


def notebook_path(name: str) -> Path:
    return repo_root() / NOTEBOOK_DIR / name
