"""`import helpers` is this repository's package (a PyPI project is also called helpers) and is side-effect free."""

import subprocess
import sys
from pathlib import Path

import helpers

REPO = Path(__file__).resolve().parent.parent


def test_import_helpers_resolves_to_this_repository():
    assert Path(helpers.__file__).resolve() == REPO / "helpers" / "__init__.py"


def test_importing_every_module_loads_no_model_and_touches_no_files(tmp_path):
    code = (
        "import sys, os\n"
        "import helpers, helpers.presets, helpers.prompts, helpers.runs, helpers.media, helpers.display,"
        " helpers.loading, helpers.pipeline, helpers.tiny_checkpoint, helpers.environment, helpers.notebooks\n"
        "assert 'torch' not in sys.modules, 'importing helpers must not import torch'\n"
        "assert 'diffusers' not in sys.modules\n"
        "assert os.listdir('.') == [], os.listdir('.')\n"
    )
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "COSMOS3_COOKBOOK_CACHE": str(tmp_path / "cache")}
    subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, check=True)
    assert not (tmp_path / "cache").exists()
