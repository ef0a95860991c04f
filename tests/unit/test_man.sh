#!/bin/sh
# test_man.sh - the man pages (docs/man) against the real CLI. Run by `make check` from the build
# tree (automake exports srcdir); by hand: srcdir=. tests/unit/test_man.sh after `make`.
#  1. every verb `agentsbx --help` lists has a page agentsbx-VERB.8, and every global option it
#     prints is in agentsbx.8;
#  2. every long option a verb's --help prints is in the verb's page;
#  3. every option of the getopt tables in src/cli/*.c is documented in one of its file's pages,
#     and every option a page documents (its .TP terms) is in those tables: nothing guessed;
#  4. groff (and man -l, when man-db is there) renders every page without a warning.
# Prints one line per failure and a summary; exit 0 = all passed, 1 = a failure, 77 = skipped.
set -u
srcdir=${srcdir:-$(dirname "$0")/../..}
bin=${AGENTSBX:-./agentsbx}
mandir=${MANDIR:-docs/man}
fails=0
checks=0

fail () { echo "FAIL: $*"; fails=$((fails + 1)); }
ok () { checks=$((checks + 1)); }

[ -x "$bin" ] || { echo "SKIP: $bin not built"; exit 77; }
[ -f "$mandir/agentsbx.8" ] || { echo "SKIP: $mandir/agentsbx.8 not built (make man)"; exit 77; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT

# The page as plain text: roff's dash and font escapes removed (no groff needed for 1-3).
text () { sed -e 's/\\-/-/g' -e 's/\\f[BIRP]//g' -e 's/\\[&%]//g' -e 's/\\e/\\/g' "$1"; }
# The long options of the .TP terms (the OPTIONS entries) of a page.
terms () { text "$1" | awk 'prev == ".TP" { print } { prev = $0 }' | grep -o -- '--[a-z][a-z0-9-]*' | sort -u; }
# Does the text file $1 name option $2 as a whole word?
names () { grep -qE -- "(^|[^a-z0-9-])$2([^a-z0-9-]|\$)" "$1"; }
# The long options a source file takes: its getopt tables, and "--x" compared by hand (strcmp).
src_opts () {
	{
		grep -o '{ *"[a-z0-9-]*", *[a-z]*_argument' "$srcdir/src/cli/$1" | sed 's/{ *"\([^"]*\)".*/--\1/'
		grep -o 'strcmp ([^,]*, *"--[a-z0-9-]*")' "$srcdir/src/cli/$1" | sed 's/.*"\(--[^"]*\)".*/\1/'
	} | sort -u
}
# The source files whose option tables a page documents, and back.
files_of_page () {
	case $1 in
	agentsbx) echo main.c ;;
	create | run) echo create.c ;;
	start | state | kill | delete | list) echo simple.c ;;
	pause | resume) echo pause.c ;;
	checkpoint | restore) echo checkpoint.c ;;
	approvals | approve | deny) echo approvals.c ;;
	workspace) echo workspace.c workspace_diff.c workspace_export.c ;;
	*) echo "$1.c" ;;
	esac
}
pages_of_file () {
	case $1 in
	main.c) echo agentsbx ;;
	create.c) echo agentsbx-create agentsbx-run ;;
	simple.c) echo agentsbx-start agentsbx-state agentsbx-kill agentsbx-delete agentsbx-list ;;
	pause.c) echo agentsbx-pause agentsbx-resume ;;
	checkpoint.c) echo agentsbx-checkpoint agentsbx-restore ;;
	approvals.c) echo agentsbx-approvals agentsbx-approve agentsbx-deny ;;
	workspace*.c) echo agentsbx-workspace ;;
	*) echo "agentsbx-${1%.c}" ;;
	esac
}

# 1. verbs and global options
"$bin" --help > "$tmp/help" || fail "agentsbx --help exited $?"
verbs=$(awk '/^COMMANDS:/ { on = 1; next } /^$/ { on = 0 } on { print $1 }' "$tmp/help")
[ -n "$verbs" ] || fail "no COMMANDS in agentsbx --help"
text "$mandir/agentsbx.8" > "$tmp/agentsbx.txt"
for opt in $(awk '/^GLOBAL OPTIONS:/ { on = 1; next } on' "$tmp/help" | grep -o -- '--[a-z][a-z0-9-]*' | sort -u); do
	names "$tmp/agentsbx.txt" "$opt" && ok || fail "agentsbx.8: global option $opt (agentsbx --help) is not documented"
done

# 2. each verb: a page naming every option its --help prints (and --help itself)
for verb in $verbs; do
	page="$mandir/agentsbx-$verb.8"
	if [ ! -f "$page" ]; then
		fail "verb $verb has no page $page (add docs/man/agentsbx-$verb.8.md and list it in docs/man/man.am)"
		continue
	fi
	ok
	text "$page" > "$tmp/$verb.txt"
	names "$tmp/agentsbx.txt" "agentsbx-$verb" && ok || fail "agentsbx.8 does not refer to agentsbx-$verb"
	"$bin" "$verb" --help > "$tmp/$verb.help" 2>&1 || fail "agentsbx $verb --help exited $?"
	for opt in $(grep -o -- '--[a-z][a-z0-9-]*' "$tmp/$verb.help" | sort -u) --help; do
		names "$tmp/$verb.txt" "$opt" && ok || fail "agentsbx-$verb.8: $opt (from agentsbx $verb --help) is not documented"
	done
done

# 3. the source's option tables <-> the pages' OPTIONS entries
for f in "$srcdir"/src/cli/*.c; do
	f=${f##*/}
	opts=$(src_opts "$f")
	[ -n "$opts" ] || continue
	pagetexts=
	for p in $(pages_of_file "$f"); do
		[ -f "$mandir/$p.8" ] && text "$mandir/$p.8" > "$tmp/src-$p.txt" && pagetexts="$pagetexts $tmp/src-$p.txt"
	done
	[ -n "$pagetexts" ] || { fail "src/cli/$f has options but no page (map it in tests/unit/test_man.sh)"; continue; }
	for opt in $opts; do
		found=no
		for t in $pagetexts; do names "$t" "$opt" && found=yes; done
		[ $found = yes ] && ok || fail "src/cli/$f: option $opt is in no page of: $(pages_of_file "$f")"
	done
done
for page in "$mandir"/agentsbx*.8; do
	name=${page##*/}
	name=${name%.8}
	verb=${name#agentsbx-}
	for f in $(files_of_page "$verb"); do
		[ -f "$srcdir/src/cli/$f" ] && src_opts "$f"
	done | sort -u > "$tmp/known"
	for opt in $(terms "$page"); do
		grep -qx -- "$opt" "$tmp/known" && ok || fail "$name.8 documents $opt, which src/cli/$(files_of_page "$verb") does not take"
	done
done

# 4. rendering
if command -v groff > /dev/null 2>&1; then
	for page in "$mandir"/*.8; do
		out=$(groff -man -ww -z -Tutf8 "$page" 2>&1)
		[ -z "$out" ] && ok || fail "groff -ww: ${page##*/}: $out"
		if command -v man > /dev/null 2>&1; then
			out=$(MANWIDTH=80 man --warnings -l -Tutf8 "$page" 2>&1 > /dev/null)
			[ -z "$out" ] && ok || fail "man -l: ${page##*/}: $out"
		fi
	done
else
	echo "note: groff not installed, rendering not checked"
fi

echo "test_man: $checks checks passed, $fails failed ($(echo $verbs | wc -w) verbs, $(ls "$mandir"/*.8 | wc -l) pages)"
[ $fails = 0 ]
