"""Where the cookbook's bundled prompts, images and videos live, resolved without depending on the cwd."""

from __future__ import annotations

from pathlib import Path

from helpers.errors import MediaError

GENERATOR_DIR = Path("cookbooks") / "cosmos3" / "generator"
FAMILIES = ("audiovisual", "action", "transfer", "dataset", "post_training")


def repo_root() -> Path:
    return Path(__file__).resolve().parent.parent


def _family_dir(family: str) -> Path:
    if family not in FAMILIES:
        raise MediaError(f"No cookbook family {family!r}. Families: {', '.join(FAMILIES)}.")
    return repo_root() / GENERATOR_DIR / family


def assets_dir(family: str = "audiovisual") -> Path:
    """The bundled assets of one cookbook family."""
    path = _family_dir(family) / "assets"
    if not path.is_dir():
        raise MediaError(
            f"The cookbook assets are not at {path}. `helpers` must be installed from a clone of the "
            "repository in editable mode: `pip install -e .` in the repository root."
        )
    return path


def asset_path(relative: str, family: str = "audiovisual") -> Path:
    """Absolute path of a bundled asset such as `images/harbor_crane.png`."""
    folder = assets_dir(family)
    path = folder / relative
    if not path.is_file():
        available = sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())
        raise MediaError(f"No bundled asset {relative!r}. Available: {', '.join(available)}.")
    return path


def notebook_path(name: str) -> Path:
    """A notebook by its path under the family folders (`action/run_with_diffusers.ipynb`); a bare name is an
    audiovisual one."""
    family, _, file = name.rpartition("/")
    return _family_dir(family or "audiovisual") / file
