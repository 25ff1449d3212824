"""MODEL resolution and the errors a user meets before any generation."""

import pytest

from helpers import loading
from helpers.errors import GuardrailsUnavailableError, ModelUnavailableError


def test_unreachable_hub_id_says_how_to_download_and_authenticate(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelUnavailableError) as err:
        loading.load_pipeline("nvidia/Cosmos3-Nano-does-not-exist", guardrails=False, device="cpu")
    message = str(err.value)
    assert "hf auth login" in message and "hf download nvidia/Cosmos3-Nano" in message and "MODEL='tiny'" in message


def test_malformed_model_name_is_reported_the_same_way():
    with pytest.raises(ModelUnavailableError, match="hf download"):
        loading.load_pipeline("not a model id", guardrails=False, device="cpu")


def test_local_folder_without_model_index_is_named(tmp_path):
    with pytest.raises(ModelUnavailableError, match="no model_index.json"):
        loading.load_pipeline(str(tmp_path), guardrails=False, device="cpu")


def test_guardrails_without_the_package_say_how_to_install_or_turn_them_off():
    from diffusers.utils import is_cosmos_guardrail_available

    if is_cosmos_guardrail_available():
        pytest.skip("cosmos_guardrail is installed here")
    with pytest.raises(GuardrailsUnavailableError) as err:
        loading.load_pipeline("nvidia/Cosmos3-Nano", device="cpu")
    assert "pip install cosmos_guardrail" in str(err.value) and 'GUARDRAILS="off"' in str(err.value)


def test_asking_for_cuda_without_a_gpu_is_explained():
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with pytest.raises(ModelUnavailableError, match="no CUDA GPU"):
        loading.choose_device("cuda")


def test_defaults_are_bf16_on_cuda_and_float32_on_cpu():
    import torch

    assert loading.choose_dtype(torch.device("cuda")) == torch.bfloat16
    assert loading.choose_dtype(torch.device("cpu")) == torch.float32
    with pytest.raises(ModelUnavailableError, match="bfloat16"):
        loading.choose_dtype(torch.device("cpu"), "int4")


def test_memory_switches_are_applied_while_loading_so_weights_never_all_move_first():
    from helpers import presets, speed

    low = presets.get_preset("low_vram").speedups
    pipe, _ = loading.load_pipeline("tiny", device="cpu", progress=False, speedups=low)
    assert speed.applied(pipe) == speed.check(low)
    plain, _ = loading.load_pipeline("tiny", device="cpu", progress=False, speedups=presets.get_preset("fast").speedups)
    assert speed.applied(plain) == ()  # compute switches wait for the first generation


def test_progress_false_hides_the_loading_bar_and_restores_the_global_switch(capsys):
    from diffusers.utils import logging as diffusers_logging

    loading.load_pipeline("tiny", device="cpu", progress=False)
    assert "Loading pipeline components" not in capsys.readouterr().err
    assert diffusers_logging.is_progress_bar_enabled()
    loading.load_pipeline("tiny", device="cpu", progress=True)
    assert "Loading pipeline components" in capsys.readouterr().err
