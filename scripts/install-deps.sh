#!/usr/bin/env bash
# Installs what a fresh Debian 12 machine lacks to build Transfuse (and, with
# --test, to run every test). Runs apt-get only when something is missing.
# Run as root (or with sudo available).
set -euo pipefail

packages=(
  cmake ninja-build g++ ccache pkg-config
  libmlir-22-dev mlir-22-tools llvm-22-dev llvm-22-tools clang-22
  libhwy-dev libgtest-dev libgmock-dev libbenchmark-dev libopenblas-dev
  libsentencepiece-dev libutf8proc-dev libonig-dev zlib1g-dev libpng-dev libjpeg62-turbo-dev
  libonnx-dev libprotobuf-dev protobuf-compiler
  libopenmpi-dev openmpi-bin
  python3 python3-numpy python3-venv python3-dev
)
if [[ "${1:-}" == "--test" ]]; then
  # The oracle is checked against PyTorch's own modules (Debian's torch).
  packages+=(python3-torch)
  # The sanitizer and libFuzzer runtimes of clang-22 (test.sh --sanitize, fuzz.sh).
  packages+=(libclang-rt-22-dev)
  # The Python package's tests (pytest) and its pictures (matplotlib, Graphviz).
  packages+=(python3-pytest python3-matplotlib graphviz)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  sudo=""
  [[ $(id -u) -ne 0 ]] && sudo="sudo"
  echo "installing: ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# The Python package's build (python/, docs/python.md): nanobind and
# scikit-build-core from PyPI in a venv over Debian's Python, which also sees
# Debian's NumPy, PyTorch and pytest (--system-site-packages).
pyvenv="${XDG_CACHE_HOME:-$HOME/.cache}/transfuse/python-venv"
if ! "$pyvenv/bin/python" -c "import nanobind, scikit_build_core" 2>/dev/null; then
  echo "installing nanobind and scikit-build-core into $pyvenv"
  /usr/bin/python3 -m venv --system-site-packages "$pyvenv"
  "$pyvenv/bin/pip" install -q "nanobind==3.1.0" "scikit-build-core==1.1.2"
fi

if [[ "${1:-}" == "--test" ]]; then
  # The ONNX backend node tests are written from the PyPI onnx package's
  # case definitions (tests/onnx): a venv of its own, no torch.
  venv="${XDG_CACHE_HOME:-$HOME/.cache}/transfuse/onnx-venv"
  onnx_version=1.23.2
  if ! "$venv/bin/python" -c "import onnx, sys; sys.exit(onnx.__version__ != '$onnx_version')" 2>/dev/null; then
    echo "installing onnx==$onnx_version into $venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q "onnx==$onnx_version"
  fi
fi
