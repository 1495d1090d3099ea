#!/bin/sh
# Builds the .deb with CPack, unpacks it into a temporary root (dpkg -x, no root
# needed) and runs the packaged shardscope-cli --version from there.
#   sh packaging/test-deb.sh BUILD_DIR VERSION
set -eu
build=$1
version=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

(cd "$build" && cpack -G DEB -B "$work/out" >"$work/cpack.log" 2>&1) || {
  cat "$work/cpack.log"
  tail -n 40 "$work"/out/_CPack_Packages/*/DEB/PreinstallOutput.log 2>/dev/null || true
  exit 1
}
deb=$(ls "$work"/out/shardscope_"$version"-*.deb 2>/dev/null | head -n 1)
[ -n "$deb" ] || { echo "no shardscope_$version-*.deb in $work/out:"; ls -la "$work/out"; cat "$work/cpack.log"; exit 1; }
echo "package: $(basename "$deb")"
dpkg-deb --field "$deb" Package Version Depends

dpkg -x "$deb" "$work/root"
for f in usr/bin/shardscope usr/bin/shardscope-cli usr/share/applications/shardscope.desktop \
         usr/share/icons/hicolor/scalable/apps/shardscope.svg \
         usr/share/metainfo/io.github.shardscope.ShardScope.metainfo.xml; do
  [ -e "$work/root/$f" ] || { echo "missing from the package: /$f"; exit 1; }
done
out=$("$work/root/usr/bin/shardscope-cli" --version)
echo "$out"
[ "$out" = "shardscope-cli $version" ] || { echo "expected 'shardscope-cli $version'"; exit 1; }
# The packaged CLI works on a fresh catalog.
"$work/root/usr/bin/shardscope-cli" --db "$work/catalog.sqlite" catalog show gpt2-small | grep -q "124,439,808"
echo "packaged shardscope-cli runs"
