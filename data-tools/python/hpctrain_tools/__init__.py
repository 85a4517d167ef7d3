"""hpctrain's Python tools, started by the hpctrain program: `hpctrain study` (the scaling
study driver), `hpctrain plot` (PNG plots of runs, studies and all-reduce benchmarks),
`hpctrain scaling` (the alpha-beta scaling model), see docs/study.md, and `hpctrain export
--format pytorch|onnx`, whose PyTorch modules (torch_models) users import too, see
docs/export.md."""
