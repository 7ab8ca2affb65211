"""OpenCLIP's towers written in torch, with OpenCLIP's parameter names, meeting the tower
contract of :mod:`medibench.prompt_tuning._towers` (OpenCLIP itself needs torchvision, which
medibench's torch pin excludes).

Following OpenCLIP 3.x (``open_clip/transformer.py``, ``modified_resnet.py``,
``timm_model.py``, ``hf_model.py``) and OpenAI's ``clip/model.py``:

* :class:`TextTransformer`: CLIP's causal text transformer (token + learned position
  embeddings, pre-norm residual blocks of ``nn.MultiheadAttention`` and a ``c_fc``/``c_proj``
  MLP, ``ln_final``, pooled at the end-of-text token, ``@ text_projection``);
* :class:`VisionTransformer`: CLIP's ViT (``conv1`` patches, class token, position embeddings,
  ``ln_pre``, blocks, ``ln_post`` on the class token, ``@ proj``);
* :class:`ModifiedResNet`: the ResNet of CLIP's RN50/RN101 (three-convolution stem, average-
  pool anti-aliased bottlenecks, attention pooling); it takes no prompts;
* :class:`TimmVisionTransformer`: the timm ViT trunk of BiomedCLIP (``patch_embed.proj``,
  ``cls_token``, ``pos_embed``, fused-``qkv`` blocks with LayerNorm eps 1e-6, ``norm``, the
  class token) and its linear ``head.proj``;
* :class:`BertTextTower`: a ``transformers`` BERT (no pooler) pooled at ``[CLS]`` with
  OpenCLIP's ``mlp`` or ``linear`` projection; padding is masked as OpenCLIP masks it.

Only the settings MVC-Bench's backbones use are built (learned position embeddings, class-token
pooling, no layer scale, no attentional pooler); a config asking for another is refused by the
loader (:mod:`._openclip`).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from medibench.prompt_tuning._towers import _replace

__all__ = [
    "BertTextTower",
    "ModifiedResNet",
    "TextTransformer",
    "TimmVisionTransformer",
    "VisionTransformer",
]


class QuickGELU(nn.Module):
    """``x * sigmoid(1.702 x)``, the activation OpenAI's CLIP models were trained with."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.sigmoid(1.702 * x)


class _Mlp(nn.Sequential):
    def __init__(self, width: int, hidden: int, act: nn.Module) -> None:
        super().__init__(
            OrderedDict(
                [
                    ("c_fc", nn.Linear(width, hidden)),
                    ("gelu", act),
                    ("c_proj", nn.Linear(hidden, width)),
                ]
            )
        )


class _Block(nn.Module):
    """``x + attn(ln_1(x))``, then ``x + mlp(ln_2(x))`` (batch first)."""

    def __init__(self, width: int, heads: int, mlp_ratio: float, quick_gelu: bool) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(width)
        self.attn = nn.MultiheadAttention(width, heads, batch_first=True)
        self.ln_2 = nn.LayerNorm(width)
        self.mlp = _Mlp(width, int(width * mlp_ratio), QuickGELU() if quick_gelu else nn.GELU())

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        y = self.ln_1(x)
        x = x + self.attn(y, y, y, need_weights=False, attn_mask=mask)[0]
        return x + self.mlp(self.ln_2(x))


class _Transformer(nn.Module):
    def __init__(self, width: int, layers: int, heads: int, mlp_ratio: float, quick: bool) -> None:
        super().__init__()
        self.resblocks = nn.ModuleList(
            [_Block(width, heads, mlp_ratio, quick) for _ in range(layers)]
        )


class TextTransformer(nn.Module):
    """CLIP's text tower (module doc); ``pool_index`` is the end-of-text position per row."""

    def __init__(
        self,
        *,
        context_length,
        vocab_size,
        width,
        heads,
        layers,
        embed_dim,
        mlp_ratio=4.0,
        quick_gelu=False,
    ) -> None:
        super().__init__()
        self.token_embedding = nn.Embedding(vocab_size, width)
        self.positional_embedding = nn.Parameter(torch.zeros(context_length, width))
        self.transformer = _Transformer(width, layers, heads, mlp_ratio, quick_gelu)
        self.ln_final = nn.LayerNorm(width)
        self.text_projection = nn.Parameter(torch.zeros(width, embed_dim))
        self.width, self.depth, self.max_length, self.pad_to_max = (
            width,
            layers,
            context_length,
            False,
        )

    def embed(self, ids: torch.Tensor) -> torch.Tensor:
        return self.token_embedding(ids)

    def forward(self, embeds, pool_index, deep: Sequence[torch.Tensor] | None = None, ctx_start=0):
        n, length, _ = embeds.shape
        h = embeds + self.positional_embedding[:length]
        mask = torch.full((length, length), float("-inf"), dtype=h.dtype, device=h.device).triu(1)
        for j, block in enumerate(self.transformer.resblocks):
            if deep is not None and 0 < j <= len(deep):
                h = _replace(h, deep[j - 1], ctx_start)
            h = block(h, mask)
        h = self.ln_final(h)
        return h[torch.arange(n), pool_index] @ self.text_projection


class _ImageTower(nn.Module):
    """Preprocessing shared by the image towers: OpenCLIP's ``image_transform`` at test time
    (resize the shorter side bicubic, centre crop, scale to [0, 1], normalise)."""

    image_size: int
    mean: tuple[float, ...]
    std: tuple[float, ...]
    takes_prompts = True

    def preprocess(self, images: Sequence[np.ndarray]) -> torch.Tensor:
        from PIL import Image

        size = self.image_size
        out = []
        for array in images:
            img = Image.fromarray(np.asarray(array, dtype=np.uint8)).convert("RGB")
            w, h = img.size
            scale = size / min(w, h)
            img = img.resize(
                (max(size, round(w * scale)), max(size, round(h * scale))), Image.Resampling.BICUBIC
            )
            left, top = (img.size[0] - size) // 2, (img.size[1] - size) // 2
            img = img.crop((left, top, left + size, top + size))
            out.append(torch.from_numpy(np.asarray(img, dtype=np.float32) / 255.0).permute(2, 0, 1))
        pixels = torch.stack(out)
        mean = torch.tensor(self.mean).view(1, 3, 1, 1)
        return (pixels - mean) / torch.tensor(self.std).view(1, 3, 1, 1)


def _append_prompts(h: torch.Tensor, prompts: torch.Tensor | None) -> tuple[torch.Tensor, int]:
    if prompts is None:
        return h, 0
    p = prompts.expand(h.shape[0], -1, -1) if prompts.dim() == 2 else prompts
    return torch.cat([h, p.to(h.dtype)], dim=1), prompts.shape[-2]


class VisionTransformer(_ImageTower):
    """CLIP's ViT image tower (module doc); prompts are appended after the position embeddings,
    before ``ln_pre``, as MaPLe's code does."""

    def __init__(
        self,
        *,
        image_size,
        patch_size,
        width,
        layers,
        heads,
        embed_dim,
        mean,
        std,
        mlp_ratio=4.0,
        quick_gelu=False,
    ) -> None:
        super().__init__()
        grid = image_size // patch_size
        self.conv1 = nn.Conv2d(3, width, patch_size, stride=patch_size, bias=False)
        self.class_embedding = nn.Parameter(torch.zeros(width))
        self.positional_embedding = nn.Parameter(torch.zeros(grid * grid + 1, width))
        self.ln_pre = nn.LayerNorm(width)
        self.transformer = _Transformer(width, layers, heads, mlp_ratio, quick_gelu)
        self.ln_post = nn.LayerNorm(width)
        self.proj = nn.Parameter(torch.zeros(width, embed_dim))
        self.image_size, self.mean, self.std = image_size, tuple(mean), tuple(std)
        self.width, self.depth = width, layers

    def forward(self, pixels, prompts=None, deep: Sequence[torch.Tensor] | None = None):
        x = self.conv1(pixels).flatten(2).transpose(1, 2)
        cls = self.class_embedding.to(x.dtype).expand(x.shape[0], 1, -1)
        h = torch.cat([cls, x], dim=1) + self.positional_embedding.to(x.dtype)
        h, n_prompt = _append_prompts(h, prompts)
        h = self.ln_pre(h)
        for j, block in enumerate(self.transformer.resblocks):
            if deep is not None and n_prompt and 0 < j <= len(deep):
                h = _replace(h, deep[j - 1], h.shape[1] - n_prompt)
            h = block(h)
        return self.ln_post(h[:, 0]) @ self.proj


class _Bottleneck(nn.Module):
    def __init__(self, inplanes: int, planes: int, stride: int = 1) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.avgpool = nn.AvgPool2d(stride) if stride > 1 else nn.Identity()
        self.conv3 = nn.Conv2d(planes, planes * 4, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(planes * 4)
        self.downsample: nn.Module | None = None
        if stride > 1 or inplanes != planes * 4:
            self.downsample = nn.Sequential(
                OrderedDict(
                    [
                        ("-1", nn.AvgPool2d(stride)),
                        ("0", nn.Conv2d(inplanes, planes * 4, 1, bias=False)),
                        ("1", nn.BatchNorm2d(planes * 4)),
                    ]
                )
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.avgpool(F.relu(self.bn2(self.conv2(out))))
        out = self.bn3(self.conv3(out))
        identity = x if self.downsample is None else self.downsample(x)
        return F.relu(out + identity)


class _AttentionPool(nn.Module):
    def __init__(self, spatial: int, dim: int, heads: int, out: int) -> None:
        super().__init__()
        self.positional_embedding = nn.Parameter(torch.zeros(spatial * spatial + 1, dim))
        self.k_proj, self.q_proj, self.v_proj = (nn.Linear(dim, dim) for _ in range(3))
        self.c_proj = nn.Linear(dim, out)
        self.heads = heads

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.flatten(2).transpose(1, 2)  # (B, HW, C)
        x = torch.cat([x.mean(dim=1, keepdim=True), x], dim=1) + self.positional_embedding
        b, n, c = x.shape
        d = c // self.heads
        q = self.q_proj(x[:, :1]).view(b, 1, self.heads, d).transpose(1, 2)
        k = self.k_proj(x).view(b, n, self.heads, d).transpose(1, 2)
        v = self.v_proj(x).view(b, n, self.heads, d).transpose(1, 2)
        out = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, c)
        return self.c_proj(out)


class ModifiedResNet(_ImageTower):
    """CLIP's ResNet image tower (module doc)."""

    takes_prompts = False

    def __init__(self, *, layers, width, heads, image_size, embed_dim, mean, std) -> None:
        super().__init__()
        half = width // 2
        self.conv1 = nn.Conv2d(3, half, 3, stride=2, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(half)
        self.conv2 = nn.Conv2d(half, half, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(half)
        self.conv3 = nn.Conv2d(half, width, 3, padding=1, bias=False)
        self.bn3 = nn.BatchNorm2d(width)
        self.avgpool = nn.AvgPool2d(2)
        inplanes = width
        for i, blocks in enumerate(layers):
            planes = width * 2**i
            stages = [_Bottleneck(inplanes, planes, 1 if i == 0 else 2)]
            stages += [_Bottleneck(planes * 4, planes) for _ in range(1, blocks)]
            inplanes = planes * 4
            setattr(self, f"layer{i + 1}", nn.Sequential(*stages))
        self.attnpool = _AttentionPool(image_size // 32, width * 32, heads, embed_dim)
        self.image_size, self.mean, self.std = image_size, tuple(mean), tuple(std)
        self.width, self.depth = width * 32, 0

    def forward(self, pixels, prompts=None, deep=None):
        if prompts is not None or deep:
            raise ValueError("a ResNet image tower takes no prompts (MaPLe, PromptSRC, HiCroPL)")
        x = F.relu(self.bn1(self.conv1(pixels)))
        x = F.relu(self.bn2(self.conv2(x)))
        x = self.avgpool(F.relu(self.bn3(self.conv3(x))))
        for i in range(1, 5):
            x = getattr(self, f"layer{i}")(x)
        return self.attnpool(x)


class _TimmAttention(nn.Module):
    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.qkv = nn.Linear(width, width * 3)
        self.proj = nn.Linear(width, width)
        self.heads = heads

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, c = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        out = F.scaled_dot_product_attention(q, k, v)
        return self.proj(out.transpose(1, 2).reshape(b, n, c))


class _TimmBlock(nn.Module):
    def __init__(self, width: int, heads: int, mlp_ratio: float) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(width, eps=1e-6)
        self.attn = _TimmAttention(width, heads)
        self.norm2 = nn.LayerNorm(width, eps=1e-6)
        hidden = int(width * mlp_ratio)
        self.mlp = _TimmMlp(width, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class _TimmMlp(nn.Module):
    def __init__(self, width: int, hidden: int) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(width, hidden), nn.Linear(hidden, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.gelu(self.fc1(x)))


class TimmVisionTransformer(_ImageTower):
    """The timm ViT trunk with OpenCLIP's linear head (module doc); prompts are appended after
    the position embeddings."""

    def __init__(
        self, *, image_size, patch_size, width, layers, heads, embed_dim, mean, std, mlp_ratio=4.0
    ) -> None:
        super().__init__()
        grid = image_size // patch_size
        self.trunk = nn.Module()
        self.trunk.patch_embed = nn.Module()
        self.trunk.patch_embed.proj = nn.Conv2d(3, width, patch_size, stride=patch_size)
        self.trunk.cls_token = nn.Parameter(torch.zeros(1, 1, width))
        self.trunk.pos_embed = nn.Parameter(torch.zeros(1, grid * grid + 1, width))
        self.trunk.blocks = nn.ModuleList(
            [_TimmBlock(width, heads, mlp_ratio) for _ in range(layers)]
        )
        self.trunk.norm = nn.LayerNorm(width, eps=1e-6)
        self.head = nn.ModuleDict({"proj": nn.Linear(width, embed_dim, bias=False)})
        self.image_size, self.mean, self.std = image_size, tuple(mean), tuple(std)
        self.width, self.depth = width, layers

    def forward(self, pixels, prompts=None, deep: Sequence[torch.Tensor] | None = None):
        t: Any = self.trunk
        x = t.patch_embed.proj(pixels).flatten(2).transpose(1, 2)
        h = torch.cat([t.cls_token.expand(x.shape[0], -1, -1), x], dim=1) + t.pos_embed
        h, n_prompt = _append_prompts(h, prompts)
        for j, block in enumerate(t.blocks):
            if deep is not None and n_prompt and 0 < j <= len(deep):
                h = _replace(h, deep[j - 1], h.shape[1] - n_prompt)
            h = block(h)
        return self.head["proj"](t.norm(h)[:, 0])


class BertTextTower(nn.Module):
    """A BERT text tower pooled at ``[CLS]`` (module doc). ``pool_index`` is the last real
    token of each row (``[SEP]``); the positions after it are padding and are masked."""

    def __init__(self, config: Any, embed_dim: int, proj_type: str) -> None:
        super().__init__()
        import transformers

        config._attn_implementation = "eager"
        self.transformer = transformers.BertModel(config, add_pooling_layer=False)
        d = config.hidden_size
        if proj_type == "mlp":
            hidden = (d + embed_dim) // 2
            self.proj: nn.Module = nn.Sequential(
                nn.Linear(d, hidden, bias=False),
                nn.GELU(),
                nn.Linear(hidden, embed_dim, bias=False),
            )
        elif proj_type == "linear":
            self.proj = nn.Linear(d, embed_dim, bias=False)
        else:
            self.proj = nn.Identity()
        self.width, self.depth = d, config.num_hidden_layers
        self.max_length, self.pad_to_max = config.max_position_embeddings, False

    def embed(self, ids: torch.Tensor) -> torch.Tensor:
        return self.transformer.embeddings.word_embeddings(ids)

    def forward(self, embeds, pool_index, deep: Sequence[torch.Tensor] | None = None, ctx_start=0):
        n, length, _ = embeds.shape
        h = self.transformer.embeddings(inputs_embeds=embeds)
        keep = torch.arange(length, device=h.device)[None, :] <= pool_index[:, None]
        mask = torch.zeros(n, 1, length, length, dtype=h.dtype, device=h.device)
        mask = mask.masked_fill(~keep[:, None, None, :], torch.finfo(h.dtype).min)
        for j, layer in enumerate(self.transformer.encoder.layer):
            if deep is not None and 0 < j <= len(deep):
                h = _replace(h, deep[j - 1], ctx_start)
            h = layer(h, attention_mask=mask)
        return self.proj(h[:, 0])
