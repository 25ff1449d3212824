"""The tuning package's FP8 switches (`fp8_linears`, `fp8_attention`) and bf16 FlashAttention-3
(`flash_attention_3`). On a CPU: which layers they take, the per-head quantisation the attention kernel is given,
their refusals and skips. On a Hopper GPU (skipped elsewhere): the kernels against bf16 on random data. Their speed
and their effect on a whole video are measured on one GPU by support/benchmarks/fp8_benchmark.py and
support/benchmarks/speed_table.py."""

from __future__ import annotations

import pytest
import torch

from helpers import speeds
from helpers.errors import InvalidSettingError
from tuning import fp8, pipelines
from tuning.pipelines import load_pipeline

hopper = pytest.mark.skipif(
    not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] != 9, reason="needs a Hopper GPU"
)


def test_the_generation_pathway_is_what_fp8_linears_takes():
    pipe = load_pipeline("tiny", device="cpu")[0]
    taken = [n for n, m in pipe.transformer.named_modules() if fp8._is_generation_linear(m, n)]
    layers = len(pipe.transformer.layers)
    assert len(taken) == layers * len(fp8.GENERATION_LINEARS)
    # The text tower (to_q, mlp.*), the embeddings and the heads stay in bf16.
    assert not [n for n in taken if ".mlp." in n or n.endswith(("to_q", "to_k", "to_v", "to_out"))]


def _head_norms(t: torch.Tensor) -> torch.Tensor:
    return t.pow(2).sum(dim=(0, 1, 3)).sqrt()


def test_per_head_scales_keep_each_head_within_float8_precision():
    torch.manual_seed(0)
    x = torch.randn(1, 300, 8, 64)
    x[:, :, 4:] *= 50  # key-value head 1 (query heads 4-7) is 50 times larger: its own scale keeps head 0 precise
    quantized, scale = fp8._per_head_fp8(x, kv_heads=2)
    assert quantized.dtype == torch.float8_e4m3fn and scale.shape == (1, 2)
    back = quantized.float().view(1, 300, 2, 4, 64) * scale[:, None, :, None, None]
    error = _head_norms(back.view_as(x) - x) / _head_norms(x)
    assert float(error.max()) < 0.04, error  # e4m3 keeps 3 mantissa bits: about 2-3 % per value
    assert float(quantized.float().abs().max()) <= fp8.E4M3_MAX


@pytest.mark.parametrize(
    ("value", "attention"),
    [("fp8", "flash_attention_3"), ("fp8_turbo", "flash_attention_3"), ("fp8_attention", "fp8_attention")],
)
def test_off_a_gpu_the_fp8_switches_are_skipped_with_the_reason_and_the_rest_applies(value: str, attention: str):
    pipe = load_pipeline("tiny", device="cpu")[0]
    assert "CUDA GPU" in fp8.linears_unavailable_reason(torch.device("cpu"))
    assert "CUDA GPU" in fp8.attention_unavailable_reason(torch.device("cpu"))
    switches = speeds.switches(value, "tuning")
    on = pipelines.apply(pipe, switches)
    graphs = {"cuda_graphs"} & set(switches)  # CUDA only, and never beside a step cache
    assert set(pipelines.skipped(pipe)) == {"fp8_linears", attention, *graphs}
    assert "compile" in on and "text_kv_cache" in on


@pytest.mark.parametrize(
    ("names", "message"),
    [
        (["fp8_storage", "fp8_linears"], "'fp8_storage' and 'fp8_linears' cannot be combined"),
        (["flash_attention", "fp8_attention"], "'flash_attention' and 'fp8_attention' cannot be combined"),
        (["flash_attention", "flash_attention_3"], "'flash_attention' and 'flash_attention_3' cannot be combined"),
        (["flash_attention_3", "fp8_attention"], "'flash_attention_3' and 'fp8_attention' cannot be combined"),
        (["sea_cache", "nvidia_sea_cache"], "'sea_cache' and 'nvidia_sea_cache' cannot be combined"),
    ],
)
def test_switches_that_replace_the_same_thing_are_refused_together(names, message):
    pipe = load_pipeline("tiny", device="cpu")[0]
    with pytest.raises(InvalidSettingError, match=message):
        pipelines.apply(pipe, names)
    assert pipelines.applied(pipe) == ()


@hopper
def test_fp8_attention_is_close_to_bf16_attention_on_a_hopper_gpu():
    torch.manual_seed(0)
    q = torch.randn(1, 4096, 32, 128, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(1, 4608, 8, 128, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    got = fp8.attention_op()(q, k, v, False, None)
    want = torch.nn.functional.scaled_dot_product_attention(
        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), enable_gqa=True
    ).transpose(1, 2)
    error = float((got.float() - want.float()).norm() / want.float().norm())
    assert got.dtype == torch.bfloat16 and error < 0.05, error


@hopper
def test_flash_attention_3_is_bf16_attention_on_a_hopper_gpu():
    from tuning import flash_attention_3

    torch.manual_seed(0)
    q = torch.randn(1, 4096, 32, 128, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(1, 4608, 8, 128, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    got = flash_attention_3.attention_op()(q, k, v, False, None)
    want = torch.nn.functional.scaled_dot_product_attention(
        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), enable_gqa=True
    ).transpose(1, 2)
    error = float((got.float() - want.float()).norm() / want.float().norm())
    assert got.dtype == torch.bfloat16 and error < 0.01, error


@hopper
def test_fp8_linears_run_float8_products_close_to_bf16_on_a_hopper_gpu():
    torch.manual_seed(0)
    layer = torch.nn.Linear(4096, 4096, bias=False, device="cuda", dtype=torch.bfloat16)
    x = torch.randn(2048, 4096, device="cuda", dtype=torch.bfloat16)
    want = layer(x)

    class Holder(torch.nn.Module):  # the name quantize_generation_linears looks for
        def __init__(self) -> None:
            super().__init__()
            self.layers = torch.nn.ModuleList([torch.nn.Module()])
            self.layers[0].mlp_moe_gen = torch.nn.Module()
            self.layers[0].mlp_moe_gen.up_proj = layer

    class Pipe:
        transformer = Holder()

    assert fp8.quantize_generation_linears(Pipe()) == 1
    got = layer(x)
    error = float((got.float() - want.float()).norm() / want.float().norm())
    assert "Float8" in type(layer.weight).__name__ and error < 0.06, error
