#!/usr/bin/perl
# report_tap.pl FILE - parse a TAP document (gates.tap) with Perl's
# TAP::Parser, the parser behind prove, and print what it read:
#   version=13 planned=7 run=7 passed=6 failed=1 skipped=2 parse_errors=0
# then each parse error on its own line.  Exit 0 whenever the file was read.
use strict;
use warnings;
use TAP::Parser;

open(my $fh, '<', $ARGV[0]) or die "report_tap: $ARGV[0]: $!\n";
my $tap = do { local $/; <$fh> };
close($fh);
my $p = TAP::Parser->new({tap => $tap});
while (defined($p->next)) { }
printf("version=%d planned=%s run=%d passed=%d failed=%d skipped=%d parse_errors=%d\n",
       $p->version, $p->tests_planned // 'none', $p->tests_run, scalar($p->passed),
       scalar($p->failed), scalar($p->skipped), scalar($p->parse_errors));
print "$_\n" for $p->parse_errors;
