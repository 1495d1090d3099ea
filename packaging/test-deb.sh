#!/bin/sh
# Builds the .deb with CPack and checks it as Debian and a user would: lintian clean
# (no error or warning at the default level), the desktop file and AppStream metadata
# valid, the binaries hardened (PIE, relro, bind now) and portable (AVX only in the kernels
# chosen at run time); then unpacks it into a
# temporary root (dpkg -x, no root needed) and checks there that both man pages
# render, the bash completion loads and completes commands, options and catalog
# names, and the installed CLI prints its version and runs `demo`.
#   sh packaging/test-deb.sh BUILD_DIR PACKAGE_VERSION
set -eu
build=$1
version=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# The version sorts by history: the commit count decides, whatever the SHAs.
case $version in
  *+git*.g*)
    count=${version#*+git}; count=${count%%.g*}
    base=${version%%+git*}
    [ "$count" -gt 1 ] && { dpkg --compare-versions "$version" gt "$base+git$((count - 1)).gffffffffff" ||
      fail "$version does not sort after the previous commit's $base+git$((count - 1)).g..."; }
    dpkg --compare-versions "$version" gt "$base" || fail "$version does not sort after $base"
    ;;
esac

(cd "$build" && cpack -G DEB -B "$work/out" >"$work/cpack.log" 2>&1) || {
  cat "$work/cpack.log"
  tail -n 40 "$work"/out/_CPack_Packages/*/DEB/PreinstallOutput.log 2>/dev/null || true
  exit 1
}
deb=$(ls "$work"/out/shardscope_"$version"_*.deb 2>/dev/null | head -n 1)
[ -n "$deb" ] || { echo "no shardscope_${version}_*.deb in $work/out:"; ls -la "$work/out"; cat "$work/cpack.log"; exit 1; }
echo "package: $(basename "$deb")"
dpkg-deb --field "$deb" Package Version Maintainer Depends Recommends

# lintian at its default level: any error or warning fails (info and pedantic are shown only).
echo "lintian:"
lintian --fail-on error,warning --display-info "$deb" >"$work/lintian.log" 2>&1 || {
  cat "$work/lintian.log"; fail "lintian reports errors or warnings"; }
cat "$work/lintian.log"

dpkg -x "$deb" "$work/root"
root=$work/root

# The MPI backend (SHARDSCOPE_MPI): binaries that link libmpi need Open MPI's library in Depends
# (dpkg-shlibdeps finds it) and its launcher in Recommends (nothing links mpirun).
depends=$(dpkg-deb --field "$deb" Depends)
if readelf -d "$root/usr/bin/shardscope-cli" | grep NEEDED | grep -q 'libmpi\.so'; then
  echo "$depends" | grep -q 'libopenmpi' || fail "shardscope-cli links libmpi but Depends lacks libopenmpi: $depends"
  dpkg-deb --field "$deb" Recommends | grep -q 'openmpi-bin' || fail "shardscope-cli links libmpi but openmpi-bin is not recommended"
  echo "MPI backend: Depends has $(echo "$depends" | tr ',' '\n' | grep libopenmpi | tr -d ' ')"
else
  echo "$depends" | grep -q 'libopenmpi' && fail "Depends names libopenmpi but shardscope-cli does not link libmpi"
  echo "MPI backend: not built"
fi

for f in usr/bin/shardscope usr/bin/shardscope-cli usr/share/applications/shardscope.desktop \
         usr/share/icons/hicolor/scalable/apps/shardscope.svg \
         usr/share/metainfo/io.github.shardscope.shardscope.metainfo.xml \
         usr/share/man/man1/shardscope.1.gz usr/share/man/man1/shardscope-cli.1.gz \
         usr/share/bash-completion/completions/shardscope-cli \
         usr/share/doc/shardscope/copyright usr/share/doc/shardscope/changelog.gz; do
  [ -e "$root/$f" ] || fail "missing from the package: /$f"
done

desktop-file-validate "$root/usr/share/applications/shardscope.desktop" || fail "desktop-file-validate"
appstreamcli validate --no-net --explain "$root/usr/share/metainfo/io.github.shardscope.shardscope.metainfo.xml" ||
  fail "appstreamcli validate"

# Hardening: position-independent executables, read-only relocations bound at start.
for b in shardscope shardscope-cli; do
  readelf -h "$root/usr/bin/$b" | grep -q 'Type:.*DYN' || fail "$b is not PIE"
  readelf -lW "$root/usr/bin/$b" | grep -q GNU_RELRO || fail "$b has no RELRO segment"
  readelf -dW "$root/usr/bin/$b" | grep -Eq 'BIND_NOW|FLAGS_1.*NOW' || fail "$b is not linked with -z now"
done

# Portable: AVX2/AVX-512 registers appear only in the per-level GEMM kernels chosen at run time
# (engine/GemmIsa.h), never in code every CPU runs. Checked on the build's binaries, which the
# package holds stripped (without the symbols that say which function an instruction is in).
for b in shardscope shardscope-cli; do
  objdump -d --no-show-raw-insn -C "$build/app/$b" | awk '
    /^[0-9a-f]+ <.*>:$/ { fn = $0; next }
    /%[yz]mm/ { if (fn ~ /Eigen_v[34]|isa::v[34]/) level++; else { print "  " fn; bad++ } }
    END { if (bad) exit 1; if (!level) { print "  no per-level kernels"; exit 1 } }' >"$work/wide.txt" ||
    { head -n 20 "$work/wide.txt"; fail "$b: wide vector instructions outside the per-level kernels (a native build?)"; }
done
echo "portable: wide vector code only in the per-level GEMM kernels"

# The man pages render without warnings and document every command.
for page in shardscope shardscope-cli; do
  MANWIDTH=80 man --warnings -E UTF-8 -l "$root/usr/share/man/man1/$page.1.gz" >"$work/$page.txt" 2>"$work/$page.err" ||
    { cat "$work/$page.err"; fail "man -l $page.1.gz"; }
  [ ! -s "$work/$page.err" ] || { cat "$work/$page.err"; fail "man -l $page.1.gz warns"; }
done
for word in plan sweep compare validate calibrate "catalog list" --objective --format --quiet "EXIT STATUS"; do
  grep -q -- "$word" "$work/shardscope-cli.txt" || fail "man shardscope-cli lacks \"$word\""
done
grep -q -- "--screenshots" "$work/shardscope.txt" || fail "man shardscope lacks --screenshots"
echo "man pages render"

# The installed CLI.
PATH=$root/usr/bin:$PATH
export PATH
db=$work/catalog.sqlite
out=$(shardscope-cli --version)
echo "$out"
case $out in
  "shardscope-cli $version"*) ;;
  *) fail "expected 'shardscope-cli $version ...'" ;;
esac
shardscope-cli --db "$db" demo >"$work/demo.txt" || { cat "$work/demo.txt"; fail "shardscope-cli demo"; }
grep -q "174,604,259,328" "$work/demo.txt" || { cat "$work/demo.txt"; fail "demo lacks GPT-3's parameter count"; }
echo "packaged shardscope-cli runs demo"

# The completion script loads in bash (with bash-completion's helpers) and completes.
cat >"$work/complete.bash" <<EOF
set -u
. /usr/share/bash-completion/bash_completion
. "$root/usr/share/bash-completion/completions/shardscope-cli"
complete -p shardscope-cli >/dev/null
comp() { COMP_WORDS=("\$@"); COMP_CWORD=\$((\$# - 1)); COMP_LINE="\$*"; COMP_POINT=\${#COMP_LINE}
         COMPREPLY=(); _shardscope_cli; printf '%s\n' "\${COMPREPLY[@]}"; }
comp shardscope-cli pl
echo --
comp shardscope-cli plan --obj
echo --
comp shardscope-cli plan --objective ''
echo --
comp shardscope-cli --db "$db" catalog show gpt2-s
echo --
comp shardscope-cli --db "$db" plan --node-type trn1
EOF
bash "$work/complete.bash" >"$work/complete.txt" 2>&1 || { cat "$work/complete.txt"; fail "the completion script"; }
expect() { awk -v RS='--\n' -v n="$1" 'NR == n' "$work/complete.txt" | grep -qx -- "$2" ||
  { cat "$work/complete.txt"; fail "completion $1 lacks $2"; }; }
expect 1 plan
expect 2 --objective
expect 3 cost
expect 4 gpt2-small
expect 5 trn1.32xlarge
echo "bash completion completes commands, options, values and catalog names"
