"""hpctrain's Python tools, started by the hpctrain program: `hpctrain study` (the scaling
study driver), `hpctrain plot` (PNG plots of runs, studies and all-reduce benchmarks) and
`hpctrain scaling` (the alpha-beta scaling model). See docs/study.md."""
