#!/bin/sh
# Unpacks the Debian 12 packages whose message catalogs make_train.py reads, without installing them
# (installing them pulls and upgrades libraries: dpkg, krb5, libpq ...): apt-get download, then their
# .mo files alone, where dpkg would put them.
#
#   tools/langid_set/fetch_train.sh ROOT $(cut -f1 tools/langid_set/train_packages.txt)
#   tools/langid_set/make_train.py /tmp/train.tsv tools/langid_set/train_packages.txt --root ROOT
#
# ROOT/usr/share/locale/LOCALE/LC_MESSAGES/DOMAIN.mo; ROOT/owners.tsv: path -> package;
# ROOT/versions.tsv: package -> version. Without PACKAGEs, the .debs already in ROOT/debs are unpacked.
set -eu
root=$(realpath -m "$1")
shift
mkdir -p "$root/debs"
cd "$root/debs"
[ "$#" -eq 0 ] || apt-get download "$@"
: > "$root/owners.tsv"
: > "$root/versions.tsv"
for deb in *.deb; do
  pkg=$(dpkg-deb -f "$deb" Package)
  printf '%s\t%s\n' "$pkg" "$(dpkg-deb -f "$deb" Version)" >> "$root/versions.tsv"
  dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$root" --wildcards './usr/share/locale/*.mo' 2>/dev/null || true
  dpkg-deb -c "$deb" | awk -v pkg="$pkg" '$NF ~ /^\.\/usr\/share\/locale\/.*\.mo$/ { print substr($NF, 2) "\t" pkg }' >> "$root/owners.tsv"
done
