#!/usr/bin/env bash
# The bash completion (completion/crl) against the built crl: subcommands, their own subcommands and
# options, section.key names from the schema, values (components, enum choices, plugin names) and env
# ids, the way bash calls it (COMP_WORDS split at '=', COMP_LINE, COMP_POINT).
set -uo pipefail
crl=${CRL:?}
top_src=$(cd "${CRL_TEST_SRCDIR:?}/.." && pwd)
n=0; failures=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() { n=$((n + 1)); failures=$((failures + 1)); echo "not ok $n - $1"; shift; printf '%s\n' "$@" | sed 's/^/# /'; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/crl-completion.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1
touch exp.ini notes.txt

# shellcheck source=/dev/null
. "$top_src/completion/crl" || { echo "not ok 1 - sourcing completion/crl failed"; exit 1; }
complete -p crl >/dev/null 2>&1 && ok "completion/crl registers _crl for crl" || nok "no 'complete -F _crl crl'"

# complete LINE: what bash would offer at the end of LINE (the command word is the built crl).
complete_line() {
    local line=$1
    COMP_LINE="crl ${line}"
    COMP_POINT=${#COMP_LINE}
    # bash's own split: blanks, and '=' / ':' as words of their own (COMP_WORDBREAKS)
    local IFS=$' \t\n'
    read -r -a COMP_WORDS <<<"$(sed -E 's/([=:])/ \1 /g' <<<"crl ${line}")"
    COMP_WORDS[0]=$crl
    [[ $line == *" " || -z $line ]] && COMP_WORDS+=("")
    [[ $line == *= ]] && COMP_WORDS+=("")
    COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
    COMPREPLY=()
    _crl
    printf '%s\n' "${COMPREPLY[@]}"
}
# expect LINE WORD...: each WORD is among the replies.
expect() {
    local line=$1; shift
    local got; got=$(complete_line "$line")
    local w miss=""
    for w in "$@"; do grep -qxF -- "$w" <<<"$got" || miss+=" '$w'"; done
    [ -z "$miss" ] && ok "crl $line<TAB>: $*" || nok "crl $line<TAB> lacks$miss" "$got"
}
# only LINE WORD: exactly WORD.
only() {
    local got; got=$(complete_line "$1")
    [ "$got" = "$2" ] && ok "crl $1<TAB>: only '$2'" || nok "crl $1<TAB>: wanted only '$2'" "$got"
}

expect "" version plugins config envs inspect rollout collect run replay bench help
only "ro" rollout
only "run --dr" --dry-run
expect "rollout --" --steps --seed --actions --json --save-frames
expect "config " check show
only "replay r" repair
expect "bench " core envs replay nn transforms train plugins batched
expect "bench train --" --seconds --seeds --only
expect "config show --" --no-validate --describe
# files and section names
expect "inspect " exp.ini env. log. plugins.
only "inspect en" env.
only "inspect env.back" env.backend=
only "inspect env.backend=cl" classic
expect "rollout env.backend=classic env.id=" CartPole-v1 Pendulum-v1 MountainCar-v0
only "rollout env.backend=classic env.id=Acro" Acrobot-v1
only "inspect log.level=i" info
expect "plugins plugins.load=" transforms replay losses
expect "collect replay.storage=" memmap tensor
only "run env.auto_reset=n" next_step
# the option list follows the command: every long option --help names
got=$(complete_line "run --")
for o in --dry-run --quiet --overwrite --resume --accept-changes --seeds --jobs; do
    grep -qxF -- "$o" <<<"$got" || nok "crl run --<TAB> lacks $o" "$got"
done
ok "crl run --<TAB> lists crl run's options"
# nothing offered after version
got=$(complete_line "version ")
[ -z "$got" ] && ok "crl version takes nothing" || nok "crl version <TAB> offered words" "$got"
echo "1..$n"
[ $failures -eq 0 ]
