"""The diffusers adapters list and check their own options and the shared pipeline options."""

import pytest

from medibench.models import MODELS
from medibench.models._spec import ModelOptionError, ModelSpec, model_options

COMMON = [
    "device",
    "dtype",
    "batch_size",
    "local_files_only",
    "cpu_offload",
    "load_options",
    "lora",
    "lora_scale",
]


@pytest.mark.parametrize(
    "name,own",
    [
        ("ip2p", {"steps": 100, "guidance_scale": 7.5, "resolution": 512, "safety_checker": False}),
        ("flux-kontext", {"steps": 28, "guidance_scale": 2.5, "max_area": 1024 * 1024}),
        ("qwen-image-edit", {"steps": 50, "true_cfg_scale": 4.0, "negative_prompt": " "}),
        ("diffusers", {"steps": 28, "call_options": None, "trust_remote_code": False}),
    ],
)
def test_each_adapter_lists_its_own_options_then_the_shared_ones(name, own):
    options = {o.name: o.default for o in model_options(MODELS.get(name))}
    assert list(options)[-len(COMMON) :] == COMMON
    assert options["name"] == name and options["device"] == "auto" and options["batch_size"] == 1
    assert {k: options[k] for k in own} == own


def test_an_option_of_another_adapter_is_refused_with_the_valid_list():
    with pytest.raises(ModelOptionError, match="no option 'resolution'") as info:
        ModelSpec("flux-kontext", {"resolution": 512}).check_options()
    assert "max_area=1048576" in str(info.value) and "cpu_offload=False" in str(info.value)
    ModelSpec("ip2p", {"resolution": 256, "device": "cpu", "load_options": {}}).check_options()
