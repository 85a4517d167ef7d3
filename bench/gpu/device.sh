#!/usr/bin/env bash
# Runs hpctrain's GPU checks and benchmarks on a GPU machine that has no Debian
# packages of its own (such as an H100/H200 image where CUDA, cuDNN and NCCL come from
# PyTorch's Python packages). Binaries and the Debian libraries they need are
# built and packed on the Debian machine by bench/gpu/make_kit.sh into KIT:
#   KIT/bin/{hpctrain,hpctrain-data,ht_gpu_tests,ht_gpu_mixed_tests,mpiexec.hydra,h5dump,
#            hydra_pmi_proxy}
#   KIT/lib/hpctrain/libhpctrain_cuda.so  (the CUDA backend, loaded by the programs)
#   KIT/libs.tar.xz  (MPICH, HDF5, yaml-cpp, OpenBLAS and their dependencies)
#   KIT/fmnist/*.xz  (Fashion-MNIST IDX files, xz: the kit and the tree must fit 64 MiB)
#   KIT/share/hpctrain (the Python tools of hpctrain study, plot and scaling)
#
#   bench/gpu/device.sh STAGE...   stages: env tests fmnist resnet lstm study seeds e2e nccl
#                                  allreduce profile kernels probe
# Logs, summaries and a table go to $OUT (default /tmp/hpctrain-gpu-out); the table
# (OUT/table.txt) is printed last. DEADLINE (seconds from the start, optional) fits one
# device call: a stage or step that would start after it is skipped, and each step's
# timeout is cut to what is left, so the logs are packed in time. Without a CUDA device
# seen by hpctrain (stage env), the stages after env are skipped.
set -uo pipefail
KIT=${KIT:-.dev}
OUT=${OUT:-/tmp/hpctrain-gpu-out}
WORK=${WORK:-/tmp/hpctrain-gpu}
mkdir -p "$OUT/logs" "$WORK"
TABLE=$OUT/table.txt
KIT=$(cd "$KIT" && pwd)
REPO=$(pwd)

note() { echo "$*" | tee -a "$TABLE"; }

# tmo SECONDS COMMAND...: timeout (TERM, then KILL 10 s later: a rank stuck in the driver or
# a program that handles TERM ends too), cut so that the KILL comes before DEADLINE; 124
# without running COMMAND when less than 20 s is left.
tmo() {
  local t=$1
  shift
  if [[ -n ${DEADLINE:-} ]]; then
    local left=$((DEADLINE - SECONDS))
    if ((left < 20)); then
      echo "skipped, past DEADLINE: $*" >&2
      return 124
    fi
    ((t > left - 15)) && t=$((left - 15))
  fi
  timeout -k 10 "$t" "$@"
}

setup() {
  if [[ ! -d $WORK/lib ]]; then tar xJf "$KIT/libs.tar.xz" -C "$WORK"; fi
  local nv cuda_dirs
  nv=$(python3 -c 'import nvidia, os; print(list(nvidia.__path__)[0])')
  cuda_dirs=$(find "$nv" -name 'lib*.so*' -printf '%h\n' | sort -u | paste -sd:)
  export LD_LIBRARY_PATH=$cuda_dirs:$WORK/lib
  export PATH=$KIT/bin:$PATH
  export OPENBLAS_NUM_THREADS=1
}

stage_env() {
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv | tee -a "$TABLE"
  note "host: $(nproc) cores, $(uname -r)"
  ldd "$KIT/lib/hpctrain/libhpctrain_cuda.so" | grep -E 'not found|cudnn|cublas|nccl|cudart' |
    tee -a "$TABLE"
  hpctrain --version 2>&1 | tee -a "$TABLE"
  if ! hpctrain --version 2>&1 | grep -q 'CUDA devices: [1-9]'; then
    note "hpctrain sees no CUDA device: the stages after env are skipped"
    NO_GPU="no CUDA device"
  fi
  python3 -c 'import torch; print("torch", torch.__version__, "cudnn", torch.backends.cudnn.version())' |
    tee -a "$TABLE"
}

# The recurrent tests (cuDNN's RNN API, not yet run on a GPU) go last, on their own: a
# device fault there leaves the CUDA context unusable and would fail every test after it.
stage_tests() {
  local rnn='*Recurrent*:*LanguageModel*:CudaRnn.*' run t name filter rc log
  for run in "ht_gpu_tests ht_gpu_tests -$rnn" "ht_gpu_mixed_tests ht_gpu_mixed_tests *" \
    "ht_gpu_tests ht_gpu_tests_rnn $rnn"; do
    read -r t name filter <<<"$run"
    log=$OUT/logs/$name.log
    tmo 300 "$t" --gtest_color=no --gtest_filter="$filter" >"$log" 2>&1
    rc=$?
    grep -E '^\[  (FAILED|PASSED) |tests ran|error against float32|gradient error' "$log" |
      sort -u | tee -a "$TABLE"
    note "$t --gtest_filter=$filter: exit $rc"
    grep -B2 -A12 'Failure' "$log" | head -80
  done
}

# One training run: NAME RANKS CONFIG [--set ...]; the summary lands in OUT/logs.
train() {
  local name=$1 ranks=$2 config=$3
  shift 3
  local dir=$WORK/runs/$name
  rm -rf "$dir"
  local t0=$SECONDS
  tmo 400 mpiexec.hydra -n "$ranks" hpctrain train "$config" --set run.dir="$dir" \
    --set checkpoint.every_seconds=0 --set checkpoint.at_epoch_end=false --resume never "$@" \
    >"$OUT/logs/$name.log" 2>&1
  local rc=$?
  tail -n 4 "$OUT/logs/$name.log"
  cp "$dir/summary.json" "$OUT/logs/$name.summary.json" 2>/dev/null
  cp "$dir/metrics.csv" "$OUT/logs/$name.metrics.csv" 2>/dev/null
  python3 - "$dir" "$name" "$rc" "$((SECONDS - t0))" <<'EOF' | tee -a "$TABLE"
import csv, json, sys
run, name, rc, wall = sys.argv[1:]
try:
    s = json.load(open(f"{run}/summary.json"))
    last = list(csv.DictReader(open(f"{run}/metrics.csv")))[-1]
except (OSError, IndexError):
    print(f"{name}: exit {rc}, no summary ({wall} s)")
    sys.exit()
print(f"{name}: exit {rc}, {s['backend']} x{s['world_size']}, test acc {s['test_accuracy']}, "
      f"last epoch {float(last['samples_per_second']):.0f} samples/s, data wait "
      f"{float(last['data_wait_s']):.3f} of {float(last['time_train_s']):.2f} s, {wall} s wall")
e = s.get("energy") or {}
if e.get("joules_per_sample") is not None:
    print(f"  energy: {e['joules_per_sample']:.4f} J per training sample (GPU {e.get('gpu_j')} J, "
          f"CPU {e.get('cpu_j')} J, {e.get('average_power_w')} W average)")
ph = s.get("step_phases_s")
if ph:
    total = sum(ph.values())
    print("  step phases (all epochs): " + ", ".join(
        f"{k} {100 * v / total:.1f}%" for k, v in ph.items()) + f" of {total:.2f} s")
EOF
}

# A PyTorch process's last line: into the table, and into pytorch.jsonl where it is its JSON
# result (not an error's last line or a skipped step's note).
pytorch_line() {
  tee -a "$TABLE" | { grep '^{' || true; } >>"$OUT/logs/pytorch.jsonl"
}

# data/fashion-mnist/{train,val,test}.h5 from the kit's IDX files (once).
fmnist_data() {
  [[ -f data/fashion-mnist/test.h5 ]] && return
  local f
  mkdir -p "$WORK/fmnist"
  for f in "$KIT"/fmnist/*.xz; do
    xz -dc "$f" | gzip -1 >"$WORK/fmnist/$(basename "$f" .xz).gz"
  done
  hpctrain-data fashion-mnist --out data/fashion-mnist --src "$WORK/fmnist" >/dev/null
}

stage_fmnist() {
  fmnist_data
  train mlp_1gpu 1 configs/fashion_mnist_mlp.yaml --set device=cuda
  train cnn_1gpu 1 configs/fashion_mnist_cnn.yaml --set device=cuda
  train mlp_2ranks_1gpu 2 configs/fashion_mnist_mlp.yaml --set device=cuda
  train cnn_2ranks_1gpu 2 configs/fashion_mnist_cnn.yaml --set device=cuda
  local p
  for p in bf16 fp16; do
    train "mlp_1gpu_$p" 1 configs/fashion_mnist_mlp.yaml --set device=cuda --set precision=$p
    train "cnn_1gpu_$p" 1 configs/fashion_mnist_cnn.yaml --set device=cuda --set precision=$p
  done
}

# ResNet-34 training images/s at batch 128: hpctrain (epochs 2..3 of a synth set read
# from HDF5 through the prefetch queue; REPS runs per precision in PRECISIONS, default
# "fp32 tf32 bf16 bf16_nchw", interleaved; fp16 may be named too; train.cuda_graph GRAPH,
# default off; a name ending in _graph, such as bf16_graph, runs with train.cuda_graph on
# beside the others) and PyTorch
# (batches already on the GPU; one process per precision in PYTORCH, 5 timed windows,
# with the GPU's joules per image where NVML is importable), same GPU.
# One more hpctrain run per precision in TIMED (default "tf32 bf16") with train.step_timing
# gives the step breakdown.
resnet_pair() {
  local shape=$1 classes=$2 n=$3
  local file=$WORK/synth-${shape}.h5
  [[ -f $file ]] || tmo 120 hpctrain-data synth --out "$file" --n "$n" --shape "$shape" \
    --classes "$classes" --dtype uint8 --threads 16 >/dev/null
  local sets=(--set device=cuda --set data.train="$file" --set 'data.val=""'
    --set 'data.test=""' --set train.epochs=3 --set optimizer.momentum=0.9
    --set data.prefetch_threads=8 --set run.threads=8)
  for rep in $(seq "${REPS:-3}"); do
    for p in ${PRECISIONS:-fp32 tf32 bf16 bf16_nchw}; do
      # bf16_nchw: bf16 with layout nchw (bf16 alone takes layout auto: nhwc on a GPU);
      # tf32_nhwc: tf32 with layout nhwc (auto: nchw for float32)
      local layout=auto graph=${GRAPH:-off}
      [[ $p == *_nchw* ]] && layout=nchw
      [[ $p == *_nhwc* ]] && layout=nhwc
      [[ $p == *_graph ]] && graph=on
      train "resnet34_${shape}_${p}_rep$rep" 1 configs/seed_resnet34.yaml "${sets[@]}" \
        --set precision="${p%%_*}" --set layout=$layout --set train.cuda_graph="$graph"
    done
  done
  for p in ${TIMED:-tf32 bf16}; do
    train "resnet34_${shape}_${p}_timed" 1 configs/seed_resnet34.yaml "${sets[@]}" \
      --set precision="$p" --set train.step_timing=true --set train.cuda_graph="${GRAPH:-off}"
  done
  [[ -n ${SKIP_PYTORCH:-} ]] && return
  # PYTORCH: the precisions PyTorch runs ("bf16_nchw": bf16 in NCHW, hpctrain's layout nchw;
  # "tf32_nhwc": tf32 channels_last, hpctrain's layout nhwc)
  for p in ${PYTORCH:-fp32 tf32 bf16 bf16_nchw}; do
    [[ $p == *_nchw ]] && p="${p%_nchw} --nchw"
    [[ $p == *_nhwc ]] && p="${p%_nhwc} --nhwc"
    # shellcheck disable=SC2086  # "bf16 --nchw" is two arguments
    tmo 300 python3 "$REPO/bench/gpu/pytorch_resnet.py" --model resnet34 --shape "$shape" \
      --classes "$classes" --batch 128 --precision $p 2>&1 | tail -n 1 | pytorch_line
  done
}

# The MLP's accuracy over seeds, 2 ranks sharing the GPU against 2 CPU ranks.
stage_seeds() {
  for seed in 1 2 3 4; do
    train "mlp_2ranks_1gpu_seed$seed" 2 configs/fashion_mnist_mlp.yaml --set device=cuda \
      --set run.seed=$seed
    train "mlp_2ranks_cpu_seed$seed" 2 configs/fashion_mnist_mlp.yaml --set device=cpu \
      --set run.seed=$seed --set run.threads=1
  done
}

# End-to-end cases of tests/e2e/e2e.py on this machine: device auto picks the GPU, so
# determinism, kill -9 and resume, signals, ResNet evaluation and Adam run on the CUDA
# backend (2 and 3 ranks sharing it).
stage_e2e() {
  fmnist_data
  ln -sf mpiexec.hydra "$KIT/bin/mpiexec"
  ln -sf "$KIT/bin/hpctrain" "$WORK/hpctrain"
  ln -sf "$KIT/bin/hpctrain-data" "$WORK/hpctrain-data"
  ln -sfn "$KIT/test-shims" "$WORK/test-shims"  # LD_PRELOAD of kill9_resume_bit_identical
  for c in ${E2E_CASES:-mlp_allreduce_ring determinism kill9_resume_bit_identical \
    signal_stop_resume resnet_resume_eval eval_checkpoint adam cuda_graph_bit_identical \
    hybrid_cpu_and_gpu_ranks}; do
    local t0=$SECONDS t=150
    # At most 150 s a case (each took 2 to 20 s on the H200): a hang costs no more. 20 s
    # before its TERM the case ends itself with the stacks of its jobs still running (every
    # thread of mpiexec, its proxies and the ranks) and the cut run's output so far.
    [[ -n ${DEADLINE:-} ]] && ((t > DEADLINE - SECONDS - 15)) && t=$((DEADLINE - SECONDS - 15))
    HPCTRAIN_E2E_CASE_SECONDS=$((t - 20)) HPCTRAIN_E2E_STACKS=$KIT/bin/eu-stack \
      tmo 150 python3 tests/e2e/e2e.py "$c" --build "$WORK" --data data/fashion-mnist \
      >"$OUT/logs/e2e_$c.log" 2>&1
    # The verdict, or what cut the case short (its stacks follow that line in the log).
    local rc=$? verdict='^(PASS|FAIL)|^== .*(follow|stacks)$|Error|TimeoutExpired'
    note "e2e.$c: exit $rc ($((SECONDS - t0)) s) $(grep -E "$verdict" "$OUT/logs/e2e_$c.log" |
      tail -n 1)"
  done
}

# The run of e2e.determinism that hung on the H200 at 2d5fc0d (the MLP on 2 ranks sharing
# the GPU, 1 epoch, data.train the test file; summary.json was written and the ranks did not
# exit), as it was and under variants: PROBE, one variant per word, its settings joined by
# ',' ('-': none). A run still going after 15 s (they take 2 to 4) has every thread's stack
# of each rank taken (eu-stack, from the kit); at 20 s, distributed.timeout_seconds, the
# watchdog names a collective one rank never reached, and a rank stuck in its ending names
# that step and exits; one still going at 30 s is killed.
stage_probe() {
  fmnist_data
  local v n=0 d=data/fashion-mnist
  for v in ${PROBE:-- energy.interval_ms=0 checkpoint.at_epoch_end=false data.test=     train.epochs=2 data.train=$d/train.h5,data.test=}; do
    n=$((n + 1))
    if [[ -n ${DEADLINE:-} ]] && ((DEADLINE - SECONDS < 50)); then
      note "probe $v: skipped, past DEADLINE"
      continue
    fi
    local dir=$WORK/probe/$n log=$OUT/logs/probe_$n.log sets=() kv t0=$SECONDS rc
    rm -rf "$dir"
    [[ $v != - ]] && for kv in ${v//,/ }; do sets+=(--set "$kv"); done
    echo "+ variant: $v" >"$log"
    mpiexec.hydra -n 2 hpctrain train configs/fashion_mnist_mlp.yaml --set run.dir="$dir" \
      --set data.train=$d/test.h5 --set data.val=$d/val.h5 --set data.test=$d/test.h5 \
      --set train.progress_seconds=0 --set run.deterministic=true --set train.epochs=1 \
      --set distributed.timeout_seconds=20 "${sets[@]}" >>"$log" 2>&1 &
    local launcher=$! ranks="hpctrain train configs/fashion_mnist_mlp.yaml --set run.dir=$dir"
    while kill -0 "$launcher" 2>/dev/null && ((SECONDS - t0 < 15)); do sleep 0.5; done
    if kill -0 "$launcher" 2>/dev/null; then
      local pid
      for pid in $(pgrep -f "$ranks"); do
        echo "== stacks of pid $pid" >>"$log"
        timeout 4 "$KIT/bin/eu-stack" -p "$pid" >>"$log" 2>&1 ||
          grep -H . /proc/"$pid"/task/*/wchan >>"$log" 2>&1
      done
    fi
    while kill -0 "$launcher" 2>/dev/null && ((SECONDS - t0 < 30)); do sleep 0.5; done
    if kill -0 "$launcher" 2>/dev/null; then
      rc=hung
      pkill -KILL -f "$ranks"
      kill -KILL "$launcher" 2>/dev/null
      wait "$launcher" 2>/dev/null
    else
      wait "$launcher"
      rc=$?
    fi
    note "probe $v: exit $rc ($((SECONDS - t0)) s), summary.json $([[ -f $dir/summary.json ]] &&
      echo written || echo none); $(grep -v '^+' "$log" | grep -v '^\(==\|#\|TID\|PID\)' |
      tail -n 1)"
  done
}

# One rank with distributed.algorithm nccl (a one-rank communicator): the bucketed
# exchange that overlaps backward gives the parameters of the plain path (deterministic
# CNN), and timed ResNet-34 runs, ring and nccl
# interleaved, show what the buckets cost and what is left exposed after backward.
stage_nccl() {
  fmnist_data
  local sets=(--set device=cuda --set run.deterministic=true --set train.epochs=1)
  train cnn_det_ring 1 configs/fashion_mnist_cnn.yaml "${sets[@]}" --set distributed.algorithm=ring
  train cnn_det_nccl 1 configs/fashion_mnist_cnn.yaml "${sets[@]}" --set distributed.algorithm=nccl \
    --set distributed.bucket_bytes=65536
  python3 - "$WORK/runs" <<'EOF' | tee -a "$TABLE"
import json, sys
sha = [json.load(open(f"{sys.argv[1]}/cnn_det_{a}/summary.json"))["params_sha256"]
       for a in ("ring", "nccl")]
print("nccl buckets vs ring, 1 rank, deterministic CNN: " +
      ("same parameters" if sha[0] == sha[1] else f"DIFFERENT parameters {sha}"))
EOF
  local file=$WORK/synth-1x148x197.h5
  [[ -f $file ]] || tmo 120 hpctrain-data synth --out "$file" --n 3200 --shape 1x148x197 \
    --classes 9 --dtype uint8 --threads 16 >/dev/null
  for rep in 1 2; do
    for a in ring nccl; do
      train "resnet34_1x148x197_tf32_${a}_timed_rep$rep" 1 configs/seed_resnet34.yaml \
        --set device=cuda --set data.train="$file" --set 'data.val=""' --set 'data.test=""' \
        --set train.epochs=3 --set optimizer.momentum=0.9 --set data.prefetch_threads=8 \
        --set run.threads=8 --set precision=tf32 --set train.step_timing=true \
        --set distributed.algorithm=$a
    done
  done
}

# hpctrain bench allreduce with messages in GPU memory: 1 rank (NCCL on a one-rank
# communicator, ring and mpi as staging copies only) and 2 ranks sharing the GPU (staged
# ring and mpi; NCCL refuses a shared GPU). Bus bandwidth needs 2+ GPUs.
stage_allreduce() {
  mpiexec.hydra -n 1 hpctrain bench allreduce --device cuda --max-bytes 1073741824 \
    --out "$OUT/logs/allreduce_cuda_np1.json" 2>&1 | tee -a "$TABLE"
  mpiexec.hydra -n 2 hpctrain bench allreduce --device cuda --max-bytes 268435456 \
    --out "$OUT/logs/allreduce_cuda_np2_shared.json" 2>&1 | tee -a "$TABLE"
}

# Per-layer times of ResNet-34 at 3x224x224, batch 128 (hpctrain inspect --time) for each
# precision in PROFILE (default "fp32 tf32 bf16"; repeat one to see the spread between
# processes): full tables in the logs, the step lines in the table.
stage_profile() {
  local k=0
  for p in ${PROFILE:-fp32 tf32 bf16}; do
    k=$((k + 1))
    local log=$OUT/logs/profile_resnet34_${p}_$k.txt
    hpctrain inspect configs/seed_resnet34.yaml --input 3x224x224 --classes 1000 --time \
      --batch 128 --set device=cuda --set precision="$p" >"$log" 2>&1
    note "profile $p: $(grep -E '^step at|error' "$log")"
  done
}

# GPU time of one ResNet-34 step (KERNEL_SHAPE, default 3x224x224, batch 128) by kind of
# kernel, hpctrain against PyTorch (channels_last for bf16), for each precision in KERNELS
# (default bf16): Nsight Compute times every kernel of the one step that both programs
# bracket with cudaProfilerStart/Stop (hpctrain inspect --time; pytorch_resnet.py
# --profile-step: forward, loss, backward), bench/gpu/kernel_breakdown.py sums by kind.
stage_kernels() {
  local ncu="" c
  for c in "$(command -v ncu)" /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu; do
    [[ -x $c ]] && ncu=$c && break
  done
  if [[ -z $ncu ]]; then
    note "kernels: no ncu on this machine"
    return
  fi
  note "$("$ncu" --version | tail -n 1)"
  local shape=${KERNEL_SHAPE:-3x224x224} classes=1000 p side
  [[ $shape == 1x148x197 ]] && classes=9
  # One step is bracketed on each side (a few hundred kernels); the launch count only
  # bounds a bracket that failed to close.
  local profile=(--clock-control none --profile-from-start off --launch-count 5000
    --metrics gpu__time_duration.sum -f)
  for p in ${KERNELS:-bf16}; do
    tmo 150 "$ncu" "${profile[@]}" -o "$WORK/ncu_hpctrain_$p" hpctrain inspect \
      configs/seed_resnet34.yaml --input "$shape" --classes $classes --time --batch 128 \
      --set device=cuda --set precision="$p" >"$OUT/logs/ncu_hpctrain_$p.log" 2>&1
    tmo 150 "$ncu" "${profile[@]}" -o "$WORK/ncu_pytorch_$p" python3 \
      "$REPO/bench/gpu/pytorch_resnet.py" --model resnet34 --shape "$shape" --classes $classes \
      --batch 128 --precision "$p" --profile-step >"$OUT/logs/ncu_pytorch_$p.log" 2>&1
    for side in hpctrain pytorch; do
      tmo 60 "$ncu" -i "$WORK/ncu_${side}_$p.ncu-rep" --csv --page raw --print-units base \
        >"$OUT/logs/ncu_${side}_$p.csv" 2>>"$OUT/logs/ncu_${side}_$p.log"
    done
    note "kernels $p $shape (ms of GPU time in one step, kernels serialised by the profiler):"
    python3 "$REPO/bench/gpu/kernel_breakdown.py" --top 12 hpctrain="$OUT/logs/ncu_hpctrain_$p.csv" \
      pytorch="$OUT/logs/ncu_pytorch_$p.csv" 2>&1 | tee -a "$TABLE"
  done
}

# Sequential Fashion-MNIST with the LSTM config on one GPU (hpctrain with each rnn engine in
# RNN, default "cudnn steps": cuDNN's RNN API, or cuBLAS GEMMs and kernels/rnn.cu; fp32,
# tf32 and bf16; REPS runs each), then PyTorch's nn.LSTM (cuDNN) at the same batch, units
# and precision; samples/s x 28 = tokens/s.
stage_lstm() {
  fmnist_data
  local p rep e
  for rep in $(seq "${REPS:-2}"); do
    for e in ${RNN:-cudnn steps}; do
      for p in fp32 tf32 bf16; do
        train "lstm_1gpu_${e}_${p}_rep$rep" 1 configs/fashion_mnist_lstm.yaml --set device=cuda \
          --set rnn="$e" --set precision=$p --set train.epochs=2 --set optimizer.name=sgd \
          --set optimizer.lr=0.05 --set optimizer.schedule.type=constant
      done
    done
  done
  [[ -n ${SKIP_PYTORCH:-} ]] && return
  for p in fp32 tf32 bf16; do
    tmo 300 python3 "$REPO/bench/gpu/pytorch_lstm.py" --batch 64 --units 128 \
      --precision $p 2>&1 | tail -n 1 | pytorch_line
  done
}

stage_resnet() {
  resnet_pair 3x224x224 1000 3200
  resnet_pair 1x148x197 9 3200
}

# The classic study (configs/study_seed_resnet34.yaml) made small enough for a few minutes of GPU time:
# the CPU, 1 GPU, and 2 ranks sharing the one GPU (its distributed path; devices 1), on
# synthetic 1x148x197 images split 85/2/13 (STUDY_N, default 1280), STUDY_EPOCHS epochs
# (default 2), STUDY_REPEATS repeats (default 2), 5 s of cool-down, NVML energy. study.md
# and study.csv come back in the table; the plots in the logs.
stage_study() {
  ln -sf mpiexec.hydra "$KIT/bin/mpiexec"
  local dir=$WORK/seed n=${STUDY_N:-1280}
  mkdir -p "$dir"
  if [[ ! -f $dir/seed-test.h5 ]]; then
    tmo 120 hpctrain-data synth --out "$dir/all.h5" --n "$n" --shape 1x148x197 --classes 9 \
      --threads 16 >/dev/null
    hpctrain-data split "$dir/all.h5" --ratios 85,2,13 --out-prefix "$dir/seed" >/dev/null
  fi
  sed -e "s|^config: .*|config: $REPO/configs/seed_resnet34.yaml|" \
    -e "s|^repeats: .*|repeats: ${STUDY_REPEATS:-2}|" -e 's|^cooldown_seconds: .*|cooldown_seconds: 5|' \
    -e 's|{name: gpu-2, ranks: 2, device: cuda}|{name: gpu-2, ranks: 2, devices: 1, device: cuda}|' \
    configs/study_seed_resnet34.yaml >"$WORK/study_1gpu.yaml"
  rm -rf "$WORK/study"
  tmo 500 hpctrain study "$WORK/study_1gpu.yaml" --out "$WORK/study" \
    --set train.epochs="${STUDY_EPOCHS:-2}" --set data.train="$dir/seed-train.h5" \
    --set data.val="$dir/seed-val.h5" --set data.test="$dir/seed-test.h5" \
    --set run.threads=8 --set data.prefetch_threads=4 >"$OUT/logs/study.log" 2>&1
  note "study: exit $? ($(tail -n 1 "$OUT/logs/study.log"))"
  (cd "$WORK/study" && cat study.md >>"$TABLE" && cp study.csv study.json "$OUT/logs/" &&
    cp -r plots "$OUT/logs/study_plots") 2>/dev/null
}

setup
NO_GPU=""
for s in "$@"; do
  skip=$NO_GPU
  [[ -z $skip && -n ${DEADLINE:-} ]] && ((SECONDS > DEADLINE - 20)) && skip="past DEADLINE"
  if [[ -n $skip ]]; then
    note "== $s skipped ($skip)"
    continue
  fi
  note "== $s ($(date -u +%FT%TZ), ${SECONDS} s in)"
  "stage_$s"
done
echo "----- table -----"
cat "$TABLE"
# The logs travel as one archive, for machines that hand back only a few files.
tar czf "$OUT/logs.tar.gz" -C "$OUT" logs && rm -rf "$OUT/logs"
