#!/usr/bin/env bash
# Every fallible function takes `crl_error *err`, and err may be NULL (plugin-sdk/include/crl/error.h).
# So no code but core/error.c reads or writes through an error pointer: return codes carry the
# control flow, and an error a caller needs from a NULL-returning call goes through a local
# crl_error handed on with crl_error_pass.  This lists FILE:LINE of every dereference of a
# crl_error pointer in core/, plugins/ and the SDK example, whatever it is called:
#   - in each function, every name declared `crl_error *NAME` there (parameters and locals):
#     NAME->..., *NAME, NAME[...], and mem*/str*/printf calls writing through NAME;
#   - anywhere, a struct member declared `crl_error *MEMBER;` in any scanned file (a caller's err
#     kept in a context): x->MEMBER->... and x.MEMBER->...
# `const crl_error *` is an input (a recorded failure) and may be read.  Comments and string
# literals are ignored.  Functions are the code between lines starting with '}' (the tree's style).
set -uo pipefail
top_src=$(cd "${CRL_TEST_SRCDIR:-$(dirname "$0")}/.." && pwd)
cd "$top_src" || exit 99

dirs="core plugins"
[ -d plugin-sdk/examples ] && dirs="$dirs plugin-sdk/examples"
# shellcheck disable=SC2086
files=$(find $dirs -name '*.[ch]' ! -path core/error.c | LC_ALL=C sort)
[ -n "$files" ] || { echo "1..1"; echo "not ok 1 - no sources found under $top_src"; exit 1; }

# shellcheck disable=SC2086
out=$(perl -e '
    use strict;
    use warnings;
    my $decl = qr/(\bconst\s+)?\b(?:struct\s+)?crl_error\s*\*\s*(?:const\s+)?([A-Za-z_]\w*)\s*([,;)=\[])/;
    my (%text, %orig, %members);
    for my $f (@ARGV) {
        open my $fh, "<", $f or die "$f: $!\n";
        local $/;
        my $s = <$fh>;
        close $fh;
        $orig{$f} = [split /\n/, $s, -1];
        # Blank comments, string and character literals, keeping every newline (line numbers).
        $s =~ s{(/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"|\x27(?:\\.|[^\x27\\\n])*\x27)}{
            my $m = $1;
            my $k = substr($m, 0, 1) eq "\"" ? "\"\"" : substr($m, 0, 1) eq "\x27" ? "\x27\x27" : " ";
            $k . ("\n" x ($m =~ tr/\n//)) }gse;
        $text{$f} = $s;
        # Members: any "crl_error *NAME;" (a struct field; a local so declared only widens the net).
        while ($s =~ /\b(?:struct\s+)?crl_error\s*\*\s*([A-Za-z_]\w*)\s*;/g) {
            $members{$1} = 1;
        }
    }
    my $malt = join "|", map { quotemeta } sort keys %members;
    my $bad = 0;
    for my $f (@ARGV) {
        my @lines = split /\n/, $text{$f}, -1;
        my ($start, %names) = (0);
        my $flush = sub {
            my ($end) = @_;
            my $alt = join "|", map { quotemeta } sort keys %names;
            for my $i ($start .. $end) {
                my $l = $lines[$i];
                # Declarations are not dereferences: drop "crl_error *NAME" first.
                $l =~ s/\b(?:struct\s+)?crl_error\s*\*\s*(?:const\s+)?[A-Za-z_]\w*//g;
                my $hit = 0;
                $hit = 1 if $alt ne "" &&
                    ($l =~ /(?<![\w.>])(?:$alt)\s*(?:->|\[)/ ||
                     $l =~ /(?:^|[=(,;!&|?:{}]|\breturn)\s*\*\s*\(*\s*(?:$alt)\b/ ||
                     $l =~ /\b(?:mem\w+|str\w+|g_strl\w+|v?s?n?printf)\s*\(\s*(?:$alt)\s*[,)]/);
                $hit = 1 if $malt ne "" && $l =~ /(?:->|\.)\s*(?:$malt)\s*->/;
                if ($hit) {
                    (my $show = $orig{$f}[$i]) =~ s/^\s+|\s+$//g;
                    print "$f:", $i + 1, ": $show\n";
                    $bad++;
                }
            }
        };
        for my $i (0 .. $#lines) {
            my $l = $lines[$i];
            while ($l =~ /$decl/g) {
                $names{$2} = 1 unless defined $1;
            }
            if ($l =~ /^\}/ || $i == $#lines) {
                $flush->($i);
                $start = $i + 1;
                %names = ();
            }
        }
    }
    exit($bad ? 1 : 0);
' $files)
rc=$?
echo "1..1"
if [ "$rc" -eq 0 ]; then
    echo "ok 1 - no dereference of a crl_error pointer outside core/error.c ($(echo "$files" | wc -l) files)"
    exit 0
fi
echo "not ok 1 - crl_error pointers dereferenced outside core/error.c (err may be NULL: return the status" \
     "you have, or pass a local crl_error and hand it on with crl_error_pass):"
printf '%s\n' "$out" | sed 's/^/# /'
exit 1
