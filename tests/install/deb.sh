#!/usr/bin/env bash
# The Debian package (cmake/package.cmake): cpack -G DEB builds it; its control file
# names the package, the Debian dependencies and no module file; then it is installed for
# real with `dpkg -i` in a throw-away root (an overlay of this system in a private mount
# namespace, so dpkg checks the dependencies against what is installed here and nothing
# touches the real root), where /usr/bin/hpctrain --version and hpctrain init run, and
# `dpkg -r` removes it again. Where no mount namespace can be had, the package is unpacked
# with dpkg -x and its hpctrain --version run instead (said so).
#   bash tests/install/deb.sh BUILD        exit 0 pass, 1 fail, 77 skip
set -euo pipefail
fail() { echo "FAIL: $*" >&2; exit 1; }
build=$(cd "$1" && pwd)
for tool in cpack dpkg-deb dpkg-shlibdeps; do
  command -v "$tool" >/dev/null || { echo "SKIP: $tool not installed (dpkg-dev)"; exit 77; }
done
pkgdir=$build/package
rm -rf "$pkgdir"
cpack --config "$build/CPackConfig.cmake" -B "$pkgdir" >"$build/cpack.log" 2>&1 ||
  fail "cpack -G DEB: $(cat "$build/cpack.log")"
debs=("$pkgdir"/*.deb)
[[ ${#debs[@]} == 1 && -f "${debs[0]}" ]] || fail "expected one .deb in $pkgdir: ${debs[*]}"
deb=${debs[0]}
echo "built $deb ($(stat -c %s "$deb") bytes)"

package=$(dpkg-deb -f "$deb" Package)
depends=$(dpkg-deb -f "$deb" Depends)
echo "Package: $package"
echo "Depends: $depends"
case "$package" in
  hpctrain | hpctrain-cuda) ;;
  *) fail "package name $package" ;;
esac
for dep in libmpich12 libhdf5 libyaml-cpp libopenblas0 mpich python3-matplotlib python3-yaml; do
  grep -q "\b$dep" <<<"$depends" || fail "Depends lacks $dep"
done
# CPU nodes install the package too: NVIDIA's libraries (which only the CUDA module
# loads) must never become dependencies, whatever the build host packaged them as.
if grep -Eqi "cuda|nvidia|cudnn|nccl|cublas" <<<"$depends"; then
  fail "Depends names NVIDIA packages: $depends"
fi
if [[ $package == hpctrain-cuda ]]; then
  [[ "$(dpkg-deb -f "$deb" Provides)" == hpctrain ]] || fail "hpctrain-cuda must provide hpctrain"
  # Not `dpkg-deb | grep -q`: grep stops reading at its match, and under pipefail dpkg-deb's
  # SIGPIPE would fail the test.
  description=$(dpkg-deb -f "$deb" Description)
  grep -q "cuDNN" <<<"$description" || fail "hpctrain-cuda's description must name the CUDA libraries"
fi
contents=$(dpkg-deb -c "$deb" | awk '{print $1, $6}')
for f in usr/bin/hpctrain usr/bin/hpctrain-data usr/share/hpctrain/jobs/train_single_node.sbatch; do
  grep -q "^-rwxr-xr-x \./$f$" <<<"$contents" || fail "$f missing or not executable in the package"
done
readme=README.md contracts=docs/contracts.md
for f in usr/share/hpctrain/configs/fashion_mnist_mlp.yaml "usr/share/doc/hpctrain/$readme" \
  "usr/share/doc/hpctrain/$contracts" usr/share/hpctrain/python/hpctrain_tools/__main__.py; do
  grep -q " \./$f$" <<<"$contents" || fail "$f missing from the package"
done
if grep -q modulefiles <<<"$contents"; then fail "the package holds a module file"; fi

# Inside the namespace: a tmpfs for the overlay's upper layer, this system as the lower
# one, /proc and /dev bound in; dpkg -i inside a chroot to it.
cat >"$pkgdir/in_root.sh" <<EOS
set -eu
t=$pkgdir/ns
mount -t tmpfs tmpfs "\$t" || exit 77
mkdir "\$t/up" "\$t/work" "\$t/root"
mount -t overlay overlay -o "lowerdir=/,upperdir=\$t/up,workdir=\$t/work" "\$t/root" || exit 77
mount --rbind /proc "\$t/root/proc" && mount --rbind /dev "\$t/root/dev" || exit 77
cp "$deb" "\$t/root/tmp/package.deb"
exec chroot "\$t/root" /bin/bash -euc '
  echo "== dpkg -i (in a throw-away root)"
  dpkg -i /tmp/package.deb
  [[ "\$(command -v hpctrain)" == /usr/bin/hpctrain ]] || { echo "hpctrain is not /usr/bin/hpctrain" >&2; exit 1; }
  /usr/bin/hpctrain --version | tee /tmp/version.txt
  ! grep -q "backends: cpu, cuda" /tmp/version.txt ||
    grep -q "^CUDA backend: /usr/lib/hpctrain/libhpctrain_cuda.so (CUDA runtime" /tmp/version.txt
  /usr/bin/hpctrain-data --version
  cd /tmp && /usr/bin/hpctrain init starter >/dev/null
  test -x /tmp/starter/train_single_node.sbatch
  dpkg -L $package | grep -qx /usr/share/hpctrain/configs/fashion_mnist_mlp.yaml
  echo "== dpkg -r"
  dpkg -r $package
  ! test -e /usr/bin/hpctrain
'
EOS
mkdir "$pkgdir/ns"
rc=77
for ns in "--mount" "--user --map-root-user --mount"; do
  # shellcheck disable=SC2086  # the options are words
  if unshare $ns --propagation private true 2>/dev/null; then
    rc=0
    unshare $ns --propagation private bash "$pkgdir/in_root.sh" || rc=$?
    break
  fi
done
if ((rc == 77)); then
  echo "no private mount namespace with an overlay here: unpacking with dpkg -x instead of dpkg -i"
  root=$pkgdir/root
  dpkg -x "$deb" "$root"
  "$root/usr/bin/hpctrain" --version || fail "the packaged hpctrain --version"
elif ((rc != 0)); then
  fail "installing the package with dpkg -i (exit $rc; output above)"
fi
echo PASS
