#!/usr/bin/env bash
# scripts/deb.sh: `make deb`. Builds the Debian packages postgresql-NN-claims
# (both extensions) and claims-grpc (the gRPC server) with PostgreSQL's packaging tooling (pg_buildext, dh
# --with pgxs_loop) for the PostgreSQL versions of debian/pgversions this
# system supports, in a copy of the tree (build/deb-src), so the tree stays
# clean; the .deb files go to build/deb/ (CLAIMS_DEB_OUT). The version is
# the distribution's (scripts/dist_version.sh, from the control files);
# debian/control and debian/changelog are written in the copy.
# Run as root to have the build dependencies installed when missing.
set -eu

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${CLAIMS_DEB_OUT:-$REPO/build/deb}"
VERSION="$("$REPO/scripts/dist_version.sh")"
WORK="$REPO/build/deb-src"
SRC="$WORK/claims-$VERSION"
BUILD_DEPS=(build-essential debhelper postgresql-server-dev-all dpkg-dev libpq-dev libssl-dev
    pkg-config libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc)

missing=()
for p in "${BUILD_DEPS[@]}"; do
    [ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)" = "install ok installed" ] || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
    [ "$(id -u)" -eq 0 ] || { echo "deb.sh: missing build dependencies: ${missing[*]}" >&2; exit 1; }
    echo "deb.sh: installing ${missing[*]}"
    apt-get update >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}" >/dev/null
fi

rm -rf "$WORK" && mkdir -p "$SRC" "$OUT"
tar -C "$REPO" --anchored --exclude=./.git --exclude=./build --exclude=./grpc/build --exclude="./tmp_check*" \
    --exclude="./cell/tmp_check*" --exclude=./results --exclude=./cell/results \
    --exclude=./output_iso --exclude=./log --exclude=./cell/log --exclude=./.run \
    --exclude="*.o" --exclude="*.so" --exclude="*.bc" -cf - . | tar -C "$SRC" -xf -

cd "$SRC"
cat >debian/changelog <<END
claims ($VERSION) unstable; urgency=medium

  * Built from the claims source tree: claims $("$REPO/scripts/dist_version.sh" claims),
    claims_cell $("$REPO/scripts/dist_version.sh" claims_cell).

 -- The claims developers <claims@localhost>  $(date -R)
END
pg_buildext updatecontrol
echo "deb.sh: building $(sed -n 's/^Package: //p' debian/control | tr '\n' ' ')version $VERSION"
dpkg-buildpackage -b -us -uc >"$WORK/build.log" 2>&1 || { tail -n 40 "$WORK/build.log"; exit 1; }
for f in "$WORK"/*.deb; do
    mv "$f" "$OUT/"
    echo "deb.sh: $OUT/$(basename "$f")"
done
