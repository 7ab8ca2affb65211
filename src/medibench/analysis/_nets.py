"""Networks defined here so their weights load without torchvision (which breaks diffusers).

* :class:`FIDInceptionV3`: the Inception-v3 of pytorch-fid (the TensorFlow FID graph ported):
  torchvision's layer names, so ``pt_inception-2015-12-05-6726825d.pth`` loads as it is; the
  FID variants of the A, C and E blocks (average pools that do not count padding, a max pool
  in the last block's pool branch), 1,008 classes in ``fc`` (unused: features are the 2,048
  pooled activations).
* :class:`LPIPSNet`: AlexNet or VGG-16 feature layers with torchvision's indices
  (``features.N.weight``), LPIPS v0.1's scaling layer and linear heads (``linN.model.1.weight``).
"""

from __future__ import annotations

from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["FIDInceptionV3", "LPIPSNet", "LPIPS_CHANNELS"]


class _Conv(nn.Module):
    """Convolution without bias, batch norm (eps 0.001), ReLU."""

    def __init__(self, cin: int, cout: int, kernel, stride=1, padding=0) -> None:
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, kernel, stride=stride, padding=padding, bias=False)
        self.bn = nn.BatchNorm2d(cout, eps=0.001)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(self.bn(self.conv(x)))


def _avg(x: torch.Tensor) -> torch.Tensor:
    return F.avg_pool2d(x, 3, stride=1, padding=1, count_include_pad=False)


class _BlockA(nn.Module):
    def __init__(self, cin: int, pool: int) -> None:
        super().__init__()
        self.branch1x1 = _Conv(cin, 64, 1)
        self.branch5x5_1 = _Conv(cin, 48, 1)
        self.branch5x5_2 = _Conv(48, 64, 5, padding=2)
        self.branch3x3dbl_1 = _Conv(cin, 64, 1)
        self.branch3x3dbl_2 = _Conv(64, 96, 3, padding=1)
        self.branch3x3dbl_3 = _Conv(96, 96, 3, padding=1)
        self.branch_pool = _Conv(cin, pool, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b5 = self.branch5x5_2(self.branch5x5_1(x))
        b3 = self.branch3x3dbl_3(self.branch3x3dbl_2(self.branch3x3dbl_1(x)))
        return torch.cat([self.branch1x1(x), b5, b3, self.branch_pool(_avg(x))], 1)


class _BlockB(nn.Module):
    def __init__(self, cin: int) -> None:
        super().__init__()
        self.branch3x3 = _Conv(cin, 384, 3, stride=2)
        self.branch3x3dbl_1 = _Conv(cin, 64, 1)
        self.branch3x3dbl_2 = _Conv(64, 96, 3, padding=1)
        self.branch3x3dbl_3 = _Conv(96, 96, 3, stride=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b3 = self.branch3x3dbl_3(self.branch3x3dbl_2(self.branch3x3dbl_1(x)))
        return torch.cat([self.branch3x3(x), b3, F.max_pool2d(x, 3, stride=2)], 1)


class _BlockC(nn.Module):
    def __init__(self, cin: int, c7: int) -> None:
        super().__init__()
        self.branch1x1 = _Conv(cin, 192, 1)
        self.branch7x7_1 = _Conv(cin, c7, 1)
        self.branch7x7_2 = _Conv(c7, c7, (1, 7), padding=(0, 3))
        self.branch7x7_3 = _Conv(c7, 192, (7, 1), padding=(3, 0))
        self.branch7x7dbl_1 = _Conv(cin, c7, 1)
        self.branch7x7dbl_2 = _Conv(c7, c7, (7, 1), padding=(3, 0))
        self.branch7x7dbl_3 = _Conv(c7, c7, (1, 7), padding=(0, 3))
        self.branch7x7dbl_4 = _Conv(c7, c7, (7, 1), padding=(3, 0))
        self.branch7x7dbl_5 = _Conv(c7, 192, (1, 7), padding=(0, 3))
        self.branch_pool = _Conv(cin, 192, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b7 = self.branch7x7_3(self.branch7x7_2(self.branch7x7_1(x)))
        d = self.branch7x7dbl_1(x)
        for layer in (
            self.branch7x7dbl_2,
            self.branch7x7dbl_3,
            self.branch7x7dbl_4,
            self.branch7x7dbl_5,
        ):
            d = layer(d)
        return torch.cat([self.branch1x1(x), b7, d, self.branch_pool(_avg(x))], 1)


class _BlockD(nn.Module):
    def __init__(self, cin: int) -> None:
        super().__init__()
        self.branch3x3_1 = _Conv(cin, 192, 1)
        self.branch3x3_2 = _Conv(192, 320, 3, stride=2)
        self.branch7x7x3_1 = _Conv(cin, 192, 1)
        self.branch7x7x3_2 = _Conv(192, 192, (1, 7), padding=(0, 3))
        self.branch7x7x3_3 = _Conv(192, 192, (7, 1), padding=(3, 0))
        self.branch7x7x3_4 = _Conv(192, 192, 3, stride=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b3 = self.branch3x3_2(self.branch3x3_1(x))
        b7 = self.branch7x7x3_1(x)
        for layer in (self.branch7x7x3_2, self.branch7x7x3_3, self.branch7x7x3_4):
            b7 = layer(b7)
        return torch.cat([b3, b7, F.max_pool2d(x, 3, stride=2)], 1)


class _BlockE(nn.Module):
    def __init__(self, cin: int, pool: Literal["avg", "max"]) -> None:
        super().__init__()
        self.pool = pool
        self.branch1x1 = _Conv(cin, 320, 1)
        self.branch3x3_1 = _Conv(cin, 384, 1)
        self.branch3x3_2a = _Conv(384, 384, (1, 3), padding=(0, 1))
        self.branch3x3_2b = _Conv(384, 384, (3, 1), padding=(1, 0))
        self.branch3x3dbl_1 = _Conv(cin, 448, 1)
        self.branch3x3dbl_2 = _Conv(448, 384, 3, padding=1)
        self.branch3x3dbl_3a = _Conv(384, 384, (1, 3), padding=(0, 1))
        self.branch3x3dbl_3b = _Conv(384, 384, (3, 1), padding=(1, 0))
        self.branch_pool = _Conv(cin, 192, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b3 = self.branch3x3_1(x)
        b3 = torch.cat([self.branch3x3_2a(b3), self.branch3x3_2b(b3)], 1)
        d = self.branch3x3dbl_2(self.branch3x3dbl_1(x))
        d = torch.cat([self.branch3x3dbl_3a(d), self.branch3x3dbl_3b(d)], 1)
        # pytorch-fid: the first E block pools without counting padding, the last takes a max
        pooled = _avg(x) if self.pool == "avg" else F.max_pool2d(x, 3, stride=1, padding=1)
        return torch.cat([self.branch1x1(x), b3, d, self.branch_pool(pooled)], 1)


class FIDInceptionV3(nn.Module):
    """pytorch-fid's Inception-v3; :meth:`forward` takes images in [-1, 1] (N, 3, 299, 299)
    and returns the (N, 2048) pool features."""

    def __init__(self) -> None:
        super().__init__()
        self.Conv2d_1a_3x3 = _Conv(3, 32, 3, stride=2)
        self.Conv2d_2a_3x3 = _Conv(32, 32, 3)
        self.Conv2d_2b_3x3 = _Conv(32, 64, 3, padding=1)
        self.Conv2d_3b_1x1 = _Conv(64, 80, 1)
        self.Conv2d_4a_3x3 = _Conv(80, 192, 3)
        self.Mixed_5b = _BlockA(192, 32)
        self.Mixed_5c = _BlockA(256, 64)
        self.Mixed_5d = _BlockA(288, 64)
        self.Mixed_6a = _BlockB(288)
        self.Mixed_6b = _BlockC(768, 128)
        self.Mixed_6c = _BlockC(768, 160)
        self.Mixed_6d = _BlockC(768, 160)
        self.Mixed_6e = _BlockC(768, 192)
        self.Mixed_7a = _BlockD(768)
        self.Mixed_7b = _BlockE(1280, "avg")
        self.Mixed_7c = _BlockE(2048, "max")
        self.fc = nn.Linear(2048, 1008)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.Conv2d_2b_3x3(self.Conv2d_2a_3x3(self.Conv2d_1a_3x3(x)))
        x = F.max_pool2d(x, 3, stride=2)
        x = self.Conv2d_4a_3x3(self.Conv2d_3b_1x1(x))
        x = F.max_pool2d(x, 3, stride=2)
        for name in ("5b", "5c", "5d", "6a", "6b", "6c", "6d", "6e", "7a", "7b", "7c"):
            x = getattr(self, f"Mixed_{name}")(x)
        return F.adaptive_avg_pool2d(x, 1).flatten(1)


#: Channels of the five feature layers LPIPS compares, per backbone.
LPIPS_CHANNELS = {"alex": (64, 192, 384, 256, 256), "vgg": (64, 128, 256, 512, 512)}
_SLICES = {"alex": (2, 5, 8, 10, 12), "vgg": (4, 9, 16, 23, 30)}
_VGG16 = (64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512)


def _alexnet_features() -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(3, 64, 11, stride=4, padding=2),
        nn.ReLU(),
        nn.MaxPool2d(3, stride=2),
        nn.Conv2d(64, 192, 5, padding=2),
        nn.ReLU(),
        nn.MaxPool2d(3, stride=2),
        nn.Conv2d(192, 384, 3, padding=1),
        nn.ReLU(),
        nn.Conv2d(384, 256, 3, padding=1),
        nn.ReLU(),
        nn.Conv2d(256, 256, 3, padding=1),
        nn.ReLU(),
    )


def _vgg16_features() -> nn.Sequential:
    layers: list[nn.Module] = []
    cin = 3
    for v in _VGG16:
        if v == "M":
            layers.append(nn.MaxPool2d(2, stride=2))
        else:
            assert isinstance(v, int)
            layers += [nn.Conv2d(cin, v, 3, padding=1), nn.ReLU()]
            cin = v
    return nn.Sequential(*layers)


class _Linear(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.model = nn.Sequential(nn.Dropout(), nn.Conv2d(channels, 1, 1, bias=False))


class LPIPSNet(nn.Module):
    """LPIPS v0.1: :meth:`forward` takes two image batches in [-1, 1] and returns (N,)."""

    def __init__(self, net: Literal["alex", "vgg"]) -> None:
        super().__init__()
        self.net = net
        self.features = _alexnet_features() if net == "alex" else _vgg16_features()
        for i, c in enumerate(LPIPS_CHANNELS[net]):
            self.add_module(f"lin{i}", _Linear(c))
        self.register_buffer("shift", torch.tensor([-0.030, -0.088, -0.188]).view(1, 3, 1, 1))
        self.register_buffer("scale", torch.tensor([0.458, 0.448, 0.450]).view(1, 3, 1, 1))

    def layers(self, x: torch.Tensor) -> list[torch.Tensor]:
        """The five compared activations of ``x`` (already scaled)."""
        out, start = [], 0
        for end in _SLICES[self.net]:
            for i in range(start, end):
                x = self.features[i](x)
            out.append(x)
            start = end
        return out

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        shift, scale = self.get_buffer("shift"), self.get_buffer("scale")
        fa = self.layers((a - shift) / scale)
        fb = self.layers((b - shift) / scale)
        total = torch.zeros(a.shape[0], dtype=a.dtype, device=a.device)
        for i, (x, y) in enumerate(zip(fa, fb, strict=True)):
            nx = x / (torch.sqrt(torch.sum(x**2, dim=1, keepdim=True)) + 1e-10)
            ny = y / (torch.sqrt(torch.sum(y**2, dim=1, keepdim=True)) + 1e-10)
            lin = getattr(self, f"lin{i}").model
            total = total + lin((nx - ny) ** 2).mean(dim=(2, 3)).flatten()
        return total
