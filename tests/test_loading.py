"""MODEL resolution and the errors a user meets before any weights are read."""

import json
import shutil
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

import checkpoints
from checkpoints import random_weights
from checkpoints.resolver import choose_dtype
from helpers.errors import GuardrailsUnavailableError, InvalidSettingError, ModelUnavailableError
from local_server import launcher


def test_unreachable_hub_id_says_how_to_download_and_authenticate(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelUnavailableError) as err:
        checkpoints.resolve("nvidia/Cosmos3-Nano-does-not-exist", guardrails="off", device="cpu")
    message = str(err.value)
    assert "hf auth login" in message and "hf download nvidia/Cosmos3-Nano" in message and "MODEL='tiny'" in message


def test_malformed_model_name_is_reported_the_same_way():
    with pytest.raises(ModelUnavailableError, match="hf download"):
        checkpoints.resolve("not a model id", guardrails="off", device="cpu")


def test_local_folder_without_model_index_is_named(tmp_path):
    with pytest.raises(ModelUnavailableError, match="MODEL=.* no model_index.json"):
        checkpoints.resolve(str(tmp_path), guardrails="off", device="cpu")


def test_a_missing_local_folder_is_about_the_model_not_the_guardrails(monkeypatch, tmp_path):
    # The model is resolved first: a typo in MODEL must not read as "install cosmos_guardrail".
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelUnavailableError, match="no folder at"):
        checkpoints.resolve(str(tmp_path / "no-such-checkpoint"), device="cpu")


@pytest.mark.parametrize("model", ["./cosmos3-missing", "../models/Cosmos3-Nano", "~/no-such/Cosmos3", "a/b/c"])
def test_a_path_that_is_not_there_says_so_and_names_it(model):
    """Tried as a new user would: before, "./cosmos3-missing" answered "Repo id must use alphanumeric chars"."""
    with pytest.raises(ModelUnavailableError) as err:
        checkpoints.resolve(model, guardrails="off", device="cpu")
    message = str(err.value)
    assert f"MODEL={model!r} is written as a path, and there is no folder at" in message
    assert str(Path(model).expanduser().absolute()) in message and "Repo id" not in message


@pytest.mark.parametrize("model", ["./cosmos3-missing", "a/b/c", "C:\\models\\Cosmos3-Nano", "models\\Nano"])
def test_the_server_reads_a_model_name_as_the_notebook_does(model):
    """Both backends resolve MODEL with one resolver: a Windows path is a path for the server too, refused for the
    missing folder it is, not sent to the Hub as an id."""
    with pytest.raises(ModelUnavailableError, match="written as a path"):
        checkpoints.resolve(model, guardrails="off", device="cpu")
    with pytest.raises(ModelUnavailableError, match="written as a path"):
        launcher.command(model, [], gpu=False)


def test_the_guardrail_package_is_checked_before_any_download(monkeypatch):
    """A Hub id with guardrails on: the missing package is reported first, not after a 30 GB download (here the
    download could not even start: offline, nothing cached)."""
    from diffusers.utils import is_cosmos_guardrail_available

    if is_cosmos_guardrail_available():
        pytest.skip("cosmos_guardrail is installed here")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(GuardrailsUnavailableError, match="pip install cosmos_guardrail"):
        checkpoints.resolve("nvidia/Cosmos3-Nano", device="cpu")


def _cached_snapshot(hf_home: Path, repo_id: str, folder: Path) -> Path:
    """A checkpoint laid out in a Hugging Face cache as `hf download` leaves it."""
    repo = hf_home / "hub" / f"models--{repo_id.replace('/', '--')}"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text("0" * 40)
    snapshot = repo / "snapshots" / ("0" * 40)
    shutil.copytree(folder, snapshot)
    return snapshot


def test_a_hub_id_resolves_through_the_hugging_face_cache(monkeypatch, tmp_path):
    import huggingface_hub.constants

    snapshot = _cached_snapshot(tmp_path, "acme/cosmos3-test", random_weights.ensure_tiny_checkpoint())
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    checkpoint = checkpoints.resolve("acme/cosmos3-test", guardrails="off", device="cpu")
    assert (checkpoint.source, Path(checkpoint.path)) == ("hub", snapshot)
    # The server serves the same folder, under the id: a revision (`@fp8`) is the folder it was downloaded to.
    monkeypatch.setenv(launcher.DEVICE_ENV, "cpu")  # a Hub id on a CPU server, asked for on purpose
    command = launcher.command("acme/cosmos3-test", [], gpu=False)
    assert command[2:4] == [str(snapshot), "--omni"] and command[command.index("--served-model-name") + 1] == (
        "acme/cosmos3-test"
    )


class _Hub(BaseHTTPRequestHandler):
    """The Hub's access check as huggingface_hub reads it: 200, or 403 with `X-Error-Code: GatedRepo`."""

    gated: frozenset[str] = frozenset()

    def do_GET(self):  # noqa: N802 - the http.server hook
        repo = self.path.removeprefix("/api/models/").removesuffix("/auth-check")
        status = 403 if repo in self.gated else 200
        body = json.dumps({"error": "Access to this model is restricted."} if status == 403 else {}).encode()
        self.send_response(status)
        if status == 403:
            self.send_header("X-Error-Code", "GatedRepo")
            self.send_header("X-Error-Message", "Access to this model is restricted.")
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def hub(monkeypatch):
    """A loopback endpoint for the Hub's access checks: which repositories are gated is the test's to say."""
    import huggingface_hub.constants
    from huggingface_hub import hf_api

    server = ThreadingHTTPServer(("127.0.0.1", 0), _Hub)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setattr(hf_api.api, "endpoint", f"http://127.0.0.1:{server.server_port}")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    yield lambda *repos: setattr(_Hub, "gated", frozenset(repos))
    server.shutdown()
    _Hub.gated = frozenset()


def test_a_gated_checkpoint_is_reported_before_any_download_with_the_licence_to_accept(hub):
    hub("nvidia/Cosmos3-Nano")
    with pytest.raises(ModelUnavailableError) as err:
        checkpoints.resolve("nvidia/Cosmos3-Nano", guardrails="off", device="cpu")
    message = str(err.value)
    assert "gated" in message and "Accept the licence on https://huggingface.co/nvidia/Cosmos3-Nano" in message


def test_gated_guardrail_models_are_reported_before_the_checkpoint_is_downloaded(hub, monkeypatch):
    import diffusers.utils

    # The package itself is present on a user's machine; only the access to its gated model is missing.
    monkeypatch.setattr(diffusers.utils, "is_cosmos_guardrail_available", lambda: True)
    hub("nvidia/Cosmos-1.0-Guardrail")
    with pytest.raises(GuardrailsUnavailableError) as err:
        checkpoints.resolve("nvidia/Cosmos3-Nano", guardrails="on", device="cpu")
    message = str(err.value)
    assert "https://huggingface.co/nvidia/Cosmos-1.0-Guardrail" in message and 'GUARDRAILS="off"' in message


@pytest.mark.parametrize("model", ["nvidia/Cosmos3-Super-Text2Image-4Step", "nvidia/Cosmos3-Super-Image2Video-4Step"])
def test_a_distilled_hub_id_is_refused_before_any_download_naming_the_pipeline_that_runs_it(model):
    with pytest.raises(InvalidSettingError, match="Cosmos3DistilledModularPipeline"):
        checkpoints.resolve(model, guardrails="off", device="cpu")


def test_guardrails_without_the_package_say_how_to_install_or_turn_them_off(tmp_path):
    from diffusers.utils import is_cosmos_guardrail_available

    if is_cosmos_guardrail_available():
        pytest.skip("cosmos_guardrail is installed here")
    (tmp_path / "model_index.json").write_text("{}")  # a real-looking local checkpoint: guardrails default on
    with pytest.raises(GuardrailsUnavailableError) as err:
        checkpoints.resolve(str(tmp_path), device="cpu")
    assert "pip install cosmos_guardrail" in str(err.value) and 'GUARDRAILS="off"' in str(err.value)


def test_a_guardrails_value_outside_the_choices_lists_them():
    with pytest.raises(InvalidSettingError, match="GUARDRAILS='yes' is not allowed.*'auto', 'on', 'off'"):
        checkpoints.resolve("tiny", guardrails="yes", device="cpu")


def test_asking_for_cuda_without_a_gpu_is_explained():
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with pytest.raises(InvalidSettingError, match="no CUDA GPU"):
        checkpoints.choose_device("cuda")


def test_nano_random_on_a_cpu_is_refused_with_what_it_needs():
    with pytest.raises(InvalidSettingError, match="nano-random.*CUDA GPU.*MODEL='tiny'"):
        checkpoints.resolve("nano-random", device="cpu")


def test_defaults_are_bf16_on_cuda_and_float32_on_cpu():
    import torch

    assert choose_dtype(torch.device("cuda")) == torch.bfloat16
    assert choose_dtype(torch.device("cpu")) == torch.float32


def test_tiny_resolves_to_a_folder_from_pretrained_reads_with_guardrails_off():
    import torch
    from diffusers import Cosmos3OmniPipeline

    checkpoint = checkpoints.resolve("tiny", device="cpu")
    assert (checkpoint.source, checkpoint.dtype, checkpoint.guardrails) == ("random", torch.float32, False)
    pipe = Cosmos3OmniPipeline.from_pretrained(checkpoint.path, dtype=checkpoint.dtype, enable_safety_checker=False)
    assert pipe.safety_checker is None and pipe.transformer.dtype == torch.float32


def test_a_distilled_folder_goes_to_distilled_model_by_what_its_files_name(tmp_path):
    """The faithful distilled checkpoint (its FlowMatchEuler scheduler and distilled modular index), by its tiny name
    and as a local folder: as MODEL, `Cosmos3OmniPipeline` would load it without complaint and make wrong pictures,
    so it is refused with the parameter that takes it; as DISTILLED_MODEL it resolves."""
    with pytest.raises(InvalidSettingError, match="distilled.*Cosmos3DistilledModularPipeline.*DISTILLED_MODEL="):
        checkpoints.resolve("tiny-distilled", device="cpu")
    folder = shutil.copytree(random_weights.ensure_tiny_checkpoint(variant="tiny-distilled"), tmp_path / "super")
    with pytest.raises(InvalidSettingError, match="its folder names Cosmos3DistilledModularPipeline"):
        checkpoints.resolve(str(folder), guardrails="off", device="cpu")
    distilled = checkpoints.resolve(str(folder), device="cpu", guardrails="off", parameter="DISTILLED_MODEL")
    assert distilled.path == str(folder)
    (folder / "modular_model_index.json").unlink()  # a download without the modular index: the scheduler tells
    with pytest.raises(InvalidSettingError, match="its folder names FlowMatchEulerDiscreteScheduler"):
        checkpoints.resolve(str(folder), guardrails="off", device="cpu")


def test_distilled_model_takes_4_step_checkpoints_only_and_says_so_before_any_download():
    from diffusers import Cosmos3DistilledModularPipeline

    checkpoint = checkpoints.resolve("tiny-distilled", device="cpu", parameter="DISTILLED_MODEL")
    pipe = Cosmos3DistilledModularPipeline.from_pretrained(checkpoint.path)
    assert pipe.config["distilled_sigmas"] == [1.0, 0.9375, 0.8333333333333334, 0.625]
    for full in ("tiny", "nvidia/Cosmos3-Nano"):
        with pytest.raises(InvalidSettingError, match=f"DISTILLED_MODEL='{full}' is not a 4-step"):
            checkpoints.check(full, device="cpu", guardrails="off", parameter="DISTILLED_MODEL")
    # A published 4-step checkpoint on a machine without a GPU: the message names the parameter and its offline twin.
    with pytest.raises(ModelUnavailableError, match='DISTILLED_MODEL=.*needs an NVIDIA GPU.*DISTILLED_MODEL = "tiny-'):
        checkpoints.check("nvidia/Cosmos3-Super-Text2Image-4Step", parameter="DISTILLED_MODEL")


@pytest.mark.slow  # imports ModelOpt: seconds
def test_tiny_fp8_is_the_published_fp8_format_and_loads_as_diffusers_loads_it():
    """ModelOpt's FP8 layers in the decoder, its state beside the weights, the published `quantization_config`; loaded
    the published way, it makes nearly tiny's frames (its weights are tiny's, quantised), far closer than a seed."""
    import numpy as np
    import torch
    from diffusers import Cosmos3OmniPipeline
    from diffusers.pipelines.cosmos import mixed_precision

    checkpoint = checkpoints.resolve("tiny-fp8", device="cpu")
    folder = Path(checkpoint.path)
    assert checkpoint.fp8 and (folder / "transformer" / "modelopt_state.pth").is_file()
    config = json.loads((folder / "transformer" / "config.json").read_text())
    assert config["quantization_config"] == random_weights.published()["fp8"]["quantization_config"]
    random_weights.enable_loading()
    quantised = Cosmos3OmniPipeline.from_pretrained(checkpoint.path, dtype=torch.float32, enable_safety_checker=False)
    quantized = [n for n, m in quantised.transformer.named_modules() if mixed_precision._is_modelopt_fp8_linear(m)]
    assert quantized and all(n.startswith("layers.") for n in quantized)
    for name in quantized:  # one tensorwise scale each, as diffusers' mixed precision requires
        mixed_precision._validate_modelopt_fp8_linear(name, quantised.transformer.get_submodule(name))
    tiny = checkpoints.resolve("tiny", device="cpu")
    bf16 = Cosmos3OmniPipeline.from_pretrained(tiny.path, enable_safety_checker=False)

    def frames(pipe, seed):
        out = pipe(
            prompt="A red ball.",
            num_frames=9,
            height=96,
            width=160,
            num_inference_steps=2,
            generator=torch.Generator("cpu").manual_seed(seed),
            output_type="np",
        )
        return np.asarray(out.video, dtype=np.float32) * 255

    reference = frames(bf16, 0)
    quantisation = float(np.abs(frames(quantised, 0) - reference).mean())
    seed = float(np.abs(frames(bf16, 1) - reference).mean())
    assert 0 < quantisation < seed / 4, (quantisation, seed)
    with pytest.raises(InvalidSettingError, match="a call of 8 steps has FP8 matrix products, which ModelOpt runs"):
        checkpoint.check_steps([2, 8])
