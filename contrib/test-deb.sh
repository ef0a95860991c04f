#!/bin/bash
# The Debian package (issue 21): build agentsbx_<ver>_amd64.deb from a scratch copy of this tree
# with dpkg-buildpackage, run lintian (errors and warnings fail), compare its files with what
# `make install DESTDIR=` installs (and check `make uninstall` removes all of it), then install
# the .deb, run `agentsbx --version`, `agentsbx sandbox -- true` and `man agentsbx-sandbox`,
# wire it into a dockerd with `agentsbx setup docker --profile agent` and run a container of
# that runtime class (README's install steps), purge it and check nothing is left.
#
# The install happens in a private mount namespace whose /etc, /usr and /var are overlays with
# their upper layers in a scratch directory: dpkg and apt work as on the machine, nothing outside
# this script sees the package (other users of the machine, its own agentsbx), and "nothing left
# after purge" is what the upper layers of /etc and /usr hold (nothing) and of /var outside
# dpkg's and apt's own records. So the machine is left as found by construction, CI or not.
# Run as root from the top of a clone (Debian 12):  contrib/test-deb.sh   (about 2 minutes)
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
[ "$(id -u)" = 0 ] || { echo "test-deb.sh: run as root" >&2; exit 1; }
pass=0
ok() { pass=$((pass + 1)); echo "ok: $*"; }
die() { echo "FAIL: $*" >&2; exit 1; }

# CI-only packages (the build tools of a .deb), idempotent as contrib/setup.sh
need=()
for p in debhelper dpkg-dev lintian fakeroot man-db bash-completion; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
	echo "test-deb.sh: installing ${need[*]}"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null
fi

work=$(mktemp -d /tmp/asbx-deb.XXXXXX)
cleanup() { rm -rf --one-file-system "$work"; }
trap cleanup EXIT

# 1. build from a scratch copy: dh_auto_clean runs `make distclean`, which must not touch the tree
mkdir "$work/src"
(cd "$top" && git ls-files -co --exclude-standard | tar -cf - -T -) | tar -xf - -C "$work/src"
(cd "$work/src" && DEB_BUILD_OPTIONS="nocheck parallel=$(nproc)" dpkg-buildpackage -us -uc -b >"$work/build.log" 2>&1) \
	|| { tail -40 "$work/build.log"; die "dpkg-buildpackage"; }
ver=$(cd "$work/src" && dpkg-parsechangelog -S Version)
deb="$work/agentsbx_${ver}_amd64.deb"
[ -f "$deb" ] || die "no $deb"
ok "dpkg-buildpackage built ${deb##*/}"

# 2. lintian: no error, no warning (info tags are listed in debian/README.source)
chmod -R a+rX "$work"
if ! setpriv --reuid 65534 --regid 65534 --clear-groups env HOME="$work" \
	lintian --fail-on error,warning "$work/agentsbx_${ver}_amd64.changes" >"$work/lintian.log" 2>&1; then
	cat "$work/lintian.log"
	die "lintian"
fi
ok "lintian clean (errors and warnings)"

# 3. the package holds what `make install` installs, and `make uninstall` removes all of it
make -C "$work/src" install DESTDIR="$work/mi" >/dev/null
(cd "$work/mi" && find . -type f | sed 's|^\.||' | sort) >"$work/make.list"
dpkg-deb -c "$deb" | awk '$1 !~ /^d/ {print $6}' | sed 's|^\.||; s|\.gz$||' |
	grep -v -e '^/usr/share/doc/agentsbx/changelog$' -e '^/usr/share/doc/agentsbx/copyright$' | sort >"$work/deb.list"
diff -u "$work/make.list" "$work/deb.list" || die "the .deb and make install differ (above)"
ok "the .deb holds exactly what make install installs ($(wc -l <"$work/deb.list") files)"
dpkg-deb -I "$deb" conffiles | grep -qx /etc/agentsbx/config.json || die "config.json is not a conffile"
ok "/etc/agentsbx/config.json is a conffile"
make -C "$work/src" uninstall DESTDIR="$work/mi" >/dev/null
left=$(find "$work/mi" -type f)
[ -z "$left" ] || die "make uninstall left: $left"
ok "make uninstall removes every file"

# 4. install, use, purge: in a private mount namespace over overlays of /etc, /usr, /var
for d in etc usr var; do mkdir -p "$work/ov/$d-up" "$work/ov/$d-wk"; done
cp "$deb" "$work/ov/"
cat >"$work/inns.sh" <<'INNER'
set -euo pipefail
w=$1 deb=$2 ver=$3
mount --make-rprivate /
for d in etc usr var; do
	mount -t overlay overlay -o "lowerdir=/$d,upperdir=$w/ov/$d-up,workdir=$w/ov/$d-wk" "/$d"
done
! dpkg-query -W -f='${Status}' agentsbx 2>/dev/null | grep -q "install ok installed" || { echo "agentsbx already installed"; exit 1; }
DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-download "$deb" >"$w/apt-install.log" 2>&1 ||
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$deb" >>"$w/apt-install.log" 2>&1 || { tail "$w/apt-install.log"; exit 1; }
echo "ok: apt-get install ./${deb##*/}"
out=$(/usr/bin/agentsbx --version)
echo "$out" | grep -qx "agentsbx version ${ver%%-*}" || { echo "--version: $out"; exit 1; }
echo "ok: agentsbx --version: $(echo "$out" | head -1)"
mkdir -p "$w/ws" "$w/state" "$w/audit"
(cd "$w/ws" && /usr/bin/agentsbx --root "$w/state" --audit-dir "$w/audit" sandbox -- true) || { echo "sandbox -- true failed"; exit 1; }
ls "$w/audit"/*.jsonl >/dev/null || { echo "sandbox wrote no audit log"; exit 1; }
echo "ok: agentsbx sandbox -- true (under the installed /etc/agentsbx/config.json)"
man -P cat agentsbx-sandbox 2>/dev/null | grep -q "quick mode" || { echo "man agentsbx-sandbox"; exit 1; }
echo "ok: man agentsbx-sandbox"
bash -c 'source /usr/share/bash-completion/bash_completion; source /usr/share/bash-completion/completions/agentsbx
COMP_WORDS=(agentsbx set); COMP_CWORD=1; COMP_LINE="agentsbx set"; COMP_POINT=${#COMP_LINE}; _agentsbx; [ "${COMPREPLY[*]}" = setup ]' ||
	{ echo "bash completion of 'agentsbx set'"; exit 1; }
echo "ok: bash completion (agentsbx set<TAB> -> setup)"
# README's Docker path with the installed binary: `agentsbx setup docker --profile agent`, a
# dockerd on that daemon.json (private sockets and roots; README says `systemctl reload docker`,
# there is no systemd here), a container of the agent runtime class, then `setup docker --undo`
# gives daemon.json back byte for byte. Skipped, with the reason, without Docker or the test image.
img=/var/cache/agentsbx-tests/debian-bookworm-minbase-python3.tar
if command -v dockerd >/dev/null && [ -x /usr/bin/docker ] && [ -f "$img" ]; then
	dj=/etc/docker/daemon.json
	[ -e "$dj" ] && cp -p "$dj" "$w/daemon.before"
	/usr/bin/agentsbx setup docker --profile agent >"$w/setup.log" 2>&1 || { cat "$w/setup.log"; exit 1; }
	dk=$w/dk
	mkdir -p "$dk"
	dockerd --config-file "$dj" --data-root "$dk/data" --exec-root "$dk/exec" --pidfile "$dk/docker.pid" \
		-H "unix://$dk/docker.sock" --containerd-namespace "asbx-deb-$$" --containerd-plugins-namespace "asbx-deb-$$-p" \
		--exec-opt native.cgroupdriver=cgroupfs --iptables=false --ip6tables=false --ip-forward=false \
		--ip-masq=false --bridge none --storage-driver overlay2 >"$dk/dockerd.log" 2>&1 &
	dpid=$!
	stop_docker() { kill "$dpid" 2>/dev/null && wait "$dpid" 2>/dev/null || true; }
	trap stop_docker EXIT
	export DOCKER_HOST=unix://$dk/docker.sock DOCKER_CONFIG=$dk/client
	for _ in $(seq 1 120); do docker version >/dev/null 2>&1 && break; kill -0 "$dpid" 2>/dev/null || break; sleep 0.5; done
	docker version >/dev/null 2>&1 || { tail -20 "$dk/dockerd.log"; echo "dockerd did not answer"; exit 1; }
	docker import "$img" asbx-deb:test >/dev/null
	out=$(docker run --rm --network none --runtime agentsbx-agent asbx-deb:test sh -c 'touch /etc/x 2>/dev/null || echo refused; id -u')
	[ "$out" = "$(printf 'refused\n0')" ] || { echo "docker run --runtime agentsbx-agent: $out"; tail -20 "$dk/dockerd.log"; exit 1; }
	echo "ok: docker run --runtime agentsbx-agent (setup docker --profile agent): /etc is read-only inside"
	stop_docker
	trap - EXIT
	/usr/bin/agentsbx setup docker --undo >>"$w/setup.log" 2>&1 || { cat "$w/setup.log"; exit 1; }
	if [ -e "$w/daemon.before" ]; then cmp -s "$dj" "$w/daemon.before" || { echo "daemon.json differs after --undo"; exit 1; }
	else [ ! -e "$dj" ] || { echo "daemon.json left after --undo: $(cat "$dj")"; exit 1; }; fi
	rm -rf --one-file-system "$dk"
	echo "ok: agentsbx setup docker --undo gives daemon.json back"
else
	echo "skip: README's Docker step (needs dockerd, /usr/bin/docker and $img from the integration suite)"
fi
DEBIAN_FRONTEND=noninteractive apt-get purge -y -q agentsbx >"$w/apt-purge.log" 2>&1 || { tail "$w/apt-purge.log"; exit 1; }
! dpkg-query -W -f='${Status}' agentsbx 2>/dev/null | grep -q "installed" || { echo "still installed"; exit 1; }
echo "ok: apt-get purge agentsbx"
INNER
unshare --mount --propagation private bash "$work/inns.sh" "$work" "$work/ov/${deb##*/}" "$ver" | tee "$work/inns.log"
[ "${PIPESTATUS[0]}" = 0 ] || die "install/use/purge (above)"
pass=$((pass + $(grep -c '^ok:' "$work/inns.log")))
# what the package run left: upper layers (whiteouts of files it never had do not occur: the
# package only adds files) outside dpkg's, apt's and man-db's own records
left=$(cd "$work/ov" && find etc-up usr-up var-up -mindepth 1 \
	! -path 'var-up/lib/dpkg*' ! -path 'var-up/log*' ! -path 'var-up/cache/apt*' ! -path 'var-up/cache/man*' \
	! -path 'var-up/cache/debconf*' ! -path 'var-up/lib/apt*' ! -path 'var-up/cache/ldconfig*' \
	! -path 'etc-up/ld.so.cache' ! -type d -print)
[ -z "$left" ] || die "left after purge: $left"
# a directory the overlay copied up (its child was created) exists on the machine itself; one
# that does not was created by the package and left
leftdirs=$(cd "$work/ov" && find etc-up usr-up -mindepth 1 -type d -print | sed 's|^\([a-z]*\)-up|/\1|' |
	while read -r d; do [ -d "$d" ] || echo "$d"; done)
[ -z "$leftdirs" ] || die "directories left after purge: $leftdirs"
ok "nothing left after purge (/etc, /usr and /var outside dpkg/apt/man-db records)"
echo "test-deb.sh: $pass checks passed"
