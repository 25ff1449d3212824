"""MODEL resolution and the errors a user meets before any weights are read."""

import pytest

from helpers.errors import GuardrailsUnavailableError, InvalidSettingError, ModelUnavailableError
from helpers.with_diffusers import loading


def test_unreachable_hub_id_says_how_to_download_and_authenticate(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelUnavailableError) as err:
        loading.resolve("nvidia/Cosmos3-Nano-does-not-exist", guardrails="off", device="cpu")
    message = str(err.value)
    assert "hf auth login" in message and "hf download nvidia/Cosmos3-Nano" in message and "MODEL='tiny'" in message


def test_malformed_model_name_is_reported_the_same_way():
    with pytest.raises(ModelUnavailableError, match="hf download"):
        loading.resolve("not a model id", guardrails="off", device="cpu")


def test_local_folder_without_model_index_is_named(tmp_path):
    with pytest.raises(ModelUnavailableError, match="MODEL=.* no model_index.json"):
        loading.resolve(str(tmp_path), guardrails="off", device="cpu")


def test_a_missing_local_folder_is_about_the_model_not_the_guardrails(monkeypatch, tmp_path):
    # The model is resolved first: a typo in MODEL must not read as "install cosmos_guardrail".
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelUnavailableError, match="Could not load MODEL"):
        loading.resolve(str(tmp_path / "no-such-checkpoint"), device="cpu")


def test_guardrails_without_the_package_say_how_to_install_or_turn_them_off(tmp_path):
    from diffusers.utils import is_cosmos_guardrail_available

    if is_cosmos_guardrail_available():
        pytest.skip("cosmos_guardrail is installed here")
    (tmp_path / "model_index.json").write_text("{}")  # a real-looking local checkpoint: guardrails default on
    with pytest.raises(GuardrailsUnavailableError) as err:
        loading.resolve(str(tmp_path), device="cpu")
    assert "pip install cosmos_guardrail" in str(err.value) and 'GUARDRAILS="off"' in str(err.value)


def test_a_guardrails_value_outside_the_choices_lists_them():
    with pytest.raises(InvalidSettingError, match="GUARDRAILS='yes' is not allowed.*'auto', 'on', 'off'"):
        loading.resolve("tiny", guardrails="yes", device="cpu")


def test_asking_for_cuda_without_a_gpu_is_explained():
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with pytest.raises(InvalidSettingError, match="no CUDA GPU"):
        loading.choose_device("cuda")


def test_nano_random_on_a_cpu_is_refused_with_what_it_needs():
    with pytest.raises(InvalidSettingError, match="nano-random.*CUDA GPU.*MODEL='tiny'"):
        loading.resolve("nano-random", device="cpu")


def test_defaults_are_bf16_on_cuda_and_float32_on_cpu():
    import torch

    assert loading.choose_dtype(torch.device("cuda")) == torch.bfloat16
    assert loading.choose_dtype(torch.device("cpu")) == torch.float32


def test_tiny_resolves_to_a_folder_from_pretrained_reads_with_guardrails_off():
    import torch
    from diffusers import Cosmos3OmniPipeline

    checkpoint = loading.resolve("tiny", device="cpu")
    assert (checkpoint.source, checkpoint.dtype, checkpoint.guardrails) == ("tiny", torch.float32, False)
    pipe = Cosmos3OmniPipeline.from_pretrained(checkpoint.path, dtype=checkpoint.dtype, enable_safety_checker=False)
    assert pipe.safety_checker is None and pipe.transformer.dtype == torch.float32
