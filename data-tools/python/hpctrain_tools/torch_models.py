"""PyTorch modules that compute what hpctrain's models compute, with the state_dict names
that `hpctrain export` gives their tensors (docs/export.md).

    from hpctrain_tools.torch_models import load_export, resnet18
    model, info = load_export("model.h5")      # an hdf5-layers export, weights loaded
    model = resnet18(in_channels=1, num_classes=10, width=16, stem="small")
    model.load_state_dict(torch.load("model.pt"))   # an export --format pytorch

A module takes what hpctrain's model takes: float32 samples [N, C, H, W] after hpctrain's
conversion (uint8 pixels scaled by 1/255; token ids as float values, [N, 1, 1, T]), and
returns its logits ([N, classes], or [N, T, classes] for a language model). The ResNet
presets use torchvision's layout and names (conv1, bn1, layer1.0.conv1, ...,
layer2.0.downsample.0, fc); the other presets and layer lists are a LayerNet whose children
are named after hpctrain's layers (dense0, conv0, lstm, classifier, ...).
"""
import math

import torch
from torch import nn

RESNET_BLOCKS = {"resnet18": (2, 2, 2, 2), "resnet34": (3, 4, 6, 3)}


class Dense(nn.Linear):
    """hpctrain's dense layer: flattens its input, or with per_step applies to every step of
    a sequence [N, T, F] (every dimension but the last counts steps, as in lstm and gru)."""

    def __init__(self, in_features, units, per_step=False):
        super().__init__(in_features, units)
        self.per_step = per_step

    def forward(self, x):
        if self.per_step:
            return super().forward(x.reshape(x.shape[0], -1, x.shape[-1]))
        return super().forward(torch.flatten(x, 1))


class GlobalAvgPool(nn.Module):
    """The mean of each channel: [N, C, H, W] to [N, C]."""

    def forward(self, x):
        return x.mean(dim=(2, 3))


class Embedding(nn.Embedding):
    """Token ids held as float values (any [N, ...] of T ids) to [N, T, dim]."""

    def forward(self, x):
        return super().forward(x.reshape(x.shape[0], -1).long())


class _Recurrent:
    """The inputs and outputs of hpctrain's recurrent layers, for nn.LSTM and nn.GRU (batch
    first): the input's dims after the batch are steps of its last dim's features (an image
    [1, H, W] is H steps of W); the output is the last layer's last h, or with sequences
    every step's [N, T, units]."""

    def __init__(self, features, units, layers=1, sequences=False):
        super().__init__(features, units, num_layers=layers, batch_first=True)
        self.sequences = sequences

    def forward(self, x):
        out, _ = super().forward(x.reshape(x.shape[0], -1, self.input_size))
        return out if self.sequences else out[:, -1]


class Lstm(_Recurrent, nn.LSTM):
    """hpctrain's lstm layer."""


class Gru(_Recurrent, nn.GRU):
    """hpctrain's gru layer."""


class BasicBlock(nn.Module):
    """ResNet's basic block as torchvision's: relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut),
    the shortcut a 1x1 convolution and BatchNorm (downsample) where the shape changes."""

    def __init__(self, in_channels, filters, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, filters, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(filters)
        self.relu = nn.ReLU()
        self.conv2 = nn.Conv2d(filters, filters, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(filters)
        self.downsample = None
        if stride != 1 or in_channels != filters:
            self.downsample = nn.Sequential(
                nn.Conv2d(in_channels, filters, 1, stride, 0, bias=False), nn.BatchNorm2d(filters))

    def forward(self, x):
        shortcut = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        return self.relu(self.bn2(self.conv2(out)) + shortcut)


class ResNet(nn.Module):
    """hpctrain's resnet18 and resnet34 presets in torchvision's layout: stages of width,
    2x, 4x and 8x channels. stem "imagenet": 7x7 stride-2 convolution and 3x3 stride-2 max
    pooling (torchvision's); "small": a 3x3 stride-1 convolution, no pooling. With width 64,
    3 channels and the imagenet stem the state_dict has the keys and shapes of torchvision's
    resnet18/34 (num_classes as given)."""

    def __init__(self, blocks, in_channels, num_classes, width=64, stem="imagenet"):
        super().__init__()
        if stem not in ("imagenet", "small"):
            raise ValueError(f"stem: expected imagenet or small, got {stem!r}")
        if stem == "small":
            self.conv1 = nn.Conv2d(in_channels, width, 3, 1, 1, bias=False)
        else:
            self.conv1 = nn.Conv2d(in_channels, width, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU()
        self.maxpool = nn.MaxPool2d(3, 2, 1) if stem == "imagenet" else nn.Identity()
        channels = width
        for stage, count in enumerate(blocks):
            filters = width << stage
            stage_blocks = []
            for b in range(count):
                stride = 2 if stage > 0 and b == 0 else 1
                stage_blocks.append(BasicBlock(channels, filters, stride))
                channels = filters
            self.add_module(f"layer{stage + 1}", nn.Sequential(*stage_blocks))
        self.avgpool = GlobalAvgPool()
        self.fc = nn.Linear(channels, num_classes)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(self.avgpool(x))


class LayerNet(nn.Module):
    """Layers run one after the other, each a child named after hpctrain's layer."""

    def __init__(self, layers):
        super().__init__()
        for name, module in layers:
            if not name or "." in name or hasattr(self, name):
                raise ValueError(f"layer name {name!r} cannot name a PyTorch module "
                                 "(rename the layer in model.layers)")
            self.add_module(name, module)

    def forward(self, x):
        for module in self.children():
            x = module(x)
        return x


def resnet18(in_channels, num_classes, width=64, stem="imagenet"):
    return ResNet(RESNET_BLOCKS["resnet18"], in_channels, num_classes, width, stem)


def resnet34(in_channels, num_classes, width=64, stem="imagenet"):
    return ResNet(RESNET_BLOCKS["resnet34"], in_channels, num_classes, width, stem)


def mlp(in_features, hidden, num_classes):
    """The mlp preset: dense0, relu0, dense1, relu1, ..., classifier."""
    layers, inputs = [], in_features
    for i, units in enumerate(hidden):
        layers += [(f"dense{i}", Dense(inputs, units)), (f"relu{i}", nn.ReLU())]
        inputs = units
    return LayerNet(layers + [("classifier", Dense(inputs, num_classes))])


def cnn(input_shape, num_classes):
    """The cnn preset: two 3x3 "same" convolutions (32, 64 filters) with ReLU and 2x2 max
    pooling, a dense layer of 128 with ReLU, the classifier."""
    c, h, w = input_shape
    layers = []
    for i, filters in enumerate((32, 64)):
        layers += [(f"conv{i}", nn.Conv2d(c, filters, 3, 1, 1)), (f"relu{i}", nn.ReLU()),
                   (f"pool{i}", nn.MaxPool2d(2, 2))]
        c, h, w = filters, h // 2, w // 2
    layers += [("flatten", nn.Flatten()), ("dense0", Dense(c * h * w, 128)),
               ("relu2", nn.ReLU()), ("classifier", Dense(128, num_classes))]
    return LayerNet(layers)


class ArchitectureLayer:
    """One `layer NAME TYPE params=P [state=S] out=SHAPE [ATTRIBUTES]` line of an
    architecture (docs/formats.md): `values` holds its key=value attributes, `flags` the
    others (bias, per_step, sequences, projection, ...)."""

    def __init__(self, line):
        words = line.split()
        self.name, self.type = words[1], words[2]
        self.values, self.flags = {}, set()
        for word in words[3:]:
            key, eq, value = word.partition("=")
            if eq:
                self.values[key] = value
            else:
                self.flags.add(word)
        self.params = int(self.values.pop("params"))
        self.state = int(self.values.pop("state", "0"))
        self.out = _dims(self.values.pop("out"))

    def first(self, key):
        """The first number of a HxW attribute (k=3x3: 3)."""
        return int(self.values[key].split("x")[0])


def _dims(text):
    return [int(d) for d in text.split("x")]


def parse_architecture(text):
    """The input shape and the layers of an architecture text (a checkpoint's or an
    export's `architecture` attribute)."""
    input_dims, layers = None, []
    for line in text.splitlines():
        words = line.split()
        if words and words[0] == "input":
            input_dims = _dims(words[1])
        elif words and words[0] == "layer":
            layers.append(ArchitectureLayer(line))
    if input_dims is None or not layers:
        raise ValueError("not an hpctrain architecture (no input line or no layers)")
    return input_dims, layers


def _module(layer, in_dims):
    """The module of one architecture layer whose input has the per-sample shape in_dims."""
    t, out = layer.type, layer.out
    if t == "conv2d":
        return nn.Conv2d(in_dims[0], out[0], layer.first("k"), layer.first("s"), layer.first("p"),
                         bias="bias" in layer.flags)
    if t == "dense":
        per_step = "per_step" in layer.flags
        return Dense(in_dims[-1] if per_step else math.prod(in_dims), out[-1], per_step)
    if t == "relu":
        return nn.ReLU()
    if t in ("maxpool", "avgpool"):
        pool = nn.MaxPool2d if t == "maxpool" else nn.AvgPool2d
        return pool(layer.first("k"), layer.first("s"), layer.first("p"))
    if t == "global_avgpool":
        return GlobalAvgPool()
    if t == "flatten":
        return nn.Flatten()
    if t == "batchnorm":
        norm = nn.BatchNorm2d if len(in_dims) == 3 else nn.BatchNorm1d
        return norm(in_dims[0], eps=float(layer.values["eps"]),
                    momentum=float(layer.values["momentum"]))
    if t == "dropout":
        return nn.Dropout(float(layer.values["p"]))
    if t == "basic_block":
        return BasicBlock(in_dims[0], int(layer.values["filters"]), int(layer.values["s"]))
    if t in ("lstm", "gru"):
        cell = Lstm if t == "lstm" else Gru
        return cell(in_dims[-1], out[-1], int(layer.values["layers"]), "sequences" in layer.flags)
    if t == "embedding":
        return Embedding(layer.params // out[-1], out[-1])
    raise ValueError(f"layer {layer.name}: type {t} has no PyTorch module here")


def build_model(architecture, preset="layers"):
    """The module of an hpctrain model, from its architecture text and model.preset (both
    attributes of an hdf5-layers export; a checkpoint holds the architecture too). Its
    state_dict has the names `hpctrain export` writes, plus BatchNorm's
    num_batches_tracked, which hpctrain does not count. Returned in training mode, as
    PyTorch builds modules: call .eval() before inference."""
    input_dims, layers = parse_architecture(architecture)
    if preset in RESNET_BLOCKS:
        by_name = {layer.name: layer for layer in layers}
        stem = "imagenet" if "stem_pool" in by_name else "small"
        return ResNet(RESNET_BLOCKS[preset], input_dims[0], by_name["classifier"].out[-1],
                      by_name["stem_conv"].out[0], stem)
    modules, dims = [], input_dims
    for layer in layers:
        modules.append((layer.name, _module(layer, dims)))
        dims = layer.out
    return LayerNet(modules)


def export_state_dict(path, model=None):
    """The tensors of an hdf5-layers export as a state_dict (torch tensors, file order).
    With `model`, BatchNorm's num_batches_tracked buffers it has are added as 0, so that
    model.load_state_dict(..., strict=True) takes it."""
    import h5py  # only this helper reads HDF5

    with h5py.File(path, "r") as f:
        group = f["state_dict"]
        state = {name: torch.from_numpy(group[name][()]) for name in f.attrs["tensor_names"]}
    if model is not None:
        for name, buffer in model.state_dict().items():
            if name.endswith(".num_batches_tracked") and name not in state:
                state[name] = torch.zeros_like(buffer)
    return state


def load_export(path):
    """The module of an hdf5-layers export with its weights, in evaluation mode, and the
    file's root attributes as a dict (architecture, preset, input_shape,
    input_preprocessing, class_names, ...)."""
    import h5py

    with h5py.File(path, "r") as f:
        info = {key: value for key, value in f.attrs.items()}
    model = build_model(info["architecture"], info["preset"])
    model.load_state_dict(export_state_dict(path, model), strict=True)
    return model.eval(), info
